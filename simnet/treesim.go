package simnet

import (
	"errors"
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
	// MaxMessages; default MessageBudget). Counted on what is simulated: the representatives of the
	// symmetric replay, every (channel, rank) with PerRank.
	Merge       int
	MaxMessages int64
	// Strict keeps every link in the symmetric replay (no relaxed links, relax.go); tests use it
	// as the reference of the relaxed replay. Exact never settles for an approximation: where ECMP
	// hash collisions break the symmetric replay every rank is replayed whatever it costs, and
	// every chunk is simulated (no steady-state extrapolation). MeanOversubscribed lets the ECMP
	// mean model stand on an oversubscribed fabric too, where it ignores collisions on links that
	// bind (fast, but tens of percent off: docs/cluster.md).
	Strict, Exact, MeanOversubscribed bool
	// cache keeps the symmetric replay's partition between calls on one machine (Machine.Run).
	cache *treeCache
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
	// upNet, dnNet: whether the route crosses the network (ClassNet; Timing.NetStage)
	upNet []bool
	dnNet [][]bool
}

func (t *treeNet) vertices() int { return len(t.up) }

// routes yields the route of every connection.
func (t *treeNet) routes(yield func([]LinkID)) {
	for v := range t.up {
		if t.up[v] >= 0 {
			yield(t.upRoute[v])
		}
		for _, r := range t.dnRoute[v] {
			yield(r)
		}
	}
}

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
		upRoute: make([][]LinkID, nv), upLat: make([]Time, nv), dnRoute: make([][][]LinkID, nv), dnLat: make([][]Time, nv),
		upNet: make([]bool, nv), dnNet: make([][]bool, nv)}
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
				t.upNet[v] = class == ClassNet
			}
			for i, k := range tr.Down[rk] {
				t.kids[v] = append(t.kids[v], base+int32(k))
				t.kidIdx[base+int32(k)] = int8(i)
				route, class := r.Route(rk, k, c, nil)
				t.dnRoute[v] = append(t.dnRoute[v], route)
				t.dnLat[v] = append(t.dnLat[v], e.RouteLatency(route)+tm.StepLat[class][spec.Proto])
				t.dnNet[v] = append(t.dnNet[v], class == ClassNet)
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
	// cta is one CTA's data rate (Timing.CTARate; 0: not modelled). As in the schedule replay, a
	// channel's CTA is shared by its lanes: a non-root rank reduces up and broadcasts down on two
	// lanes at cta/2 each, the root runs one primitive on one lane at cta. Every message moves at
	// most at its lane's rate, and a leaf's receive copies the chunk out of the FIFO at that rate.
	cta   Rate
	mul   Time
	done  int64
	total int64
	end   Time
	dk    []Time // per chunk: when its last down step completed
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
	// Timing.NetStage (staged): the NIC's queue of every vertex's up connection, and of its
	// down connections from dnOff[v] on (one a kid); nicCap caps the NIC's stage
	// (Timing.PerFlowCap)
	staged bool
	nicCap Rate
	upNIC  nicQueues
	dnNIC  nicQueues
	dnOff  []int32
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
	// Relaxed is the number of links the symmetric replay left out and checked (relax.go);
	// Attempts the number of replays it took (more than one where a relaxed link was found over
	// its capacity and the replay started again with it kept).
	Relaxed  int
	Attempts int
	// MeanBacklog, where the ECMP mean model stands although it was judged too far to (meanTooFar)
	// because the replay of every rank was past farMessages or farWork, is twice the largest
	// backlog of its links over its time (0 elsewhere).
	MeanBacklog float64
	// RateInterval, where the replay went past symWork flow visits, is the rate interval it took
	// from there (Engine.pastWork, treeSim.interval); 0: none.
	RateInterval Time
	// Visits and LinkVisits are the flows and the links the rate computations of the replay that
	// gave the time visited (Engine.CompVisited, CompLinks): its work.
	Visits, LinkVisits uint64
}

