package simnet

import (
	"math"
	"math/bits"
	"slices"
)

// Relaxed links.
//
// A symmetric replay (one representative per class of equivalent connections, see
// SimulateTreeDetail) needs every link to carry the same numbers of connections of each class as
// the other links of its class. Under ECMP the switch-to-switch links of the fabric do not: a hash
// puts two connections on one uplink and none on the next, and the classes fall apart into single
// ranks. Those links rarely limit anything — a connection's own NIC usually binds first — so the
// replay leaves them out ("relaxes" them) and checks them instead: it adds up, on every relaxed
// link, the rates of the connections crossing it (a class's rate times its members on that link)
// after every instant, and marks the links that carry more than their capacity.
//
// Where no relaxed link is ever over its capacity the replay is exact: the max-min fair
// allocation of the problem without those links is feasible with them, and a max-min fair
// allocation that is feasible in a smaller feasible set is that set's max-min fair allocation
// (it is the leximin-largest point of the larger set, so of any subset holding it). Every instant
// then gets the rates the full replay computes, so the whole run is the same. Where some link is
// over, the replay is started again with those links kept (SimulateTreeDetail).

// relaxer is implemented by routers with links a symmetric replay may relax (Cluster: the
// switch-to-switch links of its fabric). standIn reports whether l may be relaxed and returns the
// link that stands for it and its equal-cost siblings in the replay: one link with the capacity
// of them all, a constraint their own constraints imply (so the replay with it is still a
// relaxation of the full one). ecmp reports whether the router hashes flows over those siblings.
type relaxer interface {
	standIn(l LinkID) (LinkID, bool)
	ecmp() bool
}

// relaxTolerance is the relative excess of a relaxed link's load over its capacity that counts
// as floating-point rounding, not as a violation.
const relaxTolerance = 1e-9

// relaxCheck watches the relaxed links of a symmetric replay through its engine's observer.
// Links whose classes cross them in the same numbers have the same load at every instant, so
// they share one signature ("sig") and are checked once.
type relaxCheck struct {
	e    *Engine
	slot func(tag int64) int32 // quotient connection of a flow (-1: none)
	// per quotient connection (CSR): the signatures it loads and its members per link of each
	off  []int32
	sig  []int32
	mult []float64
	// per signature
	capa    []float64
	load    []float64
	act     []float64 // member flows active on one of its links
	since   []Time
	busy    []Time
	bad     []bool
	mark    []bool
	touched []int32
	links   [][]LinkID // the links of each signature
	nbad    int
	halt    bool    // stop the replay at the first violation
	over    float64 // the largest load / capacity seen
	// Per signature, the backlog of a fluid queue fed at load/capacity and drained at 1 (link
	// time, ps), its load/capacity since qAt, and the largest backlog seen: backlog.
	q    []float64
	qR   []float64
	qAt  []Time
	qMax float64

	// haltOnly: nothing is read of the check but whether a link went over (bad, halt; the
	// checked NVLS folds): settled keeps no load ratio or backlog (over, q).
	haltOnly bool

	// budget, where positive, is the most signature updates (entries visited by changedAt) a
	// check that only watches (not halt) makes; past it the check stops (gaveUp), keeping what
	// it saw until then. work counts them.
	budget, work int64
	gaveUp       bool
}

// relaxPair is a pair (relaxed link, quotient connection) as newRelaxCheck takes it.
func relaxPair(l LinkID, slot int32) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(slot)) }

