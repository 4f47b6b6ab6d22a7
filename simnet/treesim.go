package simnet

import (
	"fmt"
	"math"
	"slices"

	"github.com/simccl/simccl/coll"
)

// TreeSpec is a tree all-reduce for the compact executor (SimulateTree): NCCL's split tree
// (runTreeSplit) without a materialised schedule. Every chunk is reduced up the tree (a rank sends
// it to its parent once it has it from all its children) and broadcast down (a rank forwards it to
// its children once it has it from its parent; the root once it has reduced it), the two
// directions running concurrently, with NCCL_STEPS credits on every connection.
type TreeSpec struct {
	Bytes int64 // the all-reduce buffer
	Proto coll.Proto
	Trees []coll.ChannelTree // per channel
	Chunk int64              // payload per chunk (tuning's chunk size; 0: the protocol's step)
	// Merge and MaxMessages: the coarse mode, as in RingSpec: Merge consecutive chunks travel as
	// one message (0: automatic, the smallest power of two that keeps the simulated messages under
	// MaxMessages; default 16,000,000). Counted on what is simulated: the representatives of the
	// symmetric replay, every (channel, rank) with PerRank.
	Merge       int
	MaxMessages int64
	// PerRank replays every (channel, rank) pair on e itself. By default SimulateTree first
	// partitions the pairs into classes that provably behave identically (see SimulateTree) and
	// replays one representative per class on a private engine, then credits e's links with the
	// traffic of every member; PerRank is the reference that replay is tested against.
	PerRank bool
}

// treeNet is the forest a tree all-reduce runs on. Its vertices are (channel, rank) pairs, vertex
// c×n+rank, or (symmetric replay) classes of them. Each vertex sends up to its parent and down to
// its children; kids lists distinct children (in a quotient, distinct child classes).
type treeNet struct {
	up      []int32   // parent, -1 at a root
	kids    [][]int32 // children
	kidIdx  []int8    // position of the vertex in its parent's kids
	upRoute [][]LinkID
	upLat   []Time
	dnRoute [][][]LinkID
	dnLat   [][]Time
}

func (t *treeNet) vertices() int { return len(t.up) }

// slots is the number of connections (one per vertex and direction towards each neighbour).
func (t *treeNet) slots() int64 {
	var s int64
	for v := range t.up {
		if t.up[v] >= 0 {
			s++
		}
		s += int64(len(t.kids[v]))
	}
	return s
}

// fullTreeNet is the forest of every (channel, rank) of spec, with its routes through r.
func fullTreeNet(e *Engine, r Router, spec TreeSpec, tm Timing) *treeNet {
	n := r.NumRanks()
	nv := len(spec.Trees) * n
	t := &treeNet{up: make([]int32, nv), kids: make([][]int32, nv), kidIdx: make([]int8, nv),
		upRoute: make([][]LinkID, nv), upLat: make([]Time, nv), dnRoute: make([][][]LinkID, nv), dnLat: make([][]Time, nv)}
	for c, tr := range spec.Trees {
		base := int32(c * n)
		for rk := 0; rk < n; rk++ {
			v := base + int32(rk)
			t.up[v] = -1
			if p := tr.Up[rk]; p >= 0 {
				t.up[v] = base + int32(p)
				route, class := r.Route(rk, p, c, nil)
				t.upRoute[v] = route
				t.upLat[v] = e.RouteLatency(route) + tm.StepLat[class][spec.Proto]
			}
			for i, k := range tr.Down[rk] {
				t.kids[v] = append(t.kids[v], base+int32(k))
				t.kidIdx[base+int32(k)] = int8(i)
				route, class := r.Route(rk, k, c, nil)
				t.dnRoute[v] = append(t.dnRoute[v], route)
				t.dnLat[v] = append(t.dnLat[v], e.RouteLatency(route)+tm.StepLat[class][spec.Proto])
			}
		}
	}
	return t
}

type treeSim struct {
	e      *Engine
	t      *treeNet
	chunks int32
	bytes  []float64 // wire bytes per (merged) chunk
	cap    Rate
	mul    Time
	done   int64
	total  int64
	end    Time
	dk     []Time // per chunk: when its last down step completed
	// per vertex
	upNext []int32
	dnNext []int32
	upRun  []bool
	dnRun  []bool
	dnPend []int8
	upRecv [][]int32 // per kid: chunks arrived from it
	dnRecv []int32
	upCons []int32   // my up messages my parent consumed
	dnCons [][]int32 // per kid: my down messages it consumed
}