// Mode is the row mode of a tree replay: tree-compact (every chunk replayed: exact), tree-steady-C
// (C chunks replayed, the steady state extrapolated), tree-coarse-K (K chunks merged per
// message), followed by ", ecmp-mean" where the ECMP mean model stands for the exact replay.
func (r *TreeResult) Mode() string {
	mode := "tree-compact"
	switch {
	case r.Merge > 1:
		mode = fmt.Sprintf("tree-coarse-%d", r.Merge)
	case r.Period > 0:
		mode = fmt.Sprintf("tree-steady-%d", r.Chunks)
	}
	if r.RateInterval > 0 {
		mode += ", rate-interval-" + intervalName(r.RateInterval)
	}
	if r.ECMPMean {
		mode += ", ecmp-mean"
	}
	return mode
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
	var relax func(LinkID) (LinkID, bool)
	// With ECMP the mean model may stand for the replay where nothing exact fits the budget,
	// unless Exact, or the fabric is oversubscribed (it is far off there) and
	// MeanOversubscribed does not allow it anyway.
	ecmp, mean := false, false
	if rx, ok := r.(relaxer); ok && !spec.Strict {
		var kept bool
		relax, kept = implied(e, full.routes, rx.standIn)
		ecmp = rx.ecmp()
		mean = ecmp && !spec.Exact && (!kept || spec.MeanOversubscribed)
	}
	maxMsg := spec.MaxMessages
	if maxMsg <= 0 {
		maxMsg = MessageBudget
	}
	// budgeted is how many of C (merged) chunks a replay of per connections simulates: all of
	// them, or past the message budget (with no Merge and not Exact) the first C0 (the steady
	// extrapolation adds the rest).
	budgeted := func(per int64, C int32) int32 {
		if spec.Merge == 0 && !spec.Exact && per*int64(C) > maxMsg {
			if c0 := max(minSteadyChunks, maxMsg/per/8*8); c0 < int64(C) {
				return int32(c0)
			}
		}
		return C
	}
	// replayOn runs the all-reduce on net over run's links (q: the quotient it stands for, nil
	// for the per-rank replay), simulating at most most chunks (0: as the message budget allows).
	replayOn := func(net *treeNet, run *Engine, q *treeQuotient, most int32) (*treeRun, error) {
		tr := &treeRun{net: net, run: run, q: q, per: net.slots(), merge: max(spec.Merge, 1)}
		if int64(tr.merge) > nchunks {
			tr.merge = int(nchunks)
		}
		tr.C = int32((nchunks + int64(tr.merge) - 1) / int64(tr.merge))
		tr.sim = budgeted(tr.per, tr.C)
		if most > 0 && most < tr.sim {
			tr.sim = most
		}
		tr.x = newTreeSim(run, net, tr.sim, tm.PerFlowCap[spec.Proto], tm.CTARate, tr.merge)
		tr.x.stage(tm)
		for k := int32(0); k < tr.sim; k++ {
			m := min(int64(tr.merge), nchunks-int64(k)*int64(tr.merge))
			tr.x.bytes[k] = wire * float64(m)
		}
		// Busy times before the run, to scale what this run adds (per-rank extrapolation).
		if q == nil && tr.sim < tr.C {
			tr.busy0 = make([]Time, run.NumLinks())
			for l := range tr.busy0 {
				tr.busy0[l] = run.LinkBusy(LinkID(l))
			}
		}
		run.handler = tr.x
		tr.t0 = run.Now()
		startEvents := run.Events
		// Past symWork flow visits a replay whose rate computations visit many flows an event
		// (intervalVisits) goes on with a rate interval (treeSim.interval), where nothing else
		// bounds its work (the symmetric replays; the replay of every rank where nothing is
		// symmetric) and, where its bound is farWork, up to that bound. A replay under
		// exactWork, Exact and PerRank (the tests' reference) stay exact.
		if !spec.Exact && !spec.PerRank && run.RateInterval == 0 && run.pastWork == nil && (run.maxWork == 0 || run.maxWork > symWork) {
			run.maxWork, run.hardWork = symWork, run.maxWork
			// Judged at symWork on the visits an event so far, then, in a symmetric replay, on
			// each further block of symWork visits alone: one that went on exactly takes the
			// interval from a block that visited intervalBlockVisits flows an event, and one that
			// took it goes back to exact from a block under intervalVisits. A symmetric replay's
			// computations join classes across the call and grow as the chunks spread over the
			// trees; the replay of every rank keeps the first judgement (its computations grow
			// less and briefly, and batching the small ones after a burst cost more than it saved:
			// 16,384 PCIe nodes 178 s exactly, 235 s judged block by block).
			blockVisits, blockEvents := uint64(0), uint64(0)
			var past func() Time
			past = func() Time {
				iv := Time(0)
				if blockEvents == 0 {
					if float64(run.CompVisited) >= intervalVisits*float64(run.Events-startEvents) {
						iv = tr.x.interval(tr.t0, lanePerFlow(tm, spec.Proto))
					}
				} else {
					avg := float64(run.CompVisited-blockVisits) / float64(max(run.Events-blockEvents, 1))
					switch {
					case run.RateInterval == 0 && avg >= intervalBlockVisits:
						iv = tr.x.interval(tr.t0, lanePerFlow(tm, spec.Proto))
					case run.RateInterval > 0 && avg < intervalVisits:
						run.RateInterval = 0 // exact again
					}
				}
				if iv > 0 {
					tr.iv = iv
				}
				// The next block (the engine has put maxWork back to hardWork).
				blockVisits, blockEvents = run.CompVisited, run.Events
				if next := run.CompVisited + symWork; q != nil && (run.maxWork == 0 || next < run.maxWork) {
					run.hardWork, run.maxWork, run.pastWork = run.maxWork, next, past
				}
				return iv
			}
			run.pastWork = past
		}
		run.At(tr.t0+tm.Launch, evLaunch, 0)
		_, err := run.Run()
		tr.events = run.Events - startEvents
		if err == nil && tr.x.done != tr.x.total {
			err = fmt.Errorf("simnet: tree simulation stopped after %d of %d steps", tr.x.done, tr.x.total)
		}
		return tr, err
	}
	// replay runs the all-reduce on net over the links of a fresh engine (fresh: the engine and
	// the quotient it stands for). Where the steady extrapolation may stand (no Merge, not
	// Exact) and the budget would simulate more than twice minSteadyChunks, it first simulates
	// minSteadyChunks (the probe): a replay's work grows faster than its chunks (more of them in
	// flight in every rate computation), so where the probe's work times the square of the
	// chunk ratio is past treeWork the probe stands (tree-steady-32), else the longer replay
	// runs on a second fresh engine. guess, where positive, is the whole replay's work as an
	// earlier replay suggests it.
	replay := func(net *treeNet, fresh func() (*Engine, *treeQuotient), guess float64) (*treeRun, error) {
		run, q := fresh()
		full := budgeted(net.slots(), int32(nchunks)) // no Merge here: a chunk a message
		if spec.Merge != 0 || spec.Exact || full <= minSteadyChunks {
			return replayOn(net, run, q, 0)
		}
		if full <= 2*minSteadyChunks && guess <= float64(treeWork) {
			// At most twice the probe's chunks: the whole replay first, as the probe would be
			// followed by it where cheap; stopped past treeWork (where its own budget, if any,
			// is larger), where the probe then stands, as it would have. Where an earlier replay
			// puts the whole past treeWork, the probe runs first.
			if hard := run.maxWork; run.pastWork != nil || (hard > 0 && hard <= treeWork) {
				return replayOn(net, run, q, 0)
			}
			run.maxWork = treeWork
			tr, err := replayOn(net, run, q, 0)
			if !errors.Is(err, errBudget) {
				return tr, err
			}
			stopped := tr.events
			run, q = fresh()
			tr, err = replayOn(net, run, q, minSteadyChunks)
			tr.events += stopped
			return tr, err
		}
		visited0 := run.CompVisited
		tr, err := replayOn(net, run, q, minSteadyChunks)
		if err != nil || (q != nil && len(q.violated()) > 0) {
			return tr, err
		}
		ratio := float64(full) / float64(minSteadyChunks)
		if float64(run.CompVisited-visited0)*ratio*ratio > float64(treeWork) {
			return tr, nil // the probe stands
		}
		probeEvents := tr.events
		run, q = fresh()
		tr, err = replayOn(net, run, q, 0)
		tr.events += probeEvents
		return tr, err
	}
	// rankCopy is a fresh copy of e's links for the replay of every rank, the links another
	// implies left out of its rate computations (treePrune), its work bounded by maxWork (0: none).
	rankCopy := func(maxWork uint64) *Engine {
		c := e.replayCopy()
		if treePrune {
			c.pruneImplied(full.routes)
		}
		c.maxWork = maxWork
		return c
	}
	keep := map[LinkID]bool{} // relaxable links found over their capacity: kept in the replay
	var (
		out      *treeRun
		events   uint64
		attempts int
		ecmpMean bool
		far      float64 // twice the largest backlog over the time of a mean model too far to stand
		// rankFirst: the replay of every rank ran, past its budgets, before the mean model's
		// whole replay (little symmetry)
		rankFirst bool
	)
	// symmetric builds the symmetric replay with the relaxable links but those of keep relaxed
	// (all kept: none relaxed), halting at the first relaxed link over its capacity if halt.
	symmetric := func(all, halt bool) *treeQuotient {
		rf := relax
		if all {
			rf = nil
		} else if rf != nil && len(keep) > 0 {
			rf = func(l LinkID) (LinkID, bool) {
				if keep[l] {
					return -1, false
				}
				return relax(l)
			}
		}
		var q *treeQuotient
		if spec.cache != nil && !all && len(keep) == 0 && rf != nil {
			q = spec.cache.get(treeKeyOf(spec), func() *treeQuotient { return quotientTree(e, full, rf) })
		} else {
			q = quotientTree(e, full, rf)
		}
		if q != nil {
			q = q.fresh()
			if q.check != nil {
				q.check.halt = halt
			}
			q.e.RateInterval, q.e.NoShortcut, q.e.Strict = e.RateInterval, e.NoShortcut, e.Strict
		}
		return q
	}
	eStart := e.Now()
	var meanRun *treeRun // the full symmetric replay with every switch link relaxed (ECMP)
	for out == nil && !spec.PerRank {
		attempts++
		// With ECMP the first replay runs to its end even over capacity: it is then the mean
		// model, should nothing exact fit the budget.
		q := symmetric(attempts > maxRelaxAttempts, !mean || attempts > 1)
		if q == nil && (!mean || attempts == 1) {
			break
		}
		var visits uint64
		scale := 1.0
		if q != nil {
			// Little symmetry under ECMP: where the quotient keeps half the vertices or more (the
			// two trees' mirror alone: nodes whose one NIC carries both trees, as PCIe boxes,
			// DGX-1 V100, two-GPU boxes), the mean model's replay costs about what the replay of
			// every rank does (2,048 PCIe nodes at 1 GiB: 81 s for its 56 chunks, the other 48 s
			// for its 32), and that one, which a mean model too far to stand gives way to anyway,
			// is exact. The mean model's replay then runs within treeWork: where it is cheaper it
			// goes on as below; past it the replay of every rank runs, within the budgets of the
			// one a mean model too far to stand runs in (farMessages, farWork), and only past
			// those does the mean model's replay run whole, and stand.
			little := attempts == 1 && mean && float64(q.net.vertices()) >= littleSymmetry*float64(full.vertices()) &&
				full.slots()*min(nchunks, minSteadyChunks) <= farMessages
			first := true
			symRun := func() (*treeRun, error) {
				return replay(q.net, func() (*Engine, *treeQuotient) {
					if !first { // the probe ran on q: a fresh copy for the longer replay
						halt := q.check != nil && q.check.halt
						q = q.fresh()
						q.e.RateInterval, q.e.NoShortcut, q.e.Strict = e.RateInterval, e.NoShortcut, e.Strict
						if q.check != nil {
							q.check.halt = halt
						}
					}
					first = false
					if little {
						q.e.maxWork = treeWork
					}
					return q.e, q
				}, 0)
			}
			// The replay of every rank that the mean model's replay stopped at treeWork gives way
			// to runs beside it on the second core (rankAhead), with the guess that stop implies.
			var ahead *rankAhead
			if little {
				ahead = newRankAhead(e, func(fresh func() (*Engine, *treeQuotient)) (*treeRun, error) {
					return replay(full, fresh, math.Inf(1))
				}, func() *Engine { return rankCopy(farWork) })
			}
			tr, err := symRun()
			stopped := little && errors.Is(err, errBudget)
			if little && !stopped {
				ahead.cancel() // the model's replay fits treeWork: it goes on as below
			}
			if stopped {
				events += tr.events
				rankFirst = true
				// The bar follows it against the stopped replay's time at the pace of its
				// steps so far, for the chunks of the probe it starts with: the replay of every
				// rank takes minutes at 2,048 nodes and up.
				var expect Time
				if tr.x.done > 0 {
					probe := float64(min(int32(minSteadyChunks), tr.sim)) / float64(tr.sim)
					expect = Time(float64(tr.run.now-tr.t0) * float64(tr.x.total) / float64(tr.x.done) * probe)
				}
				pr, perr := ahead.wait(expect)
				events += pr.events
				if perr == nil {
					out = pr
					break
				}
				if !errors.Is(perr, errBudget) {
					return nil, perr
				}
				little, first = false, false
				tr, err = symRun()
			}
			events += tr.events
			over := q.violated()
			if len(over) == 0 {
				if err != nil {
					return nil, err
				}
				out = tr
				break
			}
			if err != nil && !errors.Is(err, errHalted) {
				return nil, err
			}
			if attempts == 1 && mean {
				meanRun = tr
				if meanTooFar(q.check, tr.x.end-tr.t0) && !spec.MeanOversubscribed {
					mean = false // too far over for the mean model: replay every rank
					far = 2 * float64(q.check.backlog()) / float64(max(tr.x.end-tr.t0, 1))
				}
			}
			// Some relaxed links carried more than their capacity: with rail routing, whose
			// overloaded links are few and regular, replay with them kept. ECMP's collisions are
			// scattered: keeping them leaves little symmetry (never enough at 64 nodes and up).
			if !ecmp {
				for _, l := range over {
					keep[l] = true
				}
				continue
			}
		}
		if rankFirst && meanRun != nil {
			// The replay of every rank ran past its budgets above: the mean model stands.
			out, ecmpMean = meanRun, true
			break
		}
		if meanRun != nil {
			visits, scale = meanRun.run.CompVisited, float64(full.vertices())/float64(meanRun.net.vertices())
		}
		// ECMP hash collisions change the result: replay every rank, on a copy of e's links, if
		// that fits the work budget (any work with Exact); else the first symmetric replay, with
		// every switch link relaxed, stands as the ECMP mean model (relax.go).
		if !mean || meanRun == nil || exactAffordable(visits, scale) {
			budget := mean && meanRun != nil
			// A progress bar follows the replay of every rank against the symmetric replay's
			// time for the same chunks (ReplayProgress): where the mean model was too far to
			// stand, that replay can take minutes.
			var expect Time
			if meanRun != nil {
				expect = meanRun.x.end - meanRun.t0
			}
			farRun := meanRun
			if !mean {
				meanRun = nil
			}
			// A mean model too far to stand gives way to the replay of every rank unless that
			// replay would be past farMessages or farWork (its visits guessed as farGuess times
			// the symmetric replay's times scale), or runs past farWork: then the model stands,
			// with its backlog on the row (MeanBacklog).
			var limit uint64
			if far > 0 && farRun != nil {
				if full.slots()*min(nchunks, minSteadyChunks) > farMessages || farGuess*float64(visits)*scale > float64(farWork) {
					out, meanRun, ecmpMean = farRun, farRun, true
					break
				}
				limit = farWork
			}
			work := limit
			if budget {
				work = exactWork
			}
			untrack := func() {}
			pr, err := replay(full, func() (*Engine, *treeQuotient) {
				c := rankCopy(work)
				untrack()
				untrack = c.trackProgress(expect)
				return c, nil
			}, farGuess*float64(visits)*scale)
			untrack()
			events += pr.events
			if err == nil {
				out, far = pr, 0
				break
			}
			if !errors.Is(err, errBudget) {
				return nil, err
			}
			if limit > 0 {
				out, meanRun, ecmpMean = farRun, farRun, true
				break
			}
		}
		out, ecmpMean = meanRun, true
	}
	if out == nil {
		// No symmetry (NCCL's double binary tree on a node count that is not a power of two
		// leaves colour refinement almost every node its own class), or PerRank: every rank is
		// replayed. PerRank, the reference of the tests, replays every chunk on e itself; else
		// the replay may stop at its probe where the whole would be past treeWork (tree-steady-32),
		// as the replay of every rank under ECMP above does (until stop 38 it replayed every
		// chunk: 100 pcie-8gpu-2socket nodes at 256 MiB, 376 s; now 8 s, −0.05%).
		var tr *treeRun
		var err error
		if spec.PerRank {
			tr, err = replayOn(full, e, nil, 0)
		} else {
			tr, err = replay(full, func() (*Engine, *treeQuotient) { return rankCopy(0), nil }, 0)
		}
		events += tr.events
		if err != nil {
			return nil, err
		}
		out = tr
	}
	net, run, q, x, sim, C, merge := out.net, out.run, out.q, out.x, out.sim, out.C, out.merge
	res := &TreeResult{RingResult: RingResult{Time: x.end - out.t0, Events: events, Messages: out.per * int64(sim),
		Merge: merge, Groups: net.vertices(), Loops: int(nchunks), Steps: 2 * (n - 1)}, Symmetric: q != nil, Chunks: int(sim),
		Attempts: attempts}
	res.ECMPMean = ecmpMean
	res.RateInterval = out.iv
	res.Visits, res.LinkVisits = run.CompVisited, run.CompLinks
	if ecmpMean {
		res.MeanBacklog = far
	}
	if q != nil && q.check != nil {
		for _, ls := range q.check.links {
			res.Relaxed += len(ls)
		}
	}
	if meanRun != nil && meanRun.q.check != nil {
		res.Overload = meanRun.q.check.over
	}
	simTime := res.Time
	if sim < C {
		sr := steadyRate(run, net, lanePerFlow(tm, spec.Proto))
		if q != nil {
			sr = min(sr, q.check.minShare())
		}
		res.Period = transferTime(wire*float64(merge), sr)
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
		full.routes(func(route []LinkID) {
			for _, l := range route {
				cnt[l] += e.crossShare(l) // a queue pair's share where the link has one
			}
		})
		for l, c := range cnt {
			e.links[l].bytes += c * carried
		}
		for i, l := range q.links {
			e.links[l].busy += Time(float64(q.e.LinkBusy(q.by[q.vlink[i]])) * scale)
		}
		if q.check != nil {
			q.check.linkBusy(func(l LinkID, b Time) { e.links[l].busy += Time(float64(b) * scale) })
		}
	} else {
		if sim < C {
			// The per-rank run carried the first sim chunks; add the rest.
			rest := wire * float64(nchunks-int64(sim)*int64(merge))
			full.routes(func(route []LinkID) {
				for _, l := range route {
					run.links[l].bytes += rest * run.crossShare(l)
				}
			})
			for l, b := range out.busy0 {
				run.links[l].busy += Time(float64(run.LinkBusy(LinkID(l))-b) * (scale - 1))
			}
		}
		if run != e {
			// The per-rank replay ran on a copy of e's links: credit e with what it added.
			for l := range e.links {
				e.links[l].bytes += run.links[l].bytes
				e.links[l].busy += run.LinkBusy(LinkID(l))
			}
		}
	}
	if end := eStart + res.Time; end > e.now {
		e.now = end
	}
	return res, nil
}