// newRelaxCheck builds the check of relaxed links from pairs (relaxPair: link, quotient
// connection), one per member connection crossing a relaxed link; it sorts pairs in place. It
// returns nil where there is none.
//
// The pairs are as many as the members' crossings (an all-to-all on 512 DGX H100 nodes: 67 M), so
// the tables are built in two passes over them, sorted, with no copy: the first gives each link
// its signature (a new one where its run of quotient connections and multiplicities is new) and
// counts the entries of each connection, the second fills them in. (Until stop 39 the pairs were
// copied into keys, sorted, copied back and gathered into a list of entries: 44 bytes a pair at
// the peak, 20 now.)
func newRelaxCheck(e *Engine, pairs []uint64, nslots int) *relaxCheck {
	if len(pairs) == 0 {
		return nil
	}
	slices.Sort(pairs)
	link := func(k uint64) LinkID { return LinkID(int32(uint32(k >> 32))) }
	slot := func(k uint64) int32 { return int32(uint32(k)) }
	// runs calls f with each quotient connection of the link whose pairs start at i and its
	// multiplicity, and returns where the next link's start.
	runs := func(i int, f func(slot int32, mult int)) int {
		l := link(pairs[i])
		j := i
		for j < len(pairs) && link(pairs[j]) == l {
			k := j
			for k < len(pairs) && pairs[k] == pairs[j] {
				k++
			}
			f(slot(pairs[j]), k-j)
			j = k
		}
		return j
	}
	type key [2]uint64
	ids := map[key]int32{}
	c := &relaxCheck{}
	c.off = make([]int32, nslots+1)
	var owners []int // per signature, where the pairs of the link that made it start
	for i := 0; i < len(pairs); {
		l := link(pairs[i])
		h1, h2 := treeMix(0x51, math.Float64bits(float64(e.LinkCap(l)))), uint64(0x77)
		next := runs(i, func(s int32, m int) {
			h1 = treeMix(h1, uint64(uint32(s))<<32|uint64(m))
			h2 = treeMix(h2^0x3c, uint64(uint32(s))<<32|uint64(m))
		})
		id, ok := ids[key{h1, h2}]
		if !ok {
			id = int32(len(c.capa))
			ids[key{h1, h2}] = id
			c.capa = append(c.capa, float64(e.LinkCap(l)))
			c.links = append(c.links, nil)
			owners = append(owners, i)
			runs(i, func(s int32, _ int) { c.off[s+1]++ })
		}
		c.links[id] = append(c.links[id], l)
		i = next
	}
	for s := 0; s < nslots; s++ {
		c.off[s+1] += c.off[s]
	}
	c.sig = make([]int32, c.off[nslots])
	c.mult = make([]float64, c.off[nslots])
	fill := slices.Clone(c.off[:nslots])
	for id, i := range owners {
		// A connection's queue pairs each load a switch link with their share (Engine.share).
		share := e.crossShare(link(pairs[i]))
		runs(i, func(s int32, m int) {
			c.sig[fill[s]], c.mult[fill[s]] = int32(id), float64(m)*share
			fill[s]++
		})
	}
	n := len(c.capa)
	c.load, c.act = make([]float64, n), make([]float64, n)
	c.since, c.busy = make([]Time, n), make([]Time, n)
	c.bad, c.mark = make([]bool, n), make([]bool, n)
	return c
}

// fresh returns a check with c's links and signatures and no load yet, watching engine e.
func (c *relaxCheck) fresh(e *Engine) *relaxCheck {
	if c == nil {
		return nil
	}
	n := len(c.capa)
	return &relaxCheck{e: e, slot: c.slot, off: c.off, sig: c.sig, mult: c.mult, capa: c.capa, links: c.links,
		load: make([]float64, n), act: make([]float64, n), since: make([]Time, n), busy: make([]Time, n),
		bad: make([]bool, n), mark: make([]bool, n)}
}

func (c *relaxCheck) rateChanged(tag int64, old, new Rate, active int) {
	c.changedAt(c.slot(tag), old, new, active)
}