// TreeResult is SimulateTreeDetail's outcome: the RingResult SimulateTree returns and how it was
// obtained.
type TreeResult struct {
	RingResult
	// Symmetric is true where one representative per class of (channel, rank) pairs was replayed
	// (Groups is then the number of classes), false for the per-rank replay (Groups = channels ×
	// ranks).
	Symmetric bool
	// Chunks is the number of (merged) chunks per channel that were simulated: Loops/Merge rounded
	// up, or fewer where the time was extrapolated.
	Chunks int
	// Period is the time per (merged) chunk added for each chunk beyond Chunks (0 where nothing was
	// extrapolated).
	Period Time
}

// minSteadyChunks is the fewest chunks simulated before extrapolating (a multiple of NCCL_STEPS,
// 8). On the DGX H100 rail clusters of bench/sim the all-reduce time grows by exactly one period
// per chunk from about 40 chunks on, and 32 simulated chunks extrapolate 128 to within 0.1%
// (TestTreeSteadyClose).
const minSteadyChunks = 32

// SimulateTree times a tree all-reduce on the links of e reached through r (SimulateTreeDetail
// without the details).
func SimulateTree(e *Engine, r Router, spec TreeSpec, tm Timing) (*RingResult, error) {
	d, err := SimulateTreeDetail(e, r, spec, tm)
	if err != nil {
		return nil, err
	}
	return &d.RingResult, nil
}

