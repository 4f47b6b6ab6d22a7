package simnet

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
)

// LinkID names a link (a directed resource with a capacity) of an Engine.
type LinkID int32

// FlowID names an active flow of an Engine. Ids are reused once a flow completes.
type FlowID int32

// Handler receives the engine's callbacks. Both run inside Run, at the simulated time Now().
type Handler interface {
	// FlowDone is called when the last byte of the flow tagged tag has left its bottleneck.
	FlowDone(tag int64)
	// Fire is called for an event scheduled with At or After.
	Fire(kind int32, arg int64)
}

// errHalted is returned by Run when its observer stopped it (a relaxed link found over its
// capacity: the replay will start again).
var errHalted = errors.New("simnet: replay halted")

// errBudget is returned by Run when its rate computations visited more flows than maxWork.
var errBudget = errors.New("simnet: replay over its work budget")

// ErrStalled is returned by Run when flows are still active but none can make progress
// (every one of them crosses a link of zero capacity).
var ErrStalled = errors.New("simnet: flows stalled (a route crosses a link of zero capacity)")

type link struct {
	// What the rate computation reads comes first: 56 bytes, one cache line in a line-aligned
	// array of 128-byte links (a large slice's backing array is page-aligned).
	flows []FlowID // active flows crossing the link, unordered
	cap   Rate
	// Relaxed links (relaxLink): relaxed marks a link the engine may leave out of the rate
	// computation; lazy is true while it does; load is the sum of its flows' rates, checked
	// against its capacity after every computation. lazy is also set, for good, on a link that
	// is not relaxed but whose constraint another link implies (pruneImplied).
	relaxed, lazy, check bool
	release, listed      bool // left out again once under its capacity (releaseLink); in Engine.enforced
	load                 float64
	bytes                float64 // bytes carried so far (utilisation)
	name                 string
	lat                  Time
	busy                 Time // time with at least one active flow
	since                Time // start of the current busy period
	// fj[k]: the position of link in the route of flows[k] (finish moves a flow in flows
	// without looking for the link in its route)
	fj []int32
	_  [8]byte
}

// linkScratch is a link's state in the rate computation (Engine.ls, indexed by LinkID), apart
// from link so that the computation's inner loops touch 24 bytes a link.
type linkScratch struct {
	rem   float64
	cnt   float64 // unfrozen flows (their weights' sum where routes are weighted)
	epoch uint32  // the computation that last saw the link
	in    bool    // in that computation's component (not lazy)
}

type flow struct {
	// What the rate computation's closure and filling read first (one 64-byte line), then what
	// a new rate moves, then the rest.
	route []LinkID
	w     []float64  // w[i]: the flow's weight on route[i] (nil: 1 on every link; weighRoute)
	filt  *routeFilt // its route's at its start (Engine.lean; nil: the whole route)
	maxr  Rate       // per-flow cap (0: none)
	rate  Rate
	left  float64 // bytes still to send at time last
	last  Time
	tag   int64
	// orc, where the engine's observer was a *relaxCheck at the flow's start, is it, and oslot
	// its slot of the flow's tag (looked up once)
	orc     *relaxCheck
	oslot   int32
	hpos    int32      // index in Engine.fh, -1 when not scheduled
	doneAt  Time       // completion time while in the flow heap
	dseq    uint64     // schedule order of that completion
	pos     []int32    // pos[i]: index of this flow in links[route[i]].flows
	meta    *routeMeta // its route's (useMeta; nil: not looked up yet)
	active  bool
	counted bool // counted in nact (not a flow completed at once)
	// 168 bytes padded to 192 (three cache lines), so that every flow of Engine.flows (a
	// page-aligned backing array) starts a line and its first line holds what the closure
	// reads; unpadded, seven flows in eight straddled two. 100 DGX H100 nodes under rail
	// routing, all-to-all of 1 MiB (the interval replay of every rank, components of some
	// 38,000 flows): 76 / 84 s → 59 / 71 s on alternating runs (BENCHMARKS.md, stop 72).
	_ [24]byte
}

// told tells the engine's observer of flow f's rate change (observer.rateChanged).
func (e *Engine) told(f *flow, old, new Rate, active int) {
	if f.orc != nil && e.obs == observer(f.orc) {
		f.orc.changedAt(f.oslot, old, new, active)
		return
	}
	e.obs.rateChanged(f.tag, old, new, active)
}

// flowScratch is a flow's state in the rate computation (Engine.fs, indexed by FlowID), apart
// from flow so that the computation's tests of flows already seen read 16 bytes a flow.
type flowScratch struct {
	epoch      uint32 // the computation that visited it
	frozen     uint32 // the computation that gave it its rate
	inLo, inHi int32  // Engine.inPos[inLo:inHi]: positions in route of its links in that computation's component
}

// Engine is a discrete-event simulator of flows over links with max-min fair bandwidth sharing.
//
// Time is an integer number of picoseconds. Events are kept in a typed binary heap ordered by
// (time, sequence number), so equal-time events run in the order they were scheduled and two runs
// of the same input produce the same results. All the events of one instant are handled before
// rates are recomputed, and a recomputation only touches the connected component (flows that share
// links, transitively) of the links whose set of flows changed.
//
// An Engine is not safe for concurrent use.
type Engine struct {
	now   Time
	seq   uint64
	h     eventHeap
	fh    []fhEntry // indexed min-heap of flow completions by (doneAt, dseq): one entry per flow
	links []link
	flows []flow
	free  []FlowID
	nact  int

	dirty []LinkID
	epoch uint32

	handler Handler
	namers  []namer
	// weights: the weights of the routes given to weighRoute, by the identity of their slice
	// (nil: every flow weighs 1 on every link).
	weights map[*LinkID][]float64
	// share, where set, is per link the part of a flow's rate that one crossing of the link
	// takes (0: all of it): a connection spread over Q queue pairs crosses the Q equal-cost links
	// its pairs hash to, each with 1/Q of its rate (Cluster, Fabric.QPs). StartFlow folds it into
	// the flow's route and weights (shareRoute); shared by the engine's clones (never written after the
	// cluster is built).
	share       []float64
	shareRoutes map[shareKey]sharedRoute
	obs         observer // told of every rate change (relaxed links, see relax.go); nil: none
	halted      bool     // Run returns errHalted at the end of the current instant
	maxWork     uint64   // Run returns errBudget once CompVisited exceeds it (0: no bound)
	// pastWork, where set, is asked once CompVisited exceeds maxWork, in place of returning
	// errBudget: the rate interval the rest of the run takes (RateInterval; 0: none, the run
	// goes on exactly). The run then goes on up to hardWork (0: unbounded), past which Run
	// returns errBudget.
	pastWork func() Time
	hardWork uint64
	// abort, where set, is asked every eventBlock events; Run returns its error, if any, at
	// once (Simulate: the schedule's check failed).
	abort func() error
	// stepsDone, where set, counts the steps of the schedule replay a progress bar follows
	// (trackSteps).
	stepsDone func() int64

	// scratch of the rate computation, reused between calls
	ls        []linkScratch // by link
	fs        []flowScratch // by flow
	compLinks []LinkID
	compFlows []FlowID
	nfrozen   int // flows of the component given their rate
	inPos     []int32
	// The partial rate computation (relax.go): allowed; the rates it gives, by flow; the flows in
	// the order it gave them; the enforced stand-ins it crosses.
	partialOK bool
	prate     []float64
	pend      []pendRate
	rparts    []rPart
	// lean: the engine keeps no link statistics (LinkBytes, LinkBusy: nobody reads them) and
	// walks, of a flow started in Run, only the links of its route that a rate computation may
	// hold (routeFilt). Set for the folded NVLS replays' private engines (foldedEngine).
	lean    bool
	running bool // inside Run
	filts   map[*LinkID]*routeFilt
	// Route metadata (routeMeta), where the engine has links of releaseLink and partial rate
	// computations (partialOK; elsewhere the closure and newRate walk whole routes, as before).
	hasRelease bool
	useMeta    bool
	metas      map[*LinkID]*routeMeta
	activeR    []LinkID // the links of releaseLink enforced now, sorted (activeRel)
	activeVer  uint64   // changes whenever activeR does
	// lazyAtStandIn: links left out for good from the first activation of a link of releaseLink
	// (leaveOut; the node fold's unbounded switch links where its checked replay goes on
	// switch-bound: nvlsfold.go)
	lazyAtStandIn []LinkID
	// atStandIn, where set, is called at the first activation of a link of releaseLink (the
	// node fold's checked replay that goes on switch-bound: from then on it will report a halt;
	// nvlsfold.go)
	atStandIn func()
	extraBuf  []int32
	sh        shareHeap
	// flows started and ended in the current instant (replaced)
	started     []FlowID
	ended       []endedFlow
	usedScratch []bool
	rtab        routeTable
	// per-flow caps of a rate computation, grouped by value (capVals[j]: the flows
	// capFlows[capOff[j]:capOff[j+1]])
	capVals     []float64
	capOff      []int32
	capFlows    []FlowID
	capFill     []int32
	capGrp      []int32
	capped      []FlowID
	capTab      capTable
	rateScratch []Rate

	// RateInterval, when > 0, is the smallest simulated time between two rate computations:
	// changes within it are batched, so a new flow may wait up to RateInterval for its rate and an
	// ended flow's bandwidth up to RateInterval to be handed out. 0 (the default) is exact.
	RateInterval     Time
	nextRecompute    Time
	pendingRecompute bool

	// NoShortcut disables the replaced-flow shortcut (every instant with changes recomputes);
	// tests use it to check the shortcut changes nothing.
	NoShortcut bool
	// Strict enforces relaxed links like any other (see relaxLink); tests use it to check that
	// relaxing them changes nothing.
	Strict bool
	checks []LinkID // relaxed links whose load changed since the last check
	// enforced: the links of releaseLink enforced since they were last found over their
	// capacity, checked after every rate computation (release)
	enforced []LinkID

	// Statistics.
	Events      uint64 // events handled (including stale flow completions)
	Recomputes  uint64 // rate computations (one per instant with changes)
	FlowsTotal  uint64 // flows started
	MaxActive   int    // largest number of flows active at once
	CompVisited uint64 // flows visited by rate computations, summed
	CompLinks   uint64 // links in the components of the full rate computations, summed
	Shortcuts   uint64 // instants where new flows replaced ended ones on the same routes (no recomputation)
	Activations uint64 // relaxed links found over their capacity and enforced from then on
	StandInActs uint64 // those of them of releaseLink
	Partials    uint64 // rate computations of a part of a component (partial), kept
	PartialsOff uint64 // partial computations not kept (the whole component computed instead)
	Releases    uint64 // links of releaseLink left out again, under their capacity
}

