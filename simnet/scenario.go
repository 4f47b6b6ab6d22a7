package simnet

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/tuning"
)

// Machine is a communicator's hardware as the simulator models it — a node template replicated
// Nodes times, joined by a fabric — and the planner that decides what NCCL runs on it. Its cluster
// is built once, on the first run, so Node, Nodes and Fabric must not change after that; Run may
// be called from several goroutines at once.
type Machine struct {
	Node   *NodeModel
	Nodes  int
	Fabric *Fabric
	// Planner decides every call's plan (package planner, with NCCL's rules for this machine).
	Planner coll.Planner
	// Release is the NCCL release whose latencies time the steps (TimingFor).
	Release string
	// BackToBack is RunOptions.BackToBack when a call gives none: 1 one isolated call; 0
	// nccl-tests' loop where it changes the time, NCCLTestsLoop calls of a broadcast or reduce
	// and one call of the other collectives (loopCalls).
	BackToBack int
	// GPU is the GPU model (the per-CTA data rate of its SM generation; GPUModelFor). A zero
	// CTARate leaves the CTA unmodelled: steps then cost only their links.
	GPU GPUModel
	// Launch is how the host launches each call's kernels (LaunchPerGPU: one process or thread
	// per GPU, the default).
	Launch LaunchMode
	// HostEnqueue is this machine's host time for NCCL's enqueue of a one-channel collective call
	// on one communicator-rank (0: the package's HostEnqueue, measured on 2 H200). The collective
	// terms of the launch modes' host floors scale with it (HostScale): hosts differ, and the
	// leases measured here were 7.8–10.7 µs a call (HostEnqueueSpan) where a public 8-GPU VM
	// implies 3–6.
	HostEnqueue Time
	// Notes lists the simplifications applied to this machine, for reports.
	Notes []string
	// PlannerAt, when set, returns the planner of the same machine with another node count, for
	// the broadcast and reduce pipelines too long to replay, which are timed from replays on fewer
	// nodes (nodesSteady).
	PlannerAt func(nodes int) (coll.Planner, error)

	tmpl clusterTemplate // the cluster, built on first use (engine)
}

// NRanks is the number of ranks (GPUs).
func (m *Machine) NRanks() int { return m.Node.NumGPUs * m.Nodes }

// HostScale is the factor by which the machine's collective host costs differ from the measured
// ones (HostEnqueue over the package's HostEnqueue; 1 where the machine sets none): the enqueue of
// a collective call, its further channels and, for one thread per node, each GPU past the first.
// The point-to-point lines (HostSendRecv, HostAllToAll) and HostP2PPerChannel stay as measured: on
// the 4×H200 lease whose processes enqueued a collective in 6.6 µs (testdata/nccl/h200x4/
// hostscan-2026-11-28.csv, the host loop with a process per GPU), an all-to-all of 64 B–1 KiB took
// 12.1–13.2 µs a call, which the 2-H200 line gives (12.37), not its scaled 8.1. One factor for the
// collective terms is the model's simplest reading of a host's speed: on the leases the per-GPU
// term of one thread moved with the enqueue (a communicator-rank cost what a process's enqueue
// cost on the fast leases, releasescan a and b, and 0.78 of it on the slow ones, commscan).
func (m *Machine) HostScale() float64 { return hostScale(m.HostEnqueue) }

// hostScale is a host's enqueue over the measured HostEnqueue (1 for 0: none given).
func hostScale(host Time) float64 {
	if host <= 0 {
		return 1
	}
	return float64(host) / float64(HostEnqueue)
}

// MaxHostEnqueue bounds Machine.HostEnqueue: a millisecond, a hundred times any host measured.
const MaxHostEnqueue = Millisecond

// NewMachine models nodes copies of the system sys (NodeFromGraph) joined by fab (nil: the
// default fabric), with plans from pl, which must plan for the same ranks; release names the
// NCCL release whose latencies apply.
func NewMachine(sys *graph.System, nodes int, fab *Fabric, pl coll.Planner, release string) (*Machine, error) {
	if nodes < 1 {
		return nil, fmt.Errorf("simnet: %d nodes (want >= 1)", nodes)
	}
	node, err := NodeFromGraph(sys)
	if err != nil {
		return nil, err
	}
	if nodes > 1 && len(node.NICs) == 0 {
		return nil, fmt.Errorf("simnet: topology %q has no NET: cannot join %d nodes", sys.Name, nodes)
	}
	if nodes*node.NumGPUs > maxRanks {
		return nil, tooLarge("simnet", nodes, node.NumGPUs)
	}
	if pl == nil || pl.NRanks() != nodes*node.NumGPUs {
		return nil, fmt.Errorf("simnet: the planner plans for a different communicator than %d nodes of %d GPUs", nodes, node.NumGPUs)
	}
	if fab == nil {
		fab = DefaultFabric()
	}
	if q, ok := pl.(qpPlanner); ok && q.IBQPsPerConnection() > 0 && fab.QPs == 0 {
		// NCCL_IB_QPS_PER_CONNECTION of the planner's settings, on a copy: the caller's fabric may
		// serve other machines.
		f := *fab
		f.QPs = q.IBQPsPerConnection()
		fab = &f
	}
	// The fabric's shape is checked here, once, rather than at every simulation's NewCluster.
	if err := fab.Validate(); err != nil {
		return nil, err
	}
	if err := checkClusterSize(node, nodes, fab); err != nil {
		return nil, err
	}
	m := &Machine{Node: node, Nodes: nodes, Fabric: fab, Planner: pl, Release: release}
	cc := 1 << 30
	for _, g := range sys.GPUs() {
		cc = min(cc, g.GPU.SM)
	}
	if m.GPU, err = GPUModelFor(release, cc); err != nil {
		return nil, err
	}
	// The memory of the GPUs' model where they are all one (by their PCI device id), else of
	// their generation's (GPUMemoryFor).
	var dev uint16
	for i, g := range sys.GPUs() {
		if i == 0 {
			dev = g.GPU.PCIDevice
		} else if g.GPU.PCIDevice != dev {
			dev = 0
		}
	}
	m.GPU.Memory = GPUMemoryFor(dev, cc)
	return m, nil
}