// SimulateTreeDetail times a tree all-reduce on the links of e reached through r.
//
// Symmetric replay (the default). Most (channel, rank) pairs of a cluster are interchangeable: on
// the rail-optimized clusters of bench/sim each class holds one pair per channel. SimulateTree
// finds the coarsest equitable partition of the pairs, their connections and the links they cross
// (colour refinement over the graph pair–connection–link, starting from roots, numbers of
// children, latencies and capacities): members of a class have the same latency and neighbours of
// the same classes in the same numbers, and every link of a class carries the same number of
// connections of each class. Started together, the members of a class then move in lockstep: at
// every instant max-min fairness gives them the same rates (progressive filling saturates all
// links of a class at once), so their events coincide. One representative per class is replayed
// on a private engine whose links stand for link classes: where each link of a class carries w
// connections of every class that crosses it, the representative link has 1/w of the capacity,
// which gives each representative flow the share of its w copies. Links whose connections all
// cross a link of no larger capacity are dropped (their constraint is implied, so the max-min
// allocation is unchanged). The result equals the per-rank replay up to floating-point rounding
// (TestTreeSymmetricMatchesPerRank). e's links are then credited with every member's bytes
// (exact) and busy time (that of the link class, or of the link that implied it). Where a link
// class carries unequal numbers of the classes crossing it, or the classes are not at least
// twice fewer than the pairs, SimulateTree replays per rank.
//
// Steady-state extrapolation. Where the simulated messages (connections × chunks) would exceed
// MaxMessages and no Merge is given, only the first C0 chunks are simulated (C0 =
// max(32, MaxMessages/connections), a multiple of 8) and each further chunk adds one period: the
// wire bytes of a chunk at the slowest connection's rate when every connection sends (min over
// links of capacity / connections crossing it), since every chunk crosses every connection once.
// The pipeline fill is simulated; only its steady part is extrapolated (TestTreeSteadyClose
// bounds the error). Busy times are then scaled by the ratio of the times; bytes stay exact.
func SimulateTreeDetail(e *Engine, r Router, spec TreeSpec, tm Timing) (*TreeResult, error) {
	n := r.NumRanks()
	if len(spec.Trees) == 0 {
		return nil, fmt.Errorf("simnet: tree simulation without trees")
	}
	if spec.Proto < 0 || spec.Proto >= coll.NumProtos {
		return nil, fmt.Errorf("simnet: bad protocol %v", spec.Proto)
	}
	if spec.Merge < 0 || spec.MaxMessages < 0 {
		return nil, fmt.Errorf("simnet: tree simulation: negative Merge (%d) or MaxMessages (%d)", spec.Merge, spec.MaxMessages)
	}
	if n == 1 || spec.Bytes <= 0 {
		return &TreeResult{RingResult: RingResult{Time: tm.Launch}}, nil
	}
	for c, t := range spec.Trees {
		if len(t.Up) != n || len(t.Down) != n {
			return nil, fmt.Errorf("simnet: tree %d covers %d ranks, the cluster %d", c, len(t.Up), n)
		}
		if err := coll.CheckTree(t); err != nil {
			return nil, fmt.Errorf("simnet: tree %d: %v", c, err)
		}
		for rk, d := range t.Down {
			if len(d) > 8 {
				return nil, fmt.Errorf("simnet: tree %d: rank %d has %d children (at most 8)", c, rk, len(d))
			}
		}
	}
	nch := len(spec.Trees)
	// Chunks as coll cuts them (its channel parts, chunk size and wire-byte rule).
	loops, _, wire := coll.StepSizes(coll.AllReduce, coll.Tree, spec.Proto, spec.Bytes, 2, nch, spec.Chunk)
	nchunks := int64(max(loops, 1))

	full := fullTreeNet(e, r, spec, tm)
	net, run := full, e
	var q *treeQuotient
	if !spec.PerRank {
		if q = quotientTree(e, full); q != nil {
			net, run = q.net, q.e
			run.RateInterval, run.NoShortcut = e.RateInterval, e.NoShortcut
		}
	}
	maxMsg := spec.MaxMessages
	if maxMsg <= 0 {
		maxMsg = 1_000_000
	}
	per := net.slots()
	merge := max(spec.Merge, 1)
	if int64(merge) > nchunks {
		merge = int(nchunks)
	}
	C := int32((nchunks + int64(merge) - 1) / int64(merge))
	sim := C
	if spec.Merge == 0 && per*int64(C) > maxMsg {
		c0 := max(minSteadyChunks, maxMsg/per/8*8)
		if c0 < int64(C) {
			sim = int32(c0)
		}
	}
	x := newTreeSim(run, net, sim, tm.PerFlowCap[spec.Proto], merge)
	for k := int32(0); k < sim; k++ {
		m := min(int64(merge), nchunks-int64(k)*int64(merge))
		x.bytes[k] = wire * float64(m)
	}
	// Busy times before the run, to scale what this run adds (per-rank extrapolation).
	var busy0 []Time
	if q == nil && sim < C {
		busy0 = make([]Time, e.NumLinks())
		for l := range busy0 {
			busy0[l] = e.LinkBusy(LinkID(l))
		}
	}
	run.handler = x
	eStart := e.Now()
	t0 := run.Now()
	startEvents := run.Events
	run.At(t0+tm.Launch, evLaunch, 0)
	if _, err := run.Run(); err != nil {
		return nil, err
	}
	if x.done != x.total {
		return nil, fmt.Errorf("simnet: tree simulation stopped after %d of %d steps", x.done, x.total)
	}
	res := &TreeResult{RingResult: RingResult{Time: x.end - t0, Events: run.Events - startEvents, Messages: per * int64(sim),
		Merge: merge, Groups: net.vertices(), Loops: int(nchunks), Steps: 2 * (n - 1)}, Symmetric: q != nil, Chunks: int(sim)}
	simTime := res.Time
	if sim < C {
		res.Period = transferTime(wire*float64(merge), steadyRate(run, net, tm.PerFlowCap[spec.Proto]))
		// Guard: where the simulated chunks completed slower than that in their second half (a
		// pipeline bound by latency and NCCL_STEPS credits rather than bandwidth), use their pace.
		if h := sim / 2; h > 0 {
			if pace := (x.dk[sim-1] - x.dk[h-1]) / Time(sim-h); pace > res.Period+res.Period/10 {
				res.Period = pace
			}
		}
		res.Time += Time(C-sim) * res.Period
	}
	scale := float64(res.Time) / float64(max(simTime, 1))
	// Credit e's links: bytes exactly (every connection carries every chunk), busy times scaled.
	carried := wire * float64(nchunks)
	if q != nil {
		cnt := make([]float64, e.NumLinks())
		for v := range full.up {
			if full.up[v] >= 0 {
				for _, l := range full.upRoute[v] {
					cnt[l]++
				}
			}
			for _, route := range full.dnRoute[v] {
				for _, l := range route {
					cnt[l]++
				}
			}
		}
		for i, l := range q.links {
			lk := &e.links[l]
			lk.bytes += cnt[l] * carried
			lk.busy += Time(float64(q.e.LinkBusy(q.by[q.vlink[i]])) * scale)
		}
	} else if sim < C {
		// The per-rank run carried the first sim chunks; add the rest.
		rest := wire * float64(nchunks-int64(sim)*int64(merge))
		for v := range full.up {
			if full.up[v] >= 0 {
				for _, l := range full.upRoute[v] {
					e.links[l].bytes += rest
				}
			}
			for _, route := range full.dnRoute[v] {
				for _, l := range route {
					e.links[l].bytes += rest
				}
			}
		}
		for l, b := range busy0 {
			e.links[l].busy += Time(float64(e.LinkBusy(LinkID(l))-b) * (scale - 1))
		}
	}
	if end := eStart + res.Time; end > e.now {
		e.now = end
	}
	return res, nil
}