// littleSymmetry is the share of the vertices of every rank's trees that a quotient keeping as
// many or more has too little symmetry for its ECMP mean-model replay to be worth running past
// treeWork before the replay of every rank (SimulateTreeDetail): quotientTree gives up past half,
// and at half (the two trees' mirror alone) the two replays cost about the same. Tests set it
// above 1 to see the mean model run whole.
var littleSymmetry = 0.5

// treePrune makes the replays of every rank leave out of their rate computations the links whose
// constraint another link of the tree's routes implies (Engine.pruneImplied: the same rates).
var treePrune = true

// treeWork bounds the work (Engine.CompVisited) of a tree replay that may extrapolate its steady
// state: where the probe of minSteadyChunks chunks, its work scaled by the square of the ratio
// of the chunks the message budget allows to the probe's, is past it, the probe stands
// (SimulateTreeDetail's replay). A replay's work grows faster than its chunks: from 32 to 128
// chunks 10.7 M → 159 M flow visits on 128 PCIe nodes of 8 GPUs (Tree/Simple, 2 channels, where
// every flow of a node shares its CPU's links and the one NIC), 0.42 M → 7.0 M on 128 DGX A100
// nodes (0.1–0.2 µs a visit here). 20 M is 2–4 s of this project's 2-core machine: the DGX
// replays, which stay under it, are unchanged, and the PCIe ones stop at the probe (at 128 MiB,
// 23,866 µs against the whole replay's 23,842, +0.10%, in 2 s instead of 27). A replay of at most
// twice the probe's chunks runs whole within treeWork and is stopped past it, the probe then
// standing (since stop 64; before, it ran whole whatever its work: 1,024 PCIe nodes at 1 GiB, 56
// chunks, 190 M flow visits, 93–150 s, now 22 s, +0.009%). The ECMP mean model's replay of a
// quotient with little symmetry runs within it too (littleSymmetry).
var treeWork uint64 = 20_000_000

