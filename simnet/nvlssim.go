package simnet

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/units"
)

// The symmetric replay of NVLS and NVLSTree (nvlsSymmetric). coll compiles these collectives with
// one program per (rank, channel) and per (switch, channel); every channel walks its own part of
// the buffer through the same switch endpoints, and the channels of one NCCL call start together.
// Channels whose parts are equal and whose messages take the same links (the NVLS scatter,
// reduce and multicast through each node's NVSwitch do not depend on the channel; NVLSTree's
// messages between nodes follow the tree of the channel's parity and leave through the NIC its
// index picks) therefore move in lockstep, each with the same share of every link. The replay
// keeps one representative per class of such channels — the first P channels of the call, P the
// period of the classes — on a private engine whose links have the capacity of the machine's
// divided by the channels per class: each representative's flow then gets the rate each member's
// gets on the full machine (max-min sharing among k identical flows on a link of capacity C gives
// each C/k of what it leaves), so the time is the full schedule's. It is exact when every member's
// part equals its representative's; where Compile's split leaves the last channels a smaller part
// (a count that is not a multiple of the channels), the representative takes its class's largest
// part, a fraction of a chunk off.

// NVLSBudget is the most estimated steps (coll.Plan.EstimatedSteps of the folded plan) the
// symmetric NVLS replay runs directly, below coll's MaxSteps (a folded GB200 NVL72 x16 AllReduce
// of 1 GiB, 3.9 M, takes about 23 s and 2.8 GB); above it, it replays the folded plan with fewer
// whole loops per channel, twice, and extrapolates (steadyPair, extrapolate).
var NVLSBudget = 4_000_000.0

// NVLSMinLoops and NVLSMinChunks are the fewest loops (one chunk per rank of a node, the chunks a
// channel's heads share out) and chunks per channel the smaller of the two steady-state replays
// holds. A head's connections carry one chunk per loop with NCCL_STEPS slots, so the pipeline
// may fill over that many loops: measured against the replay of every loop (docs/cluster.md),
// from 8 and 16 loops the extrapolation is within 0.13% on DGX (8 ranks a node, 4 and 16 nodes)
// and GB200 NVL72 (72, 1 and 2 racks), where from 4 and 8 loops it is 5.3% off on 16 DGX B200
// nodes, and on 16 NVL72 racks the pairs 2/4 and 3/6 give times 9% apart at 4 GiB. With NVLSTree's
// channel ceiling (Timing.ChannelCap) the pipeline settles later: on 4 DGX H100 nodes at 1 GiB,
// 8 and 16 loops are +2.1% off, 16 and 32 +0.10% (2 nodes: −0.48%), so the pair starts at 2 ×
// NCCL_STEPS loops.
var (
	NVLSMinLoops  int64 = 2 * coll.NCCLSteps
	NVLSMinChunks int64 = 64
)

// NVLSProbeLoops is the fewest loops per channel of the short replay that tells in advance that
// a checked fold's replay will halt (nvlsCheck.halts; an eighth of the replay's loops where that
// is more). Only the cost depends on it: on 64 DGX H100 nodes of a 2:1 three-tier fat tree (1 GiB,
// 128 loops) the replay halts at 445 µs of 6.5 ms, which 16 loops show and 8 do not.
var NVLSProbeLoops int64 = 2 * coll.NCCLSteps

// nvlsMinLoops is the fewest loops the smaller steady-state replay of plan holds: NVLSMinLoops,
// and a quarter of the nodes where that is more. An NVLSTree pipeline across many nodes fills
// slowly: on 128 DGX H100 nodes at 768 MiB (96 loops), extrapolating from 40 and 80 loops is
// +0.04% off the replay of every loop, from 24 and 48 +0.84%, from 20 and 40 +1.22%
// (TestNVLSSteady128Long).
func nvlsMinLoops(plan coll.Plan) int64 {
	return max(NVLSMinLoops, int64(plan.NNodes/4))
}

// nvlsFold is how the channels of an NVLS or NVLSTree plan fold onto representatives.
type nvlsFold struct {
	period  int     // representatives: the call's first period channels
	members int     // channels each representative stands for
	parts   []int64 // the representatives' element counts: the largest part of their class
	exact   bool    // every member's part equals its representative's
}

