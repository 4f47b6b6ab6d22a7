package simnet

import (
	"fmt"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/tuning"
)

// TreeSpec is a tree all-reduce for the compact executor (SimulateTree): NCCL's split tree
// (runTreeSplit) without a materialised schedule. Every chunk is reduced up the tree (a rank sends
// it to its parent once it has it from all its children) and broadcast down (a rank forwards it to
// its children once it has it from its parent; the root once it has reduced it), the two
// directions running concurrently, with NCCL_STEPS credits on every connection.
type TreeSpec struct {
	Bytes int64 // the all-reduce buffer
	Proto tuning.Proto
	Trees []coll.Tree // per channel
	Chunk int64       // payload per chunk (tuning's chunk size; 0: the protocol's step)
	// Merge and MaxMessages: the coarse mode, as in RingSpec (0: automatic under MaxMessages,
	// default 2,000,000).
	Merge       int
	MaxMessages int64
}

type treeGroup struct {
	lanes    int
	up       []int32 // parent, -1 at the root
	kids     [][]int32
	kidIdx   []int8 // position of the rank in its parent's kids
	upRoute  [][]LinkID
	upLat    []Time
	dnRoute  [][][]LinkID
	dnLat    [][]Time
	upNext   []int32
	dnNext   []int32
	upRun    []bool
	dnRun    []bool
	dnPend   []int8
	upRecv   [][]int32 // per kid: chunks arrived from it
	dnRecv   []int32
	upCons   []int32   // my up messages my parent consumed
	dnCons   [][]int32 // per kid: my down messages it consumed
	rootRank int32
}

type treeSim struct {
	e      *Engine
	gs     []*treeGroup
	chunks int32
	bytes  []float64 // wire bytes per (merged) chunk
	cap    Rate
	mul    Time
	done   int64
	total  int64
	end    Time
}

