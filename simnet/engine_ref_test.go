package simnet

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The rate computation keeps a compact scratch entry per link, pops its heap bottom-up and stops
// once every flow has its rate: none of that may change a result by
// a bit, since a replay's later events depend on the exact rates and on the order the rates are
// given in (ties between equal shares included). refRecompute is the computation as it was
// written before those changes (link and flow fields indexed by id, a sift-down heap popped to the
// end); the tests below check the engine against it on random problems full of ties.

// refFreeze is one flow given its rate, in the order of the computation.
type refFreeze struct {
	id   FlowID
	rate float64
}

// refEntry and refHeap are the heap of the reference computation (sift-down pop).
type refEntry struct {
	share  float64
	idx    int32
	isFlow bool
}

type refHeap struct{ a []refEntry }

func (h *refHeap) push(e refEntry) {
	h.a = append(h.a, e)
	a := h.a
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !(e.share < a[p].share) {
			break
		}
		a[i] = a[p]
		i = p
	}
	a[i] = e
}

func (h *refHeap) pop() refEntry {
	a := h.a
	e := a[0]
	n := len(a) - 1
	x := a[n]
	h.a = a[:n]
	a = a[:n]
	if n == 0 {
		return e
	}
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && a[r].share < a[l].share {
			m = r
		}
		if !(a[m].share < x.share) {
			break
		}
		a[i] = a[m]
		i = m
	}
	a[i] = x
	return e
}

// refRef is the ref of the engine's shareEntry for e.
func refRef(e refEntry) int32 {
	if e.isFlow {
		return ^e.idx
	}
	return e.idx
}

// refRecompute returns the rates one rate computation of e (recompute1) gives, in the order it
// gives them, and the number of flows of the component. It reads e and changes nothing.
func refRecompute(e *Engine) ([]refFreeze, int) {
	inComp := map[LinkID]bool{}
	seen := map[FlowID]bool{}
	var links []LinkID
	var flows []FlowID
	add := func(l LinkID) {
		if !inComp[l] && !e.links[l].lazy {
			inComp[l] = true
			links = append(links, l)
		}
	}
	for _, l := range e.dirty {
		add(l)
	}
	for i := 0; i < len(links); i++ {
		for _, fid := range e.links[links[i]].flows {
			if seen[fid] {
				continue
			}
			seen[fid] = true
			flows = append(flows, fid)
			for _, l2 := range e.flows[fid].route {
				add(l2)
			}
		}
	}
	rem := map[LinkID]float64{}
	cnt := map[LinkID]float64{}
	if e.weights != nil {
		for _, fid := range flows {
			f := &e.flows[fid]
			for i, l := range f.route {
				if inComp[l] {
					cnt[l] += f.weight(i)
				}
			}
		}
	}
	var h refHeap
	for _, l := range links {
		rem[l] = float64(e.links[l].cap)
		if e.weights == nil {
			cnt[l] = float64(len(e.links[l].flows))
		}
		if cnt[l] > 0 {
			h.push(refEntry{share: rem[l] / cnt[l], idx: int32(l)})
		}
	}
	// Caps: one entry per distinct value, in the order of the first flow with it.
	var capVals []float64
	var capFlows [][]FlowID
	for _, fid := range flows {
		if m := float64(e.flows[fid].maxr); m > 0 {
			j := slices.Index(capVals, m)
			if j < 0 {
				j = len(capVals)
				capVals = append(capVals, m)
				capFlows = append(capFlows, nil)
			}
			capFlows[j] = append(capFlows[j], fid)
		}
	}
	for j, c := range capVals {
		h.push(refEntry{share: c, idx: int32(j), isFlow: true})
	}
	frozen := map[FlowID]bool{}
	var out []refFreeze
	freeze := func(fid FlowID, r float64) {
		frozen[fid] = true
		out = append(out, refFreeze{fid, r})
		f := &e.flows[fid]
		for i, l := range f.route {
			if !inComp[l] {
				continue
			}
			rem[l] -= r * f.weight(i)
			if rem[l] < 0 {
				rem[l] = 0
			}
			cnt[l] -= f.weight(i)
		}
	}
	for len(h.a) > 0 {
		se := h.pop()
		if se.isFlow {
			for _, fid := range capFlows[se.idx] {
				if !frozen[fid] {
					freeze(fid, se.share)
				}
			}
			continue
		}
		l := LinkID(se.idx)
		if cnt[l] <= cntEps {
			continue
		}
		share := rem[l] / cnt[l]
		if share > se.share {
			se.share = share
			h.push(se)
			continue
		}
		if share < 0 {
			share = 0
		}
		for _, fid := range e.links[l].flows {
			if !frozen[fid] {
				freeze(fid, share)
			}
		}
	}
	return out, len(flows)
}

// logObserver records the rate changes the engine reports, in order.
type logObserver struct{ log []refFreeze }

func (o *logObserver) rateChanged(tag int64, old, new Rate, active int) {
	if active == 0 {
		o.log = append(o.log, refFreeze{FlowID(tag), float64(new)})
	}
}

func (o *logObserver) settled() {}