// nvlsFoldOf finds the shortest period P (a divisor of the call's channels; even for NVLSTree
// over several nodes, so that a class keeps its tree) such that channel c takes the links channel
// c mod P takes, and returns false when no fold leaves fewer channels.
func nvlsFoldOf(p coll.Plan, r Router) (nvlsFold, bool) {
	return nvlsFoldBy(p, r, nil)
}

// nvlsFoldBy is nvlsFoldOf comparing the channels' routes through key (nil: link by link; see
// nvlsFoldChecked).
func nvlsFoldBy(p coll.Plan, r Router, key func(sig, route []LinkID) []LinkID) (nvlsFold, bool) {
	cnts := p.ChannelCounts()
	nch := len(cnts)
	nNodes := max(p.NNodes, 1)
	tree := p.Algo == coll.NVLSTree && nNodes > 1
	// sig[c]: the links of every message channel c sends between nodes (the heads' tree), in
	// the order coll's schedule pairs them; none on one node (the switch routes are the same for
	// every channel).
	sig := make([][]LinkID, nch)
	if cr, ok := r.(CollNetRouter); ok && p.Algo == coll.NVLS && nNodes > 1 {
		// NVLS with CollNet: the heads' routes to and from the network's reduction on channel c.
		ppn := p.NRanks / nNodes
		heads := p.NVLSHeadRanks()
		for c := range sig {
			var buf []LinkID
			for i := 0; i < nNodes*len(heads); i++ {
				rank := i/len(heads)*ppn + heads[i%len(heads)]
				for _, up := range []bool{true, false} {
					route, err := cr.RouteCollNet(rank, p.ChannelLo+c, up, nil)
					if err != nil {
						return nvlsFold{}, false
					}
					if key == nil {
						buf = append(buf, route...)
					} else {
						buf = key(buf, route)
					}
					buf = append(buf, -1)
				}
			}
			sig[c] = buf
		}
	}
	if tree {
		ppn := p.NRanks / nNodes
		heads := p.NVLSHeadRanks()
		// One scratch list for every route key reads (it keeps none), and each channel's
		// signature made as long as the last one's at once: grown by append, the signatures
		// and a route a pair came to 10 MB written on 128 nodes, for 1.4 MB kept.
		scratch := make([]LinkID, 0, 64)
		for c := range sig {
			ch := p.ChannelLo + c
			var buf []LinkID
			if c > 0 {
				buf = make([]LinkID, 0, len(sig[c-1]))
			}
			for node := 0; node < nNodes; node++ {
				up, _, _, _ := coll.Dtree(nNodes, node, ch%2)
				if up < 0 {
					continue
				}
				for _, j := range heads {
					a, b := node*ppn+j, up*ppn+j
					for _, ab := range [2][2]int{{a, b}, {b, a}} {
						// Always into scratch, never buf: given an empty list a Router may return
						// a route it keeps (nodeFoldRouter), which buf's appends would then write
						// past the end of.
						route, _ := r.Route(ab[0], ab[1], ch, scratch[:0])
						if key == nil {
							buf = append(buf, route...)
						} else {
							buf = key(buf, route)
						}
						buf = append(buf, -1)
					}
				}
			}
			sig[c] = buf
		}
	}
	for P := 1; P < nch; P++ {
		if nch%P != 0 || (tree && P%2 != 0) {
			continue
		}
		ok := true
		for c := P; c < nch && ok; c++ {
			ok = slices.Equal(sig[c], sig[c%P])
		}
		if !ok {
			continue
		}
		f := nvlsFold{period: P, members: nch / P, parts: make([]int64, P), exact: true}
		for c, x := range cnts {
			f.parts[c%P] = max(f.parts[c%P], x)
		}
		for c, x := range cnts {
			f.exact = f.exact && x == f.parts[c%P]
		}
		return f, true
	}
	return nvlsFold{}, false
}

// plan is the folded plan: the representatives' channels with their parts.
func (f nvlsFold) plan(p coll.Plan) coll.Plan {
	p.NChannels = f.period
	p.Parts = append([]int64(nil), f.parts...)
	p.Count = 0
	for _, x := range f.parts {
		p.Count += x
	}
	return p
}