// NewEngine returns an engine with no links whose callbacks go to h.
func NewEngine(h Handler) *Engine { return &Engine{handler: h} }

// Now is the current simulated time.
func (e *Engine) Now() Time { return e.now }

// AddLink adds a directed link of capacity c (not negative) and latency lat and returns its id. A link's
// latency is not applied by the engine (flows are rate-limited only); callers add RouteLatency.
func (e *Engine) AddLink(name string, c Rate, lat Time) LinkID {
	e.links = append(e.links, link{name: name, cap: c, lat: lat})
	return LinkID(len(e.links) - 1)
}

// NumLinks is the number of links.
func (e *Engine) NumLinks() int { return len(e.links) }

// LinkName returns the name given to AddLink, or the one a namer of SetNamer gives.
func (e *Engine) LinkName(l LinkID) string {
	if n := e.links[l].name; n != "" {
		return n
	}
	for _, nm := range e.namers {
		if l >= nm.lo && l < nm.hi {
			return nm.f(l)
		}
	}
	return fmt.Sprintf("link%d", int(l))
}

type namer struct {
	lo, hi LinkID
	f      func(LinkID) string
}

// SetNamer names the links lo..hi-1 added without a name: f is called only when a name is
// needed (traces, op logs), so large clusters do not format a string per link.
func (e *Engine) SetNamer(lo, hi LinkID, f func(LinkID) string) {
	e.namers = append(e.namers, namer{lo, hi, f})
}

// LinkCap returns the capacity of l.
func (e *Engine) LinkCap(l LinkID) Rate { return e.links[l].cap }

// LinkBytes returns the bytes l has carried so far.
func (e *Engine) LinkBytes(l LinkID) float64 { return e.links[l].bytes }

// LinkBusy returns the time l has carried at least one flow.
func (e *Engine) LinkBusy(l LinkID) Time {
	lk := &e.links[l]
	if len(lk.flows) > 0 {
		return lk.busy + e.now - lk.since
	}
	return lk.busy
}

// RouteLatency is the sum of the latencies of the links of r: a tier of equal-cost links that a
// connection's queue pairs cross side by side counts once (each link weighs its share, Engine.share).
func (e *Engine) RouteLatency(r []LinkID) Time {
	var t Time
	for _, l := range r {
		if int(l) < len(e.share) && e.share[l] > 0 {
			t += Time(math.Round(float64(e.links[l].lat) * e.share[l]))
			continue
		}
		t += e.links[l].lat
	}
	return t
}

// At schedules Fire(kind, arg) at time t (not before Now). kind must be >= 0.
func (e *Engine) At(t Time, kind int32, arg int64) {
	if kind < 0 {
		panic("simnet: negative event kind")
	}
	if t < e.now {
		t = e.now
	}
	e.seq++
	e.h.push(event{t: t, seq: e.seq, kind: kind, arg: arg})
}

// After schedules Fire(kind, arg) d after Now.
func (e *Engine) After(d Time, kind int32, arg int64) { e.At(e.now+d, kind, arg) }

// StartFlow starts moving bytes along route at Now. maxRate (0 for none) caps the flow's own
// rate, as a per-flow bottleneck (e.g. what one channel's threads can copy). FlowDone(tag) is
// called when it completes. A flow with no bytes or an empty route completes at Now.
// Links must have been added before; route must not repeat a link.
func (e *Engine) StartFlow(route []LinkID, bytes float64, maxRate Rate, tag int64) FlowID {
	e.FlowsTotal++
	var id FlowID
	if n := len(e.free); n > 0 {
		id = e.free[n-1]
		e.free = e.free[:n-1]
	} else {
		e.flows = append(e.flows, flow{hpos: -1})
		e.fs = append(e.fs, flowScratch{})
		e.prate = append(e.prate, 0)
		id = FlowID(len(e.flows) - 1)
	}
	f := &e.flows[id]
	f.route = route
	f.left = bytes
	f.rate = 0
	f.last = e.now
	f.maxr = maxRate
	f.tag = tag
	f.active = true
	f.w = nil
	f.meta = nil
	f.filt = nil
	f.orc = nil
	if rc, ok := e.obs.(*relaxCheck); ok && rc != nil {
		f.orc, f.oslot = rc, rc.slot(tag)
	}
	if e.weights != nil && len(route) > 0 {
		f.w = e.weights[&route[0]]
	}
	if e.share != nil && len(route) > 0 {
		route, f.w = e.shareRoute(route, f.w)
		f.route = route
	}
	if bytes <= 0 || (len(route) == 0 && maxRate <= 0) {
		// Nothing to share: complete at once (an empty route with a cap is rate-limited below).
		f.left = 0
		f.route = nil
		e.seq++
		f.doneAt, f.dseq = e.now, e.seq
		e.fhSet(id)
		return id
	}
	if cap(f.pos) >= len(route) {
		f.pos = f.pos[:len(route)]
	} else {
		f.pos = make([]int32, len(route))
	}
	if e.lean && e.running && !e.Strict && len(route) > 0 {
		ft := e.filtOf(route, f.w)
		f.filt = ft
		for _, i := range ft.pos {
			l := route[i]
			lk := &e.links[l]
			f.pos[i] = int32(len(lk.flows))
			lk.flows = append(lk.flows, id)
			lk.fj = append(lk.fj, i)
			e.markDirty(l)
		}
		if len(ft.pos) == 0 {
			e.markDirty(route[0]) // an instant with changes, as the whole route would make it
		}
	} else {
		for i, l := range route {
			lk := &e.links[l]
			if len(lk.flows) == 0 {
				lk.since = e.now
			}
			f.pos[i] = int32(len(lk.flows))
			lk.flows = append(lk.flows, id)
			lk.fj = append(lk.fj, int32(i))
			e.markDirty(l)
		}
	}
	if len(route) == 0 {
		// Only the per-flow cap limits it: its rate never changes.
		f.rate = maxRate
		e.scheduleDone(id)
		if e.obs != nil {
			e.told(f, 0, maxRate, 1)
		}
	} else {
		if e.obs != nil {
			e.told(f, 0, 0, 1)
		}
		e.started = append(e.started, id)
	}
	f.counted = true
	e.nact++
	if e.nact > e.MaxActive {
		e.MaxActive = e.nact
	}
	return id
}

func (e *Engine) markDirty(l LinkID) { e.dirty = append(e.dirty, l) }