// Row is one line of an nccl-tests style table.
type Row struct {
	Coll      string  `json:"coll"`
	Bytes     int64   `json:"bytes"` // nccl-tests size column: the total buffer
	Count     int64   `json:"count"`
	Type      string  `json:"type"`
	RedOp     string  `json:"redop"`
	TimeUs    float64 `json:"time_us"`
	AlgBw     float64 `json:"algbw"`
	BusBw     float64 `json:"busbw"`
	Algo      string  `json:"algo"`
	Proto     string  `json:"proto"`
	NChannels int     `json:"nchannels"`
	Events    uint64  `json:"events"`
	// Mode is how it was simulated: "schedule" (coll's schedule, exact), "ring-compact" (the
	// compact ring executor, exact), "ring-coarse-K" (K ring steps merged per message), the tree's
	// and point-to-point executors' modes (TreeResult.Mode, P2PResult.Mode), "nvls-symmetric" and
	// "nvls-symmetric-steady (S1, S2)" (NVLS, NVLSTree: nvlssim.go), "nvlstree-fold" and
	// "nvlstree-fold-steady (S1, S2)" (NVLSTree's nodes folded too: nvlsfold.go); docs/cluster.md
	// lists them with their error against the exact replay.
	Mode string `json:"mode"`
	// NCCL is NCCL's decision ("NVLS/Simple/16": algorithm, protocol, channels) when the
	// simulator could not run it and simulated Algo/Proto/NChannels instead — what NCCL decides
	// with the algorithms the simulator lacks disabled. Empty when the row is NCCL's decision.
	NCCL string `json:"nccl,omitempty"`
	// HostBound says the call's time is the host's floor for the launch mode (LaunchMode.hostFloor:
	// HostEnqueue and HostPerChannel for each further channel of the call, or a point-to-point
	// call's HostSendRecv or HostAllToAll line and HostP2PPerChannel, with a process per GPU; with
	// one thread per node HostPerRank for each GPU past the first and each GPU's work beyond
	// HostEnqueue): its simulated device time was
	// shorter, so nccl-tests' loop would wait on the host.
	HostBound bool `json:"host_bound,omitempty"`
	// DeviceUs, on a HostBound row, is the GPUs' own time of the call (µs), below TimeUs.
	DeviceUs float64 `json:"device_us,omitempty"`
	// MeanBacklog, on a row the ECMP mean model times past the replay budgets though its
	// backlog is over the bar (P2PResult.MeanBacklog, TreeResult.MeanBacklog), is twice the
	// largest backlog over the row's time: the row may be some percent off, mostly fast
	// (docs/cluster.md "ECMP: the mean model").
	MeanBacklog float64 `json:"ecmp_mean_backlog,omitempty"`
	// Alternatives, where asked for (simccl run --alternatives), are the same call timed under
	// every algorithm and protocol NCCL's tuner could give it, fastest first, NCCL's pick among
	// them.
	Alternatives []Alternative `json:"alternatives,omitempty"`
}

// CompactAbove is the number of schedule steps above which Machine.Run replays ring and tree
// collectives with the compact executors instead of materialising coll's schedule; above
// CompactQuiet it does so too when no op records are asked for (the compact executors give the
// same times, 0.1% apart, at a fraction of the memory).
var (
	CompactAbove int64 = 4_000_000
	CompactQuiet int64 = 300_000
	// P2PQuiet is CompactQuiet for send/recv and all-to-all under SharedCTA: every such call
	// without op records runs on SimulateP2P (tests raise it to replay the schedule).
	P2PQuiet int64 = 0
)

// ringSteps estimates the steps of a ring schedule: ranks × channels × steps per loop × loops.
func ringSteps(p coll.Plan, nBytes int64) int64 {
	n := int64(p.NRanks)
	nch := int64(max(p.NChannels, 1))
	chunk := max(p.ChunkSize, 1)
	perCh := (nBytes + nch - 1) / nch
	loops := max((perCh+n*chunk-1)/(n*chunk), 1)
	return n * nch * (2*n - 1) * loops
}

// ErrNotCompiled marks a call the simulator cannot run with any algorithm NCCL would choose.
var ErrNotCompiled = errors.New("simnet: algorithm not simulated")

// plan returns the plan the simulator runs for call, and NCCL's decision when it differs: the
// simulator replays what coll compiles (Machine.simulates: every algorithm but CollNet, NVLS and
// NVLSTree only where the nodes have an NVSwitch); for an algorithm it lacks it runs what NCCL
// decides with those disabled, as NCCL_ALGO=^… would make it, and says so.
func (m *Machine) plan(call coll.Call, only func(coll.Algo) bool) (plan, nccl coll.Plan, err error) {
	nccl, err = m.Planner.Plan(call)
	if err != nil {
		return nccl, nccl, err
	}
	if only(nccl.Algo) {
		return nccl, nccl, nil
	}
	for a := coll.Algo(0); a < coll.NumAlgos; a++ {
		if !only(a) {
			call.Exclude.Algos[a] = true
		}
	}
	plan, err = m.Planner.Plan(call)
	if err != nil {
		return plan, nccl, fmt.Errorf("%w: NCCL runs %v/%v for %v and no algorithm the simulator runs is enabled: %v", ErrNotCompiled, nccl.Algo, nccl.Proto, call.Func, err)
	}
	return plan, nccl, nil
}

// Plan returns the plan the simulator runs for one nccl-tests size of f, with a note when it is
// not NCCL's decision.
func (m *Machine) Plan(f coll.Func, size int64, dt coll.DataType, op coll.RedOp) (coll.Plan, string, error) {
	call := coll.TestCall(f, size, dt, op, m.NRanks())
	plan, nccl, err := m.plan(call, func(a coll.Algo) bool { return m.simulates(f, a) })
	if err != nil {
		return plan, "", err
	}
	return plan, substitution(plan, nccl), nil
}

// substitution says what was simulated instead of NCCL's decision ("" when nothing was).
func substitution(plan, nccl coll.Plan) string {
	if plan.Decision() == nccl.Decision() {
		return ""
	}
	return fmt.Sprintf("NCCL runs %s; simulated %s, NCCL's choice without %v (not simulated)", nccl.Decision(), plan.Decision(), nccl.Algo)
}

// backToBack replays k consecutive calls of plans (one call = one kernel of len(plans)
// operations) and returns the time to the end of the last.
func (m *Machine) backToBack(plans []coll.Plan, k int, tm Timing) (Time, error) {
	all := make([]coll.Plan, 0, k*len(plans))
	for range k {
		all = append(all, plans...)
	}
	s, err := coll.Compile(all...)
	if err != nil {
		return 0, err
	}
	e, cl, err := m.engineFor(plans[0].Algo)
	if err != nil {
		return 0, err
	}
	res, err := Simulate(e, cl, s, tm, Options{OpsPerKernel: len(plans)})
	if err != nil {
		return 0, err
	}
	return res.Time, nil
}

// Timing is the executors' timing of algorithm a with protocol p on m: NCCL's latencies of m's
// release (TimingFor) and m's GPU model (the per-CTA data rate).
func (m *Machine) Timing(a coll.Algo, p coll.Proto) (Timing, error) {
	tm, err := TimingFor(m.Release, a, p)
	if err != nil {
		return tm, err
	}
	if m.Launch.Graph() {
		tm.Launch -= GraphSaving
	}
	if m.Launch == LaunchGraphPerNode && m.Node != nil && m.Node.NumGPUs > 1 {
		tm.Launch += GraphPerNodeCall
	}
	tm.CTARate = m.GPU.CTARate
	if tm.CTARate > 0 {
		tm.CTAMem, tm.Fence, tm.Slice, tm.CTACopy = m.GPU.Mem, m.GPU.Fence, m.GPU.Slice, m.GPU.Copy
		tm.MemTraffic = 2 * m.GPU.Memory.Copy
	}
	if a == coll.Ring && m.Nodes == 1 {
		// Rings in one node only: the tree, NVLS and point-to-point executors fold channels that
		// move in step, and only the lockstep of rings over NVLink was measured against NCCL
		// (docs/cluster.md). Across nodes nothing measured says how the channels part, and the
		// skew moves those replays either way (Ring/Simple on 2 and 4 DGX H100 nodes at 256 MiB:
		// 0.02% or less; Ring/LL forced at 1 GiB on 64 nodes: +7.9%).
		tm.ChannelSkew = m.GPU.ChannelSkew
	}
	tm.LineStream = LineStream
	tm.NetStage = NetStaged && tm.CTARate > 0
	return tm, nil
}

