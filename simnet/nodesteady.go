package simnet

import (
	"fmt"

	"github.com/simccl/simccl/coll"
)

// A ring broadcast or reduce is one pipeline through every rank: each chunk enters at the root
// and is forwarded (or reduced) from rank to rank, node after node. Where the cluster is large
// and the chunks per channel few (1,152 GB200 ranks, 116 chunks of LL128 per channel at 1 GiB),
// its schedule is past coll's limit and the pipeline never fills, so the extrapolation in the
// chunk count (steadySchedule) has too few chunks to stand on. What grows with the node count is
// the pipeline's length: every node the chain crosses adds its own hops (its GPUs, then one
// network hop), all alike, while the rate of the chain's narrowest hop, which sets the time per
// chunk once the chain is full, does not change. The time is then affine in the node count,
// T(N) = T(N2) + (N − N2)·(T(N2) − T(N1))/(N2 − N1), from replays of the same call on N1 and N2
// = 2·N1 nodes (nodesSteady). It is close, not exact: the time each node adds drifts by a few
// tenths of a percent with the node count (channels that share links meet at other places).
// Measured against the whole schedule's replay on GB200 NVL72 racks (Ring/LL128/16 broadcast,
// default fabric): 8 racks at 1 GiB from 2 and 4 racks, 13,500 µs against 13,474 (+0.19%); 16
// racks at 512 MiB from 4 and 8, 18,095 against 17,914 (+1.01%), from 2 and 4 18,064 (+0.84%).
// TestNodesSteadyMatchesExact checks smaller cases (within 1%) in every run.

// NodesMin is the fewest nodes of the smaller replay of nodesSteady: both replays must cross the
// network (a single node's chain has no network hop).
const NodesMin = 2

// nodesSteady times a broadcast or reduce whose schedule is past coll's limit from two replays of
// the same call on fewer nodes (see above): N2 the largest halving of the node count on which Run
// times the call (its schedule, or its own steady extrapolation in the chunk count; a dry run
// says which), N1 = N2/2 ≥ NodesMin. Both smaller plans must be the same decision (algorithm,
// protocol, channels) as the full one, or nothing is returned. It returns nil (and no error) where
// no such pair exists or m cannot build smaller machines (PlannerAt is nil).
func (m *Machine) nodesSteady(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, plan coll.Plan, opt RunOptions) (*Result, string, error) {
	if m.PlannerAt == nil || (f != coll.Broadcast && f != coll.Reduce) || m.Nodes < 2*NodesMin {
		return nil, "", nil
	}
	// The smaller calls keep the full call's algorithm and protocol (on 2 GB200 racks NCCL would
	// take Simple at 4 GiB where 16 take LL128): only the pipeline's length may differ.
	var ex coll.Exclude
	for a := range ex.Algos {
		ex.Algos[a] = coll.Algo(a) != plan.Algo
	}
	for q := range ex.Protos {
		ex.Protos[q] = coll.Proto(q) != plan.Proto
	}
	// fits returns the machine of k nodes and the mode its Run times the call in (a dry run), or
	// nil where the call is not planned there as the full one (algorithm, protocol, channels,
	// chunk) or Run cannot time it.
	fits := func(k int) (*Machine, string, error) {
		mk, p, err := m.smaller(f, size, dt, op, k, ex)
		if err != nil {
			return nil, "", err
		}
		if p.Decision() != plan.Decision() || p.ChunkSize != plan.ChunkSize {
			return nil, "", nil
		}
		row, _, err := mk.Run(f, size, dt, op, RunOptions{DryRun: true, Exclude: ex})
		if err != nil {
			return nil, "", nil
		}
		return mk, row.Mode, nil
	}
	var m1, m2 *Machine
	var mode1, mode2 string
	for n2 := m.Nodes / 2; n2/2 >= NodesMin && m2 == nil; n2 /= 2 {
		var err error
		if m2, mode2, err = fits(n2); err != nil {
			return nil, "", err
		}
		if m2 == nil {
			continue
		}
		if m1, mode1, err = fits(n2 / 2); err != nil {
			return nil, "", err
		}
		if m1 == nil {
			m2 = nil
		}
	}
	if m2 == nil {
		return nil, "", nil
	}
	n1, n2 := m1.Nodes, m2.Nodes
	mode := fmt.Sprintf("nodes-steady (%d, %d nodes)", n1, n2)
	if mode1 != "schedule" || mode2 != "schedule" {
		mode = fmt.Sprintf("nodes-steady (%d nodes: %s; %d nodes: %s)", n1, mode1, n2, mode2)
	}
	if opt.DryRun {
		return &Result{}, mode, nil
	}
	sub := RunOptions{BackToBack: 1, Exclude: ex}
	run := func(mk *Machine) func() (*Result, error) {
		return func() (*Result, error) {
			_, r, err := mk.Run(f, size, dt, op, sub)
			return r, err
		}
	}
	// The smaller machines' calls pay the host's floor per call (Run); the full call adds its own.
	res, err := extrapolated(int64(n1), int64(n2), int64(m.Nodes), run(m1), run(m2))
	if err != nil {
		return nil, "", fmt.Errorf("simnet: %s on %d and %d nodes: %w", coll.TestName(f), n1, n2, err)
	}
	return res, mode, nil
}

// smaller is m with k nodes (its planner from PlannerAt) and the plan it makes of the call with
// ex excluded.
func (m *Machine) smaller(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, k int, ex coll.Exclude) (*Machine, coll.Plan, error) {
	pl, err := m.PlannerAt(k)
	if err != nil {
		return nil, coll.Plan{}, fmt.Errorf("simnet: the communicator of %d nodes: %w", k, err)
	}
	if pl.NRanks() != k*m.Node.NumGPUs {
		return nil, coll.Plan{}, fmt.Errorf("simnet: the planner of %d nodes plans for %d ranks", k, pl.NRanks())
	}
	mk := &Machine{Node: m.Node, Nodes: k, Fabric: m.Fabric, Planner: pl, Release: m.Release, BackToBack: 1, GPU: m.GPU, Launch: m.Launch}
	call := coll.TestCall(f, size, dt, op, mk.NRanks())
	call.Exclude = ex
	p, err := pl.Plan(call)
	return mk, p, err
}
