package simnet

import (
	"errors"
	"math"
	"slices"

	"github.com/simccl/simccl/coll"
)

// The PAT fold (pat-fold).
//
// PAT runs with one GPU a node, and every rank's program is the same relative to the rank: it
// walks the blocks by their position relative to itself and sends each to the ranks 2^k ahead
// (all-gather) or receives from them (reduce-scatter). Rotating the ranks maps the schedule onto
// itself, and it maps the routes onto each other too wherever the fabric's own links (leaf
// uplinks, spine links) are left out: a node's links and NIC ports move with the node. Those
// switch-to-switch links are the ones the engine relaxes (relax.go); on a non-blocking fabric
// what crosses them is implied by the NIC ports that feed them, so leaving them out changes no
// rate while none is over its capacity, which is checked.
//
// The fold replays S = R representatives (R the smallest rotation of the nodes under which the
// remaining links map onto each other: 1 on a non-blocking fabric; the rotation under which the
// routes' latencies map too with Exact) of the schedule's n ranks: coll.CompilePATFold's quotient
// schedule, in which representative r's message to rank r′ is its message to r′ mod S on a
// connection of its own per distance, routed as the real connection of r with r′ with r′'s
// node links moved to those of r′ mod S. Every member r + jS of r's orbit moves in lockstep with
// r, so the replay's time is the schedule's. The switch-to-switch links are left out of the rate
// computations (unbounded) and checked after every instant against the loads of every real
// connection (relaxCheck): the rates of the quotient connections that the real member
// connections crossing them stand for. The real connections through the spine differ in
// latency from those within a leaf; unless Exact, a quotient connection takes its members' mean
// latency (latency-mean), as the symmetric ring replay does.
//
// At 1,024 one-GPU nodes a PAT all-gather's schedule has 4 M steps (n² a chunk and channel) and
// until 2026-11-29 the call ran Ring instead; its fold has n a chunk and channel.
//
// Where the check finds a link over its capacity (ECMP hashes two flows onto one uplink) the
// replay is the ECMP mean model. For an all-gather it stands where the largest backlog is small
// (meanTooFar), as for the ring and tree replays: each step waits for one message, its block's
// parent's. A reduce-scatter's inner step waits for every child of its block, so the slowest of
// several hashed flows sets it, which a mean does not see: measured against the whole schedule
// on 512 one-GPU nodes at 16 MiB, the mean model was +1.23% (2 nodes a leaf) and −1.24% (the
// 2:1 three-tier fat tree) off where meanTooFar let it stand, and 22% fast on 64 nodes where it
// did not; all-gathers in the same cells were within 0.03%. A reduce-scatter's fold therefore
// stands only under a bar ten times tighter, its largest backlog within patRSBacklog of its time
// and no bound on the overload (since stop 72; until then any link over its capacity refused it,
// and a 1 MiB call on 1,000 GH200 nodes replayed its whole schedule in 17 s): a latency-bound call's
// collisions are brief, each a few messages of a few KiB, and cost nothing the replay of the whole
// schedule can see. Above the bar, and with Exact, the replay halts or is dropped and the call is
// timed as without the fold. Under rail routing the check watches as under ECMP (an all-gather's
// since stop 68, a reduce-scatter's since stop 72): rail routing puts a leaf's uplinks over their
// capacity where the last leaf is part full (1,000 one-GPU nodes with 32 a leaf), and the fold
// stands under the same bars, its mode saying rail-over. Against the whole schedule: docs/cluster.md, PAT.

// ConnRouter is a Router that routes each connection of a schedule itself (Simulate asks it
// rather than Route): the PAT fold's connections of different distances between the same two
// representatives take different routes.
type ConnRouter interface {
	RouteConn(cn coll.Conn) ([]LinkID, LinkClass)
}

// patFoldRouter routes a PAT fold's quotient schedule: per connection, the route built by
// patFold.
type patFoldRouter struct {
	S     int
	route [][]LinkID
	class []LinkClass
}