// NetStaged turns Timing.NetStage on in Machine.Timing wherever the CTA is modelled: a network
// message is written by its CTA, then carried by the NIC (NCCL's proxy: net.cc's send progress
// posts a step to the network only once the GPU has written all of it and advanced the tail, and
// the GPU goes on to its next step while the NIC sends this one, NCCL_STEPS slots apart). Off
// gives the single-stage network message of before 2026-11-30 (bench/sim/compare -net-stage=false).
var NetStaged = true

// LineStream turns Timing.LineStream on in Machine.Timing for every algorithm, and with it the
// measured LL rate of one Hopper CTA (MemModelFor). It is off: NCCL does stream LL and LL128 lines,
// but with it the public nccl-tests set moves from 12.8% to 15.0% median error (trees only
// off: 13.5%) while the 4×H200 rows of testdata/nccl improve (BENCHMARKS.md "2026-11-28 (fid3)").
// bench/sim/compare -line-stream turns it on.
var LineStream = false

// NCCLTestsLoop is how many back-to-back calls time a broadcast or reduce by default
// (Machine.BackToBack 0): nccl-tests reports a call's time in a loop of launches, where a rank
// starts its next call as soon as its own part of the previous one is done. In a rooted
// collective the ranks finish one after another down the chain, so the loop overlaps
// consecutive calls: on 4 H200 (NCCL 2.28.9, testdata/nccl/h200x4/smallmsg.csv, one process per
// GPU) a 4 MiB broadcast takes 25.7 µs a call in nccl-tests' loop, where one call alone takes
// 59.9 µs in the replay and the replay of 3 calls 22.8 µs a call; over every size from 1 MiB the
// replay of one call is 72% off (median), that of 3 calls 2.5% (bench/sim/compare, which times
// every collective in such a loop). Where every rank finishes together (all-reduce, all-gather,
// reduce-scatter, all-to-all, send/recv) the loop changes the time by under 0.3% (DGX H100, 1
// and 2 nodes, 64 KiB–256 MiB) at four times the replay's cost, so those keep one call. Only
// schedule replays run the loop (the row's mode says "back-to-back"); one past LoopBudget, and
// schedule-steady, take the loop's saving measured at a smaller size (loopSaving); a broadcast or
// reduce timed from replays on fewer nodes (nodes-steady) is one call, which on 16 GB200 NVL72
// racks (LL128) is 3 µs over the loop's call at 256 and 512 MiB (4,505.0 and 5,996.3 µs against
// 4,501.7 and 5,993.0; `simccl run --topo gb200-nvl72 --nodes 16 -c broadcast -b 256M -e 512M
// [--back-to-back 1]`). (T(3) − T(1)) / 2 is the loop's steady call: nccl-tests' 20 iterations
// add the pipeline's fill once, a twentieth of it.
const NCCLTestsLoop = 3

// LoopCalls is how many back-to-back calls Run times f by when the call asks for none (loopCalls):
// a broadcast's or reduce's row is one call in such a loop, where one call alone takes longer.
func (m *Machine) LoopCalls(f coll.Func) int { return m.loopCalls(f, RunOptions{}) }

// loopCalls is how many back-to-back calls time f (RunOptions.BackToBack, else
// Machine.BackToBack, else NCCLTestsLoop for a broadcast or reduce and one call otherwise).
func (m *Machine) loopCalls(f coll.Func, opt RunOptions) int {
	switch {
	case opt.BackToBack > 0:
		return opt.BackToBack
	case m.BackToBack > 0:
		return m.BackToBack
	case f == coll.Broadcast || f == coll.Reduce:
		return NCCLTestsLoop
	}
	return 1
}

// loopFits is how many calls of the loop that times a call (k asked, n the steps of the call's
// schedule) Run replays: the loop's schedule holds k copies of the call's, which coll's limit
// bounds as it bounds one (coll.MaxSteps, about 280 bytes a step). A loop the caller asked for
// (asked) that does not fit is an error; the default loop takes the most calls that fit, and one
// call where two do not.
func loopFits(k, n int, asked bool) (int, error) {
	if k <= 1 {
		return 1, nil
	}
	if int64(k)*int64(n) <= coll.MaxSteps {
		return k, nil
	}
	if asked {
		return 0, fmt.Errorf("simnet: a loop of %d back-to-back calls would replay %d steps (coll's limit %d): ask for at most %d calls", k, int64(k)*int64(n), coll.MaxSteps, max(coll.MaxSteps/max(n, 1), 1))
	}
	if k = coll.MaxSteps / max(n, 1); k < 2 {
		return 1, nil
	}
	return k, nil
}

// RunOptions steer Machine.Run.
type RunOptions struct {
	Record bool // keep every message's record (for traces and op logs)
	// Exclude is what the call may not use (as NCCL_ALGO / NCCL_PROTO would exclude it): the
	// replays of nodesSteady on fewer nodes keep the full call's algorithm and protocol.
	Exclude coll.Exclude
	// BackToBack > 1 times the call as nccl-tests does: the time of one call in a loop of
	// back-to-back launches on each rank's stream, (T(K) − T(1)) / (K − 1) for K = BackToBack
	// calls replayed as consecutive kernels (Options.OpsPerKernel). A rank's next call starts
	// when its own part of the previous one is done, so a one-way collective's receiver still
	// copying call k overlaps its sender starting call k+1. Only schedule replays do this (the
	// row's mode says "back-to-back"); 0 takes Machine.BackToBack (loopCalls).
	BackToBack int
	// DryRun decides how the call would be simulated — the plan, NCCL's decision, the mode —
	// and returns its row without simulating it (no time).
	DryRun bool
	// Exact never lets an approximation stand for the exact replay (docs/cluster.md): no ECMP or
	// latency mean, no merged steps, no extrapolated chunks, whatever it costs.
	// MeanOversubscribed lets the ECMP mean model stand on oversubscribed fabrics too (fast, far
	// off: docs/cluster.md).
	Exact, MeanOversubscribed bool
	// noSizes: not from smaller sizes (sizesSteady's own replays, which must be timed directly).
	noSizes bool
	// patFloor: a PAT fold timing the latency floor of a longer call (patMeanBandwidth), which
	// must not ask for a floor of its own.
	patFloor bool
	// deferPair, where set, says whether p2pSizesSteady has a pair of sizes at most an eighth and
	// a quarter of the call's (planning only), which a replay of every rank projected past
	// P2PDeferWork gives way to (P2PSpec.DeferWork).
	deferPair func() bool
	// noDefer: a point-to-point call's replay of every rank runs whatever its messages
	// (P2PSpec.DeferAbove), where no pair of smaller sizes times it.
	noDefer bool
	// hostFloor is the call's host floor for the launch mode (Machine.hostFloorOf; 0: none), which
	// SimulateP2P may let decide a row (P2PSpec.HostFloor); set by Run.
	hostFloor Time
	// folds keeps the call's node-fold quotient schedules between its replays (set by Run).
	folds *foldScheds
	// foldBudget, where set, is the estimated steps the node fold may replay at once in place of
	// NVLSBudget (nvlsFoldLastResort).
	foldBudget float64
	// Transfers, for SendRecv, are the call's messages (coll.Call.Transfers, counted in the call's
	// data type) in place of nccl-tests' pattern (every rank sends size bytes to the next): a
	// traced group's sends and receives (simccl replay). The row keeps size as its bytes.
	Transfers []coll.Transfer
	// GPUTime times the call as its GPUs' time: no host floor under it, whatever the launch mode
	// (simccl replay: a traced launch is compared with NCCL's kernel time, and in an application
	// the host's enqueue overlaps its other work).
	GPUTime bool
	// force, where set, imposes another communicator's decision on the call (nodesSteady's
	// replays on other node counts: planForce).
	force *planForce
}