// weighRoute gives every flow later started on route (this slice: its identity, not its links)
// the weight w[i] on route[i]: the flow loads that link as w[i] flows of its rate would, and
// max-min sharing gives it the rate of one of them. A folded replay (nvlsfold.go) uses it for a
// representative flow that stands for w[i] members on one link and for fewer on another.
// Weights of 1 everywhere are the unweighted engine's arithmetic exactly.
func (e *Engine) weighRoute(route []LinkID, w []float64) {
	if len(route) == 0 || len(w) != len(route) {
		panic("simnet: weighRoute: empty route or weights of another length")
	}
	if e.weights == nil {
		e.weights = map[*LinkID][]float64{}
	}
	e.weights[&route[0]] = w
}

// shareKey identifies a route and the weights given to it (weighRoute), by their slices.
type shareKey struct {
	route *LinkID
	w     *float64
}

// setShare gives links lo..hi−1 the share w of a flow's rate per crossing (Engine.share).
func (e *Engine) setShare(lo, hi LinkID, w float64) {
	if e.share == nil {
		e.share = make([]float64, len(e.links))
	}
	for l := lo; l < hi; l++ {
		e.share[l] = w
	}
}

// LinkShare is the part of a message's bytes one crossing of l carries: 1 but on the links a
// connection's queue pairs split over (Fabric.QPs), where it is 1/QPs.
func (e *Engine) LinkShare(l LinkID) float64 { return e.crossShare(l) }

// crossShare is the part of a flow's rate one crossing of l takes (Engine.share): 1 but on the
// links a connection's queue pairs split over.
func (e *Engine) crossShare(l LinkID) float64 {
	if int(l) < len(e.share) && e.share[l] > 0 {
		return e.share[l]
	}
	return 1
}

// shareRoute is route and its weights w (nil: 1 on every link) with each link's share folded in:
// route and w themselves where no link of the route has a share; else the route with each link
// once, in the order of its first crossing, weighing the sum of its crossings' shares (two queue
// pairs of a connection that hash to the same link load it twice as one does), built once per
// route and weights (the same slices for the same arguments, as the engine's route caches want).
func (e *Engine) shareRoute(route []LinkID, w []float64) ([]LinkID, []float64) {
	split := false
	for _, l := range route {
		if int(l) < len(e.share) && e.share[l] > 0 {
			split = true
			break
		}
	}
	if !split {
		return route, w
	}
	k := shareKey{route: &route[0]}
	if len(w) > 0 {
		k.w = &w[0]
	}
	if sr, ok := e.shareRoutes[k]; ok && sr.n == len(route) {
		return sr.route, sr.w
	}
	sr := sharedRoute{n: len(route)}
	for i, l := range route {
		x := e.crossShare(l)
		if w != nil {
			x *= w[i]
		}
		if j := slices.Index(sr.route, l); j >= 0 {
			sr.w[j] += x
			continue
		}
		sr.route = append(sr.route, l)
		sr.w = append(sr.w, x)
	}
	if e.shareRoutes == nil {
		e.shareRoutes = map[shareKey]sharedRoute{}
	}
	e.shareRoutes[k] = sr
	return sr.route, sr.w
}

// sharedRoute is a route with its links' shares folded in (shareRoute), for a route of n links.
type sharedRoute struct {
	n     int
	route []LinkID
	w     []float64
}

// weighted reports whether some flow may have weights (weighRoute, or a link's share).
func (e *Engine) weighted() bool { return e.weights != nil || e.share != nil }

// weight is f's weight on route[i].
func (f *flow) weight(i int) float64 {
	if f.w == nil {
		return 1
	}
	return f.w[i]
}

// cntEps is the weight below which a link's unfrozen count is taken as none: weights are sums
// of fractions of small integers, so a residue is rounding, never a flow.
const cntEps = 1e-9

func (e *Engine) scheduleDone(id FlowID) {
	f := &e.flows[id]
	e.seq++
	f.doneAt, f.dseq = e.now+transferTime(f.left, f.rate), e.seq
	e.fhSet(id)
}

// fhEntry is an entry of the completion heap: a flow's completion time and schedule order, kept
// in the heap so that its comparisons do not reach into the flows.
type fhEntry struct {
	t   Time
	seq uint64
	id  FlowID
}

// fhLess orders completions by (time, schedule order), a strict total order (the order is
// unique): any heap pops them in the same sequence.
func fhLess(a, b *fhEntry) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

// fhUp moves entry x up from slot i (a hole) to its place.
func (e *Engine) fhUp(i int, x fhEntry) {
	fh := e.fh
	for i > 0 {
		p := (i - 1) / 2
		if !fhLess(&x, &fh[p]) {
			break
		}
		fh[i] = fh[p]
		e.flows[fh[i].id].hpos = int32(i)
		i = p
	}
	fh[i] = x
	e.flows[x.id].hpos = int32(i)
}

// fhDown moves entry x down from slot i (a hole) to its place.
func (e *Engine) fhDown(i int, x fhEntry) {
	fh := e.fh
	n := len(fh)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && fhLess(&fh[r], &fh[l]) {
			m = r
		}
		if !fhLess(&fh[m], &x) {
			break
		}
		fh[i] = fh[m]
		e.flows[fh[i].id].hpos = int32(i)
		i = m
	}
	fh[i] = x
	e.flows[x.id].hpos = int32(i)
}

// fhSet inserts flow id into the completion heap or moves it to its new key (f.doneAt, f.dseq).
func (e *Engine) fhSet(id FlowID) {
	f := &e.flows[id]
	x := fhEntry{f.doneAt, f.dseq, id}
	if f.hpos < 0 {
		e.fh = append(e.fh, x)
		e.fhUp(len(e.fh)-1, x)
		return
	}
	i := int(f.hpos)
	if i > 0 && fhLess(&x, &e.fh[(i-1)/2]) {
		e.fhUp(i, x)
	} else {
		e.fhDown(i, x)
	}
}

// fhRemove takes flow id out of the completion heap.
func (e *Engine) fhRemove(id FlowID) {
	f := &e.flows[id]
	i := int(f.hpos)
	if i < 0 {
		return
	}
	f.hpos = -1
	last := len(e.fh) - 1
	x := e.fh[last]
	e.fh = e.fh[:last]
	if i == last {
		return
	}
	if i > 0 && fhLess(&x, &e.fh[(i-1)/2]) {
		e.fhUp(i, x)
	} else {
		e.fhDown(i, x)
	}
}

// finish removes a completed flow from its links and frees its id.
func (e *Engine) finish(id FlowID) {
	f := &e.flows[id]
	if len(f.route) > 0 {
		e.ended = append(e.ended, endedFlow{&f.route[0], len(f.route), f.maxr, f.rate})
	}
	if e.obs != nil && f.counted {
		e.told(f, f.rate, 0, -1)
	}
	if ft := f.filt; ft != nil {
		e.finishLean(f, ft)
	} else {
		e.finishLinks(f)
	}
	if f.counted {
		e.nact--
		f.counted = false
	}
	f.active = false
	f.route = nil
	f.w = nil
	f.filt = nil
	e.free = append(e.free, id)
}

// finishLinks takes completed flow f off the links of its route.
func (e *Engine) finishLinks(f *flow) {
	// The flow is complete: its links carried exactly what it had left at its last rate change
	// (rate × elapsed would carry the picosecond rounding of the completion time).
	for i, l := range f.route {
		lk := &e.links[l]
		lk.bytes += f.left * f.weight(i)
		if e.unlink(f, i, l) {
			lk.busy += e.now - lk.since
		}
	}
}

// unlink takes flow f off link l, the i-th of its route (its relaxed load with it), and marks l
// for the next rate computation; it reports whether l carries no flow now.
func (e *Engine) unlink(f *flow, i int, l LinkID) bool {
	lk := &e.links[l]
	if lk.relaxed {
		lk.load -= float64(f.rate) * f.weight(i)
		if len(lk.flows) == 1 {
			// Empty from now on: no rounding left over, and left out again until it is over.
			lk.load = 0
			lk.lazy = !e.Strict
		}
	}
	p := f.pos[i]
	last := len(lk.flows) - 1
	if int(p) != last {
		other, j := lk.flows[last], lk.fj[last]
		lk.flows[p], lk.fj[p] = other, j
		e.flows[other].pos[j] = p
	}
	lk.flows, lk.fj = lk.flows[:last], lk.fj[:last]
	e.markDirty(l)
	return last == 0
}

// finishLean is finishLinks on a lean engine for a flow started with filter ft: the links of
// ft only (the flow is on no other list), no statistics.
func (e *Engine) finishLean(f *flow, ft *routeFilt) {
	for _, i := range ft.pos {
		e.unlink(f, int(i), f.route[i])
	}
	if len(ft.pos) == 0 {
		e.markDirty(f.route[0])
	}
}