// TestRecomputeMatchesReference runs random problems with many equal shares (few distinct
// capacities, weights and caps; links of infinite capacity; relaxed and left-out links) through
// the engine's rate computation and the reference one, flows starting and ending between
// computations, and requires the same rates, bit for bit, given in the same order. Seeds 41 to
// 80 have links of releaseLink too, and the closure walks the routes by their metadata
// (routeMeta: the links left out for good skipped, the enforced links of releaseLink looked up).
func TestRecomputeMatchesReference(t *testing.T) {
	relActs := 0 // links of releaseLink enforced, summed over the computations' closures
	for seed := uint64(1); seed <= 80; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		e := NewEngine(nil)
		obs := &logObserver{}
		e.obs = obs
		nl := 4 + rng.IntN(20)
		caps := []float64{10, 10, 20, 40, math.Inf(1)}
		var ls []LinkID
		for i := 0; i < nl; i++ {
			c := caps[rng.IntN(len(caps))]
			if i == 0 {
				c = 10 // a plain finite link, for routes that would have no other
			}
			ls = append(ls, e.AddLink("", GBps(c), 0))
			if i == 0 {
				continue
			}
			switch rng.IntN(6) {
			case 0:
				e.relaxLink(ls[i])
			case 1:
				e.links[ls[i]].lazy = true // as pruneImplied leaves a link out
			case 2, 3:
				if seed > 40 {
					e.releaseLink(ls[i])
				}
			}
		}
		e.useMeta = e.hasRelease
		weighted := seed%2 == 0
		var routes [][]LinkID
		for r := 0; r < 3+rng.IntN(12); r++ {
			perm := rng.Perm(nl)[:1+rng.IntN(min(4, nl))]
			route := make([]LinkID, len(perm))
			bounded := false
			for i, p := range perm {
				route[i] = ls[p]
				lk := &e.links[route[i]]
				bounded = bounded || (!lk.lazy && !lk.relaxed && !math.IsInf(float64(lk.cap), 1))
			}
			if !bounded && !slices.Contains(route, ls[0]) {
				// An unbounded flow would get an infinite rate: cross the plain link too.
				route = append(route, ls[0])
			}
			if weighted && rng.IntN(2) == 0 {
				w := make([]float64, len(route))
				for i := range w {
					w[i] = []float64{1, 0.5, 2, 3, 1.0 / 3}[rng.IntN(5)]
				}
				e.weighRoute(route, w)
			}
			routes = append(routes, route)
		}
		flowCaps := []Rate{0, 0, 0, GBps(5), GBps(7), GBps(10)}
		var active []FlowID
		tag := int64(0)
		for step := 0; step < 60; step++ {
			// End a few flows, start a few: the engine's own bookkeeping (finish, StartFlow)
			// marks the links dirty.
			for k := rng.IntN(3); k > 0 && len(active) > 0; k-- {
				i := rng.IntN(len(active))
				id := active[i]
				active = slices.Delete(active, i, i+1)
				e.fhRemove(id)
				e.finish(id)
			}
			for k := rng.IntN(5); k > 0; k-- {
				tag++
				r := routes[rng.IntN(len(routes))]
				id := e.StartFlow(r, 1e9, flowCaps[rng.IntN(len(flowCaps))], tag)
				active = append(active, id)
			}
			for {
				if len(e.dirty) == 0 {
					break
				}
				want, n := refRecompute(e)
				before := map[FlowID]float64{}
				for _, id := range active {
					before[id] = float64(e.flows[id].rate)
				}
				visited := e.CompVisited
				obs.log = obs.log[:0]
				e.recompute1()
				if got := e.CompVisited - visited; got != uint64(n) {
					t.Fatalf("seed %d step %d: %d flows visited, reference %d", seed, step, got, n)
				}
				var wantLog []refFreeze
				for _, fr := range want {
					f := &e.flows[fr.id]
					if math.Float64bits(float64(f.rate)) != math.Float64bits(fr.rate) {
						t.Fatalf("seed %d step %d: flow %d rate %v, reference %v", seed, step, fr.id, f.rate, fr.rate)
					}
					if fr.rate != before[fr.id] {
						wantLog = append(wantLog, refFreeze{FlowID(f.tag), fr.rate})
					}
				}
				if !slices.Equal(obs.log, wantLog) {
					t.Fatalf("seed %d step %d: rates given in the order %v, reference %v", seed, step, obs.log, wantLog)
				}
				if !e.activate() {
					break
				}
			}
			if len(e.enforced) > 0 {
				e.release()
			}
			relActs += len(e.activeR)
		}
	}
	if relActs < 20 {
		t.Fatalf("links of releaseLink enforced in %d closures only", relActs)
	}
	t.Logf("links of releaseLink enforced, summed over the closures: %d", relActs)
}

// TestShareHeapMatchesSiftDown checks the bottom-up pop against the sift-down pop on random
// push/pop sequences with many equal shares (zeros and infinities among them): the same entries
// come out in the same order and the arrays stay equal.
func TestShareHeapMatchesSiftDown(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	keys := []float64{0, 1, 1.5, 2, 2, 3, math.Inf(1)}
	for run := 0; run < 200; run++ {
		var h shareHeap
		var r refHeap
		for op := 0; op < 400; op++ {
			if len(h.a) > 0 && rng.IntN(3) == 0 {
				a, b := h.pop(), r.pop()
				if a.share != b.share || a.ref != refRef(b) {
					t.Fatalf("run %d op %d: popped %v, sift-down pops %v", run, op, a, b)
				}
			} else {
				en := refEntry{share: keys[rng.IntN(len(keys))], idx: int32(op), isFlow: rng.IntN(4) == 0}
				h.push(shareEntry{en.share, refRef(en)})
				r.push(en)
			}
			for i := range h.a {
				if h.a[i] != (shareEntry{r.a[i].share, refRef(r.a[i])}) {
					t.Fatalf("run %d op %d: heaps differ at %d", run, op, i)
				}
			}
		}
	}
}