// Run simulates one nccl-tests size of f and returns its table row, and the simulation result.
// The plan is the planner's decision; where the simulator cannot run it (an algorithm with switch
// endpoints, or an algorithm without a compact executor at a size too large to replay its
// schedule) it runs NCCL's decision with those algorithms disabled, and the row says so (NCCL).
func (m *Machine) Run(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, opt RunOptions) (Row, *Result, error) {
	n := m.NRanks()
	elt := dt.Size()
	if elt == 0 {
		return Row{}, nil, fmt.Errorf("simnet: unknown data type %v", dt)
	}
	count, algBytes := coll.TestCount(f, size, elt, n)
	// nccl-tests prints the size its count moves (max(sendBytes, recvBytes) of the count): base×n×elt
	// for AllGather, ReduceScatter and AlltoAll, count×elt for the others — 1,000 for -b 1001 of
	// float, 0 for -b 3.
	row := Row{Coll: coll.TestName(f), Bytes: algBytes, Count: count, Type: dt.String(), RedOp: op.String()}
	if !f.Reduces() {
		row.RedOp = "none"
	}
	if count == 0 {
		return row, &Result{}, nil
	}
	call := coll.TestCall(f, size, dt, op, n)
	call.Exclude = opt.Exclude
	if f == coll.SendRecv {
		call.Transfers = opt.Transfers
	}
	opt.folds = &foldScheds{}
	plan, nccl, err := m.plan(call, func(a coll.Algo) bool { return m.simulates(f, a) })
	if err != nil {
		return row, nil, err
	}
	if opt.force != nil {
		if err := opt.force.apply(&plan); err != nil {
			return row, nil, err
		}
		nccl = plan
	}
	compactable := func(p coll.Plan) bool { return compactAlgo(f, p) }
	// A point-to-point call whose transfers the compact executor cannot replay (see compactAlgo)
	// has nothing to fall back on: its schedule or coll's refusal.
	ringColl := compactColl(f) && (compactable(plan) || (f != coll.SendRecv && f != coll.AllToAll))
	steps := m.scheduleSteps(f, plan, algBytes)
	var res *Result
	var tm Timing
	b2b := m.loopCalls(f, opt)
	if !opt.Record && nvlsFolds(plan) && steps > CompactQuiet && (b2b <= 1 || steps > CompactAbove) {
		// NVLS, NVLSTree: the channels in lockstep replayed once per class (nvlsSymmetric);
		// nil where they do not fold. A back-to-back timing (one call only) keeps the schedule
		// while it fits.
		if tm, err = m.PlanTiming(plan); err != nil {
			return row, nil, err
		}
		var mode string
		if res, mode, err = m.nvlsSymmetric(plan, tm, opt); err != nil {
			return row, nil, err
		}
		row.Mode = mode
	}
	if res == nil && plan.Algo == coll.PAT && !opt.Record && steps > CompactQuiet && (b2b <= 1 || steps > CompactAbove) {
		// PAT (one GPU a node): one representative per orbit of the ranks' rotation replayed
		// (patFold); nil where the ranks do not fold.
		if tm, err = m.PlanTiming(plan); err != nil {
			return row, nil, err
		}
		var mode string
		if res, mode, err = m.patFold(plan, tm, opt); err != nil {
			return row, nil, err
		}
		row.Mode = mode
	}
	if res == nil && !compactable(plan) && !opt.Exact && !opt.Record && plan.EstimatedSteps() > SteadyAbove {
		// No compact executor (NVLS, NVLSTree) and a large schedule: replay it at two smaller
		// sizes in the pipeline's steady state and extrapolate (steadySchedule).
		if tm, err = m.PlanTiming(plan); err != nil {
			return row, nil, err
		}
		var mode string
		if res, mode, err = m.steadySchedule(plan, tm, b2b, opt.DryRun); err != nil {
			return row, nil, err
		}
		row.Mode = mode
	}
	// Point-to-point calls run on SimulateP2P whenever no op is recorded: it gives the schedule
	// replay's times (TestP2PMatchesSchedule) where the replay's CTA links (SharedCTA) join a
	// rank's lanes into large rate computations (a 64 MiB all-to-all on 16 nodes: 8 s of CPU
	// for the schedule, 128 s with SharedCTA).
	p2pQuick := SharedCTA && (f == coll.AllToAll || f == coll.SendRecv) && compactable(plan) && !opt.Record && steps > P2PQuiet
	if res == nil && !(ringColl && (steps > CompactAbove || p2pQuick || (compactable(plan) && !opt.Record && steps > CompactQuiet))) {
		if tm, err = m.PlanTiming(plan); err != nil {
			return row, nil, err
		}
		plans := []coll.Plan{plan}
		var sched *coll.Schedule
		var cerr error
		if opt.DryRun {
			cerr = coll.Check(plans...)
		} else {
			sched, cerr = coll.Compile(plans...)
		}
		switch {
		case cerr == nil && opt.DryRun:
			res, row.Mode = &Result{}, "schedule"
		case cerr == nil:
			e, cl, err := m.engineFor(plan.Algo)
			if err != nil {
				return row, nil, err
			}
			// A PAT schedule leaves out of its rate computations the links another link of its
			// routes implies (Options.prune, as its fold does): the same max-min rates, summed in
			// another order. Such a schedule is replayed whole where its fold does not stand (a
			// reduce-scatter whose hashed uplinks collide), and its collisions join its flows
			// into large computations: 1,000 GH200 nodes at 256 MiB 270–281 → 190 s.
			if res, err = Simulate(e, cl, sched, tm, Options{Record: opt.Record, prune: plan.Algo == coll.PAT}); err != nil {
				return row, nil, err
			}
			row.Mode = "schedule"
			if tm.Memcpy > 0 {
				row.Mode = "schedule, one-rank memcpy"
			}
			if b2b > 1 && !opt.Exact && float64(b2b)*float64(sched.NumSteps()) > LoopBudget {
				// A loop this long would hold b2b copies of a large schedule: take its saving
				// from a loop of the same plan at a smaller size (loopSaving).
				d, at, err := m.loopSaving(plan, b2b, float64(sched.NumSteps()), tm)
				if err != nil {
					return row, nil, err
				}
				if at > 0 {
					res.Time -= d
					row.Mode = fmt.Sprintf("schedule back-to-back x%d (saving from %s)", b2b, units.FormatSize(at))
					break
				}
			}
			k, err := loopFits(b2b, sched.NumSteps(), opt.BackToBack > 0 || m.BackToBack > 0)
			if err != nil {
				return row, nil, err
			}
			if k > 1 {
				t, err := m.backToBack(plans, k, tm)
				if err != nil {
					return row, nil, err
				}
				// Result.Time becomes the per-call time; the records stay those of one call.
				res.Time = (t - res.Time) / Time(k-1)
				row.Mode = fmt.Sprintf("schedule back-to-back x%d", k)
			}
		case ringColl && strings.Contains(cerr.Error(), "schedule would have"):
			// coll refuses a schedule this large: replay it compactly below.
		default:
			if opt.Exact || opt.Record || !strings.Contains(cerr.Error(), "schedule would have") {
				return row, nil, cerr
			}
			// A broadcast or reduce pipeline too long to replay: from the same call on fewer
			// nodes (nodesSteady), where m can build them.
			var mode string
			if res, mode, err = m.nodesSteady(f, size, dt, op, plan, opt); err != nil {
				return row, nil, err
			}
			if res == nil {
				return row, nil, cerr
			}
			row.Mode = mode
			if b2b > 1 {
				// The form over node counts times one call; the rows below it are nccl-tests'
				// loop, which overlaps one call's pipeline fill with the next: that saving, from
				// a loop of the same plan on these nodes at a smaller size (loopSaving), as
				// schedule-steady takes it. Until stop 36 these rows were one call: on 300 DGX
				// H100 nodes a broadcast of 256 MiB took 14,913 µs (the loop), of 512 MiB 15,773
				// (one call).
				d, at, err := m.loopSavingOf(plan, b2b, tm, opt.DryRun)
				if err != nil {
					return row, nil, err
				}
				if at > 0 {
					res.Time -= d
					row.Mode = fmt.Sprintf("%s back-to-back x%d (saving from %s)", mode, b2b, units.FormatSize(at))
				}
			}
		}
	}
	if res == nil && !compactable(plan) && !opt.Record && nvlsFolds(plan) {
		// NVLSTree whose node fold a switch link over its capacity halted: the fold with
		// stand-ins for those links (nvlsSwitchBound) rather than another algorithm.
		if tm, err = m.PlanTiming(plan); err != nil {
			return row, nil, err
		}
		var mode string
		if res, mode, err = m.nvlsSwitchBound(plan, tm, opt); err != nil {
			return row, nil, err
		}
		row.Mode = mode
	}
	if res == nil && plan.Algo == coll.NVLSTree && !opt.Exact && !opt.Record && nvlsFolds(plan) {
		// The node fold outside its bounds (nvlsFoldLastResort), closer than the extrapolation
		// over node counts below wherever both were measured.
		if tm, err = m.PlanTiming(plan); err != nil {
			return row, nil, err
		}
		var mode string
		if res, mode, err = m.nvlsFoldLastResort(plan, tm, opt); err != nil {
			return row, nil, err
		}
		if res != nil {
			row.Mode = mode
		}
	}
	// The forms from other sizes or node counts, in this order, each where those above it timed
	// nothing (docs/cluster.md).
	nvlsTree := plan.Algo == coll.NVLSTree && !opt.Exact && !opt.Record
	for _, form := range []struct {
		ok  bool
		run func(coll.Func, int64, coll.DataType, coll.RedOp, coll.Plan, RunOptions) (*Result, string, error)
	}{
		// An NVLSTree all-reduce on N nodes, N not a power of two: the same call on 2^⌈log2 N⌉
		// nodes, whose trees are as deep (nodesAsDeep).
		{nvlsTree, m.nodesAsDeep},
		// An NVLSTree all-reduce from the largest halvings S2 and S2/2 timed without a form of
		// their own (sizesSteadyDirect), closer than the form over node counts where both were
		// measured.
		{nvlsTree && !opt.noSizes, m.sizesSteadyDirect},
		// Else from the same call on fewer nodes (nodesSteady, in the trees' depth).
		{nvlsTree, m.nodesSteady},
		// Any algorithm without a compact executor: from two smaller sizes (sizesSteady), before
		// timing NCCL's decision without this algorithm.
		{!compactable(plan) && !opt.Exact && !opt.Record && !opt.noSizes, m.sizesSteady},
	} {
		if res != nil || !form.ok {
			continue
		}
		var mode string
		if res, mode, err = form.run(f, size, dt, op, plan, opt); err != nil {
			return row, nil, err
		}
		if res != nil {
			row.Mode = mode
		}
	}
	if res == nil && !compactable(plan) {
		// No compact executor for this algorithm at a size whose schedule is too large: run
		// what NCCL decides with only the compactly simulated algorithms enabled.
		if plan, _, err = m.plan(call, func(a coll.Algo) bool { return a == coll.Ring || (f == coll.AllReduce && a == coll.Tree) }); err != nil {
			return row, nil, err
		}
	}
	if res == nil && opt.DryRun {
		res, row.Mode = &Result{}, "compact"
	}
	if res == nil {
		if tm, err = m.PlanTiming(plan); err != nil {
			return row, nil, err
		}
		if !opt.DryRun && !opt.GPUTime {
			opt.hostFloor = m.hostFloorOf(f, n, plan, opt)
		}
		if f == coll.AllToAll || f == coll.SendRecv {
			opt.deferPair = func() bool {
				if size < 2*SizesMin {
					return false // no pair is an eighth of the size: the smallest is SizesMin/4
				}
				fits := m.p2pFits(f, dt, op, plan, opt)
				s1 := p2pFromMin(size, fits)
				if s1 == 0 {
					s1 = p2pUnderMin(size, fits)
				}
				return s1 > 0 && 8*s1 <= size
			}
		}
		res, row.Mode, err = m.compact(f, plan, algBytes, tm, opt)
		if errors.Is(err, errDeferred) {
			// A replay of every rank past P2PDeferMessages: from two smaller sizes that
			// replay it where they exist (p2pSizesSteady), else at this size after all.
			var steady *Result
			var mode string
			if steady, mode, err = m.p2pSizesSteady(f, size, dt, op, plan, opt); err == nil {
				if steady != nil {
					res, row.Mode = steady, mode
				} else {
					opt.noDefer = true
					res, row.Mode, err = m.compact(f, plan, algBytes, tm, opt)
				}
			}
		}
		if err != nil {
			return row, nil, err
		}
		if res.MeanBacklog > 0 && (f == coll.AllToAll || f == coll.SendRecv) && !opt.Exact && !opt.Record && !opt.noSizes && opt.Transfers == nil {
			// A point-to-point call the ECMP mean model timed backlogged past the replay
			// budgets: from two smaller sizes that a replay of every rank times, where they
			// exist (p2pSizesSteady).
			steady, mode, err := m.p2pSizesSteady(f, size, dt, op, plan, opt)
			if err != nil {
				return row, nil, err
			}
			if steady != nil {
				res, row.Mode = steady, mode
			}
		}
	}
	// In nccl-tests' loop of back-to-back calls the host enqueues the next call while this one
	// runs, so a call costs at least its host's enqueue time: one HostEnqueue per call with a
	// process per GPU, more for each further channel of the call and for a point-to-point call's
	// operations (callWork); when one host thread enqueues
	// the call on every GPU of its node, one after another, at least that and HostPerRank for
	// each GPU past the first; none from a CUDA graph (LaunchMode.hostFloor).
	if !opt.DryRun && !opt.GPUTime {
		floor := opt.hostFloor // the compact executor's, for this plan
		if floor == 0 {
			floor = m.hostFloorOf(f, n, plan, opt)
		}
		if res.Time < floor {
			row.DeviceUs = res.Time.Micros()
			res.Time, row.HostBound = floor, true
		}
	}
	row.MeanBacklog = res.MeanBacklog
	row.TimeUs = res.Time.Micros()
	if row.TimeUs > 0 {
		row.AlgBw = float64(algBytes) / (row.TimeUs * 1e-6) / 1e9
		row.BusBw = row.AlgBw * coll.BusFactor(f, n)
	}
	row.Algo, row.Proto, row.NChannels = plan.ShownNames()
	row.Events = res.Events
	if substitution(plan, nccl) != "" {
		row.NCCL = nccl.Decision()
	}
	if len(res.Ops) == 0 {
		// LinkName is a method of the replay's engine, which holds the whole replay (its handler,
		// the schedule, the records): a caller keeping the result of every call (simccl run keeps
		// them all until its output) kept every replay alive. Without ops it names nothing.
		res.LinkName, res.LinkShare = nil, nil
	}
	return row, res, nil
}