// routeFilt is what a lean engine walks of a route (by its slice's identity): the positions of
// the links a rate computation may hold — all but those left out for good (lazy and not relaxed:
// pruneImplied's, unbounded links; no link of those is ever enforced in a Run: activate enforces
// relaxed links only), in route order — and of its relaxed links (their loads are kept). A lean
// flow is on no list of the links left out: no rate computation reads those lists (such a link is
// never in a component), nor marks them (the closure and newRate skip them, which only ever marked
// them out of the component), so leaving them out changes no rate and no order of operations.
// The rate computation reads the links of pos and the route's weights on them (w, nil where the
// route has none: those of wsrc, the flow's) from here, without going through the route.
type routeFilt struct {
	n     int
	pos   []int32
	rel   []int32
	links []LinkID  // links[k] = route[pos[k]]
	w     []float64 // w[k] = wsrc[pos[k]]
	wsrc  []float64 // the route's weights it was built with
}

// filtOf is route's filter for weights w (the flow's: nil or weighRoute's), built the first time
// it is asked for in a Run.
func (e *Engine) filtOf(route []LinkID, w []float64) *routeFilt {
	if ft, ok := e.filts[&route[0]]; ok && ft.n == len(route) && sameWeights(ft.wsrc, w) {
		return ft
	}
	ft := &routeFilt{n: len(route), wsrc: w}
	for j, l := range route {
		lk := &e.links[l]
		if lk.lazy && !lk.relaxed {
			continue
		}
		ft.pos = append(ft.pos, int32(j))
		ft.links = append(ft.links, l)
		if w != nil {
			ft.w = append(ft.w, w[j])
		}
		if lk.relaxed {
			ft.rel = append(ft.rel, int32(j))
		}
	}
	if e.filts == nil {
		e.filts = map[*LinkID]*routeFilt{}
	}
	e.filts[&route[0]] = ft
	return ft
}

// sameWeights reports whether a and b are the same slice (nil or the same array and length).
func sameWeights(a, b []float64) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// endedFlow is what replaced needs of a flow that completed in the current instant.
type endedFlow struct {
	route0 *LinkID // identity of its route slice
	n      int
	maxr   Rate
	rate   Rate
}

// replaced handles the common pipelined case without a rate computation: every flow started in
// this instant took the place of a flow that ended in it with the same route (the same slice) and
// the same cap. The multiset of (route, cap) on every link is then unchanged, so the max-min
// allocation is too: each new flow inherits the rate of the one it replaced and no other rate moves.
//
// The matching is linear in the flows of the instant: the ended flows are put in a hash table
// keyed by (route slice, cap), each started flow takes the first unused entry of its key.
func (e *Engine) replaced() bool {
	if e.NoShortcut || e.pendingRecompute || len(e.started) == 0 || len(e.started) != len(e.ended) {
		return false
	}
	if len(e.started) <= replacedLinear {
		return e.replacedLinear()
	}
	rt := &e.rtab
	rt.reset(len(e.ended))
	for j := range e.ended {
		rt.insert(&e.ended[j], int32(j))
	}
	rates := e.rateScratch[:0]
	for _, id := range e.started {
		f := &e.flows[id]
		if !f.active || len(f.route) == 0 {
			e.rateScratch = rates
			return false
		}
		j := rt.take(e.ended, &f.route[0], len(f.route), f.maxr)
		if j < 0 {
			e.rateScratch = rates
			return false
		}
		rates = append(rates, e.ended[j].rate)
	}
	e.rateScratch = rates
	e.inherit(rates)
	return true
}

// replacedLinear is replaced for a few flows: a scan of the ended ones per started flow.
func (e *Engine) replacedLinear() bool {
	used := e.usedScratch[:0]
	for range e.ended {
		used = append(used, false)
	}
	e.usedScratch = used
	rates := e.rateScratch[:0]
	for _, id := range e.started {
		f := &e.flows[id]
		if !f.active || len(f.route) == 0 {
			e.rateScratch = rates
			return false
		}
		found := -1
		for j := range e.ended {
			en := &e.ended[j]
			if !used[j] && en.route0 == &f.route[0] && en.n == len(f.route) && en.maxr == f.maxr {
				found = j
				break
			}
		}
		if found < 0 {
			e.rateScratch = rates
			return false
		}
		used[found] = true
		rates = append(rates, e.ended[found].rate)
	}
	e.rateScratch = rates
	e.inherit(rates)
	return true
}

// inherit gives the flows started in this instant the rates of the flows they replaced.
func (e *Engine) inherit(rates []Rate) {
	for i, id := range e.started {
		f := &e.flows[id]
		f.rate = rates[i]
		f.last = e.now
		e.scheduleDone(id)
		if ft := f.filt; ft != nil {
			for _, j := range ft.rel {
				e.addLoad(f.route[j], float64(f.rate)*f.weight(int(j)))
			}
		} else {
			for j, l := range f.route {
				if e.links[l].relaxed {
					e.addLoad(l, float64(f.rate)*f.weight(j))
				}
			}
		}
		if e.obs != nil {
			e.told(f, 0, f.rate, 0)
		}
	}
	e.dirty = e.dirty[:0]
	e.Shortcuts++
}

// replacedLinear is the number of started flows up to which replaced scans instead of hashing.
const replacedLinear = 16

// routeTable is an open-addressing hash table of the flows ended in an instant, keyed by their
// route slice (its first element's address and its length) and cap. Several entries may share a
// key; take returns them in insertion order. Resetting it costs its size, which is proportional
// to the flows of the instant, so replaced stays linear.
type routeTable struct {
	slot []int32 // index into ended + 1; 0: empty
	mask uint64
}

func (t *routeTable) reset(n int) {
	size := 1
	for size < 2*n {
		size *= 2
	}
	if cap(t.slot) >= size {
		t.slot = t.slot[:size]
		clear(t.slot)
	} else {
		t.slot = make([]int32, size)
	}
	t.mask = uint64(size - 1)
}

// routeKey hashes a route's identity: its first link and length, and the flow's cap. Two
// distinct slices of the same links hash alike; take compares the addresses.
func routeKey(r0 *LinkID, n int, maxr Rate) uint64 {
	return mix64(uint64(*r0)<<20 ^ uint64(n) ^ math.Float64bits(float64(maxr))*0x9e3779b97f4a7c15)
}

func (t *routeTable) insert(en *endedFlow, j int32) {
	i := routeKey(en.route0, en.n, en.maxr) & t.mask
	for t.slot[i] != 0 {
		i = (i + 1) & t.mask
	}
	t.slot[i] = j + 1
}

// take finds the first unused ended flow with this route and cap, marks it used (slot -1) and
// returns its index, or -1.
func (t *routeTable) take(ended []endedFlow, r0 *LinkID, n int, maxr Rate) int32 {
	i := routeKey(r0, n, maxr) & t.mask
	for t.slot[i] != 0 {
		if j := t.slot[i]; j > 0 {
			en := &ended[j-1]
			if en.route0 == r0 && en.n == n && en.maxr == maxr {
				t.slot[i] = -1 // a tombstone keeps later entries of the probe sequence reachable
				return j - 1
			}
		}
		i = (i + 1) & t.mask
	}
	return -1
}

// observer is told of the rate changes of an engine's flows: rateChanged after every change
// (active is +1 when the flow starts, at rate 0 unless it crosses no link, -1 when it completes
// and its rate drops to 0, else 0), settled once every instant's rates are computed.
type observer interface {
	rateChanged(tag int64, old, new Rate, active int)
	settled()
}

// evRecompute is the engine's own event: a deferred rate computation (RateInterval).
const evRecompute int32 = -2

// nextTime is the time of the earliest pending event or completion.
func (e *Engine) nextTime() Time {
	switch {
	case e.h.len() == 0:
		return e.fh[0].t
	case len(e.fh) == 0:
		return e.h.top().t
	}
	return min(e.h.top().t, e.fh[0].t)
}

// Run handles events until none is left and returns the time of the last one. It returns
// ErrStalled if flows remain that can never complete.
// eventsSimulated counts the events every engine of the process has handled, in blocks of
// eventBlock (EventsSimulated).
var eventsSimulated atomic.Uint64

const eventBlock = 1 << 16

// replayProgress is the replay a progress bar follows (ReplayProgress): one at a time, the first
// that asks (trackProgress, trackSteps), with where its simulated clock started, how far it has
// gone (at each block of events) and how far its caller expects it to go: in simulated time, or,
// where steps is set, in the schedule's steps done (the count the engine's progress func gives).
var replayProgress struct {
	e                  atomic.Pointer[Engine]
	start, now, expect atomic.Int64
	steps              atomic.Bool
}