// foldedEngine is a private engine with e's links (same ids, so the cluster routes on it), their
// latencies, and their capacities divided by members. It is lean (Engine.lean): its replays'
// times are read, never its links' statistics.
func foldedEngine(e *Engine, members int) *Engine {
	q := NewEngine(nil)
	q.lean = true
	n := e.NumLinks()
	q.links = make([]link, 0, n+n/8) // room for a few more (the node fold's stand-ins, latencies)
	q.share = e.share                // a connection's queue pairs split as on e
	for l := 0; l < n; l++ {
		q.AddLink("", e.LinkCap(LinkID(l))/Rate(members), e.links[l].lat)
		if e.links[l].relaxed {
			q.relaxLink(LinkID(l)) // as e does (exact: enforced once found over)
		}
	}
	q.SetNamer(0, LinkID(n), e.LinkName)
	return q
}

// nvlsSymmetric times an NVLS or NVLSTree plan by the symmetric replay (see the top of this
// file) and returns its result and the row's mode: "nvls-symmetric" (the folded schedule
// replayed), or "nvls-symmetric-steady (S1, S2)" (replayed at the sizes S1 and S2 and
// extrapolated). It returns nil, and no error, where the channels do not fold (each takes links
// of its own) or where Exact forbids what the fold would need (unequal parts, extrapolation).
func (m *Machine) nvlsSymmetric(plan coll.Plan, tm Timing, opt RunOptions) (*Result, string, error) {
	if plan.Algo != coll.NVLS && plan.Algo != coll.NVLSTree {
		return nil, "", nil
	}
	e, cl, err := m.engineFor(plan.Algo)
	if err != nil {
		return nil, "", err
	}
	f, ok := nvlsFoldOf(plan, cl)
	var checked *nvlsCheck // channels folded onto links they do not share (nvlsecmp.go)
	if !ok {
		if f, checked, ok = nvlsFoldChecked(plan, cl, e); !ok {
			return nil, "", nil
		}
	}
	if opt.Exact && !f.exact {
		return nil, "", nil
	}
	fp := f.plan(plan)
	// The loops of the replay below, that of the whole call or the shorter of a steady pair (0:
	// none).
	var replayLoops int64
	if fp.EstimatedSteps() <= NVLSBudget {
		replayLoops = f.wholeLoops(plan)
	} else if l1, _, ok := f.steadyPair(plan, NVLSBudget, nvlsMinLoops(plan), NVLSMinChunks); ok && !opt.Exact {
		replayLoops = l1
	}
	// A checked fold whose replay will halt: known from a replay of its first loops
	// (nvlsCheck.halts) where the node fold's check halted, or where that replay is at most an
	// eighth of the one it saves.
	nodeHalted := false
	probeLoops := func(loops int64) int64 { return max(NVLSProbeLoops, loops/8) }
	probe := &haltProbe{l: probeLoops(replayLoops), done: make(chan struct{}), run: func(l int64) (bool, error) {
		return checked.halts(e, cl, plan, f, tm, l)
	}}
	halts := func(loops int64) (bool, error) {
		l := probeLoops(loops)
		if checked == nil || l+1 >= loops || !(nodeHalted || 8*l <= loops) {
			return false, nil
		}
		return probe.result(l)
	}
	if !opt.Exact && plan.Algo == coll.NVLSTree && plan.NNodes >= NVLSNodeFoldMin && f.parts[0]/nvlsLoopElems(plan) >= NVLSNodeFoldMinLoops {
		// NVLSTree's nodes folded too (nvlsfold.go): an approximation, so never with Exact. A
		// replay halted by its check (a switch link over its capacity) falls through (Run may
		// come back to the fold with stand-ins for those links: nvlsSwitchBound).
		if nf := nvlsNodeFold(plan, cl, e); nf != nil {
			if opt.folds != nil && checked != nil && probe.l+1 < replayLoops && haltProbeAhead {
				// A replay that will halt starts the probe that halts then runs, beside it.
				opt.folds.ahead = probe.start
			}
			res, mode, halted, err := f.nodeFolded(plan, nf, e, cl, tm, opt, false)
			if opt.folds != nil {
				opt.folds.ahead = nil
			}
			if err != nil || res != nil {
				return res, mode, err
			}
			nodeHalted = halted
			if halted && switchBoundFirst && fp.EstimatedSteps() > SwitchBoundAbove && cl.Fabric.HostsPerLeaf >= SwitchBoundMinHosts {
				// The channel fold would replay every node for seconds to minutes: the
				// switch-bound fold instead, within 1% of that replay wherever a leaf has that
				// many hosts (SwitchBoundMinHosts).
				res, mode, _, err := f.nodeFolded(plan, nf, e, cl, tm, opt, true)
				if err != nil || res != nil {
					return res, mode, err
				}
			}
		}
	}
	run := func(p coll.Plan) (*Result, error) {
		s, err := coll.Compile(p)
		if err != nil {
			return nil, err
		}
		if checked != nil {
			return checked.simulate(e, cl, s, tm)
		}
		return Simulate(foldedEngine(e, f.members), cl, s, tm, Options{prune: true})
	}
	if fp.EstimatedSteps() <= NVLSBudget {
		if opt.DryRun {
			return &Result{}, "nvls-symmetric", nil
		}
		if h, err := halts(f.wholeLoops(plan)); h || err != nil {
			return nil, "", err
		}
		res, err := run(fp)
		if errors.Is(err, errHalted) {
			return nil, "", nil // a link the fold relaxed went over its capacity
		}
		if err != nil {
			return nil, "", err
		}
		res.LinkName, res.LinkShare = e.LinkName, e.LinkShare
		return res, "nvls-symmetric", nil
	}
	if opt.Exact {
		return nil, "", nil
	}
	l1, l2, ok := f.steadyPair(plan, NVLSBudget, nvlsMinLoops(plan), NVLSMinChunks)
	if !ok {
		return nil, "", nil
	}
	mode := fmt.Sprintf("nvls-symmetric-steady (%s, %s)", f.loopsSize(plan, l1), f.loopsSize(plan, l2))
	if opt.DryRun {
		return &Result{}, mode, nil
	}
	if h, err := halts(l1); h || err != nil {
		return nil, "", err
	}
	res, err := f.extrapolate(plan, l1, l2, run)
	if errors.Is(err, errHalted) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	res.LinkName, res.LinkShare = e.LinkName, e.LinkShare
	return res, mode, nil
}