// farMessages and farWork bound the replay of every rank that a tree all-reduce takes where the
// ECMP mean model is too far to stand (meanTooFar), and SimulateP2P's (its messages, and its own
// too-far rule): past farMessages messages (connections × the chunks its probe replays) or farWork
// flow visits (Engine.CompVisited, guessed before and counted as it runs) the mean model stands,
// with its backlog on the row. That replay costs 4–9 µs a message on this project's 2-core machine
// (1 GiB: DGX A100, 1,024 nodes, 8.4 M messages, 201 M visits, 44 s; 2,048 nodes, 16.8 M, 442 M,
// 119 s, and with 8 a leaf 153 s; DGX H100 Tree, 2,048 nodes with 8 a leaf, 76 s; DGX A100, 4,096
// nodes, 33.6 M messages, 276 s; HGX H100 with 16 NICs, 4,096 nodes, 67 M messages, 400 s and 2
// GB), and at 100,000 GPUs it ran past 3 minutes without an end. Against that replay the model was
// 0.14–0.90% fast on the default fabric (1,024–8,192 nodes) and 1.36–2.37% with 8 hosts a leaf
// (2,048–4,096 nodes), BENCHMARKS.md stop 59; with 2 a leaf (16 nodes, where the replay is cheap
// and always runs) 5.5% at 1 GiB and 19% at 64 MiB. The budgets keep every replay measured up to
// 16.8 M messages (about two minutes here); farWork bounds what a wrong guess costs (PCIe nodes'
// replays visit 70 flows an event where DGX nodes' visit 11).
//
// farGuess is the guess's factor: the replay of every rank visited 1.6–5.2 times the symmetric
// replay's visits times the vertices' ratio (PCIe nodes 2.0, DGX A100 1.9–3.8, DGX H100 Tree with
// 2–8 a leaf 1.6–5.2); the low end, so that a replay the guess lets through may still stop at
// farWork.
var (
	farMessages int64   = 20_000_000
	farWork     uint64  = 1_000_000_000
	farGuess    float64 = 2
)