// trackProgress lets a progress bar follow e's run, which its caller expects to take about
// expect of simulated time, unless another replay is followed; the returned func stops it.
func (e *Engine) trackProgress(expect Time) (untrack func()) {
	return e.trackProgressFrom(e.now, expect)
}

// trackProgressFrom is trackProgress for a run whose clock started at start, which a goroutine
// other than the one running e can ask for (it does not read e's clock: rankAhead).
func (e *Engine) trackProgressFrom(start, expect Time) (untrack func()) {
	return e.track(int64(start), int64(expect), nil)
}

// trackSteps lets a progress bar follow e's replay of a schedule of total steps, done() of which
// have run (asked at each block of events, on e's goroutine), unless another replay is followed;
// the returned func stops it.
func (e *Engine) trackSteps(total int64, done func() int64) (untrack func()) {
	return e.track(0, total, done)
}

// track is trackProgressFrom (steps nil: simulated time from start) and trackSteps (steps set:
// the steps it counts) alike: e takes the progress bar's one slot if it is free. Only a steps
// replay touches e itself (stepsDone), on e's goroutine; trackProgressFrom may be asked from
// another (rankAhead).
func (e *Engine) track(start, expect int64, steps func() int64) (untrack func()) {
	if expect <= 0 || !replayProgress.e.CompareAndSwap(nil, e) {
		return func() {}
	}
	if steps != nil {
		e.stepsDone = steps
	}
	replayProgress.steps.Store(steps != nil)
	replayProgress.start.Store(start)
	replayProgress.now.Store(0)
	replayProgress.expect.Store(expect)
	return func() {
		replayProgress.expect.Store(0)
		if steps != nil {
			e.stepsDone = nil
		}
		replayProgress.e.CompareAndSwap(e, nil)
	}
}

// Progress is how far the replay a progress bar follows has gone (ReplayProgress): Done of Expect
// in simulated time (Time units: a replay of every rank, against the time its call is expected to
// take, which it may pass), or, where Steps is set, Done of Expect steps of a schedule replayed
// whole.
type Progress struct {
	Done, Expect int64
	Steps        bool
}

// ReplayProgress returns how far the replay a progress bar follows has gone, and false where none
// is followed: a long replay of every rank, or of a large schedule, which one call of `simccl run`
// can spend minutes in.
func ReplayProgress() (Progress, bool) {
	x := replayProgress.expect.Load()
	if x <= 0 {
		return Progress{}, false
	}
	return Progress{Done: replayProgress.now.Load(), Expect: x, Steps: replayProgress.steps.Load()}, true
}

// block counts a block of eventBlock events (EventsSimulated) and asks abort.
func (e *Engine) block() error {
	eventsSimulated.Add(eventBlock)
	if replayProgress.e.Load() == e {
		if e.stepsDone != nil {
			replayProgress.now.Store(e.stepsDone())
		} else {
			replayProgress.now.Store(int64(e.now) - replayProgress.start.Load())
		}
	}
	if e.abort != nil {
		return e.abort()
	}
	return nil
}

// EventsSimulated is how many events the engines of this process have handled so far, counted in
// blocks of 65,536: a progress figure that moves during one long simulation (simccl run's bar).
func EventsSimulated() uint64 { return eventsSimulated.Load() }

func (e *Engine) Run() (Time, error) {
	if e.Strict {
		for i := range e.links {
			e.links[i].lazy = false
		}
	}
	// Route metadata: the links left out for good are known from here on. Only with partial
	// rate computations: on the other engines (short routes, every link in the component: the
	// point-to-point executor's) keeping positions cost more than it saved (all_to_all on 128
	// nodes: 5.0 → 6.1 s).
	e.useMeta = e.hasRelease && e.partialOK && !e.Strict
	if e.metas != nil {
		clear(e.metas)
		for i := range e.flows {
			e.flows[i].meta = nil
		}
	}
	clear(e.filts) // the flows keep theirs
	e.running = true
	defer func() { e.running = false }()
	if len(e.dirty) > 0 {
		e.recompute()
	}
	if e.obs != nil {
		e.obs.settled()
	}
	for e.h.len() > 0 || len(e.fh) > 0 {
		t := e.nextTime()
		e.now = t
		for {
			hOK := e.h.len() > 0 && e.h.top().t == t
			fOK := len(e.fh) > 0 && e.fh[0].t == t
			if !hOK && !fOK {
				break
			}
			if fOK && (!hOK || e.fh[0].seq < e.h.top().seq) {
				id := e.fh[0].id
				e.Events++
				if e.Events%eventBlock == 0 {
					if err := e.block(); err != nil {
						return e.now, err
					}
				}
				e.fhRemove(id)
				tag := e.flows[id].tag
				e.finish(id)
				e.handler.FlowDone(tag)
				continue
			}
			ev := e.h.pop()
			e.Events++
			if e.Events%eventBlock == 0 {
				if err := e.block(); err != nil {
					return e.now, err
				}
			}
			if ev.kind == evRecompute {
				// The tick: the computation below runs (pendingRecompute keeps the
				// shortcut of replaced off until it has, so that it cannot clear the
				// deferred changes' links with this instant's).
				continue
			}
			e.handler.Fire(ev.kind, ev.arg)
		}
		if len(e.dirty) > 0 && !e.replaced() {
			if e.RateInterval <= 0 || e.now >= e.nextRecompute {
				e.recompute()
				e.nextRecompute = e.now + e.RateInterval
				e.pendingRecompute = false
			} else {
				// Defer: the rates of this instant's changes are computed at the next tick.
				e.started, e.ended = e.started[:0], e.ended[:0]
				if !e.pendingRecompute {
					e.pendingRecompute = true
					e.seq++
					e.h.push(event{t: e.nextRecompute, seq: e.seq, kind: evRecompute})
				}
			}
		}
		e.started, e.ended = e.started[:0], e.ended[:0]
		if e.obs != nil {
			e.obs.settled()
		}
		if e.halted {
			e.halted = false
			return e.now, errHalted
		}
		if e.maxWork > 0 && e.CompVisited > e.maxWork {
			past := e.pastWork
			if past == nil {
				return e.now, errBudget
			}
			// The rest of the run with a rate interval (none: exact), up to hardWork; the next
			// computation waits for it.
			e.maxWork, e.pastWork = e.hardWork, nil
			if iv := past(); iv > 0 {
				e.RateInterval, e.nextRecompute = iv, e.now+iv
			}
		}
	}
	if e.nact > 0 {
		return e.now, fmt.Errorf("%w: %d flows left at %v", ErrStalled, e.nact, e.now)
	}
	return e.now, nil
}

// recompute assigns max-min fair rates (progressive filling) to the flows of the connected
// components that contain a dirty link, and reschedules the completions whose rate changed.
// Relaxed links that carry no more than their capacity are left out (relaxLink); one found over
// it is enforced and the rates are computed again.
func (e *Engine) recompute() {
	for {
		e.recompute1()
		if !e.activate() {
			break
		}
	}
	if len(e.enforced) > 0 {
		e.release()
	}
}

// relaxLink lets e leave link l out of its rate computations while the rates computed without it
// keep it within its capacity (checked after every computation). That changes no rate: the max-min
// fair allocation without a constraint, where it satisfies the constraint, is the allocation
// with it (it is the leximin-largest point of the larger feasible set, so of any subset holding
// it). A link found over its capacity is enforced until it carries no flow again. Components of
// the rate computation then stop at links that do not limit anything: the switch-to-switch links
// of a non-blocking fabric (NewCluster relaxes them) no longer join every flow into one.
func (e *Engine) relaxLink(l LinkID) {
	lk := &e.links[l]
	lk.relaxed, lk.lazy = true, !e.Strict
}

// releaseLink relaxes link l (relaxLink) and, once it is enforced, leaves it out again at the
// end of any rate computation that leaves its load under its capacity by more than
// releaseMargin, where relaxLink keeps it enforced until it carries no flow. That changes no
// rate either: a link under its capacity is no flow's bottleneck, so the max-min fair allocation
// without it is the one with it; from then on it is checked as any left-out link is. It is for
// links that carry flows without a break and bind only now and then (the node fold's stand-ins
// for switch links, nvlsfold.go): enforced, such a link joins the flows of every connection
// crossing it into one component of every rate computation, for as long as it carries any.
func (e *Engine) releaseLink(l LinkID) {
	e.relaxLink(l)
	e.links[l].release = true
	e.hasRelease = true
}