// hostFloorOf is call f's host floor on m's n ranks for plan (LaunchMode.hostFloor; a one-rank
// communicator's enqueue where n is 1): in nccl-tests' loop a call costs at least that.
func (m *Machine) hostFloorOf(f coll.Func, n int, plan coll.Plan, opt RunOptions) Time {
	work := callWork(f, n, plan, opt.Transfers)
	work.host = m.HostEnqueue
	if n == 1 && !m.Launch.Graph() {
		// A one-rank communicator's enqueue, measured apart (OneRankHost), a collective's on
		// this machine's host.
		if work.ops > 0 {
			return OneRankP2PHost
		}
		return work.scaled(OneRankHost)
	}
	return m.Launch.hostFloor(m.Node.NumGPUs, work)
}

// PlanTiming is the executors' timing of a plan on m: what Run times it with (the report's
// recorded replay takes it too, so that its time is the row's).
func (m *Machine) PlanTiming(p coll.Plan) (Timing, error) {
	// A send/recv plan's own protocol is Simple whatever its transfers use (coll's protocol for
	// the transfers not marked LL); its launch takes the base latency of the protocol its row
	// shows, that of its largest transfer (coll.Plan.Shown), as an all-to-all's takes its
	// transfers'. Until 2026-11-29 a send/recv of LL transfers paid Simple's base latency (8.4
	// µs, not 6.6): 1.8 µs more than the all-to-all that carries the same messages.
	proto, _ := p.Shown()
	tm, err := m.Timing(p.Algo, proto)
	if err != nil {
		return tm, err
	}
	if p.OneRankCopy() && m.GPU.Memory.Copy > 0 {
		// NCCL runs a one-rank collective as a device-to-device cudaMemcpyAsync
		// (ncclLaunchOneRank): no kernel, no channel; its time per call on one H200 is the
		// memcpy's to within 0.5% from 32 MiB to 1 GiB (testdata/nccl/h200x1/onerank-*).
		tm.Launch, tm.Memcpy = MemcpyLat, m.GPU.Memory.Copy
		tm.CTARate, tm.CTAMem, tm.Fence, tm.Slice, tm.ChannelSkew = 0, [coll.NumProtos]Rate{}, 0, SliceCost{}, 0
		return tm, nil
	}
	if chainStreams(p) {
		tm.LineStream = true
		if tm.CTARate > 0 && tm.CTAMem[coll.LL] == 0 && tm.CTAMem[coll.Simple] > 0 {
			tm.CTAMem[coll.LL] = m.GPU.MemLL
		}
	}
	if p.Algo == coll.Tree {
		// Trees are charged the flat per-CTA rate (GPUModel.CTARate), by every executor: the
		// schedule replay and SimulateTree alike. That rate is NCCL's own per-channel ceiling of a
		// tree channel (perChMaxTreeBws, single-node column; CTARateGBps), so it is a tree's figure
		// before it is a ring's. The memory-traffic rates (CTAMem) and the fence are not applied:
		// they were measured on ring channels, whose CTA is not split, where runTreeSplit splits a
		// tree channel's threads between reduce-up and broadcast-down (NCCL 2.28 all_reduce.h:
		// 70/30 for LL and LL128, half plus 64 threads for Simple), which the traffic model does
		// not describe (applied to trees, it made Tree/LL128 at 4–8 MiB on 2 A100 nodes 47–89%
		// slower than measured; BENCHMARKS.md "2026-11-28 (fid2)").
		tm.CTAMem, tm.Fence, tm.Slice = [coll.NumProtos]Rate{}, 0, SliceCost{}
	}
	if p.Algo == coll.NVLS || p.Algo == coll.NVLSTree {
		// NVLS kernels split a channel's warps by role (scatter, reduce, gather) and reduce in
		// the switch, so the per-CTA rate of ring/tree channels does not bound them; what does is
		// the share of the NVLink bandwidth multimem loads and stores reach: NCCL's nvlsEfficiency
		// of the GPU generation (NCCL 2.28 tuning.cc: Hopper 0.85, Blackwell 0.74).
		tm.CTARate, tm.CTAMem, tm.Fence, tm.Slice = 0, [coll.NumProtos]Rate{}, 0, SliceCost{}
		eff, err := nvlsEfficiency(m.Release, m.GPU.SM)
		if err != nil {
			return tm, err
		}
		tm.SwitchEff = eff
		if p.Algo == coll.NVLSTree && m.Nodes > 1 {
			tm.ChannelCap = m.nvlsTreeChannelCap(p)
		}
	}
	return tm, nil
}