// steadyRate is the rate of t's slowest connection when every connection sends at once: the
// first bottleneck of progressive filling, the smallest capacity per connection over the links of
// e (or the per-flow cap).
func steadyRate(e *Engine, t *treeNet, perFlow Rate) Rate {
	cnt := make([]int32, e.NumLinks())
	for v := range t.up {
		if t.up[v] >= 0 {
			for _, l := range t.upRoute[v] {
				cnt[l]++
			}
		}
		for _, route := range t.dnRoute[v] {
			for _, l := range route {
				cnt[l]++
			}
		}
	}
	best := Rate(math.Inf(1))
	if perFlow > 0 {
		best = perFlow
	}
	for l, c := range cnt {
		if c > 0 {
			best = min(best, e.LinkCap(LinkID(l))/Rate(c))
		}
	}
	return best
}

func newTreeSim(e *Engine, t *treeNet, chunks int32, capRate Rate, merge int) *treeSim {
	nv := t.vertices()
	x := &treeSim{e: e, t: t, chunks: chunks, cap: capRate, mul: Time(merge), bytes: make([]float64, chunks), dk: make([]Time, chunks),
		upNext: make([]int32, nv), dnNext: make([]int32, nv), upRun: make([]bool, nv), dnRun: make([]bool, nv),
		dnPend: make([]int8, nv), dnRecv: make([]int32, nv), upCons: make([]int32, nv),
		upRecv: make([][]int32, nv), dnCons: make([][]int32, nv)}
	roots := 0
	for v := 0; v < nv; v++ {
		x.upRecv[v] = make([]int32, len(t.kids[v]))
		x.dnCons[v] = make([]int32, len(t.kids[v]))
		if t.up[v] < 0 {
			roots++
		}
	}
	x.total = int64(chunks) * int64(2*nv-roots)
	return x
}

// Tags: vertex<<4 | lane<<3 | kid (lane 0 up, 1 down).
func treeTag(v, lane, kid int) int64 { return int64(v)<<4 | int64(lane)<<3 | int64(kid) }

func treeUntag(t int64) (v, lane, kid int) { return int(t >> 4), int(t>>3) & 1, int(t & 7) }

func (x *treeSim) finishStep() {
	x.done++
	if now := x.e.Now(); now > x.end {
		x.end = now
	}
}

func (x *treeSim) Fire(kind int32, arg int64) {
	switch kind {
	case evLaunch:
		for v := range x.t.up {
			x.tryUp(v)
			x.tryDown(v)
		}
	case evArrive:
		v, lane, kid := treeUntag(arg)
		t := x.t
		if lane == 0 {
			p := int(t.up[v])
			x.upRecv[p][t.kidIdx[v]]++
			if t.up[p] < 0 {
				x.tryDown(p)
			} else {
				x.tryUp(p)
			}
		} else {
			c := int(t.kids[v][kid])
			x.dnRecv[c]++
			x.tryDown(c)
		}
	}
}

// haveKids reports whether vertex v has chunk k from all its children.
func (x *treeSim) haveKids(v int, k int32) bool {
	for _, got := range x.upRecv[v] {
		if got <= k {
			return false
		}
	}
	return true
}

func (x *treeSim) tryUp(v int) {
	t := x.t
	if t.up[v] < 0 || x.upRun[v] {
		return
	}
	k := x.upNext[v]
	// NCCL_STEPS (8) slots per connection: chunk k reuses the slot of chunk k-8.
	if k >= x.chunks || !x.haveKids(v, k) || (k >= 8 && x.upCons[v] < k-7) {
		return
	}
	x.upRun[v] = true
	x.e.StartFlow(t.upRoute[v], x.bytes[k], x.cap, treeTag(v, 0, 0))
}