// changedAt is rateChanged of a flow of slot s (c.slot of its tag: the engine keeps it per flow,
// flow.oslot).
func (c *relaxCheck) changedAt(s int32, old, new Rate, active int) {
	if s < 0 || c.gaveUp {
		return
	}
	if c.budget > 0 && !c.halt {
		c.work += int64(c.off[s+1] - c.off[s])
		if c.work > c.budget {
			c.giveUp()
			return
		}
	}
	d := float64(new) - float64(old)
	for i := c.off[s]; i < c.off[s+1]; i++ {
		g := c.sig[i]
		m := c.mult[i]
		c.load[g] += m * d
		if active != 0 {
			was := c.act[g]
			c.act[g] += m * float64(active)
			switch {
			case was == 0 && c.act[g] > 0:
				c.since[g] = c.e.now
			case was > 0 && c.act[g] <= 0:
				c.act[g], c.load[g] = 0, 0 // no drift from a long sum
				c.busy[g] += c.e.now - c.since[g]
			}
		}
		if !c.mark[g] {
			c.mark[g] = true
			c.touched = append(c.touched, g)
		}
	}
}

// giveUp stops the check past its budget: what it has found stays (violated, a partial
// backlog), nothing more is added.
func (c *relaxCheck) giveUp() {
	c.gaveUp = true
	for _, g := range c.touched {
		c.mark[g] = false
	}
	c.touched = c.touched[:0]
}

func (c *relaxCheck) settled() {
	if c.q == nil {
		n := len(c.capa)
		c.q, c.qR, c.qAt = make([]float64, n), make([]float64, n), make([]Time, n)
	}
	for _, g := range c.touched {
		c.mark[g] = false
		if !c.haltOnly {
			r := c.load[g] / c.capa[g]
			if r > c.over {
				c.over = r
			}
			c.q[g] = max(0, c.q[g]+float64(c.e.now-c.qAt[g])*(c.qR[g]-1))
			c.qMax = max(c.qMax, c.q[g])
			c.qR[g], c.qAt[g] = r, c.e.now
		}
		if !c.bad[g] && c.load[g] > c.capa[g]*(1+relaxTolerance) {
			c.bad[g] = true
			c.nbad++
			if c.halt {
				// The rest of this replay is not the full replay's: stop it here.
				c.e.halted = true
			}
		}
	}
	c.touched = c.touched[:0]
}

// backlog is the largest backlog a relaxed link built up: its load over time as a fluid queue
// fed at load/capacity of its time and drained at one, the time the link would lag behind the
// replay's rates to carry what was hashed onto it (0 where none was ever over its capacity).
func (c *relaxCheck) backlog() Time {
	if c == nil {
		return 0
	}
	best := c.qMax
	for g, q := range c.q {
		best = max(best, q+float64(c.e.now-c.qAt[g])*(c.qR[g]-1))
	}
	return Time(best)
}

// violated returns the relaxed links that carried more than their capacity at some instant.
func (c *relaxCheck) violated() []LinkID {
	if c == nil || c.nbad == 0 {
		return nil
	}
	var out []LinkID
	for g, b := range c.bad {
		if b {
			out = append(out, c.links[g]...)
		}
	}
	return out
}

// linkBusy returns the busy time of every relaxed link (time with at least one flow on it).
func (c *relaxCheck) linkBusy(f func(l LinkID, busy Time)) {
	for g, ls := range c.links {
		b := c.busy[g]
		if c.act[g] > 0 {
			b += c.e.now - c.since[g]
		}
		for _, l := range ls {
			f(l, b)
		}
	}
}

// minShare is the smallest capacity per member connection over the relaxed links (+Inf if none):
// the rate of the slowest connection through them when every connection sends at once.
func (c *relaxCheck) minShare() Rate {
	best := math.Inf(1)
	if c == nil {
		return Rate(best)
	}
	tot := make([]float64, len(c.capa))
	for i, g := range c.sig {
		tot[g] += c.mult[i]
	}
	for g, t := range tot {
		if t > 0 {
			best = min(best, c.capa[g]/t)
		}
	}
	return Rate(best)
}