func (r *patFoldRouter) NumRanks() int { return r.S }

// Route is not asked for a connection (RouteConn is); what a rank does alone needs no route.
func (r *patFoldRouter) Route(src, dst, ch int, buf []LinkID) ([]LinkID, LinkClass) {
	return buf[:0], ClassNVLink
}

func (r *patFoldRouter) RouteConn(cn coll.Conn) ([]LinkID, LinkClass) {
	return r.route[cn.ID], r.class[cn.ID]
}

// patFold times PAT plan by the fold (above). It returns nil, and no error, where the fold does
// not apply: not one GPU a node, a fabric whose switch links are not all implied by the NIC
// ports (oversubscribed), no rotation short of the whole cluster, a route that would cross a
// link twice, or a check that halted (a reduce-scatter over capacity, Exact) or found the mean
// model too far.
func (m *Machine) patFold(plan coll.Plan, tm Timing, opt RunOptions) (*Result, string, error) {
	if plan.Algo != coll.PAT || (plan.Func != coll.AllGather && plan.Func != coll.ReduceScatter) {
		return nil, "", nil
	}
	e, cl, err := m.engine()
	if err != nil {
		return nil, "", err
	}
	n := cl.NumRanks()
	if cl.Node.NumGPUs != 1 || n < 2 || plan.NRanks != n {
		return nil, "", nil
	}
	peer := func(r, k int) int {
		if plan.Func == coll.AllGather {
			return (r + 1<<k) % n
		}
		return ((r-1<<k)%n + n) % n
	}
	nk := 0
	for d := 1; d < n; d <<= 1 {
		nk++
	}
	ch0, nch := plan.ChannelLo, max(plan.NChannels, 1)
	var buf []LinkID
	eachConn := func(f func(c, r, k int, route []LinkID, class LinkClass)) {
		for c := ch0; c < ch0+nch; c++ {
			for r := 0; r < n; r++ {
				for k := 0; k < nk; k++ {
					var class LinkClass
					buf, class = cl.Route(r, peer(r, k), c, buf[:0])
					f(c, r, k, buf, class)
				}
			}
		}
	}
	relax, kept := implied(e, func(yield func([]LinkID)) {
		eachConn(func(_, _, _ int, route []LinkID, _ LinkClass) { yield(route) })
	}, cl.standIn)
	if kept {
		return nil, "", nil // a stand-in bounds something: oversubscribed
	}
	var kinds, latKinds [5]bool
	kinds[kindNode] = true
	eachConn(func(_, _, _ int, route []LinkID, _ LinkClass) {
		for _, l := range route {
			if _, ok := relax(l); ok && e.links[l].lat > 0 {
				if cl.kindOf(l) == kindAgg {
					latKinds[kindPodMean] = true
				} else {
					latKinds[kindLeafMean] = true
				}
			}
		}
	})
	// A reduce-scatter's step waits for every child of its block, and the members' latencies
	// (within a leaf, across the spine) do not average out there as an all-gather's do: its fold
	// takes the rotation that keeps them where there is one (patRSExactLatency).
	rsExact := !opt.Exact && plan.Func == coll.ReduceScatter && patRSExactLatency
	R, latMean := cl.symmetry(kinds, latKinds, opt.Exact || rsExact)
	if rsExact && (R >= cl.NumNodes || plan.EstimatedSteps()*float64(R)/float64(n) > PATExactLatencySteps) {
		// None keeps them, or its fold would be long: the mean.
		R, latMean = cl.symmetry(kinds, latKinds, false)
	}
	if R >= cl.NumNodes {
		return nil, "", nil
	}
	S := R
	if opt.DryRun {
		// What the fold would try; whether a link goes over its capacity (ecmp-mean, or the
		// fold refused) only its replay says.
		if latMean {
			return &Result{}, "pat-fold, latency-mean", nil
		}
		return &Result{}, "pat-fold", nil
	}
	s, err := coll.CompilePATFold(plan, S)
	if err != nil {
		return nil, "", err
	}
	conn := make(map[[4]int]int, len(s.Conns))
	for _, cn := range s.Conns {
		conn[[4]int{cn.Channel, cn.From, cn.To, cn.ConnIndex}] = cn.ID
	}
	slot := func(c, r, k int) int {
		id, ok := conn[[4]int{c, r % S, peer(r, k) % S, coll.PATFoldConn + k}]
		if !ok {
			return -1
		}
		return id
	}

	q := foldedEngine(e, 1)
	for l := cl.swLo; l < cl.swHi; l++ {
		// Unbounded, they limit nothing: left out of the rate computations for good, and
		// checked instead.
		q.links[l].cap = Rate(math.Inf(1))
		q.links[l].relaxed, q.links[l].lazy = false, true
	}
	rt := &patFoldRouter{S: S, route: make([][]LinkID, len(s.Conns)), class: make([]LinkClass, len(s.Conns))}
	least := make([]Time, len(s.Conns))
	sum := make([]Time, len(s.Conns))
	members := make([]int, len(s.Conns))
	var pairs []uint64
	broken := false // a real connection without a quotient one, or a route crossing a link twice
	eachConn(func(c, r, k int, route []LinkID, class LinkClass) {
		id := slot(c, r, k)
		if id < 0 {
			broken = true
			return
		}
		for _, l := range route {
			if _, ok := relax(l); ok {
				pairs = append(pairs, relaxPair(l, int32(id)))
			}
		}
		lat := e.RouteLatency(route)
		sum[id] += lat
		members[id]++
		if rt.route[id] != nil && lat >= least[id] {
			return
		}
		// This member's route, its two nodes' links moved to its representatives'.
		from, to := r, peer(r, k)
		qr := make([]LinkID, 0, len(route)+1)
		for _, l := range route {
			if ml, ok := cl.moveNodeLink(l, from, from%S); ok {
				l = ml
			} else if ml, ok := cl.moveNodeLink(l, to, to%S); ok {
				l = ml
			}
			if slices.Contains(qr, l) {
				broken = true
			}
			qr = append(qr, l)
		}
		rt.route[id], rt.class[id], least[id] = qr, class, lat
	})
	if broken {
		return nil, "", nil
	}
	if latMean {
		// Each quotient connection's route is its least-latency member's; a link of latency
		// only brings it to its members' mean. (Without latMean the members' latencies are
		// equal.)
		latLink := map[Time]LinkID{}
		for id, route := range rt.route {
			if route == nil {
				continue
			}
			extra := Time(math.Round(float64(sum[id])/float64(members[id]))) - least[id]
			if extra <= 0 {
				continue
			}
			l, ok := latLink[extra]
			if !ok {
				l = q.AddLink("", Rate(math.Inf(1)), extra)
				q.links[l].lazy = true
				latLink[extra] = l
			}
			rt.route[id] = append(route, l)
		}
	}

	check := newRelaxCheck(e, pairs, len(s.Conns))
	// watch: the check only watches (under ECMP or rail routing; above).
	rail := cl.railRouted()
	watch := (cl.ecmp() || rail) && !opt.Exact
	sopt := Options{prune: true}
	if check != nil {
		check.e, check.halt = q, !watch
		check.budget = PATCheckWork
		sopt.watch = func(_ *coll.Schedule, conn func(int64) int32) observer {
			check.slot = conn
			return check
		}
	}
	res, err := Simulate(q, rt, s, tm, sopt)
	over := check.violated()
	switch {
	case len(over) > 0 && !watch:
		if err != nil && !errors.Is(err, errHalted) {
			return nil, "", err
		}
		return nil, "", nil // over capacity: not the fold
	case err != nil:
		return nil, "", err
	}
	unchecked := check != nil && check.gaveUp
	keep := patSurvey != nil && patSurvey(check.backlog(), res.Time)
	switch {
	case opt.MeanOversubscribed || keep:
	case plan.Func == coll.ReduceScatter:
		if unchecked || len(over) > 0 && rsTooFar(check, res.Time) {
			// Over its bar, or not known not to be (a check past its budget): not the fold.
			return nil, "", nil
		}
	case len(over) > 0 && !unchecked && meanTooFar(check, res.Time):
		return nil, "", nil
	}
	if latMean && plan.Func == coll.ReduceScatter && !opt.patFloor && !keep && plan.EstimatedSteps() <= coll.MaxSteps {
		// The members' mean latency, past the latency-bound sizes: the whole schedule, which
		// coll compiles (patMeanBandwidth).
		floor, err := m.patFloorTime(plan, opt)
		if err != nil {
			return nil, "", err
		}
		if floor > 0 && float64(res.Time-floor) > patMeanBandwidth*float64(res.Time) {
			return nil, "", nil
		}
	}
	mode := "pat-fold"
	if latMean {
		mode += ", latency-mean"
	}
	switch {
	case len(over) > 0 && rail:
		mode += ", rail-over"
	case len(over) > 0:
		mode += ", ecmp-mean"
	}
	if unchecked {
		mode += ", unchecked"
	}
	return res, mode, nil
}