func (x *treeSim) tryDown(v int) {
	t := x.t
	for !x.dnRun[v] {
		k := x.dnNext[v]
		if k >= x.chunks {
			return
		}
		if t.up[v] < 0 {
			if !x.haveKids(v, k) {
				return
			}
		} else if x.dnRecv[v] <= k {
			return
		}
		if k >= 8 {
			for _, c := range x.dnCons[v] {
				if c < k-7 {
					return
				}
			}
		}
		if len(t.kids[v]) == 0 {
			// A leaf only receives: the step completes at once.
			x.completeDown(v)
			continue
		}
		x.dnRun[v] = true
		x.dnPend[v] = int8(len(t.kids[v]))
		for i := range t.kids[v] {
			x.e.StartFlow(t.dnRoute[v][i], x.bytes[k], x.cap, treeTag(v, 1, i))
		}
		return
	}
}

// completeDown ends vertex v's down step: the parent's message is consumed (non-root), or the
// children's up messages are (root).
func (x *treeSim) completeDown(v int) {
	t := x.t
	if k := x.dnNext[v]; x.e.Now() > x.dk[k] {
		x.dk[k] = x.e.Now()
	}
	x.dnNext[v]++
	x.finishStep()
	if t.up[v] < 0 {
		x.consumeKids(v)
	} else {
		p := int(t.up[v])
		x.dnCons[p][t.kidIdx[v]]++
		x.tryDown(p)
	}
}

func (x *treeSim) consumeKids(v int) {
	for _, c := range x.t.kids[v] {
		x.upCons[c]++
		x.tryUp(int(c))
	}
}

func (x *treeSim) FlowDone(tag int64) {
	v, lane, kid := treeUntag(tag)
	t := x.t
	if lane == 0 {
		x.e.After(t.upLat[v]*x.mul, evArrive, tag)
		x.upRun[v] = false
		x.upNext[v]++
		x.finishStep()
		x.consumeKids(v)
		x.tryUp(v)
		return
	}
	x.e.After(t.dnLat[v][kid]*x.mul, evArrive, tag)
	x.dnPend[v]--
	if x.dnPend[v] == 0 {
		x.dnRun[v] = false
		x.completeDown(v)
		x.tryDown(v)
	}
}

// treeQuotient is the symmetric replay of a treeNet: one vertex per class of the full forest, on
// a private engine with one link per class of links.
type treeQuotient struct {
	net   *treeNet
	e     *Engine
	links []LinkID // real links used by some connection
	vlink []LinkID // their class's link on the private engine
	by    []LinkID // per private link: the kept link that implies it (pruneDominated)
}

// Labels of the refinement graph's edges (what a neighbour is to an element).
const (
	lbOwnUp uint64 = iota + 1
	lbOwnDown
	lbInUp
	lbInDown
	lbOwner
	lbTarget
	lbLink
	lbSlot
)

func treeMix(h, x uint64) uint64 {
	h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	return h
}