// implied drops from relax the stand-ins whose constraint the others imply (relax returns -1 for
// their links, which the replay then leaves out altogether). A stand-in s is implied where the
// connections crossing it can be covered by links whose capacities sum to at most s's. Each
// connection crossing s is charged to one link of its route that is not relaxed, by one of three
// rules tried in turn for each stand-in: the nearest such link before s's link in the route (the
// NIC port that feeds a leaf's uplinks), the nearest after it (the NIC port its downlinks feed),
// or the one of smallest capacity. If the charged links' capacities add up to no more than s's,
// the connections through s can never exceed it. On a non-blocking fabric a leaf's uplinks carry
// only what its NICs send, so their stand-in is implied and drops out; it stays where the fabric
// is oversubscribed. Dropping implied constraints leaves the max-min allocation as it is, and
// keeps the replay's components small.
//
// kept reports whether some stand-in is not implied: the fabric is oversubscribed somewhere the
// connections go, and the ECMP mean model is far from the exact replay there (docs/cluster.md).
func implied(e *Engine, routes func(yield func([]LinkID)), relax func(LinkID) (LinkID, bool)) (f func(LinkID) (LinkID, bool), kept bool) {
	// The links' capacities side by side: read from the links themselves, one cache miss each,
	// they took most of the walk's time (5.8 of 9.6 s on 512 DGX H100 nodes).
	caps := make([]Rate, e.NumLinks())
	for l := range caps {
		caps[l] = e.links[l].cap
	}
	// Per rule and stand-in (by link id): the sum of the capacities of the distinct links it is
	// charged to, in the order they come, and whether that sum went past its capacity or a
	// connection had nothing to charge it to (failed). A rule that failed for a stand-in stays
	// failed, so its pairs are no longer looked at: the distinct pairs (stand-in, charged link)
	// kept in the sets are those of rules still standing, a few per stand-in, where the routes
	// are many (every connection of an all-to-all: 268 M on 2,048 DGX H100 nodes, which charge
	// the leaves' downlinks to every NIC port of the cluster). Until stop 39 the pairs were
	// listed (6.7 GB on 512 nodes), sorted and summed per stand-in; then kept in sets whole (85 of
	// 215 s on 2,048 nodes).
	n := len(caps)
	seen := make([]bool, n)
	var failed [3][]bool
	var sum [3][]float64
	var sets [3]keySet
	for r := range failed {
		failed[r], sum[r] = make([]bool, n), make([]float64, n)
	}
	add := func(rule int, s, charged LinkID) {
		f := failed[rule]
		switch {
		case f[s]:
		case charged < 0:
			f[s] = true // nothing to charge it to
		case sets[rule].add(uint64(s)<<32 | uint64(charged)):
			sum[rule][s] += float64(caps[charged])
			f[s] = sum[rule][s] > float64(caps[s])*(1+relaxTolerance)
		}
	}
	// Per position of the route, the stand-in of a relaxed link or notRelaxed: relax is asked once
	// per link (it was asked up to four times, on routes walked by the hundred million).
	const notRelaxed = LinkID(-2)
	var sb []LinkID
	routes(func(route []LinkID) {
		sb = sb[:0]
		best, relaxed := LinkID(-1), false
		var bc Rate
		for _, l := range route {
			s, ok := relax(l)
			if !ok {
				s = notRelaxed
				if c := caps[l]; best < 0 || c < bc {
					best, bc = l, c
				}
			} else {
				relaxed = true
			}
			sb = append(sb, s)
		}
		if !relaxed {
			return
		}
		before := LinkID(-1) // the nearest link before i that is not relaxed
		after, afterAt := LinkID(-1), -1
		for i, l := range route {
			s := sb[i]
			if s == notRelaxed {
				before = l
				continue
			}
			// A run of the same stand-in (a tier of a connection's queue pairs, Fabric.QPs) has
			// the same links before and after it: charged once.
			if s < 0 || i > 0 && sb[i-1] == s {
				continue
			}
			if afterAt < i { // the nearest link after i that is not relaxed
				after, afterAt = -1, len(route)
				for j := i + 1; j < len(route); j++ {
					if sb[j] == notRelaxed {
						after, afterAt = route[j], j
						break
					}
				}
			}
			seen[s] = true
			add(0, s, before)
			add(1, s, after)
			add(2, s, best)
		}
	})
	// A stand-in is implied where some rule stands for it.
	drop := make([]bool, n)
	for s, in := range seen {
		if in {
			drop[s] = !failed[0][s] || !failed[1][s] || !failed[2][s]
			kept = kept || !drop[s]
		}
	}
	return func(l LinkID) (LinkID, bool) {
		s, ok := relax(l)
		if ok && s >= 0 && drop[s] {
			return -1, true
		}
		return s, ok
	}, kept
}