// SimulateTree times a tree all-reduce on the links of e reached through r.
func SimulateTree(e *Engine, r Router, spec TreeSpec, tm Timing) (*RingResult, error) {
	n := r.NumRanks()
	if len(spec.Trees) == 0 {
		return nil, fmt.Errorf("simnet: tree simulation without trees")
	}
	if spec.Proto < 0 || spec.Proto >= tuning.NumProtos {
		return nil, fmt.Errorf("simnet: bad protocol %v", spec.Proto)
	}
	if n == 1 || spec.Bytes <= 0 {
		return &RingResult{Time: tm.Launch}, nil
	}
	for c, t := range spec.Trees {
		if len(t.Up) != n || len(t.Down) != n {
			return nil, fmt.Errorf("simnet: tree %d covers %d ranks, the cluster %d", c, len(t.Up), n)
		}
		if err := coll.CheckTree(t); err != nil {
			return nil, fmt.Errorf("simnet: tree %d: %v", c, err)
		}
	}
	nch := len(spec.Trees)
	chunk := spec.Chunk
	if chunk <= 0 {
		chunk = [...]int64{32 << 10, 576000, 512 << 10}[spec.Proto]
	}
	perCh := (spec.Bytes + int64(nch) - 1) / int64(nch)
	nchunks := (perCh + chunk - 1) / chunk
	payload := (perCh + nchunks - 1) / nchunks
	wire := float64(wireBytes(spec.Proto, payload))

	var gs []*treeGroup
	idx := map[string]int{}
	for c, t := range spec.Trees {
		g := &treeGroup{up: make([]int32, n), kids: make([][]int32, n), kidIdx: make([]int8, n), rootRank: -1,
			upRoute: make([][]LinkID, n), upLat: make([]Time, n), dnRoute: make([][][]LinkID, n), dnLat: make([][]Time, n)}
		sig := make([]byte, 0, 64)
		for rk := 0; rk < n; rk++ {
			g.up[rk] = int32(t.Up[rk])
			if t.Up[rk] < 0 {
				g.rootRank = int32(rk)
			} else {
				route, class := r.Route(rk, t.Up[rk], c, nil)
				g.upRoute[rk] = route
				g.upLat[rk] = e.RouteLatency(route) + tm.StepLat[class][spec.Proto]
				sig = fmt.Appendf(sig, "u%d:%v;", t.Up[rk], route)
			}
			for i, k := range t.Down[rk] {
				g.kids[rk] = append(g.kids[rk], int32(k))
				g.kidIdx[k] = int8(i)
				route, class := r.Route(rk, k, c, nil)
				g.dnRoute[rk] = append(g.dnRoute[rk], route)
				g.dnLat[rk] = append(g.dnLat[rk], e.RouteLatency(route)+tm.StepLat[class][spec.Proto])
				sig = fmt.Appendf(sig, "d%d:%v;", k, route)
			}
		}
		if g.rootRank < 0 {
			return nil, fmt.Errorf("simnet: tree %d has no root", c)
		}
		if j, ok := idx[string(sig)]; ok {
			gs[j].lanes++
			continue
		}
		g.lanes = 1
		idx[string(sig)] = len(gs)
		gs = append(gs, g)
	}
	maxMsg := spec.MaxMessages
	if maxMsg <= 0 {
		maxMsg = 2_000_000
	}
	merge := spec.Merge
	per := int64(len(gs)) * 2 * int64(n-1)
	if merge <= 0 {
		merge = 1
		for per*((nchunks+int64(merge)-1)/int64(merge)) > maxMsg && int64(merge) < nchunks {
			merge *= 2
		}
	}
	if int64(merge) > nchunks {
		merge = int(nchunks)
	}
	C := int32((nchunks + int64(merge) - 1) / int64(merge))
	x := &treeSim{e: e, gs: gs, chunks: C, cap: tm.PerFlowCap[spec.Proto], mul: Time(merge)}
	x.bytes = make([]float64, C)
	for k := int32(0); k < C; k++ {
		m := min(int64(merge), nchunks-int64(k)*int64(merge))
		x.bytes[k] = wire * float64(m)
	}
	for _, g := range gs {
		g.upNext, g.dnNext = make([]int32, n), make([]int32, n)
		g.upRun, g.dnRun = make([]bool, n), make([]bool, n)
		g.dnPend, g.dnRecv, g.upCons = make([]int8, n), make([]int32, n), make([]int32, n)
		g.upRecv, g.dnCons = make([][]int32, n), make([][]int32, n)
		for rk := 0; rk < n; rk++ {
			g.upRecv[rk] = make([]int32, len(g.kids[rk]))
			g.dnCons[rk] = make([]int32, len(g.kids[rk]))
		}
	}
	x.total = int64(len(gs)) * int64(C) * int64(2*n-1)
	e.handler = x
	t0 := e.Now()
	startEvents := e.Events
	e.At(t0+tm.Launch, evLaunch, 0)
	if _, err := e.Run(); err != nil {
		return nil, err
	}
	if x.done != x.total {
		return nil, fmt.Errorf("simnet: tree simulation stopped after %d of %d steps", x.done, x.total)
	}
	return &RingResult{Time: x.end - t0, Events: e.Events - startEvents, Messages: int64(len(gs)) * int64(C) * 2 * int64(n-1),
		Merge: merge, Groups: len(gs), Loops: int(nchunks), Steps: 2 * (n - 1)}, nil
}

// Tags: group<<34 | rank<<4 | lane<<2 | kid (lane 0 up, 1 down).
func treeTag(g, rk, lane, kid int) int64 {
	return int64(g)<<34 | int64(rk)<<4 | int64(lane)<<2 | int64(kid)
}

func treeUntag(t int64) (g, rk, lane, kid int) {
	return int(t >> 34), int(t>>4) & (1<<30 - 1), int(t>>2) & 3, int(t & 3)
}

func (x *treeSim) finishStep() {
	x.done++
	if now := x.e.Now(); now > x.end {
		x.end = now
	}
}