// quotientTree partitions t's vertices, connections and links into the coarsest equitable
// partition and builds the quotient forest on a private engine. It returns nil where the quotient
// cannot stand for t (a link class whose links carry unequal numbers of the connection classes
// crossing it, or inconsistent children), or where it is no smaller than t.
func quotientTree(e *Engine, t *treeNet) *treeQuotient {
	nv := t.vertices()
	// Connections ("slots"): up slot of v, then its down slots.
	type slot struct {
		owner, target int32
		route         []LinkID
		lat           Time
		down          bool
	}
	var slots []slot
	for v := 0; v < nv; v++ {
		if p := t.up[v]; p >= 0 {
			slots = append(slots, slot{owner: int32(v), target: p, route: t.upRoute[v], lat: t.upLat[v]})
		}
		for i, k := range t.kids[v] {
			slots = append(slots, slot{owner: int32(v), target: k, route: t.dnRoute[v][i], lat: t.dnLat[v][i], down: true})
		}
	}
	ns, nl := len(slots), e.NumLinks()
	// Elements: vertices [0,nv), slots [nv,nv+ns), links [nv+ns, nv+ns+nl). Adjacency in CSR,
	// each entry label<<32 | element.
	ne := nv + ns + nl
	deg := make([]int32, ne+1)
	for i, s := range slots {
		deg[s.owner]++
		deg[s.target]++
		deg[nv+i] += 2 + int32(len(s.route))
		for _, l := range s.route {
			deg[nv+ns+int(l)]++
		}
	}
	off := make([]int32, ne+1)
	for i := 0; i < ne; i++ {
		off[i+1] = off[i] + deg[i]
	}
	adj := make([]uint64, off[ne])
	fill := slices.Clone(off[:ne])
	add := func(a int, label uint64, b int) {
		adj[fill[a]] = label<<32 | uint64(b)
		fill[a]++
	}
	for i, s := range slots {
		si := nv + i
		own, in := lbOwnUp, lbInUp
		if s.down {
			own, in = lbOwnDown, lbInDown
		}
		add(int(s.owner), own, si)
		add(int(s.target), in, si)
		add(si, lbOwner, int(s.owner))
		add(si, lbTarget, int(s.target))
		for _, l := range s.route {
			add(si, lbLink, nv+ns+int(l))
			add(nv+ns+int(l), lbSlot, si)
		}
	}
	// Initial colours: kind and the values that set timing.
	col := make([]uint32, ne)
	init := map[[3]uint64]uint32{}
	setInit := func(i int, k [3]uint64) {
		c, ok := init[k]
		if !ok {
			c = uint32(len(init))
			init[k] = c
		}
		col[i] = c
	}
	for v := 0; v < nv; v++ {
		root := uint64(0)
		if t.up[v] < 0 {
			root = 1
		}
		setInit(v, [3]uint64{0, root, uint64(len(t.kids[v]))})
	}
	for i, s := range slots {
		d := uint64(0)
		if s.down {
			d = 1
		}
		setInit(nv+i, [3]uint64{1 + d, uint64(s.lat), 0})
	}
	for l := 0; l < nl; l++ {
		setInit(nv+ns+l, [3]uint64{3, math.Float64bits(float64(e.LinkCap(LinkID(l)))), 0})
	}
	classes := len(init)
	next := make([]uint32, ne)
	ids := make(map[[2]uint64]uint32, classes)
	var items []uint64
	for {
		clear(ids)
		for i := 0; i < ne; i++ {
			items = items[:0]
			for _, a := range adj[off[i]:off[i+1]] {
				items = append(items, a&^(1<<32-1)|uint64(col[uint32(a)]))
			}
			slices.Sort(items)
			h1, h2 := treeMix(0x1234, uint64(col[i])), treeMix(0x9876, uint64(col[i]))
			for _, it := range items {
				h1, h2 = treeMix(h1, it), treeMix(h2^0x5555, it)
			}
			k := [2]uint64{h1, h2}
			c, ok := ids[k]
			if !ok {
				c = uint32(len(ids))
				ids[k] = c
			}
			next[i] = c
		}
		col, next = next, col
		if len(ids) == classes {
			break
		}
		classes = len(ids)
	}
	// Quotient vertices: one per vertex colour, the first member its representative.
	vclass := map[uint32]int32{}
	var reps []int32
	for v := 0; v < nv; v++ {
		if _, ok := vclass[col[v]]; !ok {
			vclass[col[v]] = int32(len(reps))
			reps = append(reps, int32(v))
		}
	}
	if 2*len(reps) > nv {
		return nil // little symmetry: the per-rank replay costs about the same
	}
	// Weights: per link colour, the number of connections of each colour on one of its links.
	weight := map[uint32]float64{}
	linkRep := map[uint32]int{}
	for l := 0; l < nl; l++ {
		li := nv + ns + l
		if off[li] == off[li+1] {
			continue
		}
		if _, ok := linkRep[col[li]]; ok {
			continue
		}
		linkRep[col[li]] = l
		cnt := map[uint32]int{}
		for _, a := range adj[off[li]:off[li+1]] {
			cnt[col[uint32(a)]]++
		}
		w := -1
		for _, c := range cnt {
			if w >= 0 && c != w {
				return nil // unequal counts: no single link can stand for this class
			}
			w = c
		}
		weight[col[li]] = float64(w)
	}
	q := &treeQuotient{e: NewEngine(nil)}
	vl := map[uint32]LinkID{}
	vroute := func(route []LinkID) []LinkID {
		var out []LinkID
		for _, l := range route {
			c := col[nv+ns+int(l)]
			id, ok := vl[c]
			if !ok {
				id = q.e.AddLink("", e.LinkCap(l)/Rate(weight[c]), 0)
				vl[c] = id
			}
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
		return out
	}
	m := len(reps)
	qt := &treeNet{up: make([]int32, m), kids: make([][]int32, m), kidIdx: make([]int8, m),
		upRoute: make([][]LinkID, m), upLat: make([]Time, m), dnRoute: make([][][]LinkID, m), dnLat: make([][]Time, m)}
	parentOf := make([]int32, m)
	for i := range parentOf {
		parentOf[i] = -2
	}
	for qi, v := range reps {
		qt.up[qi] = -1
		if p := t.up[v]; p >= 0 {
			qt.up[qi] = vclass[col[p]]
			qt.upRoute[qi] = vroute(t.upRoute[v])
			qt.upLat[qi] = t.upLat[v]
		}
		for i, k := range t.kids[v] {
			kq := vclass[col[k]]
			if slices.Contains(qt.kids[qi], kq) {
				continue // a sibling of the same class: the same connection class
			}
			if parentOf[kq] != -2 && parentOf[kq] != int32(qi) {
				return nil
			}
			parentOf[kq] = int32(qi)
			qt.kidIdx[kq] = int8(len(qt.kids[qi]))
			qt.kids[qi] = append(qt.kids[qi], kq)
			qt.dnRoute[qi] = append(qt.dnRoute[qi], vroute(t.dnRoute[v][i]))
			qt.dnLat[qi] = append(qt.dnLat[qi], t.dnLat[v][i])
		}
	}
	for qi := range reps {
		if qt.up[qi] >= 0 && parentOf[qi] != qt.up[qi] {
			return nil
		}
	}
	q.net = qt
	q.by = pruneDominated(q.e, qt)
	for l := 0; l < nl; l++ {
		li := nv + ns + l
		if off[li] == off[li+1] {
			continue
		}
		c := col[li]
		id, ok := vl[c]
		if !ok {
			return nil // a link class no representative crosses: not equitable
		}
		q.links = append(q.links, LinkID(l))
		q.vlink = append(q.vlink, id)
	}
	return q
}

// pruneDominated drops from t's routes every link of e whose connections all cross another link
// of no larger capacity: its constraint is implied by that link's, so the max-min allocation (a
// function of the feasible set alone) is the same without it. It returns, per link, the link that
// stands for it (itself where it is kept).
func pruneDominated(e *Engine, t *treeNet) []LinkID {
	var routes []*[]LinkID
	for v := range t.up {
		if t.up[v] >= 0 {
			routes = append(routes, &t.upRoute[v])
		}
		for i := range t.dnRoute[v] {
			routes = append(routes, &t.dnRoute[v][i])
		}
	}
	nl := e.NumLinks()
	sets := make([][]int32, nl)
	for i, r := range routes {
		for _, l := range *r {
			sets[l] = append(sets[l], int32(i))
		}
	}
	by := make([]LinkID, nl)
	for l := range by {
		by[l] = LinkID(l)
	}
	subset := func(a, b []int32) bool { // both ascending
		j := 0
		for _, x := range a {
			for j < len(b) && b[j] < x {
				j++
			}
			if j == len(b) || b[j] != x {
				return false
			}
		}
		return true
	}
	for l := 0; l < nl; l++ {
		s := sets[l]
		if len(s) == 0 {
			continue
		}
		c := e.LinkCap(LinkID(l))
		for _, l2 := range *routes[s[0]] {
			if int(l2) == l || by[l2] != l2 {
				continue
			}
			c2, s2 := e.LinkCap(l2), sets[l2]
			if c < c2 || len(s2) < len(s) || (c == c2 && len(s2) == len(s) && int(l2) > l) {
				continue
			}
			if subset(s, s2) {
				by[l] = l2
				break
			}
		}
	}
	// Resolve chains to a kept link.
	for l := range by {
		for by[by[l]] != by[l] {
			by[l] = by[by[l]]
		}
	}
	for _, r := range routes {
		var out []LinkID
		for _, l := range *r {
			if by[l] == l {
				out = append(out, l)
			}
		}
		*r = out
	}
	return by
}