// The partial rate computation (Engine.partialOK; the switch-bound fold's replay).
//
// An enforced stand-in (releaseLink) joins the flows of every connection crossing it into one
// component: on the 64-node fat tree of BENCHMARKS.md the eight rails' trees, about 290 flows,
// where an instant's changes are those of one rail's, about 35. Most such instants move no rate
// outside the part of the component their changed links reach without crossing a stand-in
// (measured: 89% of them move none by more than 1e-9 of itself; those that do, move the
// stand-in's level). partial computes the rates of that part alone, the stand-ins it crosses
// with the capacity the other flows leave them, and keeps them where the whole is then max-min
// fair, which it checks from the stand-ins alone:
//
// Every flow outside the part keeps its rate and its links their load, but for the stand-ins.
// One whose bottleneck is elsewhere keeps it. One whose bottleneck is a stand-in S had the
// largest rate on S (the outside flows' largest, mB), and keeps S as its bottleneck where S is
// still saturated and no flow of the part gets more than mB on it. A flow of the part whose
// bottleneck is a link of the part has it in the whole too (every flow of such a link is in the
// part); one whose bottleneck is S (it was frozen at S's share) needs at least mB. Where S
// carries no outside flow, nothing is to check. These are the conditions of the max-min fair
// allocation (every flow has a saturated link on which no flow gets more), checked to
// relaxTolerance: where they hold the rates are those of the whole component's computation, to
// rounding; where they do not, the whole component is computed instead (PartialsOff). The rates
// being the same to rounding, not bit for bit, results move by rounding (BENCHMARKS.md, speed10).

// pendRate is a rate partial gave: kept, it is applied in that order.
type pendRate struct {
	fid FlowID
	r   float64
}

// rPart is what partial knows of an enforced stand-in it crosses: the load and largest rate of
// the flows outside the part, and how many there are.
type rPart struct {
	l           LinkID
	bload, mB   float64
	nb          int
	aload, maxA float64
}

// partialTolerance is the relative tolerance of partial's checks.
var partialTolerance = relaxTolerance