// exactWork bounds the per-rank replay SimulateTree and SimulateP2P try where ECMP hash
// collisions break the symmetric replay: the flows its rate computations may visit
// (Engine.CompVisited), a few tenths of a second on this project's 2-core development machine. Past it
// the ECMP mean model stands (relax.go). A replay whose cost, estimated from the symmetric one's,
// is more than four times that is not tried. Tests lower it to see the mean model.
var exactWork uint64 = 300_000

// exactAffordable guesses whether a per-rank replay is worth trying within exactWork, from a
// symmetric one that visited visits flows with scale times fewer vertices. The per-rank replay has
// scale times more events, but its components, which relaxed links keep apart, grow less than
// the symmetric replay's: the guess charges sqrt(scale). A wrong guess costs at most exactWork.
func exactAffordable(visits uint64, scale float64) bool {
	return float64(visits)*math.Sqrt(scale) <= 4*float64(exactWork)
}

// treeRun is one replay of SimulateTreeDetail: the forest it ran (the full one or a quotient),
// the engine, and its chunk counts.
type treeRun struct {
	net    *treeNet
	run    *Engine
	q      *treeQuotient
	x      *treeSim
	per    int64 // connections
	merge  int
	C, sim int32 // chunks (merged), chunks simulated
	t0     Time
	busy0  []Time
	events uint64
	iv     Time // the rate interval taken past symWork (0: none)
}