// haltProbe is nvlsCheck.halts of l loops (run), started on a goroutine of its own where the node
// fold's replay will report a halt (foldScheds.ahead), so that it runs beside the rest of that
// replay instead of after it (64-node three-tier fat tree, 1 GiB: its 0.4 s beside the fold's
// 1.3 s). Its result is run's, started early or not.
type haltProbe struct {
	l    int64
	run  func(l int64) (bool, error)
	once sync.Once
	done chan struct{}
	h    bool
	err  error
}

// haltProbeAhead: nvlsSymmetric starts its probe ahead of the node fold's halt (tests turn it off
// to compare).
var haltProbeAhead = true

// start starts the probe, once.
func (p *haltProbe) start() {
	p.once.Do(func() {
		go func() {
			defer close(p.done)
			p.h, p.err = p.run(p.l)
		}()
	})
}

// result is run(l): the probe's where l is its loops (started now if it was not), else run now.
func (p *haltProbe) result(l int64) (bool, error) {
	if l != p.l {
		return p.run(l)
	}
	p.start()
	<-p.done
	return p.h, p.err
}

// wholeLoops is the whole loops of plan's channels each of f's representatives walks at least.
func (f nvlsFold) wholeLoops(plan coll.Plan) int64 {
	loop := nvlsLoopElems(plan)
	n := f.parts[0] / loop
	for _, x := range f.parts {
		n = min(n, x/loop)
	}
	return n
}

// loopsSize is the call's size whose parts are those of a replay of loops loops (for modes).
func (f nvlsFold) loopsSize(plan coll.Plan, loops int64) string {
	p := f.withLoops(plan, loops).plan(plan)
	return units.FormatSize(p.Count * int64(f.members*plan.DataType.Size()))
}

// withLoops is f with every part cut to loops whole loops of the plan (one chunk for each of a
// node's ranks, the chunks a channel's heads share out, AllReduce; one chunk, AllGather and
// ReduceScatter) and the part's last, partial loop: Compile walks a part in whole loops, the
// last with smaller chunks, so the parts keep their last loop and lose whole ones from the front.
func (f nvlsFold) withLoops(plan coll.Plan, loops int64) nvlsFold {
	loop := nvlsLoopElems(plan)
	f.parts = slices.Clone(f.parts)
	for i := range f.parts {
		f.parts[i] = loops*loop + f.parts[i]%loop
	}
	return f
}