// chainStreams reports whether plan p's LL and LL128 lines stream in its replay
// (Timing.LineStream, with the LL rate GPUModel.MemLL): a ring broadcast or reduce, whose steps
// each cross every rank of the chain in turn. NCCL's LL and LL128 receivers go on with each line
// as it lands (prims_ll.h, prims_ll128.h; a send into the network stays a whole step: the proxy
// posts a step once the GPU has written all of it), and at the sizes NCCL runs a chain with them
// a channel's data is one or a few steps, so a replay that forwards a step only once all of it
// has arrived charges the chain's length times a step's copy: on 16 DGX H100 nodes (127 hops, 15
// of them across the network) an LL128 broadcast of 4 MiB took 2,003 µs, where streamed it takes
// 518 (733 while network receives waited for the whole step) and NCCL's own model says 540
// (`simccl tune`). The ring loops, trees and point-to-point stay
// store-and-forward: there a step waits on one hop, and streaming them as well made the public
// nccl-tests set worse (12.8 → 15.0% median error) by removing what stands in for a per-channel
// cost the model lacks (docs/cluster.md "Chains stream").
func chainStreams(p coll.Plan) bool {
	return p.Algo == coll.Ring && (p.Func == coll.Broadcast || p.Func == coll.Reduce)
}

// qpPlanner is a planner that carries NCCL_IB_QPS_PER_CONNECTION (planner.Planner does).
type qpPlanner interface{ IBQPsPerConnection() int }

// tuningTabler is a planner that exposes its tuning model (planner.Planner does).
type tuningTabler interface{ TuningTable() *tuning.Table }

