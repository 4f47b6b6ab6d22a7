package simnet

import (
	"errors"
	"fmt"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/search"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/topo/ncclxml"
	"github.com/simccl/simccl/tuning"
)

// Machine is a communicator's hardware and NCCL's plan inputs for it: a node template replicated
// Nodes times, joined by a fabric, with the search's rings and trees and the tuning model's table.
type Machine struct {
	Node    *NodeModel
	Nodes   int
	Fabric  *Fabric
	Search  *search.Result // nil when the plan inputs were set by hand
	Table   *tuning.Table
	Rings   [][]int            // per channel, the ring over all ranks
	Trees   []coll.ChannelTree // per channel
	Release string
	// BackToBack is RunOptions.BackToBack when a call gives none (0 or 1: one isolated call).
	BackToBack int
	// GPU is the GPU model (the per-CTA data rate of its SM generation; GPUModelFor). A zero
	// CTARate leaves the CTA unmodelled: steps then cost only their links.
	GPU GPUModel
	// Notes lists the simplifications applied to this machine, for reports.
	Notes []string

	// the per-node chains rings and trees were built from (for Scale)
	ringChains, treeChains [][]int
	crossNic               bool
	treePattern            coll.TreePattern
}

// Scale returns the same machine with nodes nodes: the node template, the search's chains and the
// fabric are kept; the tuning model is rebuilt for the new communicator size and the rings and
// trees are rebuilt over the new nodes. NCCL searches each node's own topology, so the graphs do
// not depend on the node count once there is more than one node (fact sheet §4.2–4.4); Scale lets
// a 2-node search stand for any larger cluster.
func (m *Machine) Scale(nodes int) (*Machine, error) {
	if nodes < 1 {
		return nil, fmt.Errorf("simnet: %d nodes (want >= 1)", nodes)
	}
	if (nodes > 1) != (m.Nodes > 1) {
		return nil, fmt.Errorf("simnet: cannot scale a %d-node machine to %d nodes (the search differs between one node and several)", m.Nodes, nodes)
	}
	if nodes*m.Node.NumGPUs > maxRanks {
		return nil, tooLarge("simnet", nodes, m.Node.NumGPUs)
	}
	comm := m.Table.Comm
	comm.NRanks, comm.NNodes = m.Node.NumGPUs*nodes, nodes
	comm.MaxLocalRanks = 0
	cfg := m.Table.Config
	table, err := tuning.Model(&comm, &cfg)
	if err != nil {
		return nil, err
	}
	out := *m
	out.Nodes, out.Table = nodes, table
	out.Notes = append([]string(nil), m.Notes...)
	if err := out.setRingsTrees(m.ringChains, m.treeChains, max(table.NChannels, 1), m.crossNic, m.treePattern); err != nil {
		return nil, err
	}
	return &out, nil
}

// NRanks is the number of ranks (GPUs).
func (m *Machine) NRanks() int { return m.Node.NumGPUs * m.Nodes }

