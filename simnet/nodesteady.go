package simnet

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"

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

// An NVLSTree all-reduce is the same shape across nodes: each node reduces in its switch, the
// nodes' leaders reduce up and broadcast down NCCL's double binary tree, and what the node count
// adds is the trees' depth, one level per doubling. Where nothing else can replay it (1,152 GB200
// ranks from 2 GiB: the folded schedule is past the NVLS budget and too few loops for the
// extrapolation in the chunk count; the node fold needs more nodes), it is timed the same way
// but affine in log2 of the node count, from N/4 and N/2 nodes (N a power of two). The
// increments are not constant (the tree's interior nodes and the links they share change with
// the depth), so this is coarser than the broadcast/reduce case. Measured on DGX H100 nodes
// (NVLSTree/Simple/16, default fabric) against `simccl run` of 16 nodes from 4 and 8: 64 MiB
// 684.4 µs against 719.1 (−4.8%), 256 MiB 1,885.8 against 1,830.2 (+3.0%), 1 GiB 6,297.9 against
// 6,267.8 (+0.5%); TestNodesSteadyMatchesExact keeps a 5% bound on such cases. On 16 GB200 NVL72
// racks from 4 and 8 (NVLSTree/Simple/32, where the 16-rack replay can run): 256 MiB +0.90%,
// 512 MiB −1.83%, 1 GiB +3.54%. It is not within the 1% the other modes are held to, nor is any
// other two-point form tried (in the size at the full node count, or mixing the two: up to
// ±5–8% on the same GB200 cells; docs/cluster.md, "Coarse modes"): neither the time per doubling
// of the nodes nor the time per byte is constant at these sizes. So it is only the last resort
// (Machine.Run tries it after every exact and size-based mode) and its mode names it. Before it,
// those GB200 rows were timed as Tree (NCCL's Tree decision, 3× slower).

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
	// depth: the extrapolation variable of a node count (the node count; for an NVLSTree all-reduce
	// its log2, the depth of the trees).
	depth := func(k int) int64 { return int64(k) }
	switch {
	case m.PlannerAt == nil || m.Nodes < 2*NodesMin:
		return nil, "", nil
	case f == coll.Broadcast || f == coll.Reduce:
	case f == coll.AllReduce && plan.Algo == coll.NVLSTree && m.Nodes&(m.Nodes-1) == 0:
		depth = func(k int) int64 { return int64(bits.Len(uint(k)) - 1) }
	default:
		return nil, "", nil
	}
	// The smaller calls keep the full call's algorithm and protocol (on 2 GB200 racks NCCL would
	// take Simple at 4 GiB where 16 take LL128): only the pipeline's length may differ.
	ex := keepDecision(plan)
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
		if err != nil || row.NCCL != "" {
			return nil, "", nil // not timed, or timed as something else than planned
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
	in := ""
	if depth(n2) != int64(n2) {
		in = ", in log2"
	}
	mode := fmt.Sprintf("nodes-steady (%d, %d nodes%s)", n1, n2, in)
	if mode1 != "schedule" || mode2 != "schedule" {
		mode = fmt.Sprintf("nodes-steady (%d nodes: %s; %d nodes: %s%s)", n1, mode1, n2, mode2, in)
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
	res, err := extrapolated(depth(n1), depth(n2), depth(m.Nodes), run(m1), run(m2))
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

// A call that nothing above can time at its size — an NVLSTree all-reduce of 4–8 GiB on 16 GB200
// NVL72 racks, whose replays on fewer racks are past the NVLS budget themselves — is still in its
// pipeline's steady state at half and a quarter of that size, where the time per byte no longer
// changes: T(S) = T(S2) + (S − S2)·(T(S2) − T(S1))/(S2 − S1), from the same call (same algorithm,
// protocol, channels and chunk) at the two largest halvings S2 = S1·2 that Run times directly
// (sizesSteady). Measured against the exact replay (nvls-symmetric) on DGX H100 nodes
// (NVLSTree/Simple/16): 16 nodes, 4 GiB from 1 and 2 GiB, 23,838.5 µs against 23,883.9 (−0.19%,
// `simccl run`); TestSizesSteadyMatchesExact, 1 GiB from 256 and 512 MiB on 4 and 8 nodes: −0.06%
// and −0.47%, held within 1%. Where the smaller sizes are themselves extrapolated (nodes-steady), their error
// carries over.

// SizesMin is the smallest size sizesSteady replays: below it a pipeline is not in its steady state.
const SizesMin = 64 << 20

// sizesSteady times the call at size from two replays of it at smaller sizes (see above). It
// returns nil (and no error) where no such pair exists.
func (m *Machine) sizesSteady(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, plan coll.Plan, opt RunOptions) (*Result, string, error) {
	return m.sizesSteadyOf(f, size, dt, op, plan, opt, false)
}

// sizesSteadyDirect is sizesSteady from S/4 and S/2 only, both timed by Run without an
// extrapolation over sizes or node counts of their own (their modes are neither sizes-steady
// nor nodes-steady). Run tries it for NVLSTree before nodesSteady's form over node counts: on
// GB200 NVL72 racks at 4 GiB, against the replay of every node, from 1 and 2 GiB it is +1.17%
// (16 racks) and +0.66% (32 racks), where the form over node counts is +1.17% and +6.89%.
func (m *Machine) sizesSteadyDirect(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, plan coll.Plan, opt RunOptions) (*Result, string, error) {
	return m.sizesSteadyOf(f, size, dt, op, plan, opt, true)
}

func (m *Machine) sizesSteadyOf(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, plan coll.Plan, opt RunOptions, direct bool) (*Result, string, error) {
	if size < 4*SizesMin {
		return nil, "", nil
	}
	ex := keepDecision(plan)
	fits := func(s int64) (string, bool) {
		call := coll.TestCall(f, s, dt, op, m.NRanks())
		call.Exclude = ex
		p, err := m.Planner.Plan(call)
		if err != nil || p.Decision() != plan.Decision() || p.ChunkSize != plan.ChunkSize {
			return "", false
		}
		row, _, err := m.Run(f, s, dt, op, RunOptions{DryRun: true, Exclude: ex, noSizes: true})
		if err != nil || row.NCCL != "" {
			return "", false
		}
		if direct && (strings.Contains(row.Mode, "sizes-steady") || strings.Contains(row.Mode, "nodes-steady")) {
			return "", false
		}
		return row.Mode, true
	}
	for s2 := size / 2; s2/2 >= SizesMin && (!direct || s2 == size/2); s2 /= 2 {
		mode2, ok2 := fits(s2)
		if !ok2 {
			continue
		}
		mode1, ok1 := fits(s2 / 2)
		if !ok1 {
			continue
		}
		s1 := s2 / 2
		mode := fmt.Sprintf("sizes-steady (%s: %s; %s: %s)", sizeName(s1), mode1, sizeName(s2), mode2)
		if opt.DryRun {
			return &Result{}, mode, nil
		}
		sub := RunOptions{Exclude: ex, noSizes: true}
		run := func(s int64) func() (*Result, error) {
			return func() (*Result, error) {
				_, r, err := m.Run(f, s, dt, op, sub)
				return r, err
			}
		}
		res, err := extrapolated(s1, s2, size, run(s1), run(s2))
		switch {
		case errors.Is(err, ErrNotCompiled):
			// A smaller call whose dry run named a mode its replay then refused (the PAT fold
			// of a reduce-scatter whose hashed uplinks collide) and that has nothing else to
			// run: no steady pair here either.
			return nil, "", nil
		case err != nil:
			return nil, "", fmt.Errorf("simnet: %s at %d and %d bytes: %w", coll.TestName(f), s1, s2, err)
		}
		return res, mode, nil
	}
	return nil, "", nil
}

// keepDecision excludes every algorithm and protocol but the plan's (as NCCL_ALGO and NCCL_PROTO
// would): the smaller replays of nodesSteady and sizesSteady time the full call's decision.
func keepDecision(plan coll.Plan) coll.Exclude {
	var ex coll.Exclude
	for a := range ex.Algos {
		ex.Algos[a] = coll.Algo(a) != plan.Algo
	}
	for q := range ex.Protos {
		ex.Protos[q] = coll.Proto(q) != plan.Proto
	}
	return ex
}

// sizeName is a size in the largest binary unit that divides it (1 GiB, 512 MiB, 3 KiB, 7 B).
func sizeName(b int64) string {
	for _, u := range []struct {
		n    int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if b >= u.n && b%u.n == 0 {
			return fmt.Sprintf("%d %s", b/u.n, u.name)
		}
	}
	return fmt.Sprintf("%d B", b)
}