// partial computes the rates of the part of a component that the dirty links reach without
// crossing an enforced stand-in, and keeps them where the checks above hold (true: e.dirty
// consumed, the rates applied). False leaves e's rates and e.dirty as they were, and the
// scratch of computation ep spent.
func (e *Engine) partial(ep uint32) bool {
	ls := e.ls
	links := e.compLinks[:0]
	flows := e.compFlows[:0]
	rp := e.rparts[:0]
	addR := func(l LinkID) {
		rp = append(rp, rPart{l: l})
	}
	seeds := 0
	for _, l := range e.dirty {
		s := &ls[l]
		if s.epoch == ep {
			continue
		}
		lk := &e.links[l]
		s.epoch, s.in, s.cnt = ep, !lk.lazy, 0
		if !s.in {
			continue
		}
		links = append(links, l)
		if lk.release {
			addR(l)
		} else {
			seeds++
		}
	}
	if seeds == 0 {
		e.compLinks = links
		e.rparts = rp
		return false
	}
	inPos := e.inPos[:0]
	for i := 0; i < len(links); i++ {
		if e.links[links[i]].release {
			continue // a stand-in: the flows beyond it are not the part's
		}
		for _, fid := range e.links[links[i]].flows {
			fs := &e.fs[fid]
			if fs.epoch == ep {
				continue
			}
			fs.epoch = ep
			f := &e.flows[fid]
			flows = append(flows, fid)
			fs.inLo = int32(len(inPos))
			ps := e.positions(f)
			n := len(f.route)
			if ps != nil {
				n = len(ps)
			}
			for k := 0; k < n; k++ {
				j := int32(k)
				if ps != nil {
					j = ps[k]
				}
				l2 := f.route[j]
				s := &ls[l2]
				if s.epoch != ep {
					lk := &e.links[l2]
					s.epoch, s.in, s.cnt = ep, !lk.lazy, 0
					if s.in {
						links = append(links, l2)
						if lk.release {
							addR(l2)
						}
					}
				}
				if s.in {
					s.cnt += f.weight(int(j))
					inPos = append(inPos, j)
				}
			}
			fs.inHi = int32(len(inPos))
		}
	}
	e.compLinks, e.compFlows, e.inPos, e.rparts = links, flows, inPos, rp
	e.CompVisited += uint64(len(flows))
	// The stand-ins' capacity left by the flows outside the part.
	for i := range rp {
		x := &rp[i]
		for _, b := range e.links[x.l].flows {
			if e.fs[b].epoch == ep {
				continue
			}
			bf := &e.flows[b]
			if bf.rate == 0 {
				// Started in this instant (its other links are left out) or stalled: not a
				// rate to keep.
				e.PartialsOff++
				return false
			}
			w := 1.0
			if bf.w != nil {
				if bf.meta == nil {
					bf.meta = e.routeMetaOf(bf.route)
				}
				k, ok := slices.BinarySearch(bf.meta.relID, x.l)
				if !ok {
					panic("simnet: partial: a flow of a stand-in without it in its route's metadata")
				}
				w = bf.w[bf.meta.relPos[k]]
			}
			x.bload += float64(bf.rate) * w
			x.mB = max(x.mB, float64(bf.rate))
			x.nb++
		}
	}
	// Progressive filling of the part (recompute1's), the rates kept aside.
	sh := &e.sh
	sh.a = sh.a[:0]
	ri := 0
	for _, l := range links {
		lk, s := &e.links[l], &ls[l]
		s.rem = float64(lk.cap)
		if lk.release {
			s.rem = max(s.rem-rp[ri].bload, 0)
			ri++
		}
		if s.cnt > 0 {
			share := s.rem / s.cnt
			if share == 0 {
				share = 0
			}
			sh.push(shareEntry{share: share, ref: int32(l)})
		}
	}
	e.capped = e.cappedOf(e.capped[:0], flows)
	e.groupCaps(e.capped)
	for j, c := range e.capVals {
		sh.push(shareEntry{share: c, ref: ^int32(j)})
	}
	pend := e.pend[:0]
	freeze := func(fid FlowID, r float64) {
		fs := &e.fs[fid]
		fs.frozen = ep
		e.nfrozen++
		f := &e.flows[fid]
		for _, j := range e.inPos[fs.inLo:fs.inHi] {
			s := &ls[f.route[j]]
			w := f.weight(int(j))
			s.rem -= r * w
			if s.rem < 0 {
				s.rem = 0
			}
			s.cnt -= w
		}
		e.prate[fid] = r
		pend = append(pend, pendRate{fid, r})
	}
	ok := true
	e.nfrozen = 0
	for sh.len() > 0 && e.nfrozen < len(flows) {
		se := sh.pop()
		if se.ref < 0 {
			j := ^se.ref
			for _, fid := range e.capFlows[e.capOff[j]:e.capOff[j+1]] {
				if e.fs[fid].frozen != ep {
					freeze(fid, se.share)
				}
			}
			continue
		}
		share, ok1 := e.linkShare(sh, se)
		if !ok1 {
			continue
		}
		lk := &e.links[se.ref]
		for _, fid := range lk.flows {
			if fs := &e.fs[fid]; fs.epoch == ep && fs.frozen != ep {
				freeze(fid, share)
				if lk.release {
					// Its bottleneck is the stand-in: it needs the outside flows' largest rate.
					for _, x := range rp {
						if x.l == LinkID(se.ref) && x.nb > 0 && share < x.mB*(1-partialTolerance) {
							ok = false
						}
					}
				}
			}
		}
	}
	e.pend = pend
	if !ok || e.nfrozen < len(flows) {
		e.PartialsOff++
		return false
	}
	// The stand-ins: still saturated, and no flow of the part above the outside flows' largest.
	for i := range rp {
		x := &rp[i]
		if x.nb == 0 {
			continue
		}
		for _, a := range e.links[x.l].flows {
			if e.fs[a].epoch != ep {
				continue
			}
			af := &e.flows[a]
			w := 1.0
			if af.w != nil {
				k, _ := slices.BinarySearch(af.meta.relID, x.l)
				w = af.w[af.meta.relPos[k]]
			}
			r := e.prate[a]
			x.aload += r * w
			x.maxA = max(x.maxA, r)
		}
		c := float64(e.links[x.l].cap)
		if x.bload+x.aload < c*(1-partialTolerance) || x.maxA > x.mB*(1+partialTolerance) {
			e.PartialsOff++
			return false
		}
	}
	// Kept: the rates applied in the order they were given (newRate's, but for the scratch).
	e.dirty = e.dirty[:0]
	e.Partials++
	for _, p := range pend {
		e.applyRate(p.fid, p.r)
	}
	return true
}