// NewMachine runs NCCL's init pipeline on a system: node template (NodeFromGraph), channel search
// (search.ComputeAll over nodes copies), tuning model, rings and trees. NVLS and CollNet are not
// searched: coll compiles Ring and Tree collectives (and point-to-point) only.
func NewMachine(sys *graph.System, nodes int, fab *Fabric, cfg *tuning.Config) (*Machine, error) {
	if nodes < 1 {
		return nil, fmt.Errorf("simnet: --nodes %d (want >= 1)", nodes)
	}
	node, err := NodeFromGraph(sys)
	if err != nil {
		return nil, err
	}
	if nodes > 1 && len(node.NICs) == 0 {
		return nil, fmt.Errorf("simnet: topology %q has no NET: cannot join %d nodes", sys.Name, nodes)
	}
	top, err := search.FromSystem(sys, nodes > 1)
	if err != nil {
		return nil, err
	}
	off := false
	res, err := search.ComputeAll(top, search.AllOptions{Nodes: nodes, NVLS: &off})
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = &tuning.Config{}
	}
	comm := tuning.Comm{NRanks: node.NumGPUs * nodes, NNodes: nodes, NChannels: res.NChannels}
	comm.CCMin, comm.CCMax = 1<<30, 0
	for _, g := range sys.GPUs() {
		comm.CCMin = min(comm.CCMin, g.GPU.SM)
		comm.CCMax = max(comm.CCMax, g.GPU.SM)
	}
	for _, c := range sys.Nodes[graph.CPU] {
		a, v := cpuKind(c.CPU.Arch, c.CPU.Vendor)
		if comm.CPUArch == "" {
			comm.CPUArch, comm.CPUVendor = a, v
		} else if comm.CPUVendor != v {
			comm.CPUVendor = "mixed"
		}
	}
	comm.HasNVSwitch = len(sys.Nodes[graph.NVS]) > 0
	comm.AllNVLink = true
	for _, a := range sys.GPUs() {
		for _, b := range sys.GPUs() {
			if p := sys.Path(a, b); a != b && (p == nil || p.Type != graph.PathNVL) {
				comm.AllNVLink = false
			}
		}
	}
	gi := func(g *search.Graph) tuning.GraphInfo {
		if g == nil {
			return tuning.GraphInfo{}
		}
		return tuning.GraphInfo{Pattern: int(g.Pattern), NChannels: g.NChannels, BwIntra: g.BwIntra, BwInter: g.BwInter,
			TypeIntra: tuning.PathType(g.TypeIntra), TypeInter: tuning.PathType(g.TypeInter), LatencyInter: g.LatencyInter,
			SameChannels: g.SameChannels == 1, CrossNic: g.CrossNic}
	}
	comm.Graphs[tuning.GraphRing] = gi(res.Ring)
	comm.Graphs[tuning.GraphTree] = gi(res.Tree)
	comm.Graphs[tuning.GraphCollNetChain] = gi(res.CollNetChain)
	comm.Graphs[tuning.GraphNVLS] = gi(res.NVLS)
	comm.Graphs[tuning.GraphCollNetDirect] = gi(res.CollNetDirect)
	table, err := tuning.Model(&comm, cfg)
	if err != nil {
		return nil, err
	}
	if fab == nil {
		fab = DefaultFabric()
	}
	m := &Machine{Node: node, Nodes: nodes, Fabric: fab, Search: res, Table: table, Release: cfg.Version}
	if m.GPU, err = GPUModelFor(cfg.Version, comm.CCMin); err != nil {
		return nil, err
	}
	m.Notes = append(m.Notes, "NVLS/CollNet not searched (coll compiles Ring, Tree and point-to-point only)")
	nch := table.NChannels
	if nch <= 0 {
		nch = res.NChannels
	}
	if err := m.setRingsTrees(res.Ring.Intra, res.Tree.Intra, nch, res.Ring.CrossNic == 1, coll.TreePattern(res.Tree.Pattern)); err != nil {
		return nil, err
	}
	return m, nil
}

// setRingsTrees expands per-channel intra-node chains (search graphs hold nChannels of them; the
// communicator runs nch channels, repeating them as NCCL's duplication does) into rings and trees.
func (m *Machine) setRingsTrees(ring, tree [][]int, nch int, crossNic bool, pat coll.TreePattern) error {
	m.ringChains, m.treeChains, m.crossNic, m.treePattern = ring, tree, crossNic, pat
	G := m.Node.NumGPUs
	rep := func(ch [][]int) [][]int {
		if len(ch) == 0 {
			id := make([]int, G)
			for i := range id {
				id[i] = i
			}
			ch = [][]int{id}
		}
		out := make([][]int, nch)
		for c := range out {
			out[c] = ch[c%len(ch)]
		}
		return out
	}
	rings, err := coll.BuildRings(rep(ring), m.Nodes, G, crossNic)
	if err != nil {
		return err
	}
	m.Rings = rings
	if pat < coll.PatternBalancedTree || pat > coll.PatternTree {
		pat = coll.PatternBalancedTree
	}
	half := (nch + 1) / 2
	trees, err := coll.BuildTrees(rep(tree)[:half], m.Nodes, G, pat)
	if err != nil {
		return err
	}
	m.Trees = trees[:nch]
	return nil
}