// nvlsLoopElems is the elements of one loop of plan's channels (a whole number of chunks).
func nvlsLoopElems(plan coll.Plan) int64 {
	return nvlsLoopChunks(plan) * max(nvlsChunk(plan)/int64(plan.DataType.Size()), 1)
}

// nvlsLoopChunks is the chunks of one loop of plan's channels.
func nvlsLoopChunks(plan coll.Plan) int64 {
	if plan.Func == coll.AllReduce {
		return int64(plan.NVLSHeadCount())
	}
	return 1
}

// nvlsChunk is plan's chunk payload (Compile's: the plan's, else coll.DefaultChunkSize).
func nvlsChunk(plan coll.Plan) int64 {
	if plan.ChunkSize > 0 {
		return plan.ChunkSize
	}
	return coll.DefaultChunkSize(plan.Func, plan.Algo, plan.Proto, plan.BuffSize[plan.Proto])
}

// steadyPair returns the numbers of loops per channel (L1 = L2/2, L2) of the steady-state
// replay: L2 the largest that the folded plan's estimated steps fit budget in, below f's whole
// loops. It returns false where L1 would be under minLoops loops or minChunks chunks.
func (f nvlsFold) steadyPair(plan coll.Plan, budget float64, minLoops, minChunks int64) (l1, l2 int64, ok bool) {
	loop := nvlsLoopElems(plan)
	chunks := nvlsLoopChunks(plan)
	l2 = f.parts[0] / loop
	for ; l2 > 0; l2-- {
		if p2 := f.withLoops(plan, l2).plan(plan); p2.EstimatedSteps() <= budget {
			break
		}
	}
	l1 = l2 / 2
	return l1, l2, l2 < f.parts[0]/loop && l1 >= minLoops && l1*chunks >= minChunks
}

// extrapolate replays f with l1 and with l2 loops per channel and extrapolates to f: past the
// pipeline's fill every loop of a channel adds the same time.
func (f nvlsFold) extrapolate(plan coll.Plan, l1, l2 int64, run func(coll.Plan) (*Result, error)) (*Result, error) {
	f1, f2 := f.withLoops(plan, l1), f.withLoops(plan, l2)
	return extrapolated(l1, l2, f.parts[0]/nvlsLoopElems(plan), func() (*Result, error) { return run(f1.plan(plan)) }, func() (*Result, error) { return run(f2.plan(plan)) })
}

// nvlsFolds reports whether plan is one nvlsSymmetric may replay: NVLS or NVLSTree over more
// than one rank and channel.
func nvlsFolds(p coll.Plan) bool {
	return (p.Algo == coll.NVLS || p.Algo == coll.NVLSTree) && p.NRanks > 1 && p.NChannels > 1
}

// nodeFolded times plan by the node fold nf on top of the channel fold f (nvlsfold.go), directly
// where the quotient's schedule fits NVLSBudget, else from two shorter replays (steadyPair,
// extrapolate). It returns nil, and no error, where the fold's check halted the replay (not
// bound, and halted says so; bound, the switch links have stand-ins and the mode says
// switch-bound) or where no steady pair fits the budget.
func (f nvlsFold) nodeFolded(plan coll.Plan, nf *nodeFold, e *Engine, cl *Cluster, tm Timing, opt RunOptions, bound bool) (res *Result, mode string, halted bool, err error) {
	run := func(p coll.Plan) (*Result, error) { return nodeFoldRun(p, f, nf, e, cl, tm, bound, opt.folds) }
	// The quotient's schedule has the folded plan's steps on len(nf.reps) nodes instead of all.
	scale := float64(len(nf.reps)) / float64(max(plan.NNodes, 1))
	fp := f.plan(plan)
	suffix := ""
	if bound {
		suffix = ", " + switchBoundMode
	}
	// A long call, or one past the budget: two shorter replays (foldSteadyPair, steadyPair).
	budget := NVLSBudget
	if opt.foldBudget > 0 {
		budget = opt.foldBudget
	}
	l1, l2, steady := f.foldSteadyPair(plan, budget/scale)
	if !steady && fp.EstimatedSteps()*scale > budget {
		if l1, l2, steady = f.steadyPair(plan, budget/scale, nvlsMinLoops(plan), NVLSMinChunks); !steady {
			return nil, "", false, nil
		}
	}
	mode = nodeFoldMode + suffix
	if steady {
		mode = fmt.Sprintf("%s-steady (%s, %s)%s", nodeFoldMode, f.loopsSize(plan, l1), f.loopsSize(plan, l2), suffix)
	}
	if opt.DryRun {
		return &Result{}, mode, false, nil
	}
	if steady {
		res, err = f.extrapolate(plan, l1, l2, run)
	} else {
		res, err = run(fp)
	}
	if errors.Is(err, errHalted) {
		return nil, "", true, nil
	}
	if err != nil {
		return nil, "", false, err
	}
	res.LinkName, res.LinkShare = e.LinkName, e.LinkShare
	return res, mode, false, nil
}