// releaseMargin is how far under its capacity (relative) a link of releaseLink must be to be
// left out again: a link that binds carries its capacity to rounding, and one left out at that
// load would be found over it at the next computation. Only the cost depends on it (1e-6 to
// 1e-2 measured alike on the 64-node fat tree of BENCHMARKS.md's speed9 section; 5% and more
// keep links enforced longer).
const releaseMargin = 1e-6

// release leaves out again the enforced links of releaseLink that are under their capacity.
func (e *Engine) release() {
	keep := e.enforced[:0]
	for _, l := range e.enforced {
		lk := &e.links[l]
		switch {
		case lk.lazy:
			// Emptied since (finish) and left out already.
		case e.Strict:
		case lk.load < float64(lk.cap)*(1-releaseMargin):
			lk.lazy = true
			e.Releases++
		default:
			keep = append(keep, l)
			continue
		}
		lk.listed = false
	}
	e.enforced = keep
}

// addLoad adds d to relaxed link l's load and queues it for the next check.
func (e *Engine) addLoad(l LinkID, d float64) {
	lk := &e.links[l]
	lk.load += d
	if lk.lazy && !lk.check {
		lk.check = true
		e.checks = append(e.checks, l)
	}
}

// activate enforces the left-out links found over their capacity, marking them dirty, and
// reports whether there was any.
func (e *Engine) activate() bool {
	any := false
	for _, l := range e.checks {
		lk := &e.links[l]
		lk.check = false
		if lk.lazy && lk.load > float64(lk.cap)*(1+relaxTolerance) {
			lk.lazy = false
			e.Activations++
			if lk.release {
				if e.StandInActs == 0 && len(e.lazyAtStandIn) > 0 {
					e.leaveOut(e.lazyAtStandIn)
				}
				if e.StandInActs == 0 && e.atStandIn != nil {
					e.atStandIn()
				}
				e.StandInActs++
			}
			if lk.release && !lk.listed {
				lk.listed = true
				e.enforced = append(e.enforced, l)
			}
			e.markDirty(l)
			any = true
		}
	}
	e.checks = e.checks[:0]
	return any
}

// routeMeta is what a rate computation's closure needs of a route (by its slice's identity) on
// an engine with links of releaseLink (stand-ins: a switch-bound fold's route crosses about 21 of
// them, and about 6 links left out for good, among 30): the positions of the links it may find
// in a component, in route order, apart from the links of releaseLink, which it looks up among
// the few enforced at the time (activeRel). Links that are neither relaxed nor in any component
// (pruneImplied's, unbounded switch links) stay out for the whole replay, and the closure skips
// them: it would mark them seen and out of the component, which changes nothing.
type routeMeta struct {
	n      int     // the route's length
	full   bool    // every position: the closure walks the route
	pos    []int32 // the positions of the links a component may hold, but those of releaseLink
	relID  []LinkID
	relPos []int32 // the links of releaseLink (relID, sorted) and their positions
	relOrd []int32 // those positions in route order
	ver    uint64  // the Engine.activeVer that merged was built for (0: none)
	merged []int32 // pos with the positions of the enforced links of releaseLink the route crosses
}

// routeMetaOf is route's metadata, built the first time it is asked for in a Run.
func (e *Engine) routeMetaOf(route []LinkID) *routeMeta {
	if len(route) == 0 {
		return &routeMeta{full: true}
	}
	if m, ok := e.metas[&route[0]]; ok && m.n == len(route) {
		return m
	}
	m := &routeMeta{n: len(route)}
	for j, l := range route {
		lk := &e.links[l]
		switch {
		case lk.release:
			m.relOrd = append(m.relOrd, int32(j))
		case lk.lazy && !lk.relaxed:
			// Left out for good.
		default:
			m.pos = append(m.pos, int32(j))
		}
	}
	m.full = len(m.pos) == len(route)
	if len(m.relOrd) > 0 {
		ord := slices.Clone(m.relOrd)
		slices.SortFunc(ord, func(a, b int32) int { return int(route[a]) - int(route[b]) })
		for _, j := range ord {
			m.relID, m.relPos = append(m.relID, route[j]), append(m.relPos, j)
		}
	}
	if e.metas == nil {
		e.metas = map[*LinkID]*routeMeta{}
	}
	e.metas[&route[0]] = m
	return m
}

// leaveOut leaves the links ls, which are not relaxed and limit no rate (unbounded), out of the
// rate computations for good: the same rates, summed in another order. The routes' metadata are
// built again (the closure skips those links from then on).
func (e *Engine) leaveOut(ls []LinkID) {
	for _, l := range ls {
		if lk := &e.links[l]; !lk.relaxed && math.IsInf(float64(lk.cap), 1) {
			lk.lazy = true
		}
	}
	if e.metas != nil {
		clear(e.metas)
		for i := range e.flows {
			e.flows[i].meta = nil
		}
	}
	clear(e.filts) // flows started from now on leave those links out too
}

// activeRel lists the links of releaseLink that are enforced now (not lazy), sorted, and
// changes activeVer where they are not those of the last call.
func (e *Engine) activeRel() {
	a := e.extraBuf[:0]
	for _, l := range e.enforced {
		if !e.links[l].lazy {
			a = append(a, int32(l))
		}
	}
	slices.Sort(a)
	e.extraBuf = a
	same := len(a) == len(e.activeR)
	for i := 0; same && i < len(a); i++ {
		same = LinkID(a[i]) == e.activeR[i]
	}
	if same && e.activeVer > 0 {
		return
	}
	e.activeR = e.activeR[:0]
	for _, l := range a {
		e.activeR = append(e.activeR, LinkID(l))
	}
	e.activeVer++
}