func cpuKind(arch, vendor string) (string, string) {
	a := strings.ToLower(arch)
	switch {
	case strings.Contains(a, "x86"):
		a = "x86"
	case strings.Contains(a, "arm") || strings.Contains(a, "aarch"):
		a = "arm"
	case strings.Contains(a, "ppc") || strings.Contains(a, "power"):
		a = "power"
	}
	v := strings.ToLower(vendor)
	switch {
	case strings.Contains(v, "intel"):
		v = "intel"
	case strings.Contains(v, "amd"):
		v = "amd"
	case strings.Contains(v, "zhaoxin") || strings.Contains(v, "shanghai"):
		v = "zhaoxin"
	}
	return a, v
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
	// compact ring executor, exact) or "ring-coarse-K" (K ring steps merged per message).
	Mode string `json:"mode"`
}

// CompactAbove is the number of schedule steps above which Machine.Run replays ring and tree
// collectives with the compact executors instead of materialising coll's schedule; above
// CompactQuiet it does so too when no op records are asked for (the compact executors give the
// same times, 0.1% apart, at a fraction of the memory).
var (
	CompactAbove int64 = 4_000_000
	CompactQuiet int64 = 300_000
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

// TestName is the nccl-tests program name of f ("all_reduce", …).
func TestName(f coll.Func) string {
	switch f {
	case coll.AllReduce:
		return "all_reduce"
	case coll.AllGather:
		return "all_gather"
	case coll.ReduceScatter:
		return "reduce_scatter"
	case coll.Broadcast:
		return "broadcast"
	case coll.Reduce:
		return "reduce"
	case coll.AllToAll:
		return "alltoall"
	case coll.SendRecv:
		return "sendrecv"
	}
	return f.String()
}

// Sizes returns nccl-tests' count column and the bytes algbw divides by for a size S (the total
// buffer, -b/-e) of f over n ranks with elements of elt bytes (fact sheet §7): AllGather,
// ReduceScatter and AlltoAll use base = count/n rounded down to 16 bytes' worth of elements.
func Sizes(f coll.Func, size int64, elt, n int) (count, algBytes int64) {
	count = size / int64(elt)
	switch f {
	case coll.AllGather, coll.ReduceScatter, coll.AllToAll:
		base := count / int64(n)
		align := int64(16 / elt)
		if align < 1 {
			align = 1
		}
		base -= base % align
		return base, base * int64(elt) * int64(n)
	}
	return count, count * int64(elt)
}

// BusFactor is nccl-tests' busbw factor (fact sheet §7).
func BusFactor(f coll.Func, n int) float64 {
	switch f {
	case coll.AllReduce:
		return 2 * float64(n-1) / float64(n)
	case coll.AllGather, coll.ReduceScatter, coll.AllToAll:
		return float64(n-1) / float64(n)
	}
	return 1
}

// ErrNotCompiled marks a choice coll cannot compile (NVLS, CollNet, PAT, Tree outside AllReduce).
var ErrNotCompiled = errors.New("simnet: algorithm not compiled by coll")

// Plan makes the coll.Plan NCCL would run for one nccl-tests size: tuning's choice of algorithm,
// protocol, channels and chunk size. When tuning picks an algorithm coll does not compile, the
// cheapest compiled one from the same cost table is used and the returned note says so.
func (m *Machine) Plan(f coll.Func, size int64, dt coll.DataType, op coll.RedOp) (coll.Plan, string, error) {
	n := m.NRanks()
	elt := dt.Size()
	count, _ := Sizes(f, size, elt, n)
	p := coll.Plan{Func: f, Count: count, DataType: dt, Op: op, NRanks: n, Rings: m.Rings, Trees: m.Trees}
	note := ""
	switch f {
	case coll.SendRecv, coll.AllToAll:
		// Point-to-point: NCCL 2.28's per-peer plan (enqueue.cc addP2pToPlan, fact sheet §4.8 and
		// §5.8, tuning.P2P): channels from the part-size bounds up to the per-peer maximum,
		// LL up to nChannels × NCCL_P2P_LL_THRESHOLD, Simple chunks of the P2P chunk size. Every
		// peer of a multi-node machine is planned as a network peer.
		kind := tuning.PeerIntra
		if m.Nodes > 1 {
			kind = tuning.PeerNet
		}
		ch, err := m.Table.P2P(count*int64(elt), kind)
		if err != nil {
			return p, "", err
		}
		p.Algo, p.Proto, p.NChannels = coll.Ring, ch.Proto, max(ch.NChannels, 1)
		if len(m.Rings) > 0 && len(m.Rings) < p.NChannels {
			// p2p channels outnumber the collective ones (pow2Up of them, §4.8); coll wants a
			// ring and a tree per channel, which point-to-point does not follow.
			rings := make([][]int, p.NChannels)
			for c := range rings {
				rings[c] = m.Rings[c%len(m.Rings)]
			}
			p.Rings = rings
		}
		if len(m.Trees) > 0 && len(m.Trees) < p.NChannels {
			trees := make([]coll.ChannelTree, p.NChannels)
			for c := range trees {
				trees[c] = m.Trees[c%len(m.Trees)]
			}
			p.Trees = trees
		}
		if ch.Proto == coll.Simple {
			p.ChunkSize = ch.ChunkSize
		}
		return p, "", nil
	}
	ch, err := m.Table.Select(tuning.Call{Func: f, Count: count, ElemSize: elt, Op: int(op), DataType: int(dt)})
	if err != nil {
		return p, "", err
	}
	if !coll.Supported(f, ch.Algo) {
		best, ba, bp := float32(-1), coll.Algo(-1), coll.Proto(-1)
		for a := coll.Algo(0); a < coll.NumAlgos; a++ {
			if !coll.Supported(f, a) {
				continue
			}
			for q := coll.Proto(0); q < coll.NumProtos; q++ {
				if v := ch.Cost[a][q]; v >= 0 && (best < 0 || v < best) {
					best, ba, bp = v, a, q
				}
			}
		}
		if ba < 0 {
			return p, "", fmt.Errorf("%w: tuning chose %v/%v for %v and no compiled algorithm is usable", ErrNotCompiled, ch.Algo, ch.Proto, f)
		}
		note = fmt.Sprintf("tuning chose %v/%v; simulated %v/%v (coll does not compile %v)", ch.Algo, ch.Proto, ba, bp, ch.Algo)
		ch.Algo, ch.Proto = ba, bp
		ch.ChunkSize = m.Table.ChunkSize(f, ba, bp, ch.NChannels, ch.Bytes)
	}
	p.Algo, p.Proto, p.NChannels, p.NThreads, p.ChunkSize = ch.Algo, ch.Proto, ch.NChannels, ch.NThreads, ch.ChunkSize
	if p.NChannels < 1 {
		p.NChannels = 1
	}
	return p, note, nil
}

// rounds splits an AllToAll plan into NCCL's point-to-point rounds (NCCL 2.28 enqueue.cc
// scheduleP2pTasksToPlan, fact sheet §5.8): round d carries every rank's transfer to rank+d on its
// own channels, so that the self copy (round 0) and the peer transfers do not share a thread
// block unless there are too few channels. NCCL starts round d at channel d and spreads its parts
// bit-reversed over the p2p channels; here round d takes the contiguous channels from d×k (k the
// plan's channels per transfer, modulo the p2p channel count), which gives the same number of
// channels per round and, when nRanks × k fits in the p2p channels (the case tuning.P2P's nMin
// ensures), the same disjoint channel sets. Each round is a SendRecv of explicit transfers whose
// buffer offsets start at 0: the schedule is right for timing, not for moving bytes. Other plans
// are returned as they are.
func (m *Machine) rounds(p coll.Plan) []coll.Plan {
	if p.Func != coll.AllToAll || p.NRanks < 2 {
		return []coll.Plan{p}
	}
	total, _ := m.Table.P2PChannels()
	k := max(p.NChannels, 1)
	total = max(total, k)
	n := p.NRanks
	rings, trees := p.Rings, p.Trees
	if len(rings) > 0 && len(rings) < total {
		rings = make([][]int, total)
		for c := range rings {
			rings[c] = p.Rings[c%len(p.Rings)]
		}
	}
	if len(trees) > 0 && len(trees) < total {
		trees = make([]coll.ChannelTree, total)
		for c := range trees {
			trees[c] = p.Trees[c%len(p.Trees)]
		}
	}
	out := make([]coll.Plan, 0, n)
	for d := 0; d < n; d++ {
		q := p
		q.Func = coll.SendRecv
		q.Rings, q.Trees = rings, trees
		q.ChannelLo = (d * k) % total
		if q.ChannelLo+k > total {
			q.ChannelLo = 0
		}
		q.Transfers = make([]coll.Transfer, n)
		for r := 0; r < n; r++ {
			q.Transfers[r] = coll.Transfer{From: r, To: (r + d) % n, Count: p.Count}
		}
		out = append(out, q)
	}
	return out
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
	e := NewEngine(nil)
	cl, err := NewCluster(e, m.Node, m.Nodes, m.Fabric)
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
	tm.CTARate = m.GPU.CTARate
	return tm, nil
}

// RunOptions steer Machine.Run.
type RunOptions struct {
	Record bool // keep every message's record (for traces and op logs)
	// BackToBack > 1 times the call as nccl-tests does: the time of one call in a loop of
	// back-to-back launches on each rank's stream, (T(K) − T(1)) / (K − 1) for K = BackToBack
	// calls replayed as consecutive kernels (Options.OpsPerKernel). A rank's next call starts
	// when its own part of the previous one is done, so a one-way collective's receiver still
	// copying call k overlaps its sender starting call k+1. Only schedule replays do this (the
	// row's mode says "back-to-back"); 0 takes Machine.BackToBack.
	BackToBack int
}

// Run simulates one nccl-tests size of f and returns its table row, and the simulation result.
func (m *Machine) Run(f coll.Func, size int64, dt coll.DataType, op coll.RedOp, opt RunOptions) (Row, *Result, error) {
	n := m.NRanks()
	elt := dt.Size()
	if elt == 0 {
		return Row{}, nil, fmt.Errorf("simnet: unknown data type %v", dt)
	}
	count, algBytes := Sizes(f, size, elt, n)
	row := Row{Coll: TestName(f), Bytes: size, Count: count, Type: dt.String(), RedOp: op.String()}
	if f == coll.AllGather || f == coll.ReduceScatter || f == coll.AllToAll {
		row.Bytes = algBytes // nccl-tests prints base×n×elt, the size actually moved
	}
	switch f {
	case coll.AllGather, coll.Broadcast, coll.AllToAll, coll.SendRecv:
		row.RedOp = "none"
	}
	if count == 0 {
		return row, &Result{}, nil
	}
	plan, _, err := m.Plan(f, size, dt, op)
	if err != nil {
		return row, nil, err
	}
	e := NewEngine(nil)
	cl, err := NewCluster(e, m.Node, m.Nodes, m.Fabric)
	if err != nil {
		return row, nil, err
	}
	tm, err := m.Timing(plan.Algo, plan.Proto)
	if err != nil {
		return row, nil, err
	}
	if plan.Algo == coll.Tree {
		// SimulateTree, which replays large trees, does not charge the CTA yet: trees are timed
		// without it at every size so that exact and compact replays agree.
		tm.CTARate = 0
	}
	ringColl := f == coll.AllReduce || f == coll.AllGather || f == coll.ReduceScatter
	steps := ringSteps(plan, algBytes)
	compactable := ringColl && (plan.Algo == coll.Ring || (f == coll.AllReduce && plan.Algo == coll.Tree))
	var res *Result
	if !(ringColl && (steps > CompactAbove || (compactable && !opt.Record && steps > CompactQuiet))) {
		plans := m.rounds(plan)
		sched, cerr := coll.Compile(plans...)
		switch {
		case cerr == nil:
			if res, err = Simulate(e, cl, sched, tm, Options{Record: opt.Record}); err != nil {
				return row, nil, err
			}
			row.Mode = "schedule"
			k := opt.BackToBack
			if k == 0 {
				k = m.BackToBack
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
			return row, nil, cerr
		}
	}
	if res == nil && !compactable {
		// No compact executor for this algorithm: the cheapest Ring protocol of the same cost
		// table runs instead, and the row's mode says so.
		ch, err := m.Table.Select(tuning.Call{Func: f, Count: count, ElemSize: elt, Op: int(op), DataType: int(dt)})
		if err != nil {
			return row, nil, err
		}
		best, bp := float32(-1), coll.Proto(-1)
		for q := coll.Proto(0); q < coll.NumProtos; q++ {
			if v := ch.Cost[coll.Ring][q]; v >= 0 && (best < 0 || v < best) {
				best, bp = v, q
			}
		}
		if bp < 0 {
			return row, nil, fmt.Errorf("%w: %v on %d ranks needs a schedule too large to compile and Ring is disabled", ErrNotCompiled, plan.Algo, n)
		}
		row.Mode = fmt.Sprintf("(tuning chose %v) ", plan.Algo)
		plan.Algo, plan.Proto = coll.Ring, bp
		plan.ChunkSize = m.Table.ChunkSize(f, coll.Ring, bp, plan.NChannels, ch.Bytes)
		if tm, err = m.Timing(plan.Algo, plan.Proto); err != nil {
			return row, nil, err
		}
	}
	if res == nil && plan.Algo == coll.Tree {
		tr, err := SimulateTree(e, cl, TreeSpec{Bytes: algBytes, Proto: plan.Proto, Trees: plan.Trees[:plan.NChannels], Chunk: plan.ChunkSize}, tm)
		if err != nil {
			return row, nil, err
		}
		res = &Result{Time: tr.Time, Events: tr.Events, LinkName: e.LinkName}
		row.Mode += "tree-compact"
		if tr.Merge > 1 {
			row.Mode = strings.TrimSuffix(row.Mode, "tree-compact") + fmt.Sprintf("tree-coarse-%d", tr.Merge)
		}
	} else if res == nil {
		rr, err := SimulateRing(e, cl, RingSpec{Func: f, Bytes: algBytes, Proto: plan.Proto, Rings: plan.Rings[:plan.NChannels], Chunk: plan.ChunkSize}, tm)
		if err != nil {
			return row, nil, err
		}
		res = &Result{Time: rr.Time, Events: rr.Events, LinkName: e.LinkName}
		if rr.Merge > 1 {
			row.Mode += fmt.Sprintf("ring-coarse-%d", rr.Merge)
		} else {
			row.Mode += "ring-compact"
		}
	}
	row.TimeUs = res.Time.Micros()
	if row.TimeUs > 0 {
		row.AlgBw = float64(algBytes) / (row.TimeUs * 1e-6) / 1e9
		row.BusBw = row.AlgBw * BusFactor(f, n)
	}
	row.Algo, row.Proto, row.NChannels, row.Events = plan.Algo.String(), plan.Proto.String(), plan.NChannels, res.Events
	return row, res, nil
}

// NewMachineFromModel builds a machine from a hand-made node model and communicator description
// (tests, what-if studies, benchmarks): rings and trees follow the identity chain 0..G-1 in every
// node, rotated by one GPU per channel so that channels leave a node through different GPUs (and
// so different NICs), as NCCL's searched rings do on rail-optimized nodes.
func NewMachineFromModel(node *NodeModel, nodes int, fab *Fabric, comm tuning.Comm, cfg *tuning.Config) (*Machine, error) {
	if err := node.Validate(); err != nil {
		return nil, err
	}
	if nodes < 1 {
		return nil, fmt.Errorf("simnet: %d nodes (want >= 1)", nodes)
	}
	if cfg == nil {
		cfg = &tuning.Config{}
	}
	comm.NRanks, comm.NNodes = node.NumGPUs*nodes, nodes
	table, err := tuning.Model(&comm, cfg)
	if err != nil {
		return nil, err
	}
	if fab == nil {
		fab = DefaultFabric()
	}
	m := &Machine{Node: node, Nodes: nodes, Fabric: fab, Table: table, Release: cfg.Version}
	if comm.CCMin > 0 {
		if m.GPU, err = GPUModelFor(cfg.Version, comm.CCMin); err != nil {
			return nil, err
		}
	}
	m.Notes = append(m.Notes, "hand-made node model and communicator (no topology search)")
	G := node.NumGPUs
	nch := max(table.NChannels, 1)
	chains := make([][]int, nch)
	for c := range chains {
		chains[c] = make([]int, G)
		for i := range chains[c] {
			chains[c][i] = (c + i) % G
		}
	}
	if err := m.setRingsTrees(chains, chains, nch, false, coll.PatternBalancedTree); err != nil {
		return nil, err
	}
	return m, nil
}

// MachineFromXML parses an NCCL topology, builds its system graph (topo.FromXML) and runs
// NewMachine on it.
func MachineFromXML(data []byte, name string, nodes int, fab *Fabric, cfg *tuning.Config) (*Machine, error) {
	doc, err := ncclxml.ParseBytes(data, name)
	if err != nil {
		return nil, err
	}
	opt := graph.Options{}
	if cfg != nil && cfg.Version != "" {
		v, err := graph.ParseVersion(cfg.Version)
		if err != nil {
			return nil, err
		}
		opt.Version = v
	}
	sys, err := topo.FromXML(doc, opt)
	if err != nil {
		return nil, err
	}
	searchNodes := min(nodes, 2)
	if nodes > 1 {
		// A communicator larger than this system keeps its NETs (NCCL's system->inter).
		opt.NRanks = len(sys.GPUs()) * searchNodes
		if sys, err = topo.FromXML(doc, opt); err != nil {
			return nil, err
		}
	}
	if sys.Name == "" {
		sys.Name = name
	}
	m, err := NewMachine(sys, searchNodes, fab, cfg)
	if err != nil || searchNodes == nodes {
		return m, err
	}
	// Every node searches its own copy of the topology: a 2-node search gives the graphs of any
	// multi-node communicator; tuning, rings and trees are then built for the real size.
	return m.Scale(nodes)
}

// HGXH100 is a hand-made model of an 8-GPU H100 NVSwitch node (the shape of the embedded default
// topology): per GPU 18 NVLinks at NCCL's SM90 20.6 GB/s (fact sheet §2.3) to the NVSwitch and a
// Gen5 x16 PCIe link (48 GB/s, NCCL's width×code/80 rule of §1.3) to a switch shared with its own
// 400 Gb/s (50 GB/s) NIC; the communicator as NCCL 2.28 searches it on a DGX H100 (16 ring/tree channels of 20 GB/s, NVL intra, PIX inter). It is the fallback when the graph
// package cannot build the system, and the model of the benchmarks.
func HGXH100(nodes int, fab *Fabric, cfg *tuning.Config) (*Machine, error) {
	node := SwitchedNode("hgx-h100 (hand-made model)", 8, 18*20.6, 8, 50, 48)
	comm := tuning.Comm{CCMin: 90, CCMax: 90, CPUArch: "x86", CPUVendor: "intel", HasNVSwitch: true, AllNVLink: true}
	inter := tuning.PathPIX
	for _, g := range []int{tuning.GraphRing, tuning.GraphTree} {
		comm.Graphs[g] = tuning.GraphInfo{Pattern: 4, NChannels: 16, BwIntra: 20, BwInter: 20, TypeIntra: tuning.PathNVL, TypeInter: inter}
	}
	comm.Graphs[tuning.GraphTree].Pattern = 1
	comm.NChannels = 16
	return NewMachineFromModel(node, nodes, fab, comm, cfg)
}