// nodeFoldSteady: the node fold times a call of many loops per channel from two shorter replays
// (foldSteadyPair); tests turn it off to compare with the replay of every loop.
var nodeFoldSteady = true

// foldSteadyPair returns the loops per channel (L1 = L2/2, L2) of the two replays from which the
// node fold extrapolates a call of L whole loops per channel instead of replaying them all: L2 =
// L/2, where L1 is at least max(NVLSNodeFoldMinLoops, nodes/4) (the fold's own fewest loops and
// nvlsMinLoops' fill bound) and the longer replay's schedule fits budget. The pair costs 3/4 of
// the whole replay's work and, run at once on two cores (replayPair), about half its wall time;
// the extrapolation always reaches twice the span between the two replays. Measured against the
// node fold's replay of every loop, docs/cluster.md ("NVLSTree: the node fold"). A shorter pair
// extrapolates further from a pipeline that has filled less: on 128 nodes at 2 GiB, 32 and 64
// loops of 256 are +0.72% off, and on 32 and 64 nodes at 1 GiB, 16 and 32 loops +1.25% and
// +1.49%.
func (f nvlsFold) foldSteadyPair(plan coll.Plan, budget float64) (l1, l2 int64, ok bool) {
	if !nodeFoldSteady {
		return 0, 0, false
	}
	l2 = f.wholeLoops(plan) / 2
	l1 = l2 / 2
	if l1 < max(NVLSNodeFoldMinLoops, int64(plan.NNodes/4)) {
		return 0, 0, false
	}
	if p2 := f.withLoops(plan, l2).plan(plan); p2.EstimatedSteps() > budget {
		return 0, 0, false
	}
	return l1, l2, true
}

// SwitchBoundMinHosts is the fewest hosts per leaf with which nvlsSymmetric takes the switch-bound
// node fold (nvlsSwitchBound's) rather than a long channel fold (SwitchBoundAbove) where the node
// fold's check halted (rail routing, 128 DGX H100 nodes at 1 GiB: 37 s and 1.9 GB for the channel
// fold's steady pair, 0.9 s for the switch-bound fold).
// Against the replay of every node the switch-bound fold was −0.67…+0.85% with 4 to 32 hosts per
// leaf (rail routing, 48–256 nodes, 256 MiB–1 GiB; oversubscribed 2:1 and 8:1 leaves; the 2:1
// fat tree with 4 per leaf) and +1.70% and +4.26% with 2 (docs/cluster.md "Switch-bound"): a bound
// on where the approximation is taken, from those measurements, not a constant of the model.
const SwitchBoundMinHosts = 4

// SwitchBoundAbove is the estimated steps of the channel fold (coll.Plan.EstimatedSteps of the
// folded plan) above which that choice is made: an eighth of NVLSBudget, a replay of a few
// seconds on this project's 2-core machine (128 DGX H100 nodes under rail routing: 256 MiB 14 s,
// 512 MiB 31 s, 1 GiB 37 s for the steady pair); below, the exact channel fold stays.
var SwitchBoundAbove = NVLSBudget / 8

// switchBoundFirst turns that choice on (tests turn it off to time the channel fold).
var switchBoundFirst = true

// switchBoundMode is the suffix of the node fold's mode where the fabric's switch links bind and
// the fold runs with stand-ins for them (nvlsSwitchBound).
const switchBoundMode = "switch-bound"