func (x *treeSim) Fire(kind int32, arg int64) {
	switch kind {
	case evLaunch:
		for gi, g := range x.gs {
			for rk := range g.up {
				x.tryUp(gi, rk)
				x.tryDown(gi, rk)
			}
		}
	case evArrive:
		gi, rk, lane, kid := treeUntag(arg)
		g := x.gs[gi]
		if lane == 0 {
			p := int(g.up[rk])
			g.upRecv[p][g.kidIdx[rk]]++
			if p == int(g.rootRank) {
				x.tryDown(gi, p)
			} else {
				x.tryUp(gi, p)
			}
		} else {
			c := int(g.kids[rk][kid])
			g.dnRecv[c]++
			x.tryDown(gi, c)
		}
	}
}

// haveKids reports whether rank rk has chunk k from all its children.
func (g *treeGroup) haveKids(rk int, k int32) bool {
	for _, v := range g.upRecv[rk] {
		if v <= k {
			return false
		}
	}
	return true
}

func (x *treeSim) tryUp(gi, rk int) {
	g := x.gs[gi]
	if rk == int(g.rootRank) || g.upRun[rk] {
		return
	}
	k := g.upNext[rk]
	if k >= x.chunks || !g.haveKids(rk, k) || (k >= 8 && g.upCons[rk] < k-7) {
		return
	}
	g.upRun[rk] = true
	x.e.StartFlow(g.upRoute[rk], x.bytes[k]*float64(g.lanes), x.cap*Rate(g.lanes), treeTag(gi, rk, 0, 0))
}

func (x *treeSim) tryDown(gi, rk int) {
	g := x.gs[gi]
	for !g.dnRun[rk] {
		k := g.dnNext[rk]
		if k >= x.chunks {
			return
		}
		if rk == int(g.rootRank) {
			if !g.haveKids(rk, k) {
				return
			}
		} else if g.dnRecv[rk] <= k {
			return
		}
		if k >= 8 {
			for _, c := range g.dnCons[rk] {
				if c < k-7 {
					return
				}
			}
		}
		if len(g.kids[rk]) == 0 {
			// A leaf only receives: the step completes at once.
			x.completeDown(gi, rk)
			continue
		}
		g.dnRun[rk] = true
		g.dnPend[rk] = int8(len(g.kids[rk]))
		for i := range g.kids[rk] {
			x.e.StartFlow(g.dnRoute[rk][i], x.bytes[k]*float64(g.lanes), x.cap*Rate(g.lanes), treeTag(gi, rk, 1, i))
		}
		return
	}
}

// completeDown ends rank rk's down step: the parent's message is consumed (non-root), or the
// children's up messages are (root).
func (x *treeSim) completeDown(gi, rk int) {
	g := x.gs[gi]
	g.dnNext[rk]++
	x.finishStep()
	if rk == int(g.rootRank) {
		x.consumeKids(gi, rk)
	} else {
		p := int(g.up[rk])
		g.dnCons[p][g.kidIdx[rk]]++
		x.tryDown(gi, p)
	}
}

func (x *treeSim) consumeKids(gi, rk int) {
	g := x.gs[gi]
	for _, c := range g.kids[rk] {
		g.upCons[c]++
		x.tryUp(gi, int(c))
	}
}

func (x *treeSim) FlowDone(tag int64) {
	gi, rk, lane, kid := treeUntag(tag)
	g := x.gs[gi]
	if lane == 0 {
		x.e.After(g.upLat[rk]*x.mul, evArrive, tag)
		g.upRun[rk] = false
		g.upNext[rk]++
		x.finishStep()
		x.consumeKids(gi, rk)
		x.tryUp(gi, rk)
		return
	}
	x.e.After(g.dnLat[rk][kid]*x.mul, evArrive, tag)
	g.dnPend[rk]--
	if g.dnPend[rk] == 0 {
		g.dnRun[rk] = false
		x.completeDown(gi, rk)
		x.tryDown(gi, rk)
	}
}