// lanePerFlow is the most a tree's message moves at: the protocol's per-flow cap, or its lane's
// share of the CTA where lower (every non-root message moves at most at its lane's rate).
func lanePerFlow(tm Timing, p coll.Proto) Rate {
	perFlow := tm.PerFlowCap[p]
	if l := tm.CTARate / 2; l > 0 && (perFlow <= 0 || l < perFlow) {
		perFlow = l
	}
	return perFlow
}

// interval is the rate interval of a tree replay past symWork (Engine.pastWork), started at t0:
// a message waits for at most two deferred rate computations (its start; its share's growth when
// the flows beside it end), and the call's critical path is at most its chunks plus a chunk's
// way up and down the deepest tree in messages one after another, so the replay is slow by at
// most 2 × chain intervals (the argument of p2pSim.interval, not a proof); the interval keeps
// that within half of MaxCoarseError of a lower bound on the call's time, the other half a
// margin. The bound is the larger of the time already replayed and the chunks at the rate of the
// slowest connection when every connection sends (steadyRate).
func (x *treeSim) interval(t0 Time, perFlow Rate) Time {
	t := x.e.now - t0
	if sr := steadyRate(x.e, x.t, perFlow); sr > 0 && len(x.bytes) > 0 {
		t = max(t, Time(x.chunks)*transferTime(x.bytes[0], sr))
	}
	chain := int64(x.chunks) + 2*int64(x.t.depth())
	return max(Picosecond, Time(MaxCoarseError/2*float64(t)/float64(2*chain)))
}

// intervalVisits is the fewest flows a tree replay's rate computations visit an event, on average
// up to symWork, for the replay to take a rate interval past it. Where every event's computation
// is small, batching them saves little and adds the deferred computations' events: 1,024 DGX
// A100 nodes (1 GiB, the replay of every rank, 2 flows an event) took 44 s exactly and 50 s with
// the interval. PCIe nodes of 8 GPUs with one NIC join both trees' connections of a node into one
// computation (38–74 flows an event at 256–512 nodes, about 1,500 at 2,048 in the symmetric
// replay, where the exact replay ran past 400 s and the interval's took 35 s). A speed threshold:
// the exact replay is the more accurate either way.
var intervalVisits = 16.0

// intervalBlockVisits is the fewest flows a symmetric tree replay that went on exactly past symWork
// must visit an event within a later block of symWork visits for it to take the rate interval from
// there. Its computations can be under intervalVisits on average at symWork and far above it
// later: on 2,048 PCIe nodes (1 GiB, ECMP) 14.9 flows an event up to symWork, then 270 in the next
// block, and the replay ran exactly for more than 8 minutes. DGX V100's (512 nodes) has a block of
// 41 after 10.2, which it replays exactly in 8 s; DGX A100's replay of every rank, blocks of 23–25,
// took 87.7 s with the interval from its second block against 70.7 exactly (stop 62): four times
// intervalVisits. A speed threshold, like intervalVisits.
var intervalBlockVisits = 4 * intervalVisits

// depth is the most messages from a vertex up to its root.
func (t *treeNet) depth() int {
	d := make([]int32, len(t.up)) // 0: not known yet, else 1 + the vertex's depth
	var walk func(v int32) int32
	walk = func(v int32) int32 {
		if d[v] > 0 {
			return d[v] - 1
		}
		var k int32
		if p := t.up[v]; p >= 0 {
			k = walk(p) + 1
		}
		d[v] = k + 1
		return k
	}
	most := int32(0)
	for v := range t.up {
		most = max(most, walk(int32(v)))
	}
	return int(most)
}