// nvlsTreeChannelCap is the data rate one channel of NVLSTree plan p reaches at most, from NCCL's
// own ceiling on NVLSTree (NCCL 2.28 tuning.cc): busBw ≤ nCh × perChMaxNVLSTreeBw, nCh the NVLS
// graph's searched channels, perChMaxNVLSTreeBws Hopper 57.7 GB/s on 2 nodes and 45.5 on more,
// Blackwell 96.0 and 80.0. That bus bandwidth is shared by the plan's channels and converted to
// algorithm bandwidth as NCCL converts it (× nRanks / nsteps, nsteps = 2(nRanks − 1)). On 2 DGX
// H100 nodes it is the term that binds NCCL's own NVLSTree estimate (8 searched channels × 57.7:
// busbw 462, where its NVLink term gives 476 and the network 768). The ceiling is NCCL's, taken as
// the CTA rate of ring and tree channels is (CTARateGBps), not fitted to a measurement. 0 (no
// cap) where the planner exposes no tuning model or NCCL has no ceiling.
func (m *Machine) nvlsTreeChannelCap(p coll.Plan) Rate {
	tt, ok := m.Planner.(tuningTabler)
	if !ok || tt.TuningTable() == nil || p.NChannels < 1 || p.NRanks < 2 {
		return 0
	}
	t := tt.TuningTable()
	s := 1
	if m.Nodes > 2 {
		s = 2
	}
	v := t.K.PerChMaxNVLSTreeBws[smIndex(m.GPU.SM)][s]
	nch := t.Comm.Graphs[tuning.GraphNVLS].NChannels
	if !(v > 0) || nch < 1 {
		return 0
	}
	bus := float64(nch) * v / float64(p.NChannels)
	return GBps(bus * float64(p.NRanks) / float64(2*(p.NRanks-1)))
}

// nvlsEfficiency is NCCL's nvlsEfficiency for compute capability sm under release's constants.
func nvlsEfficiency(release string, sm int) (float64, error) {
	if release == "" {
		release = tuning.DefaultRelease
	}
	k, err := tuning.ConstantsFor(release)
	if err != nil {
		return 0, err
	}
	if e := k.NVLSEfficiency[smIndex(sm)]; e > 0 {
		return e, nil
	}
	return 0, fmt.Errorf("simnet: NCCL %s has no NVLS efficiency for compute capability %d (NVLS needs sm 90 or newer)", release, sm)
}

// simulates reports whether the simulator runs algorithm a for f on m: what coll compiles
// without switch endpoints, NVLS/NVLSTree where the nodes have an NVSwitch, and CollNetChain and
// CollNetDirect (the network's reduction, RouteCollNet) across nodes with NICs.
func (m *Machine) simulates(f coll.Func, a coll.Algo) bool {
	if coll.Supported(f, a) {
		return true
	}
	if a == coll.CollNetChain || a == coll.CollNetDirect {
		return coll.NeedsSwitches(f, a) && m.Nodes > 1 && len(m.Node.NICs) > 0
	}
	return (a == coll.NVLS || a == coll.NVLSTree) && coll.NeedsSwitches(f, a) && m.Node.GPUToNVS != nil
}

// SteadyAbove is the estimated schedule size (coll.Plan.EstimatedSteps) above which Machine.Run
// times a collective without a compact executor (NVLS, NVLSTree) by steadySchedule, unless Exact
// or Record; SteadyBudget is the most estimated steps steadySchedule replays at its larger size;
// SteadyMinLoops the fewest chunks per channel its smaller size must hold, so that both replays
// are in the pipeline's steady state. Measured on 16 DGX H100 nodes (NVLSTree, 16 channels of
// 64 KiB chunks; TestSteadyScheduleMatchesExact): the time added per chunk settles from about
// 128 chunks per channel on — 512 MiB extrapolated from 128 and 256 MiB is 0.003% off the exact
// replay, 256 MiB from 64 and 128 MiB 2.4% off.
//
// SteadyMinPipelineLoops is the fewest for Broadcast and Reduce where their schedule is past
// coll's limit (coll.MaxSteps), so that the call is timed rather than refused: a ring broadcast or
// reduce is one pipeline whose chunks each add the same time once it is full. Measured on 16
// HGX H100 16-NIC nodes (256 ranks, 32 channels; 8 GiB is past the limit), 4 GiB extrapolated
// from 1 and 2 GiB (32 and 64 chunks per channel) against the exact replay: Simple +0.56%
// (broadcast) and +0.31% (reduce), LL128 +0.43% and +0.99%.
var (
	SteadyAbove            = 2_000_000.0
	SteadyBudget           = 2_500_000.0
	SteadyMinLoops         = int64(128)
	SteadyMinPipelineLoops = int64(32)
)

// steadySchedule times plan, whose schedule is too large to replay, from two replays of the same
// plan (algorithm, protocol, channels, chunk) at smaller counts S1 = S2/2 and S2, the largest
// halving of the count (at least one) whose schedule fits SteadyBudget. Past the pipeline's fill a pipelined
// collective adds the same time per chunk, so T(S) = T(S2) + (S − S2)·(T(S2) − T(S1))/(S2 − S1).
// It returns nil (and no error) where no such pair exists: the smaller replay would hold fewer
// than SteadyMinLoops chunks per channel, or even it is over budget (ranks, not bytes, make the
// schedule large). Bytes on links and busy times are those of the S2 replay (not scaled).
//
// Where the call is timed in a loop of loop > 1 back-to-back calls (a broadcast or reduce by
// default, Machine.loopCalls), the line above is the time of one call alone, which carries the
// pipeline's whole fill; in the loop the next call's chunks enter as the previous call's leave,
// and a call costs that fill less. The difference D = T(one call) − T(a call in the loop) does not
// change with the size once the pipeline is full (128 PCIe nodes of 8 GPUs, Ring/Simple broadcast
// on 2 channels, 32–256 MiB: 67,097 ± 1 µs of 70,528–94,481), so it is measured once, on a loop of
// the plan at a size that fits LoopBudget (loopSaving), and taken off. Before
// 2026-11-29 the row was the call alone: on those 128 nodes 512 MiB came out at 121,855 µs where
// 256 MiB took 27,384 in the loop (busbw 9.80 → 4.41 GB/s).
func (m *Machine) steadySchedule(plan coll.Plan, tm Timing, loop int, dry bool) (*Result, string, error) {
	elt := int64(plan.DataType.Size())
	p2 := plan
	for {
		if p2.Count%4 != 0 {
			return nil, "", nil
		}
		p2.Count /= 2
		if p2.EstimatedSteps() <= SteadyBudget {
			break
		}
	}
	p1 := p2
	p1.Count /= 2
	minLoops := SteadyMinLoops
	if (plan.Func == coll.Broadcast || plan.Func == coll.Reduce) && plan.EstimatedSteps() > coll.MaxSteps {
		minLoops = SteadyMinPipelineLoops
	}
	if chunksPerChannel(p1) < minLoops {
		return nil, "", nil
	}
	mode := fmt.Sprintf("schedule-steady (%s, %s)", units.FormatSize(p1.Count*elt), units.FormatSize(p2.Count*elt))
	if loop > 1 {
		if at := loopSavingPlan(plan, loop, plan.EstimatedSteps()); at.Count > 0 {
			mode += fmt.Sprintf(" back-to-back x%d (saving from %s)", loop, units.FormatSize(at.Count*elt))
		} else {
			loop = 1 // no smaller loop to take the saving from: one call
		}
	}
	if dry {
		return &Result{}, mode, nil
	}
	run := func(p coll.Plan) (*Result, error) {
		s, err := coll.Compile(p)
		if err != nil {
			return nil, err
		}
		e, cl, err := m.engineFor(p.Algo)
		if err != nil {
			return nil, err
		}
		return Simulate(e, cl, s, tm, Options{})
	}
	res, err := extrapolated(p1.Count, p2.Count, plan.Count, func() (*Result, error) { return run(p1) }, func() (*Result, error) { return run(p2) })
	if err != nil {
		return nil, "", err
	}
	if loop > 1 {
		d, _, err := m.loopSaving(plan, loop, plan.EstimatedSteps(), tm)
		if err != nil {
			return nil, "", err
		}
		res.Time -= d
	}
	return res, mode, nil
}

