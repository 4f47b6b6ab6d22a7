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
// but affine in the trees' depth, log2 of the node count, from N/4 and N/2 nodes (N a power of
// two; other node counts: nodesAsDeep). The
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

// The replays on other node counts time the full call's plan, not what NCCL would decide there:
// NCCL's channel count for LL and LL128 falls as the ranks grow (a 32 MiB Ring/LL broadcast
// on 300 DGX H100 nodes runs 3 channels, on 150 nodes 6, on 128 nodes LL128 on 16), and the forms
// over node counts hold for one plan, whose pipeline only grows longer. So the smaller calls keep
// the full call's algorithm and protocol (keepDecision) and take its channels and chunk
// (planForce). Until stop 36 they had to be NCCL's own decision there, and a broadcast or reduce
// on 300 DGX H100 nodes from 32 MiB, 1,000 from 128 MiB or 5 GB200 NVL72 racks at 2 GiB failed
// ("schedule would have about 9.89e+06 steps").

// planForce is a decision imposed on a call planned on another node count (RunOptions.force).
type planForce struct {
	algo     coll.Algo
	proto    coll.Proto
	nch, lo  int
	chunk    int64
	nThreads int
}

// forceOf is plan's decision as a planForce.
func forceOf(plan coll.Plan) *planForce {
	return &planForce{algo: plan.Algo, proto: plan.Proto, nch: plan.NChannels, lo: plan.ChannelLo, chunk: plan.ChunkSize, nThreads: plan.NThreads}
}

// apply imposes pf on p, planned on another node count with pf's algorithm and protocol.
func (pf *planForce) apply(p *coll.Plan) error {
	if p.Algo != pf.algo || p.Proto != pf.proto {
		return fmt.Errorf("simnet: %v/%v planned on this communicator, %v/%v forced", p.Algo, p.Proto, pf.algo, pf.proto)
	}
	need := pf.lo + pf.nch
	if (p.Rings != nil && len(p.Rings) < need) || (p.Trees != nil && len(p.Trees) < need) || (p.NodeTrees != nil && len(p.NodeTrees) < need) {
		return fmt.Errorf("simnet: %d channels forced, fewer on this communicator", need)
	}
	p.NChannels, p.ChannelLo, p.ChunkSize, p.NThreads = pf.nch, pf.lo, pf.chunk, pf.nThreads
	return nil
}

// nodesSteady times a call nothing else can from replays of the same plan (planForce) on other
// node counts (see above). A broadcast or reduce (affine in the node count): N2 the largest
// halving of the node count on which Run times the call (its schedule, or a steady extrapolation
// of its own; a dry run says which), N1 = N2/2 ≥ NodesMin, or N − 1 and (N − 1)/2 where no
// halving has a half of NodesMin nodes (5 GB200 racks: 2 and 4). An NVLSTree all-reduce (affine
// in the trees' depth, ⌈log2 N⌉ for NCCL's double binary tree of N nodes): the form from M/4 and
// M/2 nodes at the depth of N, M = 2^⌈log2 N⌉ (where N is not a power of two, Run first tries
// the call on M nodes, whose trees are as deep: nodesAsDeep). It
// returns nil (and no error) where no such pair exists or m cannot build other machines
// (PlannerAt is nil).
func (m *Machine) nodesSteady(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, plan coll.Plan, opt RunOptions) (*Result, string, error) {
	return m.nodesSteadyOf(f, size, dt, op, plan, opt, false)
}