// patSurvey, where set (tests only: TestPATFoldSurvey with SIMCCL_PAT_KEEP), is told a fold's
// largest backlog and time before its bars are applied, and keeps the fold whatever they say
// where it returns true: how the survey measured the bars (patRSBacklog, patMeanBandwidth).
var patSurvey func(backlog, t Time) bool

// patFloorTime is the latency floor of a PAT call's fold: the same call of one element a rank,
// planned as PAT and folded alike (0 where that call is not PAT or does not fold), once per
// machine (patFloorCache).
func (m *Machine) patFloorTime(plan coll.Plan, opt RunOptions) (Time, error) {
	key := patFloorKey{f: plan.Func, dt: plan.DataType, op: plan.Op, meanOversubscribed: opt.MeanOversubscribed}
	fl := m.tmpl.floor.get(key, func() patFloor {
		call := coll.Call{Func: plan.Func, Count: 1, DataType: plan.DataType, Op: plan.Op}
		fp, _, err := m.plan(call, func(a coll.Algo) bool { return a == coll.PAT })
		if err != nil || fp.Algo != coll.PAT {
			return patFloor{} // no PAT plan of one element: no floor, the fold stands
		}
		tm, err := m.PlanTiming(fp)
		if err != nil {
			return patFloor{err: err}
		}
		fo := RunOptions{MeanOversubscribed: opt.MeanOversubscribed, patFloor: true}
		res, _, err := m.patFold(fp, tm, fo)
		if err != nil || res == nil {
			return patFloor{err: err}
		}
		return patFloor{t: res.Time}
	})
	return fl.t, fl.err
}