// steadyRate is the rate of t's slowest connection when every connection sends at once: the
// first bottleneck of progressive filling, the smallest capacity per connection over the links of
// e (or the per-flow cap).
func steadyRate(e *Engine, t *treeNet, perFlow Rate) Rate {
	cnt := make([]float64, e.NumLinks()) // connections, a queue pair counting its share
	for v := range t.up {
		if t.up[v] >= 0 {
			for _, l := range t.upRoute[v] {
				cnt[l] += e.crossShare(l)
			}
		}
		for _, route := range t.dnRoute[v] {
			for _, l := range route {
				cnt[l] += e.crossShare(l)
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

func newTreeSim(e *Engine, t *treeNet, chunks int32, capRate, cta Rate, merge int) *treeSim {
	nv := t.vertices()
	x := &treeSim{e: e, t: t, chunks: chunks, cap: capRate, cta: cta, mul: Time(merge), bytes: make([]float64, chunks), dk: make([]Time, chunks),
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

// stage turns Timing.NetStage on where tm has it and the CTA is modelled: every message into the
// network is written by its lane, then carried by the NIC.
func (x *treeSim) stage(tm Timing) {
	if !tm.NetStage || x.cta <= 0 {
		return
	}
	t := x.t
	nv := t.vertices()
	x.staged, x.nicCap = true, x.cap
	x.upNIC = newNICQueues(nv)
	x.dnOff = make([]int32, nv+1)
	for v := 0; v < nv; v++ {
		x.dnOff[v+1] = x.dnOff[v] + int32(len(t.kids[v]))
	}
	x.dnNIC = newNICQueues(int(x.dnOff[nv]))
}

// lane is the CTA rate of vertex v's lanes (0: not modelled): the root's one lane has the whole
// CTA, every other vertex's two lanes half of it each.
func (x *treeSim) lane(v int) Rate {
	if x.t.up[v] < 0 {
		return x.cta
	}
	return x.cta / 2
}

// capFor is the rate cap of vertex v's messages: the protocol's per-flow cap and its lane's rate.
func (x *treeSim) capFor(v int) Rate {
	c := x.cap
	if l := x.lane(v); l > 0 && (c <= 0 || l < c) {
		c = l
	}
	return c
}

// Tags: vertex<<4 | lane<<3 | kid (lane 0 up, 1 down), with treeCTA set for the CTA's stage of a
// message into the network and treeNIC for its NIC's (Timing.NetStage).
func treeTag(v, lane, kid int) int64 { return int64(v)<<4 | int64(lane)<<3 | int64(kid) }

const (
	treeCTA = int64(1) << 62
	treeNIC = int64(1) << 61
)

func treeUntag(t int64) (v, lane, kid int) {
	t &^= treeCTA | treeNIC
	return int(t >> 4), int(t>>3) & 1, int(t & 7)
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
	if x.staged && t.upNet[v] {
		x.e.StartFlow(nil, x.bytes[k], x.capFor(v), treeTag(v, 0, 0)|treeCTA) // the CTA's stage
		return
	}
	x.e.StartFlow(t.upRoute[v], x.bytes[k], x.capFor(v), treeTag(v, 0, 0))
}

// nicUp puts vertex v's next written up message on its route if its NIC is free (Timing.NetStage).
func (x *treeSim) nicUp(v int) {
	if k, ok := x.upNIC.take(v); ok {
		x.e.StartFlow(x.t.upRoute[v], x.bytes[k], x.nicCap, treeTag(v, 0, 0)|treeNIC)
	}
}

// nicDown puts vertex v's next written down message to its kid i on its route if that NIC is
// free (Timing.NetStage).
func (x *treeSim) nicDown(v, i int) {
	if k, ok := x.dnNIC.take(int(x.dnOff[v]) + i); ok {
		x.e.StartFlow(x.t.dnRoute[v][i], x.bytes[k], x.nicCap, treeTag(v, 1, i)|treeNIC)
	}
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
			// A leaf only receives: the step completes at once, or, with the CTA modelled, once
			// its lane has copied the chunk out of the FIFO (a flow on no link, FlowDone).
			if l := x.lane(v); l > 0 && x.bytes[k] > 0 {
				x.dnRun[v] = true
				x.e.StartFlow(nil, x.bytes[k], l, treeTag(v, 1, 0))
				return
			}
			x.completeDown(v)
			continue
		}
		x.dnRun[v] = true
		x.dnPend[v] = int8(len(t.kids[v]))
		for i := range t.kids[v] {
			if x.staged && t.dnNet[v][i] {
				x.e.StartFlow(nil, x.bytes[k], x.capFor(v), treeTag(v, 1, i)|treeCTA) // the CTA's stage
				continue
			}
			x.e.StartFlow(t.dnRoute[v][i], x.bytes[k], x.capFor(v), treeTag(v, 1, i))
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
	if tag&treeNIC != 0 {
		// A message's NIC stage: it arrives, and its connection's next one goes.
		if lane == 0 {
			x.e.After(t.upLat[v]*x.mul, evArrive, treeTag(v, 0, 0))
			x.upNIC.left(v)
			x.nicUp(v)
			return
		}
		x.e.After(t.dnLat[v][kid]*x.mul, evArrive, treeTag(v, 1, kid))
		x.dnNIC.left(int(x.dnOff[v]) + kid)
		x.nicDown(v, kid)
		return
	}
	staged := tag&treeCTA != 0
	if lane == 0 {
		if staged {
			x.upNIC.wrote(v)
			x.nicUp(v)
		} else {
			x.e.After(t.upLat[v]*x.mul, evArrive, tag)
		}
		x.upRun[v] = false
		x.upNext[v]++
		x.finishStep()
		x.consumeKids(v)
		x.tryUp(v)
		return
	}
	if len(t.kids[v]) == 0 {
		// A leaf's copy out of the FIFO (tryDown): its receive step is done.
		x.dnRun[v] = false
		x.completeDown(v)
		x.tryDown(v)
		return
	}
	if staged {
		x.dnNIC.wrote(int(x.dnOff[v]) + kid)
		x.nicDown(v, kid)
	} else {
		x.e.After(t.dnLat[v][kid]*x.mul, evArrive, tag)
	}
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
	links []LinkID // real links used by some connection, relaxed ones apart
	vlink []LinkID // their class's link on the private engine
	by    []LinkID // per private link: the kept link that implies it (pruneDominated)
	// check watches the relaxed links (nil: none); upID and dnBase number the quotient's
	// connections for it: vertex v's up connection is upID[v], its down connection to kid i
	// dnBase[v]+i.
	check  *relaxCheck
	upID   []int32
	dnBase []int32
}

// violated returns the relaxed links of q's replay that carried more than their capacity (none
// for a nil q or one without relaxed links).
func (q *treeQuotient) violated() []LinkID {
	if q == nil {
		return nil
	}
	return q.check.violated()
}

// fresh returns a copy of q ready to replay: its own engine (q's links, no traffic) and check.
// q itself is never run, so that a Machine can keep it for the next size (treeCache).
func (q *treeQuotient) fresh() *treeQuotient {
	c := *q
	c.e = q.e.cloneLinks()
	c.check = q.check.fresh(c.e)
	if c.check != nil {
		c.e.obs = c.check
	}
	return &c
}

// meanOverload is the largest load over capacity on a relaxed link (an uplink on which ECMP
// hashed more than it carries) with which the ECMP mean model may stand for the exact replay.
// Past it collisions, which the model ignores, set the time: on a 2:1 fat tree (3.5) the model
// is 39% fast, on non-blocking fabrics (1.3 to 1.6) 0.5 to 2% (docs/cluster.md).
const meanOverload = 2.0

// maxRelaxAttempts is the number of symmetric replays with relaxed links SimulateTree tries
// (each keeping the links the previous one found over their capacity) before it replays with
// every link.
const maxRelaxAttempts = 3

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
// partition and builds the quotient forest on a private engine. Links for which relax reports
// true (nil: none) are replaced, in the partition and in the quotient's routes, by the link it
// returns (none where that is negative), and checked instead (relax.go). It returns nil where the
// quotient cannot stand for t (a link class whose links carry unequal numbers of the connection
// classes crossing it, or inconsistent children), or where it is no smaller than t.
func quotientTree(e *Engine, t *treeNet, relax func(LinkID) (LinkID, bool)) *treeQuotient {
	// use maps a route's link to the link the partition sees (-1: none).
	use := func(l LinkID) LinkID {
		if relax == nil {
			return l
		}
		if s, ok := relax(l); ok {
			return s
		}
		return l
	}
	// switchLink: a switch-to-switch link, which a connection's queue pairs cross side by side
	// (Cluster.routeNet): a run of them maps to one stand-in, crossed once.
	switchLink := func(l LinkID) bool {
		if relax == nil {
			return false
		}
		_, ok := relax(l)
		return ok
	}
	kept := func(l LinkID) bool {
		if relax == nil {
			return true
		}
		_, ok := relax(l)
		return !ok
	}
	nv := t.vertices()
	// Connections ("slots"): up slot of v, then its down slots. A slot names its route and
	// latency by its place in t (kid: the index in t.kids[owner], -1 for the up slot), 12 bytes
	// where copies of the route's slice header and the latency took 48 (on 16,384 HGX H100 nodes
	// with 16 NICs that slice, grown by appending, was 1.9 GB of the call's 6.2 GB allocated).
	type slot struct {
		owner, target, kid int32
	}
	down := func(s slot) bool { return s.kid >= 0 }
	routeOf := func(s slot) []LinkID {
		if s.kid < 0 {
			return t.upRoute[s.owner]
		}
		return t.dnRoute[s.owner][s.kid]
	}
	latOf := func(s slot) Time {
		if s.kid < 0 {
			return t.upLat[s.owner]
		}
		return t.dnLat[s.owner][s.kid]
	}
	slots := make([]slot, 0, t.slots())
	for v := 0; v < nv; v++ {
		if p := t.up[v]; p >= 0 {
			slots = append(slots, slot{owner: int32(v), target: p, kid: -1})
		}
		for i, k := range t.kids[v] {
			slots = append(slots, slot{owner: int32(v), target: k, kid: int32(i)})
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
		deg[nv+i] += 2
		prev := LinkID(-1)
		for _, l := range routeOf(s) {
			if u := use(l); u >= 0 && (u != prev || !switchLink(l)) {
				prev = u
				deg[nv+i]++
				deg[nv+ns+int(u)]++
			}
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
		if down(s) {
			own, in = lbOwnDown, lbInDown
		}
		add(int(s.owner), own, si)
		add(int(s.target), in, si)
		add(si, lbOwner, int(s.owner))
		add(si, lbTarget, int(s.target))
		prev := LinkID(-1)
		for _, l := range routeOf(s) {
			if u := use(l); u >= 0 && (u != prev || !switchLink(l)) {
				prev = u
				add(si, lbLink, nv+ns+int(u))
				add(nv+ns+int(u), lbSlot, si)
			}
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
		if down(s) {
			d = 1
		}
		setInit(nv+i, [3]uint64{1 + d, uint64(latOf(s)), 0})
	}
	for l := 0; l < nl; l++ {
		setInit(nv+ns+l, [3]uint64{3, math.Float64bits(float64(e.LinkCap(LinkID(l)))), 0})
	}
	col, _ = refine(off, adj, col, len(init))
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
			if l = use(l); l < 0 {
				continue
			}
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
		upRoute: make([][]LinkID, m), upLat: make([]Time, m), dnRoute: make([][][]LinkID, m), dnLat: make([][]Time, m),
		upNet: make([]bool, m), dnNet: make([][]bool, m)}
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
			qt.upNet[qi] = t.upNet[v]
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
			qt.dnNet[qi] = append(qt.dnNet[qi], t.dnNet[v][i])
		}
	}
	for qi := range reps {
		if qt.up[qi] >= 0 && parentOf[qi] != qt.up[qi] {
			return nil
		}
	}
	q.net = qt
	// Number the quotient's connections and list the relaxed links each member crosses.
	q.upID, q.dnBase = make([]int32, m), make([]int32, m)
	nq := int32(0)
	for qi := range reps {
		q.upID[qi] = nq
		nq++
		q.dnBase[qi] = nq
		nq += int32(len(qt.kids[qi]))
	}
	if relax != nil {
		var pairs []uint64
		for _, s := range slots {
			qi := vclass[col[s.owner]]
			id := q.upID[qi]
			if down(s) {
				id = q.dnBase[qi] + int32(qt.kidIdx[vclass[col[s.target]]])
			}
			for _, l := range routeOf(s) {
				if !kept(l) {
					pairs = append(pairs, relaxPair(l, id))
				}
			}
		}
		if q.check = newRelaxCheck(e, pairs, int(nq)); q.check != nil {
			upID, dnBase, kids := q.upID, q.dnBase, qt.kids
			q.check.slot = func(tag int64) int32 {
				if tag&treeCTA != 0 {
					return -1 // the CTA's stage of a network message: no link of a connection
				}
				v, lane, kid := treeUntag(tag)
				if lane == 0 {
					return upID[v]
				}
				if len(kids[v]) == 0 {
					return -1 // a leaf's copy out of its FIFO (treeSim.tryDown): no connection
				}
				return dnBase[v] + int32(kid)
			}
		}
	}
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