// positions returns the positions of f's route the closure must walk, in route order (nil: all
// of them): those of its metadata and those of the enforced links of releaseLink it crosses.
func (e *Engine) positions(f *flow) []int32 {
	m := f.meta
	if m == nil {
		m = e.routeMetaOf(f.route)
		f.meta = m
	}
	if m.full {
		return nil
	}
	if len(m.relID) == 0 || len(e.activeR) == 0 {
		return m.pos
	}
	if m.ver == e.activeVer {
		return m.merged
	}
	m.ver = e.activeVer
	extra := e.extraBuf[:0]
	for _, l := range e.activeR {
		if k, ok := slices.BinarySearch(m.relID, l); ok {
			extra = append(extra, m.relPos[k])
		}
	}
	slices.Sort(extra)
	e.extraBuf = extra
	out := m.merged[:0]
	a, b := m.pos, extra
	for len(a) > 0 && len(b) > 0 {
		if a[0] < b[0] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	out = append(append(out, a...), b...)
	m.merged = out
	return out
}

// closeMeta is recompute1's closure with route metadata (useMeta): from the links it has, the
// component's links and flows, the positions in its route of every flow's links in the component
// kept in inPos (inPos[fs.inLo:fs.inHi], fs = Engine.fs[f]) for newRateIn.
func (e *Engine) closeMeta(ep uint32, links []LinkID, flows []FlowID) ([]LinkID, []FlowID) {
	ls := e.ls
	weighted := e.weighted()
	inPos := e.inPos[:0]
	for i := 0; i < len(links); i++ {
		for _, fid := range e.links[links[i]].flows {
			fs := &e.fs[fid]
			if fs.epoch == ep {
				continue
			}
			fs.epoch = ep
			f := &e.flows[fid]
			flows = append(flows, fid)
			fs.inLo = int32(len(inPos))
			if ps := e.positions(f); ps != nil {
				route := f.route
				for _, j := range ps {
					l2 := route[j]
					s := &ls[l2]
					if s.epoch != ep {
						s.epoch, s.in, s.cnt = ep, !e.links[l2].lazy, 0
						if s.in {
							links = append(links, l2)
						}
					}
					if s.in {
						if weighted {
							if f.w != nil {
								s.cnt += f.w[j]
							} else {
								s.cnt++
							}
						}
						inPos = append(inPos, j)
					}
				}
				fs.inHi = int32(len(inPos))
				continue
			}
			if weighted && f.w != nil {
				w := f.w[:len(f.route)]
				for j, l2 := range f.route {
					s := &ls[l2]
					if s.epoch != ep {
						s.epoch, s.in, s.cnt = ep, !e.links[l2].lazy, 0
						if s.in {
							links = append(links, l2)
						}
					}
					if s.in {
						s.cnt += w[j]
						inPos = append(inPos, int32(j))
					}
				}
				fs.inHi = int32(len(inPos))
				continue
			}
			for j, l2 := range f.route {
				s := &ls[l2]
				if s.epoch != ep {
					s.epoch, s.in, s.cnt = ep, !e.links[l2].lazy, 0
					if s.in {
						links = append(links, l2)
					}
				}
				if s.in {
					if weighted {
						s.cnt++
					}
					inPos = append(inPos, int32(j))
				}
			}
			fs.inHi = int32(len(inPos))
		}
	}
	e.inPos = inPos
	return links, flows
}

// recompute1 is one rate computation of recompute.
func (e *Engine) recompute1() {
	e.started, e.ended = e.started[:0], e.ended[:0]
	e.Recomputes++
	e.epoch++
	ep := e.epoch
	if len(e.ls) < len(e.links) {
		e.ls = append(e.ls, make([]linkScratch, len(e.links)-len(e.ls))...)
	}
	if e.useMeta {
		e.activeRel()
	}
	if e.partialOK && len(e.activeR) > 0 && e.obs == nil && e.weights != nil && !e.Strict {
		// Stand-ins enforced: the part of the component that changed, if that is enough
		// (partial); else the whole component, in a computation of its own.
		if e.partial(ep) {
			return
		}
		e.epoch++
		ep = e.epoch
	}
	ls := e.ls
	links := e.compLinks[:0]
	flows := e.compFlows[:0]
	// A link is marked the first time the computation sees it, and is in its component unless it
	// is left out (lazy).
	for _, l := range e.dirty {
		if s := &ls[l]; s.epoch != ep {
			s.epoch, s.in, s.cnt = ep, !e.links[l].lazy, 0
			if s.in {
				links = append(links, l)
			}
		}
	}
	e.dirty = e.dirty[:0]
	// Breadth-first closure over link -> flows -> links. With weighted routes a link's count is
	// the sum of its flows' weights on it, added up here: flow by flow in the order of flows, as a
	// pass over flows after the closure would. With route metadata (useMeta) closeMeta walks the
	// routes by it and keeps, for newRateIn, the positions of a flow's links in the component.
	capped := e.capped[:0] // the component's capped flows, in the order of flows
	if e.useMeta {
		links, flows = e.closeMeta(ep, links, flows)
		capped = e.cappedOf(capped, flows)
	} else {
		weighted := e.weighted()
		for i := 0; i < len(links); i++ {
			for _, fid := range e.links[links[i]].flows {
				fs := &e.fs[fid]
				if fs.epoch == ep {
					continue
				}
				fs.epoch = ep
				f := &e.flows[fid]
				flows = append(flows, fid)
				if f.maxr > 0 {
					capped = append(capped, fid)
				}
				if ft := f.filt; ft != nil {
					// Lean: the links it may have in the component.
					if weighted && ft.w != nil {
						w := ft.w[:len(ft.links)]
						for j, l2 := range ft.links {
							s := &ls[l2]
							if s.epoch != ep {
								s.epoch, s.in, s.cnt = ep, !e.links[l2].lazy, 0
								if s.in {
									links = append(links, l2)
								}
							}
							if s.in {
								s.cnt += w[j]
							}
						}
						continue
					}
					for _, l2 := range ft.links {
						s := &ls[l2]
						if s.epoch != ep {
							s.epoch, s.in, s.cnt = ep, !e.links[l2].lazy, 0
							if s.in {
								links = append(links, l2)
							}
						}
						if weighted && s.in {
							s.cnt++
						}
					}
					continue
				}
				if weighted && f.w != nil {
					w := f.w[:len(f.route)]
					for j, l2 := range f.route {
						s := &ls[l2]
						if s.epoch != ep {
							s.epoch, s.in, s.cnt = ep, !e.links[l2].lazy, 0
							if s.in {
								links = append(links, l2)
							}
						}
						if s.in {
							s.cnt += w[j]
						}
					}
					continue
				}
				for _, l2 := range f.route {
					s := &ls[l2]
					if s.epoch != ep {
						s.epoch, s.in, s.cnt = ep, !e.links[l2].lazy, 0
						if s.in {
							links = append(links, l2)
						}
					}
					if weighted && s.in {
						s.cnt++
					}
				}
			}
		}
	}
	e.compLinks, e.compFlows = links, flows
	e.CompVisited += uint64(len(flows))
	e.CompLinks += uint64(len(links))
	// Progressive filling. Every link starts with its full capacity shared by its flows; the link
	// (or per-flow cap) with the smallest fair share is the next bottleneck: its unfrozen flows get
	// that share and are removed from every other link they cross.
	sh := &e.sh
	sh.a = sh.a[:0]
	for _, l := range links {
		lk, s := &e.links[l], &ls[l]
		s.rem = float64(lk.cap)
		if !e.weighted() {
			s.cnt = float64(len(lk.flows))
		}
		if s.cnt > 0 {
			share := s.rem / s.cnt
			if share == 0 {
				share = 0 // not -0: the heap orders shares by their bits (shareHeap.pop)
			}
			sh.push(shareEntry{share: share, ref: int32(l)})
		}
	}
	// Per-flow caps: one heap entry per distinct cap value (a channel's CTA rate is shared by
	// thousands of flows). When the smallest pending value is a cap c, every unfrozen flow capped
	// at c gets c at once: freezing one of them leaves every link's share at least c, so the
	// result is the one per-flow entries would give.
	e.capped = capped
	e.groupCaps(capped)
	for j, c := range e.capVals {
		sh.push(shareEntry{share: c, ref: ^int32(j)})
	}
	// A link's fair share rem/cnt never falls when a flow crossing it is frozen (the flow gets
	// the smallest share, at most this link's), so each link keeps one heap entry, a lower bound
	// of its share: popped, an entry whose link's share has grown goes back with the new share,
	// and one that has not is the smallest share of all. Once every flow has its rate, the
	// entries left can change nothing.
	e.nfrozen = 0
	for sh.len() > 0 && e.nfrozen < len(flows) {
		se := sh.pop()
		if se.ref < 0 {
			j := ^se.ref
			for _, fid := range e.capFlows[e.capOff[j]:e.capOff[j+1]] {
				if e.fs[fid].frozen != ep {
					if e.useMeta {
						e.newRateIn(fid, se.share)
					} else {
						e.newRate(fid, se.share)
					}
				}
			}
			continue
		}
		share, ok := e.linkShare(sh, se)
		if !ok {
			continue
		}
		for _, fid := range e.links[se.ref].flows {
			if e.fs[fid].frozen != ep {
				if e.useMeta {
					e.newRateIn(fid, share)
				} else {
					e.newRate(fid, share)
				}
			}
		}
	}
}

// newRate gives flow fid its rate r in the current rate computation: it freezes the flow, moves
// it to its new rate where that changed (applyRate) and takes it off the links of its route
// (their new shares are pushed when next popped). Each link's state is updated once per flow,
// so the order of the two passes changes no result.
func (e *Engine) newRate(fid FlowID, r float64) {
	f := &e.flows[fid]
	e.fs[fid].frozen = e.epoch
	e.nfrozen++
	e.applyRate(fid, r)
	ls := e.ls
	if ft := f.filt; ft != nil {
		if ft.w == nil {
			for _, l := range ft.links {
				if s := &ls[l]; s.in {
					s.rem -= r
					if s.rem < 0 {
						s.rem = 0
					}
					s.cnt--
				}
			}
			return
		}
		w := ft.w[:len(ft.links)]
		for j, l := range ft.links {
			if s := &ls[l]; s.in {
				s.rem -= r * w[j]
				if s.rem < 0 {
					s.rem = 0
				}
				s.cnt -= w[j]
			}
		}
		return
	}
	if f.w == nil {
		for _, l := range f.route {
			if s := &ls[l]; s.in {
				s.rem -= r
				if s.rem < 0 {
					s.rem = 0
				}
				s.cnt--
			}
		}
		return
	}
	for i, l := range f.route {
		if s := &ls[l]; s.in {
			s.rem -= r * f.w[i]
			if s.rem < 0 {
				s.rem = 0
			}
			s.cnt -= f.w[i]
		}
	}
}

// newRateIn is newRate with route metadata (useMeta): the component's links of the flow are
// those closeMeta kept, where newRate tests every link of its route.
func (e *Engine) newRateIn(fid FlowID, r float64) {
	f := &e.flows[fid]
	fs := &e.fs[fid]
	fs.frozen = e.epoch
	e.nfrozen++
	e.applyRate(fid, r)
	ls := e.ls
	for _, j := range e.inPos[fs.inLo:fs.inHi] {
		s := &ls[f.route[j]]
		w := f.weight(int(j))
		s.rem -= r * w
		if s.rem < 0 {
			s.rem = 0
		}
		s.cnt -= w
	}
}

// cappedOf appends to dst the flows of flows that have a cap, in order.
func (e *Engine) cappedOf(dst, flows []FlowID) []FlowID {
	for _, fid := range flows {
		if e.flows[fid].maxr > 0 {
			dst = append(dst, fid)
		}
	}
	return dst
}

// groupCaps fills capVals, capOff and capFlows with the flows of capped (every one with a cap),
// grouped by cap (groups in the order of their first flow).
func (e *Engine) groupCaps(capped []FlowID) {
	vals := e.capVals[:0]
	cnt := e.capOff[:0]
	const few = 8 // distinct caps searched linearly; beyond, a hash table (capTable)
	t := &e.capTab
	// Each capped flow's group, in the order of flows.
	grp := e.capGrp[:0]
	for _, fid := range capped {
		c := float64(e.flows[fid].maxr)
		j := int32(-1)
		if len(vals) > few {
			j = t.find(vals, c)
		} else {
			for k := len(vals) - 1; k >= 0; k-- {
				if vals[k] == c {
					j = int32(k)
					break
				}
			}
		}
		if j < 0 {
			vals = append(vals, c)
			j = int32(len(vals) - 1)
			if len(vals) == few+1 {
				t.reset(vals)
			} else if len(vals) > few+1 {
				t.add(vals, j)
			}
			cnt = append(cnt, 0)
		}
		cnt[j]++
		grp = append(grp, j)
	}
	// Offsets (CSR), then fill.
	off := append(cnt, 0)
	sum := int32(0)
	for j := range vals {
		c := off[j]
		off[j] = sum
		sum += c
	}
	off[len(vals)] = sum
	fl := e.capFlows[:0]
	for range sum {
		fl = append(fl, 0)
	}
	fill := append(e.capFill[:0], off[:len(vals)]...)
	for k, fid := range capped {
		j := grp[k]
		fl[fill[j]] = fid
		fill[j]++
	}
	e.capFill, e.capGrp = fill, grp
	e.capVals, e.capOff, e.capFlows = vals, off, fl
}

// capTable finds a cap's group among many (groupCaps): open addressing on the cap's bits (caps
// are positive, never NaN, so equal bits are equal caps), the groups' values in vals.
type capTable struct {
	slot []int32 // group + 1; 0: empty
	mask uint64
	n    int
}

// reset empties t and adds the groups of vals.
func (t *capTable) reset(vals []float64) {
	size := 64
	for size < 4*len(vals) {
		size *= 2
	}
	if cap(t.slot) >= size {
		t.slot = t.slot[:size]
		clear(t.slot)
	} else {
		t.slot = make([]int32, size)
	}
	t.mask, t.n = uint64(size-1), 0
	for j := range vals {
		t.add(vals, int32(j))
	}
}

// add adds group j (value vals[j]), growing the table past half full.
func (t *capTable) add(vals []float64, j int32) {
	if 2*(t.n+1) > len(t.slot) {
		t.reset(vals[:j])
	}
	i := mix64(math.Float64bits(vals[j])) & t.mask
	for t.slot[i] != 0 {
		i = (i + 1) & t.mask
	}
	t.slot[i] = j + 1
	t.n++
}

// find is c's group, −1 where it has none (vals: the groups' values, as given to add).
func (t *capTable) find(vals []float64, c float64) int32 {
	i := mix64(math.Float64bits(c)) & t.mask
	for {
		j := t.slot[i]
		if j == 0 {
			return -1
		}
		if vals[j-1] == c {
			return j - 1
		}
		i = (i + 1) & t.mask
	}
}

// FlowRate returns the current rate of an active flow.
func (e *Engine) FlowRate(id FlowID) Rate { return e.flows[id].rate }

// shareEntry is an entry of the rate computation's heap: a link's share (ref: its id) or a per-flow
// cap (ref: ^ its group in capVals).
// linkShare is what a popped link entry se of the rate computation's heap gives: the link's fair
// share, where that is still the smallest pending (ok); nothing where every flow across the link
// is frozen (a weighted sum may keep a rounding residue), or where its share has grown since, in
// which case the entry goes back on the heap with the new share.
func (e *Engine) linkShare(sh *shareHeap, se shareEntry) (float64, bool) {
	s := &e.ls[se.ref]
	if s.cnt <= cntEps {
		return 0, false
	}
	share := s.rem / s.cnt
	if share > se.share {
		se.share = share
		sh.push(se)
		return 0, false
	}
	if share < 0 {
		share = 0
	}
	return share, true
}

type shareEntry struct {
	share float64
	ref   int32
}

type shareHeap struct{ a []shareEntry }

func (h *shareHeap) len() int { return len(h.a) }

func (h *shareHeap) push(e shareEntry) {
	// Sifted up with a hole instead of swaps: the same comparisons, so the same array.
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

func (h *shareHeap) pop() shareEntry {
	// Bottom-up (Floyd): the hole left at the root goes down the path of smaller children to a
	// leaf, then the last entry x goes up that path while its parent is not smaller than x. The
	// path's shares do not decrease going down, so x lands where a sift-down stopping at the first
	// child not smaller than x puts it, and every entry of the path where that sift-down leaves
	// it: the same array, ties included, with one comparison a level instead of two. The slot
	// just past the heap holds +Inf while the hole goes down, so that a node whose right child is
	// that slot picks its left child as a bounds test would, without a branch (shares are never
	// NaN, and as non-negative floats they order as their bits do).
	a := h.a
	e := a[0]
	n := len(a) - 1
	x := a[n]
	h.a = a[:n]
	if n == 0 {
		return e
	}
	a[n].share = math.Inf(1)
	i := 0
	for r := 2; r < len(a); r = 2*i + 2 {
		_, b := bits.Sub64(math.Float64bits(a[r].share), math.Float64bits(a[r-1].share), 0)
		m := r - 1 + int(b)
		a[i] = a[m]
		i = m
	}
	for i > 0 {
		p := (i - 1) / 2
		if a[p].share < x.share {
			break
		}
		a[i] = a[p]
		i = p
	}
	a[i] = x
	return e
}

// pruneImplied leaves out of every rate computation the links whose constraint another link
// implies, given every route the engine's flows will take (routes calls yield once per route,
// repeats allowed). Link l is implied by l' where every route that crosses l crosses l' and l'
// has no more capacity (ties: the lower id stays): the flows on l are then always a subset of
// those on l', so their rates, which l' keeps within its capacity, keep l within its own, and the
// max-min fair allocation is the same without l (a constraint that the others imply changes no
// feasible point). On weighted routes (weighRoute) each link's capacity is taken over the
// route's weight on it, route by route: a flow of weight w on l and w' on l' takes w/cap(l) of
// l's capacity for every w'/cap(l') of the capacity of l', so l' keeps l within its own where
// cap(l')/w' ≤ cap(l)/w on every route through l (an order on each route, so no two links imply
// each other; unweighted, the capacities themselves). Relaxed links are neither left out here
// nor used to imply others. On a path GPU → PCIe switch → NIC it leaves the PCIe links out
// wherever only the NIC's flows cross them.
func (e *Engine) pruneImplied(routes func(yield func([]LinkID))) {
	cand := map[LinkID][]LinkID{} // for each link seen: the links every route through it crosses
	var tmp []LinkID
	routes(func(route []LinkID) {
		var w []float64
		if e.weights != nil && len(route) > 0 {
			w = e.weights[&route[0]]
		}
		if e.share != nil && len(route) > 0 {
			// As StartFlow gives it to a flow: links crossed side by side once, weighted by
			// their share (shareRoute).
			route, w = e.shareRoute(route, w)
		}
		ratio := func(i int) float64 { // route[i]'s capacity over the route's weight on it
			c := float64(e.links[route[i]].cap)
			if w != nil {
				c /= w[i]
			}
			return c
		}
		below := func(j, i int) bool { // route[j] may imply route[i] on this route
			a, b := route[j], route[i]
			ra, rb := ratio(j), ratio(i)
			return !e.links[a].relaxed && (ra < rb || (ra == rb && a < b))
		}
		for i, l := range route {
			if e.links[l].relaxed {
				continue
			}
			c, seen := cand[l]
			if !seen {
				c = nil
				for j, o := range route {
					if o != l && below(j, i) && !slices.Contains(c, o) {
						c = append(c, o)
					}
				}
				cand[l] = c
				continue
			}
			if len(c) == 0 {
				continue
			}
			tmp = tmp[:0]
			for _, o := range c {
				if j := slices.Index(route, o); j >= 0 && below(j, i) {
					tmp = append(tmp, o)
				}
			}
			cand[l] = append(c[:0], tmp...)
		}
	})
	for l, c := range cand {
		if len(c) > 0 {
			e.links[l].lazy = true
		}
	}
}