// patMeanBandwidth is the largest part of a PAT reduce-scatter fold's time, beyond its latency
// floor (patFloorTime), under which the fold stands with its members' mean latency
// (latency-mean: no rotation keeps their latencies, as where the last leaf is part full); past
// it the call replays its whole schedule where coll compiles it (since stop 72). The mean is
// close while the call is latency-bound and parts from the schedule as bandwidth takes over
// (its ranks part, their flows meeting on links as the synchronized fold never has them):
// against the whole schedule on part-full fabrics (one-GPU DGX H100 nodes with 32 a leaf, rail
// routing, 100–1,000 nodes, 16 KiB–256 MiB; BENCHMARKS.md, stop 72) it was −0.44…0% where the
// bandwidth part was within 10% of the time (the floor taken at 16 KiB), −0.69 and −0.83% at 13.6
// and 10.9%, −1.33 and −1.35% at 13.1 and 13.3% (300 nodes at 24 MiB, 600 at 48 MiB), and −1.2…
// −15% from 17.8% on (−15% at 256 MiB on 300 and 600 nodes).
const patMeanBandwidth = 0.10

// rsTooFar reports whether a reduce-scatter's fold whose check found a link over its capacity,
// and whose replay took t, is too far from the whole schedule to stand: its largest backlog
// (relaxCheck.backlog) past patRSBacklog of t. The overload does not count: a latency-bound
// call's collisions put a link at 2–5 times its capacity for the few ns of a message and cost
// nothing (the survey below).
func rsTooFar(check *relaxCheck, t Time) bool {
	return check == nil || float64(check.backlog()) > patRSBacklog*float64(t)
}