// nodesAsDeep is nodesSteady's first form for an NVLSTree all-reduce on N nodes, N not a power
// of two, alone: the same call on M = 2^⌈log2 N⌉ nodes. Run tries it before the forms in the
// size: on 200 DGX H100 nodes the 256-node call is −0.70…+0.21% from the replay of the 200 nodes
// at 256 MiB–2 GiB, where the form in the size from 128 and 256 MiB is +1.0% at 512 MiB and
// +2.3% at 1 GiB (docs/cluster.md, "Node counts that are not powers of two").
func (m *Machine) nodesAsDeep(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, plan coll.Plan, opt RunOptions) (*Result, string, error) {
	if f != coll.AllReduce || plan.Algo != coll.NVLSTree || m.Nodes&(m.Nodes-1) == 0 {
		return nil, "", nil
	}
	return m.nodesSteadyOf(f, size, dt, op, plan, opt, true)
}

func (m *Machine) nodesSteadyOf(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, plan coll.Plan, opt RunOptions, deepOnly bool) (*Result, string, error) {
	// depth: the extrapolation variable of a node count (the node count; for an NVLSTree all-reduce
	// the trees' depth).
	depth := func(k int) int64 { return int64(k) }
	type pair struct{ n1, n2 int } // n1 = 0: n2 alone, at the same depth
	var pairs []pair
	switch {
	case m.PlannerAt == nil || m.Nodes < 2*NodesMin:
		return nil, "", nil
	case f == coll.Broadcast || f == coll.Reduce:
		// Halvings of N first, then N − 1, then the powers of two below N/2: the first pair
		// both of whose calls Run times directly.
		seen := map[int]bool{}
		add := func(n2 int) {
			if n2 < m.Nodes && n2/2 >= NodesMin && !seen[n2] {
				seen[n2] = true
				pairs = append(pairs, pair{n2 / 2, n2})
			}
		}
		for n2 := m.Nodes / 2; n2 > 0; n2 /= 2 {
			add(n2)
		}
		add(m.Nodes - 1)
		for n2 := 1 << bits.Len(uint(m.Nodes/2)); n2 > 0; n2 /= 2 {
			add(n2)
		}
	case f == coll.AllReduce && plan.Algo == coll.NVLSTree:
		depth = nodesDepth
		top := 1 << depth(m.Nodes)
		if deepOnly {
			pairs = append(pairs, pair{0, top}) // Run tries it first (nodesAsDeep)
			break
		}
		for n2 := top / 2; n2/2 >= NodesMin; n2 /= 2 {
			pairs = append(pairs, pair{n2 / 2, n2})
		}
	default:
		return nil, "", nil
	}
	// The smaller calls keep the full call's algorithm and protocol (on 2 GB200 racks NCCL would
	// take Simple at 4 GiB where 16 take LL128) and its channels and chunk: only the pipeline's
	// length may differ.
	ex := keepDecision(plan)
	force := forceOf(plan)
	// fits returns the machine of k nodes and the mode its Run times the call in (a dry run), or
	// nil where the plan does not fit that communicator or Run cannot time it there.
	fits := func(k int) (*Machine, string, error) {
		mk, p, err := m.smaller(f, size, dt, op, k, ex)
		if err != nil {
			if k > m.Nodes {
				return nil, "", nil // a larger communicator than the planner builds
			}
			return nil, "", err
		}
		if force.apply(&p) != nil {
			return nil, "", nil
		}
		row, _, err := mk.Run(f, size, dt, op, RunOptions{DryRun: true, Exclude: ex, force: force})
		if err != nil || row.NCCL != "" {
			// Not timed (the machine of k nodes has no PlannerAt: no form over node counts of
			// its own), or timed as something else than planned.
			return nil, "", nil
		}
		return mk, row.Mode, nil
	}
	var m1, m2 *Machine
	var mode1, mode2 string
	for _, pr := range pairs {
		var err error
		if m2, mode2, err = fits(pr.n2); err != nil {
			return nil, "", err
		}
		if m2 == nil {
			continue
		}
		if pr.n1 == 0 {
			break // as deep: n2 alone
		}
		if m1, mode1, err = fits(pr.n1); err != nil {
			return nil, "", err
		}
		if m1 != nil {
			break
		}
		m2 = nil
	}
	if m2 == nil {
		return nil, "", nil
	}
	sub := RunOptions{BackToBack: 1, Exclude: ex, force: force}
	run := func(mk *Machine) func() (*Result, error) {
		return func() (*Result, error) {
			_, r, err := mk.Run(f, size, dt, op, sub)
			return r, err
		}
	}
	n2 := m2.Nodes
	if m1 == nil {
		// The same depth: the time of the call on n2 nodes.
		mode := fmt.Sprintf("nodes-steady (%d nodes: %s, as deep)", n2, mode2)
		if opt.DryRun {
			return &Result{}, mode, nil
		}
		res, err := run(m2)()
		if errors.Is(err, ErrNotCompiled) {
			// fits' dry run said n2 nodes time the call, and their replay found no form that
			// does (an NVLS replay its check halts, which a dry run does not know): the next form
			// (TestNodesSteadyDryRunWrong).
			return nil, "", nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("simnet: %s on %d nodes: %w", coll.TestName(f), n2, err)
		}
		return res, mode, nil
	}
	n1 := m1.Nodes
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
	run1, run2 := run(m1), run(m2)
	if m2.NRanks() >= pairSequentialRanks {
		// One after the other: the two replays at once would hold both.
		r1, err := run1()
		if err != nil {
			return nil, "", fmt.Errorf("simnet: %s on %d nodes: %w", coll.TestName(f), n1, err)
		}
		run1 = func() (*Result, error) { return r1, nil }
	}
	// The smaller machines' calls pay the host's floor per call (Run); the full call adds its own.
	res, err := extrapolated(depth(n1), depth(n2), depth(m.Nodes), run1, run2)
	if errors.Is(err, ErrNotCompiled) {
		return nil, "", nil // as above: a dry run that said the call is timed
	}
	if err != nil {
		return nil, "", fmt.Errorf("simnet: %s on %d and %d nodes: %w", coll.TestName(f), n1, n2, err)
	}
	return res, mode, nil
}