// nvlsSwitchBound times an NVLSTree plan by the node fold with stand-ins for the fabric's switch
// links (nvlsfold.go, standIns): Run's last resort for a call that nvlsSymmetric could not time
// (the fold's check halted it: a switch link over its capacity, rail routing or an oversubscribed
// fabric) and whose schedule is too large to replay, before NCCL's choice among the compactly
// simulated algorithms (Tree for NVLSTree) would stand in. An approximation of its own, slower
// than the replay of every node where switch links bind: measured up to +1.7% with rail routing
// and +4.5% on a 2:1 fat tree of two nodes per leaf under ECMP (docs/cluster.md); the row's mode
// says so. It returns nil, and no error, where the node fold does not apply.
func (m *Machine) nvlsSwitchBound(plan coll.Plan, tm Timing, opt RunOptions) (*Result, string, error) {
	return m.lateNodeFold(plan, tm, opt, true, true)
}

// lateNodeFold is the node fold as Run tries it after nvlsSymmetric (nvlsSwitchBound,
// nvlsFoldLastResort): within the fold's bounds (NVLSNodeFoldMin nodes, NVLSNodeFoldMinLoops
// loops per channel) where bounded, with stand-ins for the switch links where bound. It returns
// nil, and no error, where the node fold does not apply or its check halted it.
func (m *Machine) lateNodeFold(plan coll.Plan, tm Timing, opt RunOptions, bounded, bound bool) (*Result, string, error) {
	if opt.Exact || plan.Algo != coll.NVLSTree || (bounded && plan.NNodes < NVLSNodeFoldMin) {
		return nil, "", nil
	}
	e, cl, err := m.engineFor(plan.Algo)
	if err != nil {
		return nil, "", err
	}
	f, ok := nvlsFoldOf(plan, cl)
	if !ok {
		if f, _, ok = nvlsFoldChecked(plan, cl, e); !ok {
			return nil, "", nil
		}
	}
	if bounded && f.parts[0]/nvlsLoopElems(plan) < NVLSNodeFoldMinLoops {
		return nil, "", nil
	}
	nf := nvlsNodeFold(plan, cl, e)
	if nf == nil {
		return nil, "", nil
	}
	res, mode, _, err := f.nodeFolded(plan, nf, e, cl, tm, opt, bound)
	return res, mode, err
}

// nvlsFoldLastResort times an NVLSTree plan by the node fold where the fold's own bounds
// (NVLSNodeFoldMin nodes, NVLSNodeFoldMinLoops loops per channel) are not met but nothing above
// it in Run could replay the call: the channel fold past NVLSBudget with no steady pair, the
// schedule past coll's limit. That is GB200 NVL72 racks (32 chunks a loop, NCCL's 32 NVLS heads,
// and few loops; 72 until stop 47) at 2 GiB on 16 racks, 1 and 2 GiB on 32, 256 MiB–1 GiB on 64,
// and the shorter replays of the fold's steady pair past them. Run's alternative there,
// nodesSteady's extrapolation over node counts, was further from the replay of every node wherever
// both were measured (GB200 ×16 at 256 MiB, 512 MiB, 1 GiB on the 72-head schedules: the fold +0.10,
// +0.11, −1.88%; the extrapolation +0.90, −1.83, +3.54%; docs/cluster.md). The mode says where the fold stands outside its bounds. It returns nil, and no
// error, where the nodes do not fold or the fold's check halted it.
func (m *Machine) nvlsFoldLastResort(plan coll.Plan, tm Timing, opt RunOptions) (*Result, string, error) {
	opt.foldBudget = lastResortBudget
	res, mode, err := m.lateNodeFold(plan, tm, opt, false, false)
	if res == nil || err != nil {
		return nil, "", err
	}
	return res, mode + ", " + lastResortMode, nil
}

// lastResortBudget is the estimated steps the last-resort fold replays at once: coll's own limit
// (coll.MaxSteps), where the other folds keep NVLSBudget. What Run tries after it, the log2 form of
// nodesSteady, was 4.8% off where this lets the fold run (32 GB200 NVL72 racks at 2 GiB: a
// quotient of 4.9 M steps; docs/cluster.md "Checked past coll's limit"), and itself replays the
// same call on two smaller clusters.
const lastResortBudget = float64(coll.MaxSteps)

// lastResortMode is the suffix of the node fold's mode outside its bounds (nvlsFoldLastResort).
const lastResortMode = "last resort"