// applyRate moves flow fid to rate r where that is a new rate: it advances the flow at its old
// rate up to now (its bytes left, each link's bytes and load), sets the rate and reschedules its
// completion. newRate and newRateIn call it and then do the rate computation's scratch; partial
// calls it alone, having done that itself.
func (e *Engine) applyRate(fid FlowID, r float64) {
	f := &e.flows[fid]
	old := float64(f.rate)
	if r == old {
		return
	}
	dt := e.now - f.last
	moved := old * float64(dt)
	if dt > 0 {
		f.left -= moved
		if f.left < 0 {
			f.left = 0
		}
	}
	if ft := f.filt; ft != nil {
		// Lean: no bytes kept; the relaxed links' loads.
		for _, j := range ft.rel {
			e.addLoad(f.route[j], (r-old)*f.weight(int(j)))
		}
	} else {
		for i, l := range f.route {
			lk := &e.links[l]
			w := f.weight(i)
			if dt > 0 {
				lk.bytes += moved * w
			}
			if lk.relaxed {
				e.addLoad(l, (r-old)*w)
			}
		}
	}
	f.last = e.now
	if e.obs != nil {
		e.told(f, f.rate, Rate(r), 0)
	}
	f.rate = Rate(r)
	if r > 0 {
		e.scheduleDone(fid)
	} else {
		e.fhRemove(fid)
	}
}

// keySet is a set of uint64 keys by open addressing (linear probing), each stored as key+1 so
// that 0 marks an empty place; it grows at half full.
type keySet struct {
	tab []uint64
	n   int
}

// add puts k in the set (k < 2^64 − 1) and reports whether it was not there.
func (s *keySet) add(k uint64) bool {
	if 2*(s.n+1) > len(s.tab) {
		old := s.tab
		s.tab, s.n = make([]uint64, max(64, 2*len(old))), 0
		for _, v := range old {
			if v != 0 {
				s.add(v - 1)
			}
		}
	}
	// Fibonacci hashing: the top bits of k times 2^64/φ (the table's size is a power of two).
	mask := uint64(len(s.tab) - 1)
	shift := 64 - bits.Len64(mask)
	for h := (k * 0x9e3779b97f4a7c15) >> shift; ; h = (h + 1) & mask {
		switch s.tab[h] {
		case 0:
			s.tab[h] = k + 1
			s.n++
			return true
		case k + 1:
			return false
		}
	}
}