// pairSequentialRanks is the most ranks of nodesSteady's larger machine for which its two replays
// may run at once (replayPair): 1,400 GB200 NVL72 racks (100,800 GPUs) timed from 512 and 1,024
// racks peaked at 4.78 GB with both at once, past the 4 GiB the simulator is held to at 131,072
// GPUs; the 1,024-rack replay alone takes 2.1 GB (`/usr/bin/time simccl run --topo gb200-nvl72
// --nodes 1024 -b 1G -e 1G`).
const pairSequentialRanks = 32768

// nodesDepth is the depth of NCCL's double binary tree over k nodes, both trees: ⌈log2 k⌉
// (coll.Dtree; TestNodesDepth checks it against the trees).
func nodesDepth(k int) int64 { return int64(bits.Len(uint(k - 1))) }

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
	mk := &Machine{Node: m.Node, Nodes: k, Fabric: m.Fabric, Planner: pl, Release: m.Release, BackToBack: 1, GPU: m.GPU, Launch: m.Launch, HostEnqueue: m.HostEnqueue}
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

// sizesSteadyDirect is sizesSteady from the largest halvings S2 = S/2^j and S2/2 that Run times
// without an extrapolation over sizes or node counts of their own (their modes are neither
// sizes-steady nor nodes-steady). Run tries it for NVLSTree before nodesSteady's form over node
// counts: on GB200 NVL72 racks at 4 GiB, against the replay of every node, from 1 and 2 GiB it
// was +1.17% (16 racks) and +0.66% (32 racks) where the form over node counts was +1.17% and
// +6.89% (stop 31). Until stop 46 it took S/4 and S/2 only, so a call whose S/2 was itself a
// form (8 GiB on 8–32 racks, 4–8 GiB on 64–256) fell to the form over node counts, which did not
// lie on the line of the smaller sizes: on 32 racks the 8 GiB row was 2.30 times the 4 GiB one,
// on 64 racks 4 and 8 GiB came out below 32 racks'. From the lower pair every size past it lies
// on one line. Against the replay of every node, at 8 GiB: 8 racks (from 1 and 2 GiB, both
// exact) −0.05% where the form over node counts was +7.34%, 16 racks +2.68% where it was −12.10%
// (docs/cluster.md, "Forms on one line").
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
		if err == nil && opt.force != nil {
			err = opt.force.apply(&p)
		}
		if err != nil || p.Decision() != plan.Decision() || p.ChunkSize != plan.ChunkSize {
			return "", false
		}
		row, _, err := m.Run(f, s, dt, op, RunOptions{DryRun: true, Exclude: ex, noSizes: true, force: opt.force})
		if err != nil || row.NCCL != "" {
			return "", false
		}
		if direct && (strings.Contains(row.Mode, "sizes-steady") || strings.Contains(row.Mode, "nodes-steady")) {
			return "", false
		}
		return row.Mode, true
	}
	for s2 := size / 2; s2/2 >= SizesMin; s2 /= 2 {
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
		sub := RunOptions{Exclude: ex, noSizes: true, force: opt.force}
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

// A point-to-point call on which the ECMP mean model stood past the replay budgets with its links
// backlogged beyond the bar (P2PResult.MeanBacklog) is timed, where it can be, from the same call at
// two smaller sizes S1 and 2·S1 that a replay of every rank times (exactly or with a rate interval,
// not the mean model), as sizesSteady does: past its fill a connection's chain of messages adds the
// same time per byte, and the hash puts the same connections on the same links at every size. S1 is
// the smallest halving of the size whose plan is the call's (algorithm, protocol, channels, chunk)
// with chains of at least NCCLSteps messages a channel (p2pChain): shorter ones are still filling,
// and an all-to-all's messages split into more chunks as the size grows. The smallest such pair
// is the cheapest to replay and the likeliest to fit the budgets; where it does not, the row keeps
// the model. On 16 GB200 NVL72 racks (1,152 ranks, NCCL's one channel a peer, 16 transfers across
// the fabric, two of them hashed onto one uplink) a send/recv of 128 MiB took the interval replay,
// 5,407.6 µs (24.8 GB/s), and 256 MiB–8 GiB the mean model with its owed work: 12,851.5 µs at 256 MiB
// (20.9 GB/s), 19.3% over the exact replay's 10,776.4 (1.75 s), and 51,295.3 µs at 1 GiB, 19.3% over
// 42,988.6 (4.7 s). From 64 and 128 MiB the rows are 10,776.4 and 42,988.6 µs, the exact replay's
// to the ns, and every size to 8 GiB is within 0.01% of the interval replay of every rank.

// p2pChain is the fewest messages a channel carries of plan p's transfer to the next rank (0:
// none), the chain whose steady state p2pSizesSteady extrapolates.
func p2pChain(p *coll.Plan) int {
	fewest := 0
	for _, part := range coll.P2PParts(p, p.Count, 1) {
		if part != nil && (fewest == 0 || len(part) < fewest) {
			fewest = len(part)
		}
	}
	return fewest
}

// p2pSizesSteady times a point-to-point call of size from two replays at smaller sizes (see
// above). It returns nil (and no error) where no such pair exists.
func (m *Machine) p2pSizesSteady(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, plan coll.Plan, opt RunOptions) (*Result, string, error) {
	ex := keepDecision(plan)
	// The GPUs' times (no host floor: Run puts the call's own under the result), each run once.
	sub := RunOptions{Exclude: ex, noSizes: true, GPUTime: true, MeanOversubscribed: opt.MeanOversubscribed, force: opt.force}
	fits := m.p2pFits(f, dt, op, plan, opt)
	var failed error
	replayed := func(s int64) (p2pSized, error) {
		key := p2pSizesKey{f: f, size: s, dt: dt, op: op, meanOversubscribed: opt.MeanOversubscribed, force: opt.force}
		r := m.tmpl.sizes.get(key, func() p2pSized {
			row, res, err := m.Run(f, s, dt, op, sub)
			if err != nil {
				failed = err
				return p2pSized{}
			}
			return p2pSized{mode: row.Mode, res: res, ok: row.NCCL == "" && !strings.Contains(row.Mode, "ecmp-mean")}
		})
		if failed != nil {
			return p2pSized{}, failed
		}
		if r.res != nil {
			c := *r.res
			r.res = &c
		}
		return r, nil
	}
	// The pair (s1, 2·s1) on the line, or nil where a replay of either does not time it.
	pair := func(s1 int64) (*Result, string, error) {
		// The larger first: where its replay does not fit the budgets, the mean model's gate
		// refuses it at once, and the smaller one's replay, which may fit and take tens of
		// seconds, would be wasted (32 DGX H100 nodes with 4 a leaf, all-to-all of 1 GiB: 256
		// MiB replayed in 25 s, then 512 MiB on the mean model, the row on it too).
		r2, err := replayed(2 * s1)
		if err != nil || !r2.ok {
			return nil, "", err
		}
		r1, err := replayed(s1)
		if err != nil || !r1.ok {
			return nil, "", err
		}
		return onLine(s1, 2*s1, size, r1.res, r2.res), fmt.Sprintf("sizes-steady (%s: %s; %s: %s)", sizeName(s1), r1.mode, sizeName(2*s1), r2.mode), nil
	}
	if s1 := p2pFromMin(size, fits); s1 > 0 {
		if res, mode, err := pair(s1); res != nil || err != nil {
			return res, mode, err
		}
	}
	// Below SizesMin, the largest pair whose chains are still in their steady state, where the
	// replays from SizesMin are past the budgets of the replay of every rank (farMessages): on
	// 1,389 GB200 NVL72 racks a send/recv of 64 MiB is, of 32 MiB not. Its line holds where
	// checked: 128 racks, send/recv of 1 GiB from 16 and 32 MiB 128,888.9 µs against the interval
	// replay's 128,887.96 at 1 GiB (+0.001%), from 4 and 8 MiB 128,883.8 (−0.003%).
	if s := p2pUnderMin(size, fits); s > 0 {
		return pair(s)
	}
	return nil, "", nil
}

// p2pFits says which sizes of a point-to-point call p2pSizesSteady may replay for a call of plan:
// those whose plan is the call's with chains in their steady state (planning only).
func (m *Machine) p2pFits(f coll.Func, dt coll.DataType, op coll.RedOp, plan coll.Plan, opt RunOptions) func(int64) bool {
	ex := keepDecision(plan)
	return func(s int64) bool {
		call := coll.TestCall(f, s, dt, op, m.NRanks())
		call.Exclude = ex
		p, err := m.Planner.Plan(call)
		if err == nil && opt.force != nil {
			err = opt.force.apply(&p)
		}
		return err == nil && p.Decision() == plan.Decision() && p.ChunkSize == plan.ChunkSize && p2pChain(&p) >= coll.NCCLSteps
	}
}

// p2pFromMin is the smaller size of the pair from SizesMin that p2pSizesSteady replays first (0:
// none): the smallest halving of size/4 in the steady state, the cheapest replays and the likeliest
// to fit the replay budgets (where the smaller one did not, nothing larger does either).
func p2pFromMin(size int64, fits func(int64) bool) int64 {
	s1 := int64(0)
	for s := size / 4; s >= SizesMin && fits(s) && fits(2*s); s /= 2 {
		s1 = s
	}
	return s1
}

// p2pUnderMin is the smaller size of the pair under SizesMin that p2pSizesSteady replays where
// none from SizesMin times the call (0: none).
func p2pUnderMin(size int64, fits func(int64) bool) int64 {
	if s := min(size/4, SizesMin/4); s >= 1 && fits(s) && fits(2*s) {
		return s
	}
	return 0
}