// LoopBudget is the most steps Run replays for the loop of back-to-back calls that times a call
// (Machine.loopCalls: its schedule copied once a call). A longer loop is not replayed: the loop's
// saving over one call alone is taken from a loop of the same plan at a smaller size
// (loopSaving), except under RunOptions.Exact, which replays the whole loop. A loop's replay
// costs about 800 bytes a step: 3 copies of a 1,024-rank broadcast
// at 512 MiB (967 k steps each) allocate 810 MB, and the broadcast sweep on 128 DGX H100 nodes
// peaked at 4.1 GB with them (2.3 GB now, the same rows).
var LoopBudget = 500_000.0

// loopMinChunks is the fewest chunks per channel of the smaller plan loopSaving measures on: the
// saving is the pipeline's fill, the same at every size whose chunks are full (below, a chunk's
// hop takes less). 128 DGX H100 nodes, Ring/LL128 broadcast on 16 channels: 1.9 µs at 64 MiB (7
// chunks a channel) as at 512 MiB (58).
const loopMinChunks = 2

// loopSavingPlan is the plan loopSaving measures on: plan's count halved until loop copies of its
// schedule fit LoopBudget (steps: those of plan's schedule, or an estimate; they halve with the
// count); a zero count where that plan would hold fewer than loopMinChunks chunks per channel.
func loopSavingPlan(plan coll.Plan, loop int, steps float64) coll.Plan {
	p := plan
	for float64(loop)*steps > LoopBudget {
		if p.Count%2 != 0 {
			p.Count = 0
			return p
		}
		p.Count /= 2
		steps /= 2
	}
	if chunksPerChannel(p) < loopMinChunks {
		p.Count = 0
	}
	return p
}

// chunksPerChannel is how many of plan's chunks (its chunk size, or coll's default for its
// algorithm and protocol) each of its channels carries.
func chunksPerChannel(plan coll.Plan) int64 {
	chunk := plan.ChunkSize
	if chunk <= 0 {
		chunk = coll.DefaultChunkSize(plan.Func, plan.Algo, plan.Proto, plan.BuffSize[plan.Proto])
	}
	return plan.Count * int64(plan.DataType.Size()) / int64(max(plan.NChannels, 1)) / chunk
}

// loopSaving is what a call of plan saves in a loop of loop back-to-back calls over one call
// alone: the pipeline's fill, which the next call's chunks overlap as the previous call's leave.
// It does not change with the size once every chunk is full (128 PCIe nodes of 8 GPUs, Ring/Simple
// broadcast on 2 channels, 32–256 MiB: 67,097 ± 1 µs of 70,528–94,481; 128 DGX-1 V100 nodes,
// Ring/LL128 on 8 channels, 3 µs from 64 to 512 MiB), so it is measured on loopSavingPlan's
// smaller plan: T(one call) − (T(loop calls) − T(one call)) / (loop − 1). It returns the saving
// and the size measured at (bytes; 0 where no smaller plan qualifies, and no saving).
func (m *Machine) loopSaving(plan coll.Plan, loop int, steps float64, tm Timing) (Time, int64, error) {
	p := loopSavingPlan(plan, loop, steps)
	if p.Count == 0 {
		return 0, 0, nil
	}
	s, err := coll.Compile(p)
	if err != nil {
		return 0, 0, err
	}
	e, cl, err := m.engineFor(p.Algo)
	if err != nil {
		return 0, 0, err
	}
	r1, err := Simulate(e, cl, s, tm, Options{})
	if err != nil {
		return 0, 0, err
	}
	tk, err := m.backToBack([]coll.Plan{p}, loop, tm)
	if err != nil {
		return 0, 0, err
	}
	return r1.Time - (tk-r1.Time)/Time(loop-1), p.Count * int64(p.DataType.Size()), nil
}

// loopSavingOf is loopSaving of plan's own estimated steps, and in a dry run only the size it
// would be measured at.
//
// A broadcast's or reduce's chain takes one step per chunk on each rank, where coll's estimate
// (Plan.EstimatedSteps, an upper bound) counts four: 614,400 compiled steps against 2.48 M
// estimated on 300 DGX H100 nodes (Ring/LL, 8 MiB). Taken as it is, no size with two chunks a
// channel fit the loop's budget there and the rows stayed one call.
func (m *Machine) loopSavingOf(plan coll.Plan, loop int, tm Timing, dry bool) (Time, int64, error) {
	steps := plan.EstimatedSteps()
	if plan.Func == coll.Broadcast || plan.Func == coll.Reduce {
		steps /= 4
	}
	if dry {
		p := loopSavingPlan(plan, loop, steps)
		return 0, p.Count * int64(p.DataType.Size()), nil
	}
	return m.loopSaving(plan, loop, steps, tm)
}

// extrapolated runs the two replays of an extrapolation at x1 < x2 (replayPair) and extends the
// line through their times to x: T(x) = T(x2) + (x − x2)·(T(x2) − T(x1))/(x2 − x1), x being the
// count (steadySchedule), the loops (nvls steady pair) or the nodes (nodesSteady). The result is
// the x2 replay's, with both replays' events and the extrapolated time.
func extrapolated(x1, x2, x int64, run1, run2 func() (*Result, error)) (*Result, error) {
	r1, r2, err := replayPair(run1, run2)
	if err != nil {
		return nil, err
	}
	return onLine(x1, x2, x, r1, r2), nil
}

// onLine moves r2 along the line through (x1, r1's time) and (x2, r2's time) to x, with the events
// of both, and returns it.
func onLine(x1, x2, x int64, r1, r2 *Result) *Result {
	per := float64(r2.Time-r1.Time) / float64(x2-x1)
	r2.Events += r1.Events
	r2.Time += Time(per * float64(x-x2))
	return r2
}

// pairToken is held by the one pair of replays that runs its two replays at once (replayPair).
var pairToken = make(chan struct{}, 1)

// replayPair runs the two independent replays of a steady-state extrapolation, at once where there
// is more than one core and no other pair of the process runs at once (pairToken), one after the
// other otherwise (each on its own engine: the results do not depend on it), and returns both
// results or the first error. One pair at a time bounds the memory of nested extrapolations (16
// GB200 racks at 4 GiB: a pair of node counts whose 8-rack replay is itself a pair of sizes held
// 4.1 GB with every pair in parallel).
func replayPair(a, b func() (*Result, error)) (ra, rb *Result, err error) {
	parallel := runtime.GOMAXPROCS(0) >= 2
	if parallel {
		select {
		case pairToken <- struct{}{}:
			defer func() { <-pairToken }()
		default:
			parallel = false
		}
	}
	if !parallel {
		if ra, err = a(); err != nil {
			return nil, nil, err
		}
		if rb, err = b(); err != nil {
			return nil, nil, err
		}
		return ra, rb, nil
	}
	var ea error
	done := make(chan struct{})
	go func() {
		defer close(done)
		ra, ea = a()
	}()
	rb, err = b()
	<-done
	if ea != nil {
		return nil, nil, ea
	}
	if err != nil {
		return nil, nil, err
	}
	return ra, rb, nil
}