// patRSBacklog is the largest backlog, over the fold's time, under which a reduce-scatter's fold
// stands where a hashed (or rail-routed) uplink went over its capacity: a tenth of the bar the
// other mean models keep (meanTooFar: twice the backlog within MaxCoarseError). It comes from the
// fold against the replay of the whole schedule on 96 cells (one-GPU DGX H100 nodes, ECMP, 64–512
// nodes with 2, 4, 8 and 32 a leaf, 16 KiB–64 MiB; BENCHMARKS.md, stop 72): on the 57 cells within
// the bar the fold was −0.14…+0.08% off the schedule but one, +0.80% (512 nodes with 2 a leaf at
// 16 MiB); the first cell off by more than 1% had 0.199% (512 nodes with 8 a leaf at 64 MiB,
// +1.25%), and past 0.3% cells were off by up to 16%.
const patRSBacklog = MaxCoarseError / 10

// PATCheckWork is the most signature updates the check of an all-gather's fold under ECMP makes
// (relaxCheck.budget). That check only watches: the replay's time is the same with it or
// without it, and it says whether a hashed link went over its capacity (the row's ecmp-mean)
// and whether the mean model is too far to stand (meanTooFar). Its work grows with the square
// of the nodes — every rate change of a quotient connection updates every link signature its
// members cross, about two links a node — while the replay's grows linearly: on one-GPU nodes
// at 1 GiB, 0.59 G updates and 5.8 s of 5.8 on 16,384 nodes, 25.7 s of which 1.9 s replay on
// 32,768, 578 s on 131,072. Past the budget the check stops, the row keeps the replay's time
// and its mode says `unchecked` (after `ecmp-mean` where a link was seen over before). 4 G
// updates is about 30 s of this machine's time. A reduce-scatter's fold whose check stopped
// does not stand (nothing then says its backlog stayed under rsTooFar's bar); with Exact the
// check halts the replay at the first link over and has no budget.
var PATCheckWork int64 = 1 << 30

// patRSExactLatency folds a reduce-scatter over the rotation that keeps its members' latencies
// where the fabric has one (Cluster.symmetry with exact: the nodes of a leaf, or of a pod), rather
// than over the smallest rotation with the members' mean latency (latency-mean). The mean is
// within 0.04% at 1 MiB but −7.1% at 64 and 256 MiB on 256 one-GPU DGX H100 nodes under rail
// routing (−1.7% on 128 at 64 MiB), where the rotation by the 32 nodes of a leaf is −0.009%
// (docs/cluster.md, PAT). Tests turn it off. PATExactLatencySteps bounds the steps of that fold
// (coll.Plan.EstimatedSteps × R / ranks; about 450 bytes a step): past it the mean stands (16,384
// one-GPU nodes at 64 MiB, 2.1 M steps: 8.1 s and 1.6 GB with the leaf's 32 representatives,
// 3.0 s and 0.7 GB with the mean, the same time to the µs: so many ranks make the call
// latency-bound).
var patRSExactLatency = true

// PATExactLatencySteps: see patRSExactLatency.
var PATExactLatencySteps = 1_000_000.0
