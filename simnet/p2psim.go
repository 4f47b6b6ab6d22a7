package simnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/simccl/simccl/coll"
)

// P2POp is one point-to-point operation of a P2PSpec: every rank r sends Count elements to rank
// (r + Dist) mod n and receives as many from rank (r − Dist) mod n, on the channels of Plan
// (ChannelLo, NChannels), cut into messages as coll.Compile cuts them (coll.P2PParts). A
// distance of 0 is every rank's copy to itself.
type P2POp struct {
	Plan  coll.Plan
	Dist  int
	Count int64
}

// P2POps turns SendRecv and AllToAll plans (nccl-tests' sendrecv and alltoall) into the
// operations of a P2PSpec: an AllToAll is one operation per ring distance. A SendRecv must move
// the same count from every rank to the rank at one distance, every transfer cut alike (channels,
// chunk, protocol): the patterns nccl-tests runs.
func P2POps(plans []coll.Plan) ([]P2POp, error) {
	out := make([]P2POp, 0, len(plans))
	for i := range plans {
		p := &plans[i]
		n := p.NRanks
		if n < 1 || (p.Func != coll.SendRecv && p.Func != coll.AllToAll) {
			return nil, fmt.Errorf("simnet: p2p: plan %d is %v over %d ranks, not a SendRecv", i, p.Func, n)
		}
		if p.Func == coll.AllToAll {
			// Compile's AllToAll: every rank sends Count elements to every rank, the round of
			// distance d on the channels coll.P2PParts gives it.
			if len(p.Transfers) != 0 {
				return nil, fmt.Errorf("simnet: p2p: plan %d: an AllToAll with transfers of its own", i)
			}
			for d := 0; d < n; d++ {
				out = append(out, P2POp{Plan: *p, Dist: d, Count: p.Count})
			}
			continue
		}
		if len(p.Transfers) == 0 {
			d := p.Peer
			if d == 0 {
				d = 1
			}
			out = append(out, P2POp{Plan: *p, Dist: ((d % n) + n) % n, Count: p.Count})
			continue
		}
		if len(p.Transfers) != n {
			return nil, fmt.Errorf("simnet: p2p: plan %d has %d transfers for %d ranks (want one from every rank)", i, len(p.Transfers), n)
		}
		t0 := p.Transfers[0]
		d := ((t0.To-t0.From)%n + n) % n
		seen := make([]bool, n)
		for _, t := range p.Transfers {
			if t.From < 0 || t.From >= n || seen[t.From] || ((t.To-t.From)%n+n)%n != d || t.Count != t0.Count ||
				t.NChannels != t0.NChannels || t.ChunkSize != t0.ChunkSize || t.LL != t0.LL {
				return nil, fmt.Errorf("simnet: p2p: plan %d: its transfers are not one count from every rank to the rank at one distance", i)
			}
			seen[t.From] = true
		}
		// The transfers' own cut (channels, chunk, LL) becomes the operation plan's, as Compile
		// cuts a transfer (coll.P2PParts).
		q := *p
		q.Transfers = nil
		if t0.NChannels > 0 {
			q.NChannels = t0.NChannels
		}
		if t0.LL {
			q.Proto, q.ChunkSize = coll.LL, 0
		} else if t0.ChunkSize > 0 {
			q.ChunkSize = t0.ChunkSize
		}
		out = append(out, P2POp{Plan: q, Dist: d, Count: t0.Count})
	}
	return out, nil
}

// P2PSpec is a group of point-to-point operations for the compact executor (SimulateP2P),
// replayed as one kernel: on every rank and channel the operations run in order, each starting
// when both halves (sends, receives) of the previous one on that channel are done, as in the
// schedule coll compiles for them.
type P2PSpec struct {
	Ops []P2POp
	// PerRank replays every rank (the reference the symmetric replay is tested against); Strict
	// relaxes no link; Exact never lets an approximation stand; MeanOversubscribed lets the ECMP
	// mean model stand on oversubscribed fabrics too (TreeSpec has the same).
	PerRank, Strict, Exact, MeanOversubscribed bool
	// HostFloor is the call's host floor (0: none): where the ECMP mean model's time with the
	// work its hashed links owe, times hostBoundMargin, is still under it, the row is the host's
	// whatever the hash collisions cost the GPUs, and the model stands for their time instead of
	// the replay of every rank (not with Exact).
	HostFloor Time
	// DeferAbove, where positive, is the most messages a replay of every rank may replay:
	// past it SimulateP2P returns errDeferred before running it, and Machine.Run times the call
	// from two smaller sizes (p2pSizesSteady), replaying every rank at full size only where no
	// such pair exists (P2PDeferMessages).
	DeferAbove int64
	// DeferWork, where positive, is the most flow visits a replay of every rank may be projected
	// to take (p2pBuild.probe: a quarter of them before a quarter of its time), past which
	// SimulateP2P returns errDeferred (Machine.Run sets it where p2pSizesSteady has a pair of sizes
	// at most an eighth and a quarter of the call's: P2PDeferWork).
	DeferWork uint64
	// cache keeps the walk of every route between calls on one machine (Machine.Run).
	cache *p2pWalkCache
}

// errDeferred: the replay of every rank would replay more messages than P2PSpec.DeferAbove.
var errDeferred = errors.New("simnet: the replay of every rank is deferred to smaller sizes")

// P2PDeferMessages is P2PSpec.DeferAbove for Machine.Run: the most messages a point-to-point
// call's replay of every rank replays before the call is timed from two smaller sizes instead
// (p2pSizesSteady; since stop 61). Such a replay costs about 3 µs a message on this machine
// (DGX-1 V100, 1,024 nodes, send/recv of 1 GiB: 16.8 M messages, 49 s); past its fill every
// connection's chain of messages adds the same time per byte, and the hash puts the same
// connections on the same links at every size, so the line through two sizes of the call's
// plan in their steady state gives the full size's replay: on those 1,024 nodes the pairs 2/4,
// 4/8, 8/16, 64/128 and 128/256 MiB all give 515,439.820 µs, the replay's (1.9 s for the four
// smallest sizes).
var P2PDeferMessages int64 = 2_000_000

// P2PDeferWork is P2PSpec.DeferWork for Machine.Run: a replay of every rank projected past it is
// deferred to two smaller sizes as one past P2PDeferMessages is (since stop 66). Messages alone
// miss what a message costs on an oversubscribed fabric, where the kept stand-ins join every flow
// into one rate computation: 12 DGX H200 nodes with 4 a leaf, 2:1, all-to-all of 2 GiB replayed
// 1.56 M messages (under P2PDeferMessages) in 216 M visits, 37 s (24 µs a message); from 128 and
// 256 MiB (sizes-steady) 10.4 s and +0.017%. 30 M visits is about 5–15 s of this machine's replay
// (0.17–0.6 µs a visit in those replays), where the deferred call costs at most 3/8 of the
// projected replay (its pair at most an eighth and a quarter of the size).
var P2PDeferWork uint64 = 30_000_000

// hostBoundMargin is how far under the host floor the ECMP mean model's time (with its owed
// work) must lie for SimulateP2P to skip the replay of every rank (P2PSpec.HostFloor): the
// collisions would have to add half the GPUs' time to reach the floor, where the model with its
// owed work was at most 18% fast wherever it was measured against a replay of every rank (24
// nodes of the aws-p5 file at 16 MiB, a link at 2.88 times its capacity; 13.6% on 128 one-GPU
// nodes at 1 GiB; docs/cluster.md "ECMP: the mean model"), and on oversubscribed fabrics (the
// replay over the kept stand-ins) −4.1…+4.4% on 18 all-to-all cells (stop 66: DGX H100, A100,
// DGX-1, HGX 16-NIC, GB200 NVL72 racks, 2:1 with 2–8 a leaf, fat tree, three tiers, 256 KiB–16
// MiB). 2.0 until stop 66; 1.5 keeps 2.8 times the worst error measured. The row's time is the
// floor either way; only its device_us is the model's.
const hostBoundMargin = 1.5

// P2PResult is the outcome of SimulateP2P.
type P2PResult struct {
	Time     Time
	Events   uint64
	Messages int64 // simulated messages
	// Rotation is the rotation of nodes whose orbits the replay ran one rank of (NumNodes: every
	// rank); Programs the (rank, channel) programs replayed.
	Rotation, Programs int
	Relaxed            int  // links the symmetric replay left out and checked
	ECMPMean           bool // the ECMP mean model stands for the exact replay (relax.go)
	// RailOwed: under rail routing, a host-bound call's GPU time is the replay over the relaxed
	// links' stand-ins plus the most work a link its routes put over capacity owes (owed), not
	// the replay of every rank (P2PSpec.HostFloor).
	RailOwed bool
	// LatencyMean: the orbits replayed as one differ only in the switch latencies of their
	// members' routes; each connection class took its members' mean latency.
	LatencyMean bool
	// Unchecked: the relaxed links were not checked (too many crossings: checkPairs); the
	// replay with their stand-ins stands as it is.
	Unchecked bool
	// RateInterval: every rank was replayed with at most one rate computation per this
	// interval (Engine.RateInterval), where the ECMP mean model owed work (ecmpmean.go); 0: none.
	RateInterval Time
	// MeanBacklog: where the ECMP mean model stands although twice the largest backlog of its
	// checked links is over MaxCoarseError of its time (the replay of every rank past the
	// budgets), that ratio; 0 elsewhere. Such rows were 1–14% fast where measured (128 one-GPU
	// nodes, 4 MiB–1 GiB, ratio 0.12–0.24, all replayed since, backlogBudget; 128 DGX H100
	// nodes at 1 GiB, ratio 0.125, −2.48% from the interval replay since stop 54, is not).
	MeanBacklog float64
}

// Mode is the row mode: p2p-compact (exact), followed by ", latency-mean" where connections
// whose routes differ in switch latency were replayed as one with their mean latency, and by ",
// ecmp-mean" where the ECMP mean model stands for the exact replay.
func (r *P2PResult) Mode() string {
	mode := "p2p-compact"
	if r.LatencyMean {
		mode += ", latency-mean"
	}
	if r.ECMPMean {
		mode += ", ecmp-mean"
	}
	if r.RailOwed {
		mode += ", rail-owed"
	}
	if r.Unchecked {
		mode += ", unchecked"
	}
	if r.RateInterval > 0 {
		mode += ", rate-interval-" + intervalName(r.RateInterval)
	}
	return mode
}

// p2pNet is what SimulateP2P replays: programs (one per rank or orbit of ranks and channel) made
// of segments (one per operation), and connections ("slots") between them.
type p2pNet struct {
	// per program: its segments segs[segOff[p]:segOff[p+1]]; per segment: its lanes' share of
	// the CTA's rate in its batch (nil: the CTA is not modelled)
	segOff  []int32
	segs    []p2pSeg
	segLane []Rate
	// per slot
	owner, target []int32
	route         [][]LinkID
	rw            [][]float64 // per slot: its route's weights where symmetric sets them (nil: 1 on every link)
	lat           []Time
	netw          []bool  // per slot: its route crosses the network (ClassNet; Timing.NetStage)
	part          []int32 // index into wire
	// per (operation, channel part): the wire bytes of each message, or of the copy to self
	wire [][]float64
	// per slot: the ranks and channel of its representative connection; base[op][part]: the
	// first slot of an operation's channel part (slots follow in representative order)
	fromRank, toRank, ch []int32
	base                 [][]int32
	// per slot: the segment that sends on it and the one that receives from it; per segment:
	// its program
	sendSeg, recvSeg []int32
	prog             []int32
	// reps: the ranks replayed (program p is rank p mod reps's, on channel p / reps)
	reps int
}

// programs is the number of programs of n.
func (n *p2pNet) programs() int { return len(n.segOff) - 1 }

// p2pSeg is one round (operation) of a program: a send and a receive, or a copy to self. A
// program runs its segments in batches of coll.P2PBatch, as coll's schedule does.
type p2pSeg struct {
	out, in int32 // slots sent on and received from (-1: a copy to self)
	part    int32 // index into wire
}

// p2pBuild is what SimulateP2P derives from its spec before replaying it.
type p2pBuild struct {
	e     *Engine
	r     Router
	tm    Timing
	n     int
	proto coll.Proto
	ops   []p2pOp
	wire  [][]float64 // per (operation, channel part) with messages: the wire bytes of each
	chans []int       // channels used
	chIdx []int32     // channel -> index in chans (-1: unused)
	buf   []LinkID
	relax func(LinkID) (LinkID, bool) // nil: no relaxed link
	exact bool                        // P2PSpec.Exact: every check, whatever its size
	// crossings of relaxed links by every connection (counted with the link kinds; -1: not
	// counted)
	crossings int
	w         *p2pWalk // the walk the fields above come from (nil: none)
	// deferAbove, deferWork: P2PSpec.DeferAbove, DeferWork
	deferAbove int64
	deferWork  uint64
}

// deferred reports whether a replay of every rank of x's messages is past deferAbove.
func (b *p2pBuild) deferred(x *p2pSim) bool {
	return b.deferAbove > 0 && x.messages() > b.deferAbove
}

// p2pWalk is what one walk of every route of a point-to-point call gives SimulateP2P: the relaxed
// links' stand-ins less those implied (relax, nil where nothing is relaxed) and whether some are
// kept, the kinds of link the routes cross and those whose relaxed links delay messages (for the
// rotation, Cluster.symmetry), and the crossings of relaxed links (-1: not counted). It depends on
// the routes alone: which ranks send to which on which channels, not how many bytes.
type p2pWalk struct {
	relax           func(LinkID) (LinkID, bool)
	kept            bool
	kinds, latKinds [5]bool
	crossings       int
	// lat: per rotation (S ranks), the members' latency sums and counts per slot (latSums)
	mu  sync.Mutex
	lat map[int][2][]Time
	// links: what every route crosses, by part position (routeLinks; nil until asked)
	links *routeLinks
}

// walk walks every route of b once (relaxes: for implied and the crossings of relaxed links;
// kinds: for the kinds of link crossed).
func (b *p2pBuild) walk(cl *Cluster, rx relaxer, relaxes, kinds bool) *p2pWalk {
	w := &p2pWalk{crossings: -1}
	e := b.e
	latKind := func(l LinkID) {
		if e.links[l].lat > 0 {
			// A relaxed link still delays its messages: an exact rotation must keep which
			// routes cross it, as it keeps the leaves (or pods) it stands for.
			if cl.kindOf(l) == kindAgg {
				w.latKinds[kindPodMean] = true
			} else {
				w.latKinds[kindLeafMean] = true
			}
		}
	}
	if !relaxes {
		b.eachRoute(func(_, _, _ int, route []LinkID) {
			for _, l := range route {
				w.kinds[cl.kindOf(l)] = true
			}
		})
		return w
	}
	// One walk of every route for implied and for the kinds (the routes of an all-to-all are
	// every pair of ranks: 33 M on 512 DGX H100 nodes, 1.5 s a walk).
	var crossed []bool // relaxed links some route crosses (their kinds after the walk)
	if kinds {
		w.crossings = 0
		crossed = make([]bool, e.NumLinks())
	}
	// count notes the kinds of link a route crosses and its crossings of relaxed links.
	count := func(route []LinkID) {
		for _, l := range route {
			if _, ok := rx.standIn(l); !ok {
				w.kinds[cl.kindOf(l)] = true
				continue
			}
			crossed[l] = true
			w.crossings++
		}
	}
	if cl != nil && cl.standInsImplied(e) {
		// A non-blocking fabric: every stand-in drops out whatever the routes, as implied would
		// find after looking at each (on 2,048 DGX H100 nodes 26 of an all-to-all's 58 s); the
		// routes are walked for the kinds alone, if asked.
		w.relax = func(l LinkID) (LinkID, bool) {
			_, ok := rx.standIn(l)
			return -1, ok
		}
		if kinds {
			// The ranks in parts side by side, each with its own counts, added up after.
			type part struct {
				kinds     [5]bool
				crossed   []bool
				crossings int
			}
			parts := make([]part, b.routeHalves())
			b.eachRouteSplit(func(h int) func(_, _, _ int, route []LinkID) {
				p := &parts[h]
				p.crossed = make([]bool, e.NumLinks())
				return func(_, _, _ int, route []LinkID) {
					for _, l := range route {
						if _, ok := rx.standIn(l); !ok {
							p.kinds[cl.kindOf(l)] = true
							continue
						}
						p.crossed[l] = true
						p.crossings++
					}
				}
			})
			for _, p := range parts {
				for k, v := range p.kinds {
					w.kinds[k] = w.kinds[k] || v
				}
				for l, v := range p.crossed {
					crossed[l] = crossed[l] || v
				}
				w.crossings += p.crossings
			}
		}
	} else {
		w.relax, w.kept = implied(e, func(yield func([]LinkID)) {
			b.eachRoute(func(_, _, _ int, route []LinkID) {
				yield(route)
				if kinds {
					count(route)
				}
			})
		}, rx.standIn)
	}
	for l, c := range crossed {
		if !c {
			continue
		}
		if s, ok := w.relax(LinkID(l)); !ok {
			w.kinds[cl.kindOf(LinkID(l))] = true
		} else if s >= 0 {
			w.kinds[cl.kindOf(s)] = true
		}
		latKind(LinkID(l))
	}
	return w
}

// latSums adds up, per slot of net (S ranks a rotation), the latencies lats of its members'
// routes into sum and counts them in cnt.
func (b *p2pBuild) latSums(net *p2pNet, S int, lats, sum, cnt []Time) {
	// The ranks in parts side by side (eachRouteSplit), each into sums of its own (whole
	// picoseconds: the same totals in any order).
	sums, cnts := make([][]Time, b.routeHalves()), make([][]Time, b.routeHalves())
	sums[0], cnts[0] = sum, cnt
	for h := 1; h < len(sums); h++ {
		sums[h], cnts[h] = make([]Time, len(sum)), make([]Time, len(cnt))
	}
	b.eachRouteSplit(func(h int) func(i, c, rk int, route []LinkID) {
		sum, cnt := sums[h], cnts[h]
		return func(i, c, rk int, route []LinkID) {
			slot := net.base[i][c] + int32(rk%S)
			for _, l := range route {
				sum[slot] += lats[l]
			}
			cnt[slot]++
		}
	})
	for h := 1; h < len(sums); h++ {
		for s := range sum {
			sum[s] += sums[h][s]
			cnt[s] += cnts[h][s]
		}
	}
}

// latSums returns the members' latency sums and counts per slot of the symmetric replay of S
// ranks a rotation, computing them with sums the first time.
func (w *p2pWalk) latSums(S int, sums func() ([]Time, []Time)) ([]Time, []Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l, ok := w.lat[S]; ok {
		return l[0], l[1]
	}
	if w.lat == nil {
		w.lat = map[int][2][]Time{}
	}
	sum, cnt := sums()
	w.lat[S] = [2][]Time{sum, cnt}
	return sum, cnt
}

// walkKey is the key of b's walk in a p2pWalkCache: the ranks, the walk's settings, and every
// operation's distance and channels.
func (b *p2pBuild) walkKey(relaxes, kinds bool) string {
	k := make([]byte, 0, 16+12*len(b.ops))
	k = binary.LittleEndian.AppendUint32(k, uint32(b.n))
	k = append(k, boolByte(relaxes), boolByte(kinds))
	for _, op := range b.ops {
		k = binary.LittleEndian.AppendUint32(k, uint32(op.d))
		k = binary.LittleEndian.AppendUint32(k, uint32(op.lo))
		k = binary.LittleEndian.AppendUint32(k, uint32(len(op.part)))
		for _, w := range op.part {
			k = append(k, boolByte(w >= 0))
		}
	}
	return string(k)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// p2pWalkCache keeps the walks of every route of SimulateP2P's calls on one machine (Machine.Run),
// by their routes (p2pBuild.walkKey): the sizes of a sweep whose operations take the same
// channels walk once (an all-to-all on 1,024 DGX H100 nodes: 67 M routes, most of a size's time).
type p2pWalkCache = memo[string, *p2pWalk]

// p2pOp is one operation: its channels, distance, and per channel part the index of its wire
// bytes (-1: nothing on that channel).
type p2pOp struct {
	lo, d int
	part  []int32
}

// eachRoute calls f with the route of every connection of every rank (the slice is reused).
func (b *p2pBuild) eachRoute(f func(i, c, rank int, route []LinkID)) {
	b.buf = b.routesOf(0, b.n, b.buf, f)
}

// routesOf calls f with the route of every connection of the ranks lo to hi-1 (in buf, reused and
// returned), operation by operation, channel part by part, rank by rank.
func (b *p2pBuild) routesOf(lo, hi int, buf []LinkID, f func(i, c, rank int, route []LinkID)) []LinkID {
	for i, c := range b.parts() {
		op := b.ops[i]
		for rk := lo; rk < hi; rk++ {
			buf, _ = routeP2P(b.r, rk, (rk+op.d)%b.n, op.lo+c, buf[:0])
			f(i, c, rk, buf)
		}
	}
	return buf
}

// parts yields every operation that sends to another rank and each of its channel parts with
// bytes, as (operation index, part position).
func (b *p2pBuild) parts() iter.Seq2[int, int] {
	return func(yield func(i, c int) bool) {
		for i, op := range b.ops {
			if op.d == 0 {
				continue
			}
			for c, w := range op.part {
				if w >= 0 && !yield(i, c) {
					return
				}
			}
		}
	}
}

// routeHalves is how many parts of the ranks b's walks of every route take side by side: two on
// a Cluster, whose routes are pure functions of it, one on another Router (nodeFoldRouter caches
// routes). It depends on the Router alone, not on the cores, and so do the walks' results.
func (b *p2pBuild) routeHalves() int {
	if _, ok := b.r.(*Cluster); ok {
		return 2
	}
	return 1
}

// eachRouteSplit is eachRoute with the ranks in routeHalves parts walked side by side: part h
// calls the f that mk(h) returns (each its own state, which the caller adds up in part order),
// in eachRoute's order within the part.
func (b *p2pBuild) eachRouteSplit(mk func(h int) func(i, c, rank int, route []LinkID)) {
	halves := b.routeHalves()
	var wg sync.WaitGroup
	for h := range halves {
		lo, hi := b.n*h/halves, b.n*(h+1)/halves
		f := mk(h)
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.routesOf(lo, hi, nil, f)
		}()
	}
	wg.Wait()
}

// intervalName is a rate interval as a row's mode names it: whole nanoseconds, or picoseconds
// below one (an all-to-all on 256 GB200 NVL72 racks at 1 MiB takes 0.2 ns, which rounded to
// nanoseconds read "rate-interval-0ns").
func intervalName(iv Time) string {
	if iv < 1000 {
		return fmt.Sprintf("%dps", int64(iv))
	}
	return fmt.Sprintf("%dns", (iv+500)/1000)
}

// maxConnections is the most connections (a rank's message to another on one channel) a
// point-to-point simulation walks: each of its walks visits them all, a few times per call,
// whatever the replay (an all-to-all of 1 GiB on 2,048 DGX H100 nodes: 268 M pairs of ranks, 94 s;
// docs/cluster.md, "Unchecked"). Past it SimulateP2P refuses the call (not with Exact).
var maxConnections int64 = 1 << 30

// connections is the number of connections eachRoute walks.
func (b *p2pBuild) connections() int64 {
	var k int64
	for range b.parts() {
		k += int64(b.n)
	}
	return k
}

// use is the link a replay puts in place of l (a relaxed link's stand-in; -1: none).
func (b *p2pBuild) use(l LinkID) LinkID {
	if b.relax != nil {
		if s, ok := b.relax(l); ok {
			return s
		}
	}
	return l
}

// SimulateP2P times a group of point-to-point operations on the links of e reached through r.
//
// Symmetric replay. The operations are the same from every rank (to the rank at a distance), so
// rotating the ranks by a whole number of nodes maps the programs onto each other; it maps the
// routes onto each other too, link by link, except for the switch-to-switch links the fabric
// picks by hash (Cluster.rotation). Those are relaxed (relax.go): left out where their
// constraint is implied, replaced by their ECMP mean-model stand-in otherwise, and checked. The
// smallest rotation R under which what is left maps onto itself splits the ranks into orbits;
// one rank per orbit is replayed on a private engine whose links stand for orbits of links (a
// link that every connection class crosses w times among its members gets 1/w of the capacity),
// and every member moves in lockstep with it. On a fabric whose switch links all drop out that is
// one node: its ranks stand for all. Where a relaxed link is found over its capacity the replay
// is not exact: with ECMP, every rank is replayed if that fits exactWork (any work with Exact),
// else, where a hashed link owes work beyond the model's (ecmpmean.go), every rank is replayed
// with a rate interval if that fits coarseWork (any work where the model is too far to stand:
// a link over twice its capacity that owes work), else the symmetric replay stands as the ECMP
// mean model (with that work added); with rail routing every rank is replayed. Where no
// rotation short of the whole cluster works every rank is replayed (relaxed links are then the
// engine's, which is exact). Every message is a flow, as in Simulate: no chunks are merged.
func SimulateP2P(e *Engine, r Router, spec P2PSpec, tm Timing) (*P2PResult, error) {
	n := r.NumRanks()
	if len(spec.Ops) == 0 {
		return nil, fmt.Errorf("simnet: p2p simulation without operations")
	}
	b := &p2pBuild{e: e, r: r, tm: tm, n: n, proto: coll.P2PProto(&spec.Ops[0].Plan), exact: spec.Exact, crossings: -1, deferAbove: spec.DeferAbove, deferWork: spec.DeferWork}
	nch := 0
	for i, op := range spec.Ops {
		p := &op.Plan
		if p.NRanks != n {
			return nil, fmt.Errorf("simnet: p2p operation %d is over %d ranks, the cluster %d", i, p.NRanks, n)
		}
		if q := coll.P2PProto(p); q != b.proto || q == coll.LL128 || q < 0 || q >= coll.NumProtos {
			return nil, fmt.Errorf("simnet: p2p operation %d: protocol %v (want LL or Simple, the same for all)", i, q)
		}
		if op.Count <= 0 || p.ChannelLo < 0 || p.NChannels < 1 {
			return nil, fmt.Errorf("simnet: p2p operation %d: count %d, channels %d+%d", i, op.Count, p.ChannelLo, p.NChannels)
		}
		d := ((op.Dist % n) + n) % n
		o := p2pOp{lo: p.ChannelLo, d: d}
		for _, cut := range coll.P2PParts(p, op.Count, d) {
			if cut == nil {
				o.part = append(o.part, -1)
				continue
			}
			w := make([]float64, len(cut))
			for k, by := range cut {
				if d == 0 {
					w[k] = float64(by) // a copy to self moves its payload
				} else {
					w[k] = float64(coll.WireBytes(b.proto, by))
				}
			}
			o.part = append(o.part, int32(len(b.wire)))
			b.wire = append(b.wire, w)
		}
		nch = max(nch, p.ChannelLo+len(o.part))
		b.ops = append(b.ops, o)
	}
	if conns := b.connections(); conns > maxConnections && !spec.Exact {
		return nil, fmt.Errorf("simnet: %d ranks exchange %.3g connections (every pair of ranks, per channel), past the %.3g a point-to-point simulation walks (about ten minutes on one core): simulate fewer ranks", n, float64(conns), float64(maxConnections))
	}
	b.chIdx = make([]int32, nch)
	for c := range b.chIdx {
		b.chIdx[c] = -1
	}
	for _, op := range b.ops {
		for c, w := range op.part {
			if ch := op.lo + c; w >= 0 && b.chIdx[ch] < 0 {
				b.chIdx[ch] = int32(len(b.chans))
				b.chans = append(b.chans, ch)
			}
		}
	}
	mean, kept := false, false
	res := &P2PResult{}
	cl, isCluster := r.(*Cluster)
	walkKinds := isCluster && !spec.PerRank && cl.NumNodes > 1
	// The kinds of link the routes cross (the symmetry needed, Cluster.symmetry), those of a
	// relaxed link its stand-in's unless implied drops it; and whether a relaxed link delays
	// messages (latKinds).
	var kinds, latKinds [5]bool
	ecmpKept := false // ECMP routing over stand-ins kept (an oversubscribed fabric)
	// bound is linkBound, walked once: the symmetric replay and the replay of every rank after
	// it carry the same bytes per link.
	bound := Time(-1)
	linkBound := func(x *p2pSim) Time {
		if bound < 0 {
			bound = x.linkBound(b)
		}
		return bound
	}
	rx, relaxes := r.(relaxer)
	relaxes = relaxes && !spec.Strict && !spec.PerRank
	if relaxes || walkKinds {
		// The walk of every route depends on the routes alone, not on the bytes: the sizes of a
		// sweep share it (p2pWalkCache).
		w := spec.cache.get(b.walkKey(relaxes, walkKinds), func() *p2pWalk { return b.walk(cl, rx, relaxes, walkKinds) })
		b.relax, b.crossings, kept, kinds, latKinds, b.w = w.relax, w.crossings, w.kept, w.kinds, w.latKinds, w
	}
	// rail: rail routing's fixed routes, whose relaxed links the symmetric replay may find over
	// their capacity (a leaf left partly empty); railOver: it did, and every rank is replayed.
	rail, railOver := relaxes && isCluster && cl.railRouted(), false
	if relaxes {
		mean = rx.ecmp() && !spec.Exact && (!kept || spec.MeanOversubscribed)
		ecmpKept = rx.ecmp() && kept
	}
	if walkKinds {
		// Where only the switch latencies tell the members of R's orbits apart, they are
		// replayed as one, each connection class with its members' mean latency (a few tenths
		// of a µs per message; latency-mean).
		var R int
		R, res.LatencyMean = cl.symmetry(kinds, latKinds, spec.Exact)
		if R < cl.NumNodes {
			if b.unchecked() && ecmpKept && !spec.MeanOversubscribed {
				// Unchecked on an oversubscribed fabric under ECMP is the mean model there,
				// which SimulateP2P does not let stand (mean): measured 6.7–12.9% fast
				// (TestP2PUncheckedOversubscribed; docs/cluster.md, "Unchecked").
				return nil, fmt.Errorf("simnet: %d ranks cross the fabric's hashed uplinks %.3g times, past the %.3g the check of ECMP collisions holds; on an oversubscribed fabric the replay without that check is the ECMP mean model, which came out 7-13%% fast where it could be checked: simulate fewer ranks, use rail routing, or let the mean model stand (--ecmp-mean)", n, float64(b.crossings), float64(checkPairs))
			}
			x, check, unchecked := b.symmetric(cl, R, res.LatencyMean)
			if x != nil {
				// railFloor: rail routing (no hash) where the call may be host-bound, its
				// lower bound on the time (linkBound) under the floor by hostBoundMargin: the
				// replay runs on past a link over its capacity, and with the work such links
				// owe it may stand for the GPUs' time under the floor (below; since stop 68).
				railFloor := rail && !spec.Exact && spec.HostFloor > 0 && hostBoundMargin*float64(linkBound(x)) < float64(spec.HostFloor)
				if check != nil {
					// Halt at the first link over its capacity unless the replay's time is
					// wanted: the mean model's, on an oversubscribed fabric under ECMP the
					// time the rate interval below is cut to, or railFloor's.
					check.halt = !mean && !ecmpKept && !railFloor
				}
				switch {
				case spec.Exact:
				case kept:
					// Oversubscribed: the kept stand-ins join every connection crossing them
					// into one rate computation per event. With a rate interval cut from a
					// lower bound on the time (linkBound) the replay stays within
					// MaxCoarseError/2 of it, as the interval replay of every rank does.
					if lb := linkBound(x); lb > 0 {
						x.e.RateInterval = x.interval(lb)
					}
				default:
					// Exact up to symWork, then with half that rate interval for the rest (the
					// whole one was +0.97% off on 64 GB200 racks: symWork).
					x.e.maxWork = symWork
					x.e.pastWork = func() Time {
						if lb := linkBound(x); lb > 0 {
							return max(Picosecond, x.interval(lb)/2)
						}
						return 0 // no link has a capacity: on exactly
					}
				}
				t, err := x.run()
				res.Events += x.e.Events
				res.Rotation, res.Programs, res.Messages = R, x.net.programs(), x.messages()
				res.RateInterval = x.e.RateInterval
				if check != nil {
					for _, ls := range check.links {
						res.Relaxed += len(ls)
					}
				}
				over := check.violated()
				if err != nil && !(len(over) > 0 && errors.Is(err, errHalted)) {
					return nil, err
				}
				if len(over) == 0 {
					// Past checkPairs nothing was checked (unchecked, with no check): the replay
					// with the stand-ins stands as it is (under ECMP the mean model, without the
					// work a hashed link may owe).
					res.Time = t
					if unchecked {
						res.ECMPMean, res.Unchecked = mean, true
					}
					x.credit(b, cl, check, R)
					e.now += t
					return res, nil
				}
				var owed Time
				if mean || ecmpKept || railFloor {
					owed = x.owed(b, check)
				}
				// Too far over for the mean model to stand: a link over twice its capacity
				// for a while, whose work does not fit its busy time (owed). Every rank is
				// then replayed, with a rate interval where that fits the budgets below, else
				// exactly. (A link over twice its capacity whose work still fits its busy time
				// — tiny messages, all leaving at once — keeps the model: 256 one-GPU nodes,
				// 32 KiB, 126.59 µs against the replay of every rank's 126.97, which took 68 s;
				// docs/cluster.md.)
				tooFar := check.over > meanOverload && owed > 0 && !spec.MeanOversubscribed
				if (mean || ecmpKept || railFloor) && !spec.Exact && spec.HostFloor > 0 && hostBoundMargin*float64(t+owed) < float64(spec.HostFloor) {
					// A host-bound call: the replay of every rank would refine a GPU time the
					// row does not show (P2PSpec.HostFloor). On an oversubscribed fabric
					// (ecmpKept) the replay over the kept stand-ins is the mean model there,
					// its owed work the hash collisions' (since stop 66); under rail routing
					// (railFloor) the replay over the stand-ins with the work of the links
					// its fixed routes put over their capacity (rail-owed; since stop 68).
					res.Time = t + owed
					res.ECMPMean, res.RailOwed = !railFloor, railFloor
					x.credit(b, cl, check, R)
					e.now += res.Time
					return res, nil
				}
				if mean {
					// ECMP collisions: replay every rank on a copy of e's links if that fits
					// the work budget; else, where the model owes work on a hashed link (owed)
					// or its links are backlogged beyond the bar, replay every rank with a rate
					// interval if that fits coarseWork; else the ECMP mean model stands, unless
					// it is too far (every rank below).
					if exactAffordable(x.e.CompVisited, float64(n)/float64(x.S)) {
						ok, err := b.replayAll(res, cl, 0, exactWork, t, false)
						if err != nil {
							return nil, err
						}
						if ok {
							return res, nil
						}
					}
					// Not where the model stands only because MeanOversubscribed asks (kept:
					// the fabric is oversubscribed), nor where the replay's work may be far
					// past coarseWork (coarseBound). Where the model is too far to stand, the
					// alternative is the exact replay of every rank with no budget, whose rate
					// computations are a superset of this replay's: this one then runs, up to
					// farMessages and farP2PWork (24 nodes of aws-p5-48xl-h100-32efa-2026.xml at
					// 16 MiB: 10.8 s and +0.17% from the exact replay's 404 s). Past them (since
					// stop 59: 1,389 GB200 NVL72 racks, a send/recv of 1 GiB ran past 300 s) the
					// model stands with its owed work, backlogged, and Run takes two smaller
					// sizes where their replays fit (p2pSizesSteady: that row 21.7 s). Also where no
					// hashed link owes work (owed 0) but twice the largest backlog passes
					// MaxCoarseError of the time, the bar of trees and rings (meanTooFar): a
					// link over its capacity then holds back the batches it carries, which the
					// model's mean leaves out (128 one-GPU nodes, 16 MiB: the model −5.94%,
					// this replay +0.15% from the exact one; until stop 48 the model stood
					// wherever nothing was owed).
					iv := x.interval(t)
					ratio := 2 * float64(check.backlog()) / float64(t)
					backlogged := ratio > MaxCoarseError
					try, work, project := (owed > 0 || backlogged) && !kept, uint64(0), false
					// far: the model too far to stand, and the replay of every rank past
					// farMessages (its messages, this replay's times n/S) or, as it runs,
					// farP2PWork; the model then stands backlogged, which Machine.Run times
					// from two smaller sizes where it can (p2pSizesSteady).
					far := false
					switch {
					case try && !tooFar:
						bound := x.workBound(t+owed, iv, float64(n)/float64(x.S))
						var limit float64
						limit, work = backlogBudget(ratio, bound)
						try = bound <= limit
					case try && res.Messages*int64(n)/int64(x.S) > farMessages:
						try, far = false, true
					case try:
						work, project = farP2PWork, true
					}
					if try {
						ok, err := b.replayAll(res, cl, iv, work, t+owed, project)
						if err != nil {
							return nil, err
						}
						if ok {
							return res, nil
						}
						far = tooFar
					}
					if !tooFar || far {
						res.Time, res.ECMPMean = t+owed, true
						if backlogged || far {
							res.MeanBacklog = ratio
						}
						x.credit(b, cl, check, R)
						e.now += res.Time
						return res, nil
					}
				}
				if ecmpKept && !spec.Exact {
					// An oversubscribed fabric under ECMP, its uplinks over their capacity:
					// every rank replayed exactly where that fits exactWork, as where the
					// mean model owes work (above), else with a rate interval and no work
					// bound (the exact replay's rate computations are a superset of this
					// one's; 16 DGX H100 nodes with 8 per leaf, 2:1, 4 MiB: 0.37 s where the
					// exact replay takes 8.3 s, the same time; docs/cluster.md "Unchecked").
					for _, iv := range []Time{0, x.interval(t)} {
						work := uint64(0)
						if iv == 0 {
							if !exactAffordable(x.e.CompVisited, float64(n)/float64(x.S)) {
								continue
							}
							work = exactWork
						}
						ok, err := b.replayAll(res, cl, iv, work, t, false)
						if err != nil {
							return nil, err
						}
						if ok {
							return res, nil
						}
					}
				}
				// Rail routing over its capacity: every rank below.
				res.Relaxed = 0
				railOver = rail
			}
		}
	}
	x := b.perRank(e)
	if b.deferred(x) {
		return nil, errDeferred
	}
	if (kept || railOver) && isCluster && !spec.Exact && e.RateInterval == 0 {
		// Oversubscribed (its stand-ins kept): the interval of the symmetric replay above,
		// on a copy of e's links (rail routing, 24 nodes with 8 per leaf, 2:1, 4 MiB: 2.6 s
		// and +0.24% where the exact replay takes 14.6 s; docs/cluster.md "Unchecked").
		// Likewise under rail routing where the symmetric replay found a relaxed link over its
		// capacity (since stop 68: 25 all-to-all cells of 16 KiB–64 MiB on DGX H100, A100 and
		// DGX-1 nodes, 18 with 4 a leaf and 20 with 8 a leaf, and 3 GB200 racks with 2 a leaf,
		// +0.00…+0.26% from the exact replay, 21.9 s against its 105.7; docs/cluster.md "Rail
		// routing over its capacity").
		if lb := linkBound(x); lb > 0 {
			ok, err := b.replayAll(res, cl, x.interval(lb), 0, lb, false)
			if err != nil {
				return nil, err
			}
			if ok {
				return res, nil
			}
		}
	}
	t, err := x.run()
	if err != nil {
		return nil, err
	}
	res.LatencyMean, res.RateInterval = false, e.RateInterval
	res.Time, res.Events, res.Messages, res.Programs = t, res.Events+x.e.Events, x.messages(), x.net.programs()
	res.Rotation = 1
	if isCluster {
		res.Rotation = cl.NumNodes
	}
	return res, nil
}

// perRank builds the replay of every rank's programs on e itself (its relaxed links are e's own,
// which is exact).
func (b *p2pBuild) perRank(e *Engine) *p2pSim {
	net := b.programs(b.n, func(rank, target int) int32 { return int32(target) })
	net.route = make([][]LinkID, len(net.owner))
	net.lat = make([]Time, len(net.owner))
	net.netw = make([]bool, len(net.owner))
	cache := map[[3]int32]int32{} // (from, to, channel) -> slot already routed
	for s := range net.owner {
		from, to, ch := b.slotEnds(net, int32(s))
		k := [3]int32{int32(from), int32(to), int32(ch)}
		if j, ok := cache[k]; ok {
			net.route[s], net.lat[s], net.netw[s] = net.route[j], net.lat[j], net.netw[j]
			continue
		}
		route, class := routeP2P(b.r, from, to, ch, nil)
		net.route[s] = route
		net.lat[s] = e.RouteLatency(route) + b.tm.StepLat[class][b.proto]
		net.netw[s] = class == ClassNet
		cache[k] = int32(s)
	}
	return newP2PSim(e, net, b.tm, b.proto)
}

// replayAll replays every rank on a copy of e's links, its rate computations at most one per
// interval (0: exact) and their work bounded by work. Where it ends within the work it fills res,
// adds what the copy's links carried to e's and advances e's clock, and returns true; past the
// work it returns false and leaves res and e as they were. expect is about how long its caller
// expects the call to take (the symmetric replay's time), which a progress bar shows beside how
// far the replay has gone (ReplayProgress). With project, a replay that reaches half its work
// before a third of expect stops there as one past its work would (farProjection).
func (b *p2pBuild) replayAll(res *P2PResult, cl *Cluster, interval Time, work uint64, expect Time, project bool) (bool, error) {
	e := b.e
	c := e.replayCopy()
	if interval > 0 {
		c.RateInterval = interval
	}
	c.maxWork = work
	px := b.perRank(c)
	if b.deferred(px) {
		return false, errDeferred
	}
	if p2pPrune {
		c.pruneImplied(px.routes)
	}
	if b.deferWork > 0 && expect > 0 && (work == 0 || work > b.deferWork/4) {
		c.abort = b.probe(c, expect)
	}
	if project && work > 0 && expect > 0 {
		c.abort = farProjection(c, work, expect)
	}
	untrack := c.trackProgress(expect)
	pt, err := px.run()
	untrack()
	res.Events += px.e.Events
	switch {
	case errors.Is(err, errBudget):
		return false, nil
	case err != nil:
		return false, err
	}
	res.Time, res.Rotation, res.Programs, res.Messages = pt, cl.NumNodes, px.net.programs(), px.messages()
	res.LatencyMean = false
	res.RateInterval = c.RateInterval
	for l := range e.links {
		e.links[l].bytes += c.links[l].bytes
		e.links[l].busy += c.LinkBusy(LinkID(l))
	}
	e.now += pt
	return true, nil
}

// probe is the abort of a replay of every rank on c (P2PSpec.DeferWork): a replay whose rate
// computations visit deferWork/4 flows before it has simulated a quarter of expect (the symmetric
// replay's time, 0–15% under the replay's where measured) is projected past deferWork and stops with
// errDeferred; one that reaches the quarter first runs on as it would have without the probe. A
// projection from an earlier point overshoots where the fill is heavy: on 4 DGX H100 nodes under
// a 2:1 fat tree (all-to-all of 1 GiB) the first 2.1% of the time took 2.2 M of the replay's 11.6 M
// visits. Asked every eventBlock events; it chains an abort c already had.
func (b *p2pBuild) probe(c *Engine, expect Time) func() error {
	return visitsBefore(c, b.deferWork/4, 4, expect, errDeferred)
}

// visitsBefore is an abort for the replay on c that returns err if c's rate computations visit
// visits flows before the replay has simulated expect/k from now (k × the time simulated reaching
// expect), and nothing once the time is reached first: the projection of the replay's work that
// probe and farProjection make. It chains the abort c already had.
func visitsBefore(c *Engine, visits uint64, k Time, expect Time, err error) func() error {
	prev, start, decided := c.abort, c.Now(), false
	return func() error {
		if prev != nil {
			if err := prev(); err != nil {
				return err
			}
		}
		if decided {
			return nil
		}
		if k*(c.Now()-start) >= expect {
			decided = true
			return nil
		}
		if c.CompVisited >= visits {
			decided = true
			return err
		}
		return nil
	}
}

// farProjection is the abort of the replay of every rank that SimulateP2P tries where the ECMP
// mean model is too far to stand (farP2PWork): once its rate computations have visited half of
// work, a replay that has not yet simulated a third of expect (the model's time with its owed
// work) would visit at least 1.5 times work if the rest cost what the first half did, and stops
// with errBudget, so that the model stands half a budget sooner (since stop 73). The model is
// mostly under the replay (1,000 GH200 nodes at 16 MiB: 972 against 1,000 µs), which makes the
// projection lower still; where it was over (GB200 NVL72 send/recv, +19.3%: docs/cluster.md
// "A backlogged row from two smaller sizes") a stop still means past 1.26 times the budget. The first half is the cheaper one where it was traced: on 1,000
// GH200 nodes under ECMP (all-to-all, rate interval 51–74 ns) the visits per simulated µs grew
// through the replay, 251 → 419 (32 MiB: past the budget, 112 s) and 135 → 201 (16 MiB: within
// it, 184 M visits, 117 s; at half the budget it had simulated 47% of expect, where the abort
// needs under 33%). A replay whose fill is heavy (the first 2.1% of the time taking 19% of the
// visits: 4 DGX H100 nodes under a 2:1 fat tree, P2PSpec.DeferWork's probe) projects high from
// its start; from half its work the fill is diluted.
func farProjection(c *Engine, work uint64, expect Time) func() error {
	return visitsBefore(c, work/2, 3, expect, errBudget)
}

// slotEnds returns the ranks and channel of slot s of a net built by programs over S ranks.
func (b *p2pBuild) slotEnds(net *p2pNet, s int32) (from, to, ch int) {
	return int(net.fromRank[s]), int(net.toRank[s]), int(net.ch[s])
}

// programs builds the programs of ranks 0..S-1 on every channel used, and their slots; class
// maps a target rank to its program's rank (its orbit's representative).
func (b *p2pBuild) programs(S int, class func(rank, target int) int32) *p2pNet {
	net := &p2pNet{wire: b.wire, reps: S}
	nprog := S * len(b.chans)
	// Slots: one per (operation, channel part, representative rank) that sends.
	base := make([][]int32, len(b.ops))
	net.base = base
	for i, op := range b.ops {
		base[i] = make([]int32, len(op.part))
		for c, w := range op.part {
			base[i][c] = -1
			if w < 0 || op.d == 0 {
				continue
			}
			base[i][c] = int32(len(net.owner))
			ch := op.lo + c
			for rk := 0; rk < S; rk++ {
				t := (rk + op.d) % b.n
				net.owner = append(net.owner, int32(int(b.chIdx[ch])*S+rk))
				net.target = append(net.target, int32(int(b.chIdx[ch])*S)+class(rk, t))
				net.part = append(net.part, w)
				net.fromRank = append(net.fromRank, int32(rk))
				net.toRank = append(net.toRank, int32(t))
				net.ch = append(net.ch, int32(ch))
			}
		}
	}
	// Segments, per program in operation order.
	net.segOff = make([]int32, nprog+1)
	for _, op := range b.ops {
		for c, w := range op.part {
			if w >= 0 {
				ci := int(b.chIdx[op.lo+c])
				for rk := 0; rk < S; rk++ {
					net.segOff[ci*S+rk+1]++
				}
			}
		}
	}
	for p := 0; p < nprog; p++ {
		net.segOff[p+1] += net.segOff[p]
	}
	net.segs = make([]p2pSeg, net.segOff[nprog])
	fill := append([]int32(nil), net.segOff[:nprog]...)
	net.prog = make([]int32, len(net.segs))
	net.sendSeg = make([]int32, len(net.owner))
	net.recvSeg = make([]int32, len(net.owner))
	// The lanes of each segment's batch: its own (a send and a receive, or a copy to self) and
	// those of the other segments of the batch.
	batchLanes := make([]int32, len(net.segs))
	batchStart := func(p, g int32) int32 { // the first segment of segment g's batch
		return net.segOff[p] + (g-net.segOff[p])/coll.P2PBatch*coll.P2PBatch
	}
	for i, op := range b.ops {
		for c, w := range op.part {
			if w < 0 {
				continue
			}
			ci := int(b.chIdx[op.lo+c])
			for rk := 0; rk < S; rk++ {
				p := ci*S + rk
				g := fill[p]
				// Slot j of a batch of the program: lanes 2j, 2j+1.
				k0 := batchStart(int32(p), g)
				batchLanes[k0]++
				sg := p2pSeg{out: -1, in: -1, part: w}
				if op.d != 0 {
					sg.out = base[i][c] + int32(rk)
					// The sender to this rank is the rank at -d; its orbit's representative sends
					// on the same slot class.
					src := ((rk-op.d)%b.n + b.n) % b.n
					sg.in = base[i][c] + class(src, src)
					net.sendSeg[sg.out] = g
					net.recvSeg[sg.in] = g
					batchLanes[k0]++
				}
				net.segs[g] = sg
				net.prog[g] = int32(p)
				fill[p]++
			}
		}
	}
	if b.tm.CTARate > 0 {
		// A lane's fixed share of its CTA is taken over the lanes of its batch: NCCL's kernel
		// splits a CTA's warps among the works of the batch it runs (NCCL 2.28 sendrecv.h
		// RunWorkBatch), so the works of a channel's last, smaller batch have the CTA to
		// themselves (before stop 63 the share was over every lane the program used in the
		// call, and a batch of one work after one of eight ran at 2/16 of the CTA).
		net.segLane = make([]Rate, len(net.segs))
		for p := 0; p < nprog; p++ {
			for g := net.segOff[p]; g < net.segOff[p+1]; g++ {
				net.segLane[g] = b.tm.CTARate / Rate(max(batchLanes[batchStart(int32(p), g)], 1))
			}
		}
	}
	return net
}

// symmetric builds the replay of one rank per orbit of the rotation of nodes by R, on a private
// engine, and the check of its relaxed links.
func (b *p2pBuild) symmetric(cl *Cluster, R int, latMean bool) (*p2pSim, *relaxCheck, bool) {
	S := R * (b.n / cl.NumNodes)
	net := b.programs(S, func(_, t int) int32 { return int32(t % S) })
	q := NewEngine(nil)
	q.RateInterval, q.NoShortcut, q.Strict = b.e.RateInterval, b.e.NoShortcut, b.e.Strict
	qlink := map[LinkID]LinkID{} // orbit -> private link
	net.route = make([][]LinkID, len(net.owner))
	net.lat = make([]Time, len(net.owner))
	net.netw = make([]bool, len(net.owner))
	// Each slot's route as link orbits, in route order, with the times it crosses each.
	orbits := make([][]LinkID, len(net.owner))
	times := make([][]int32, len(net.owner))
	weight := map[LinkID]int32{} // an orbit's crossings per connection, where all agree
	unequal := false
	mult := map[LinkID]int32{}
	for s := range net.owner {
		from, to, ch := b.slotEnds(net, int32(s))
		route, class := routeP2P(b.r, from, to, ch, nil)
		net.lat[s] = b.e.RouteLatency(route) + b.tm.StepLat[class][b.proto]
		net.netw[s] = class == ClassNet
		clear(mult)
		var order []LinkID
		prev := LinkID(-1)
		for _, l := range route {
			if u := b.use(l); u >= 0 {
				o := cl.orbit(u, R)
				if o == prev && cl.isSwitch(l) {
					continue // the queue pairs of a tier: one crossing of its stand-in
				}
				prev = o
				if mult[o] == 0 {
					order = append(order, o)
				}
				mult[o]++
			}
		}
		ts := make([]int32, len(order))
		for i, o := range order {
			ts[i] = mult[o]
			if w0, ok := weight[o]; ok && w0 != ts[i] {
				unequal = true
			}
			weight[o] = ts[i]
		}
		orbits[s], times[s] = order, ts
	}
	// A member of a slot's connection class crossing an orbit w times loads each of the orbit's
	// links as w connections of the class do (the rotation spreads the crossings evenly). Where
	// every class crosses an orbit alike, its private link has 1/w of the capacity; where classes
	// cross it unequally (a route that meets the same orbit at both ends: 24 nodes of
	// rtx3090-8gpu-pcie-2socket-ib56g.xml, with a rotation of one node, staging through host
	// memory at both ends, where a route inside a node meets it once), the private link keeps the
	// whole capacity and each route its weight w on it: the same max-min shares (weighRoute).
	if unequal {
		net.rw = make([][]float64, len(net.owner))
	}
	for s, order := range orbits {
		qr := make([]LinkID, 0, len(order))
		for _, o := range order {
			id, ok := qlink[o]
			if !ok {
				c := b.e.LinkCap(o)
				if !unequal {
					c /= Rate(weight[o])
				}
				id = q.AddLink("", c, 0)
				qlink[o] = id
			}
			qr = append(qr, id)
		}
		net.route[s] = qr
		if unequal {
			w := make([]float64, len(order))
			for i, t := range times[s] {
				w[i] = float64(t)
			}
			net.rw[s] = w
		}
	}
	x := newP2PSim(q, net, b.tm, b.proto)
	x.qlink, x.S = qlink, S
	// One walk of every route for the members' mean latencies and the check's pairs (relax.go),
	// unless they are past checkPairs (counted with the link kinds, SimulateP2P).
	var sum, cnt, lats []Time
	if latMean {
		sum, cnt = make([]Time, len(net.lat)), make([]Time, len(net.lat))
		lats = make([]Time, b.e.NumLinks()) // side by side (see credit)
		for l := range lats {
			lats[l] = b.e.RouteLatency([]LinkID{LinkID(l)}) // a queue pair's share of a tier's
		}
	}
	var pairs []uint64
	unchecked := b.unchecked()
	if b.relax != nil && !unchecked && b.crossings > 0 {
		pairs = make([]uint64, 0, b.crossings)
	}
	if latMean && (b.relax == nil || unchecked) && b.w != nil {
		// The sums alone: they depend on the routes and the rotation, not on the bytes, and the
		// sizes of a sweep share them (p2pWalk.latSums).
		sum, cnt = b.w.latSums(S, func() ([]Time, []Time) {
			b.latSums(net, S, lats, sum, cnt)
			return sum, cnt
		})
	} else if latMean || (b.relax != nil && !unchecked) {
		b.eachRoute(func(i, c, rk int, route []LinkID) {
			slot := net.base[i][c] + int32(rk%S)
			if latMean {
				for _, l := range route {
					sum[slot] += lats[l]
				}
				cnt[slot]++
			}
			if b.relax == nil || unchecked {
				return
			}
			for _, l := range route {
				if _, ok := b.relax(l); ok {
					pairs = append(pairs, relaxPair(l, slot))
				}
			}
		})
	}
	if latMean {
		for s := range net.lat {
			from, to, ch := b.slotEnds(net, int32(s))
			route, _ := routeP2P(b.r, from, to, ch, nil)
			net.lat[s] += (sum[s]+cnt[s]/2)/max(cnt[s], 1) - b.e.RouteLatency(route)
		}
	}
	if b.relax == nil || unchecked {
		return x, nil, unchecked
	}
	check := newRelaxCheck(b.e, pairs, len(net.owner))
	if check != nil {
		check.e = q
		staged := x.staged
		check.slot = func(tag int64) int32 {
			switch s := int32(tag >> 2); tag & 3 {
			case p2pNIC:
				return s
			case p2pSend:
				if staged && net.netw[s] {
					return -1 // the CTA's stage of a network message: no link of the connection
				}
				return s
			}
			return -1
		}
		q.obs = check
	}
	return x, check, false
}

// unchecked reports whether the symmetric replay stands without its relaxed-link check: past
// checkPairs crossings, and not Exact.
func (b *p2pBuild) unchecked() bool { return b.crossings > checkPairs && !b.exact }

// checkPairs is the most crossings of relaxed links (member connections times the relaxed links
// each crosses) the symmetric replay checks: about 20 bytes each while the check is built
// (newRelaxCheck). Past it the replay stands unchecked (P2PResult.Unchecked).
var checkPairs = 1 << 26

// symWork bounds the rate computations (Engine.CompVisited) of SimulateP2P's replay of one rank
// per orbit run exactly: past it the replay goes on with a rate interval (Engine.pastWork), half
// the one the replay of every rank takes (p2pSim.interval of linkBound's lower bound on the time),
// and the row's mode names it (rate-interval-N). The whole interval's argument (MaxCoarseError/2)
// did not hold there: GB200 NVL72 racks' all-to-all of 1 GiB came out +0.037, +0.079 and +0.97%
// from the exact replay on 16, 32 and 64 racks (the last 23,364.8 against 23,140.3 µs), with half
// of it +0.020, −0.145 and −0.270% (docs/cluster.md "Past symWork"). About a second on this
// project's 2-core development machine (0.05-0.1 µs a visit there). What passes it: all-to-all on
// GB200 NVL72 racks (72 ranks a node, each a program per channel: 1,152 programs whose flows share
// one rate computation) from about 4 racks at 1 GiB (30 M visits; 16 racks at 1 GiB 447 M, 51 s;
// 64 racks 2.69 G, 429 s); the symmetric all-to-all of 128 DGX H100 nodes at 1 GiB visits 2.4 M.
var symWork uint64 = 20_000_000

// farP2PWork bounds, as it runs, the replay of every rank with a rate interval that SimulateP2P
// takes where the ECMP mean model is too far to stand (with farMessages, which bounds it before):
// past it the model stands with its owed work, backlogged, and Machine.Run tries two smaller sizes
// (p2pSizesSteady). That replay's visits cost 0.43 µs each where its flows are many and short (128
// DGX H100 nodes with 4 a leaf, all-to-all of 256 MiB: 50 M visits in 21.7 s; the whole replay
// took 994.6 s, and its row is 0.78% under it on the model) and 0.05–0.1 µs where they are few
// (GB200 send/recv): about 1.5 minutes at most here. The tree's budget (farWork) is five times
// larger: its visits are cheaper.
var farP2PWork uint64 = 200_000_000

// credit adds to e's links what the symmetric replay x carried: every member's bytes, and the
// busy time of its link's orbit (or of the relaxed link, from check).
func (x *p2pSim) credit(b *p2pBuild, cl *Cluster, check *relaxCheck, R int) {
	e := b.e
	bytes, seen := x.linkBytes(b)
	for l, by := range bytes {
		e.links[l].bytes += by
		if !seen[l] {
			continue
		}
		if u := b.use(LinkID(l)); u == LinkID(l) {
			if id, ok := x.qlink[cl.orbit(u, R)]; ok {
				e.links[l].busy += x.e.LinkBusy(id)
			}
		}
	}
	if check != nil {
		check.linkBusy(func(l LinkID, busy Time) { e.links[l].busy += busy })
	}
}

// slotBytes returns per slot the wire bytes its connection carries (a member's, for the
// symmetric replay).
func (x *p2pSim) slotBytes() []float64 {
	total := make([]float64, len(x.net.part))
	for s, p := range x.net.part {
		for _, w := range x.net.wire[p] {
			total[s] += w
		}
	}
	return total
}

// linkBytes returns per link of b's engine the wire bytes every member of x's slots carries over
// it (a queue pair's share where the link has one: crossShare), and whether some route crosses
// it. Where a slot's bytes depend only on its channel part's position in its operation (an
// all-to-all's or a send/recv's: every peer the same message), they are the part's bytes times
// the routes' crossings (routeLinks, which the sizes of a sweep share), without a walk of every
// route (an all-to-all on 256 GB200 NVL72 racks: 340 M of them, 15 s a walk); else every route
// is walked.
func (x *p2pSim) linkBytes(b *p2pBuild) ([]float64, []bool) {
	e := b.e
	total := x.slotBytes()
	S := x.S // the members a slot stands for (the replay of every rank: one)
	if S == 0 {
		S = b.n
	}
	if per, ok := x.partBytes(b, total, S); ok {
		rl := b.routeLinks()
		bytes := make([]float64, e.NumLinks())
		for c, t := range per {
			if t == 0 || c >= len(rl.share) {
				continue
			}
			for l, sh := range rl.share[c] {
				bytes[l] += t * sh
			}
		}
		return bytes, rl.seen
	}
	bytes := make([]float64, e.NumLinks())
	seen := make([]bool, e.NumLinks())
	b.eachRoute(func(i, c, rk int, route []LinkID) {
		t := total[x.net.base[i][c]+int32(rk%S)]
		for _, l := range route {
			bytes[l] += t * e.crossShare(l)
			seen[l] = true
		}
	})
	return bytes, seen
}

// partBytes returns, per position of a channel part in an operation, the bytes of every slot of
// that position, and false where two slots of one position differ.
func (x *p2pSim) partBytes(b *p2pBuild, total []float64, S int) ([]float64, bool) {
	var per []float64
	var set []bool
	for i, c := range b.parts() {
		for len(per) <= c {
			per, set = append(per, 0), append(set, false)
		}
		base := x.net.base[i][c]
		for s := base; s < base+int32(S); s++ {
			if !set[c] {
				per[c], set[c] = total[s], true
			} else if total[s] != per[c] {
				return nil, false
			}
		}
	}
	return per, true
}

// routeLinks is what every route of a point-to-point call crosses, whatever its bytes: per
// position c of a channel part in its operation, per link, the sum of crossShare over the routes
// of that position (every rank, every operation); and the links some route crosses.
type routeLinks struct {
	share [][]float64
	seen  []bool
}

// routeLinks returns b's routeLinks, kept with its walk (the sizes of a sweep share it). It walks
// every route once, the ranks in routeHalves parts side by side, added up in part order (the same
// sums whatever the cores).
func (b *p2pBuild) routeLinks() *routeLinks {
	if b.w == nil {
		return b.walkLinks()
	}
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	if b.w.links == nil {
		b.w.links = b.walkLinks()
	}
	return b.w.links
}

func (b *p2pBuild) walkLinks() *routeLinks {
	e := b.e
	parts := 0
	for _, op := range b.ops {
		parts = max(parts, len(op.part))
	}
	halves := b.routeHalves()
	res := make([]*routeLinks, halves)
	var wg sync.WaitGroup
	for h := range halves {
		lo, hi := b.n*h/halves, b.n*(h+1)/halves
		rl := &routeLinks{share: make([][]float64, parts), seen: make([]bool, e.NumLinks())}
		for c := range rl.share {
			rl.share[c] = make([]float64, e.NumLinks())
		}
		res[h] = rl
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []LinkID
			// Position by position: one position's links stay in the cache (16 positions of
			// 342,144 links on 256 GB200 racks are 44 MB; taken op by op, 5 times the time).
			for c := range parts {
				sh, seen := rl.share[c], rl.seen
				for _, op := range b.ops {
					if op.d == 0 || c >= len(op.part) || op.part[c] < 0 {
						continue
					}
					for rk := lo; rk < hi; rk++ {
						buf, _ = routeP2P(b.r, rk, (rk+op.d)%b.n, op.lo+c, buf[:0])
						for _, l := range buf {
							sh[l] += e.crossShare(l)
							if !seen[l] {
								seen[l] = true
							}
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	out := res[0]
	for _, rl := range res[1:] {
		for c := range out.share {
			for l, v := range rl.share[c] {
				out.share[c][l] += v
			}
		}
		for l, v := range rl.seen {
			out.seen[l] = out.seen[l] || v
		}
	}
	return out
}

// linkBound is a lower bound on the time of the replay x: the most any link of b's engine must
// carry of every connection's wire bytes over its capacity (the bytes of every member, as credit
// adds them up), 0 where no link has a capacity.
func (x *p2pSim) linkBound(b *p2pBuild) Time {
	e := b.e
	bytes, _ := x.linkBytes(b)
	var lb Time
	for l, by := range bytes {
		if c := e.links[l].cap; c > 0 && by > 0 {
			lb = max(lb, transferTime(by, c))
		}
	}
	return lb
}

// p2pSim replays a p2pNet as coll's schedule runs it: a program's segments in batches of
// coll.P2PBatch, each segment of a batch with a sending and a receiving lane of its own, the next
// batch once every segment of the current one is done; per slot the messages that arrived and
// those consumed.
type p2pSim struct {
	e   *Engine
	net *p2pNet
	tm  Timing
	// per program: its current batch of segments [lo, hi) and how many of them are unfinished
	lo, hi, left []int32
	// per segment: each lane's next message, whether it runs a flow, whether it is done
	sendNext, recvNext []int32
	sendRun, recvRun   []bool
	sendFin, recvFin   []bool
	// per slot
	arrived, consumed []int32
	end               Time
	capRate           Rate // the per-flow cap of the protocol (Timing.PerFlowCap; 0: none)
	// The memory-traffic model (Timing.CTAMem, Fence), where it applies (mem > 0): the CTA's
	// rate of traffic, the payload bytes per wire byte, and the fence after a Simple send.
	mem   Rate
	pay   float64
	fence Time
	// copyScale: a copy to self's traffic factor (Timing.copyScale), 1 without the model
	copyScale float64
	// SharedCTA (where the memory-traffic model applies): per program the link standing for its
	// CTA (capacity mem, traffic bytes), and per slot its route followed by its sender's CTA link,
	// weighted by the send's traffic per wire byte (nil: the lanes' fixed shares).
	cta      []LinkID
	ctaRoute [][]LinkID
	// selfRoute: per program, the route of its copies to self where its rank's GPU memory is
	// shared by them (Timing.MemTraffic; nil: its CTA link alone)
	selfRoute [][]LinkID
	// symmetric replay: orbits of links -> private links, ranks per rotation
	qlink map[LinkID]LinkID
	S     int
	// Timing.NetStage with the CTA modelled (staged): per slot into the network, its NIC's queue
	staged bool
	nic    nicQueues
}

// Flow tags: slot<<2 (kind p2pSend) for a message, or for the CTA's stage of one into the network
// and slot<<2|p2pNIC for its NIC's (Timing.NetStage), program<<2|p2pRecvWork for a receive's local
// work, program<<2|p2pCopyWork for a copy to self.
const (
	p2pSend     = 0
	p2pRecvWork = 1
	p2pCopyWork = 2
	p2pNIC      = 3
)

func newP2PSim(e *Engine, net *p2pNet, tm Timing, proto coll.Proto) *p2pSim {
	np, ns, ng := net.programs(), len(net.owner), len(net.segs)
	x := &p2pSim{e: e, net: net, tm: tm, lo: make([]int32, np), hi: make([]int32, np), left: make([]int32, np),
		sendNext: make([]int32, ng), recvNext: make([]int32, ng), sendRun: make([]bool, ng), recvRun: make([]bool, ng),
		sendFin: make([]bool, ng), recvFin: make([]bool, ng),
		arrived: make([]int32, ns), consumed: make([]int32, ns), capRate: tm.PerFlowCap[proto], copyScale: 1}
	copy(x.hi, net.segOff[:np])
	for s, w := range net.rw {
		if len(w) > 0 {
			e.weighRoute(net.route[s], w)
		}
	}
	if proto >= 0 && proto < coll.NumProtos && tm.CTARate > 0 && tm.CTAMem[proto] > 0 {
		const unit = 1 << 20
		x.mem, x.pay = tm.CTAMem[proto], float64(unit)/float64(coll.WireBytes(proto, unit))
		x.copyScale = tm.copyScale(coll.Copy, proto)
		if proto == coll.Simple {
			x.fence = tm.Fence
		}
		if SharedCTA {
			x.shareCTA()
		}
	}
	x.shareMem()
	if tm.NetStage && tm.CTARate > 0 && net.netw != nil {
		x.staged = true
		x.nic = newNICQueues(ns)
	}
	return x
}

// stagedSend reports whether slot s's messages go in two stages (Timing.NetStage): into the
// network, with the CTA modelled (the flat rate, the memory-traffic model or its shared link).
func (x *p2pSim) stagedSend(s int32) bool {
	return x.staged && x.net.netw[s] && (x.cta != nil || x.net.segLane != nil)
}

// nicStart puts slot s's next written message on its route if its NIC is free: a connection's
// messages go one after another (Timing.NetStage).
func (x *p2pSim) nicStart(s int32) {
	i, ok := x.nic.take(int(s))
	if !ok {
		return
	}
	wire := x.net.wire[x.net.segs[x.net.sendSeg[s]].part]
	x.e.StartFlow(x.net.route[s], wire[i], x.capRate, int64(s)<<2|p2pNIC)
}

// shareCTA makes every program's lanes share one link of its CTA's traffic rate (SharedCTA): a
// send crosses its route and its sender's CTA link, which it loads with its traffic per wire byte
// (ctaTraffic of a Send), a receive's and a copy's local work cross the CTA link alone.
func (x *p2pSim) shareCTA() {
	x.cta = make([]LinkID, x.net.programs())
	for p := range x.cta {
		x.cta[p] = x.e.AddLink("cta", x.mem, 0)
	}
	const unit = 1 << 20
	w := ctaTraffic(coll.Send, unit*x.pay, unit, 1) / unit
	x.ctaRoute = make([][]LinkID, len(x.net.owner))
	for s, r := range x.net.route {
		cr := append(append(make([]LinkID, 0, len(r)+1), r...), x.cta[x.net.owner[s]])
		ws := make([]float64, len(cr))
		for i := range ws {
			ws[i] = 1
		}
		if s < len(x.net.rw) {
			copy(ws, x.net.rw[s])
		}
		ws[len(ws)-1] = w
		x.e.weighRoute(cr, ws)
		x.ctaRoute[s] = cr
	}
}

// shareMem gives every replayed rank whose channels' copies to self could together ask more
// than Timing.MemTraffic of its GPU's memory a link of that capacity, which those copies cross
// (selfRoute: after their CTA link where the CTA is one), weighted by the memory traffic a unit of
// the copy's flow is: 1 / copyScale of the CTA traffic it carries, its traffic where a lane moves
// it (memLane), two bytes a payload byte under the flat model. The schedule replay does the same
// (sim.buildMem).
func (x *p2pSim) shareMem() {
	if x.net.reps <= 0 || !x.tm.memBinds(x.net.programs()) { // no rank has more channels than programs
		return
	}
	copies := make([]int, x.net.reps)
	has := make([]bool, x.net.programs())
	for g, sg := range x.net.segs {
		if p := x.net.prog[g]; sg.out < 0 && len(x.net.wire[sg.part]) > 0 && x.net.wire[sg.part][0] > 0 && !has[p] {
			has[p] = true
			copies[int(p)%x.net.reps]++
		}
	}
	mem := make([]LinkID, x.net.reps)
	for r, c := range copies {
		mem[r] = -1
		if x.tm.memBinds(c) {
			mem[r] = x.e.AddLink(fmt.Sprintf("mem%d", r), x.tm.MemTraffic, 0)
		}
	}
	for p, h := range has {
		m := mem[p%x.net.reps]
		if !h || m < 0 {
			continue
		}
		if x.selfRoute == nil {
			x.selfRoute = make([][]LinkID, x.net.programs())
		}
		var r []LinkID
		var w []float64
		switch {
		case x.cta != nil:
			r, w = []LinkID{x.cta[p], m}, []float64{1, 1 / x.copyScale}
		case x.mem > 0 && x.net.segLane != nil:
			r, w = []LinkID{m}, []float64{1 / x.copyScale}
		default:
			r, w = []LinkID{m}, []float64{2}
		}
		x.e.weighRoute(r, w)
		x.selfRoute[p] = r
	}
}

// p2pPrune makes replayAll leave out of its rate computations the links whose constraint another
// link implies (Engine.pruneImplied: the same max-min rates; its copy of the links serves the
// replay alone). On 32 DGX H100 nodes with 2 per leaf (all-to-all, 2 MiB, rate-interval-105ns)
// it takes the replay from 6.2 to 5.3 s; the PCIe links between a GPU and its NIC are the ones
// left out. TestReplayAllPruned holds the times to those of the whole computation.
var p2pPrune = true

// routes yields every route a flow of x may take: each message's, with its sender's CTA link
// where the lanes share it (SharedCTA), and each CTA link alone (a receive's or a copy's work).
func (x *p2pSim) routes(yield func([]LinkID)) {
	if x.cta == nil {
		for _, r := range x.net.route {
			yield(r)
		}
		return
	}
	for _, r := range x.ctaRoute {
		yield(r)
	}
	for p := range x.cta {
		yield(x.cta[p : p+1])
	}
}

// memLane is segment g's lane share of its CTA's traffic rate (0: the model does not apply).
func (x *p2pSim) memLane(g int32) Rate {
	if x.mem <= 0 || x.net.segLane == nil {
		return 0
	}
	return x.mem * (x.net.segLane[g] / x.tm.CTARate)
}

// messages is the number of messages the replay simulates.
func (x *p2pSim) messages() int64 {
	var m int64
	for _, p := range x.net.part {
		m += int64(len(x.net.wire[p]))
	}
	return m
}

// run replays the programs from a kernel launch at e's current time and returns the time to the
// last step's completion.
func (x *p2pSim) run() (Time, error) {
	x.e.handler = x
	t0 := x.e.Now()
	x.end = t0
	x.e.At(t0+x.tm.Launch, evLaunch, 0)
	_, err := x.e.Run()
	if err != nil {
		return 0, err
	}
	for p := range x.hi {
		if end := x.net.segOff[p+1]; x.hi[p] != end || x.left[p] != 0 {
			return 0, fmt.Errorf("simnet: p2p simulation stopped in segment %d of program %d", x.lo[p]-x.net.segOff[p], p)
		}
	}
	return max(x.end-t0, x.tm.Launch), nil
}

func (x *p2pSim) Fire(kind int32, arg int64) {
	switch kind {
	case evLaunch:
		for p := range x.hi {
			x.nextBatch(int32(p))
		}
	case evComplete:
		x.sent(int32(arg))
	case evArrive:
		s := int32(arg)
		x.arrived[s]++
		if g := x.net.recvSeg[s]; x.active(g) {
			x.tryRecv(g)
		}
	}
}

// nextBatch starts program p's next batch of segments (if any remain).
func (x *p2pSim) nextBatch(p int32) {
	end := x.net.segOff[p+1]
	if x.hi[p] >= end {
		return
	}
	lo := x.hi[p]
	x.lo[p], x.hi[p] = lo, min(lo+coll.P2PBatch, end)
	x.left[p] = x.hi[p] - lo
	for g := lo; g < x.hi[p]; g++ {
		x.trySend(g)
		x.tryRecv(g)
	}
}

// active reports whether segment g belongs to its program's current batch.
func (x *p2pSim) active(g int32) bool {
	p := x.net.prog[g]
	return g >= x.lo[p] && g < x.hi[p]
}

// finish records that one lane of segment g is done; when both are, the segment is, and when
// every segment of its batch is, its program goes on to the next batch.
func (x *p2pSim) finish(g int32) {
	if !x.sendFin[g] || !x.recvFin[g] {
		return
	}
	p := x.net.prog[g]
	x.left[p]--
	if x.left[p] == 0 {
		x.nextBatch(p)
	}
}

// done records a step's completion time.
func (x *p2pSim) done() {
	if now := x.e.Now(); now > x.end {
		x.end = now
	}
}

// trySend starts segment g's next step on its sending lane if it can run: its copy to self (at
// the lane's rate; at once where the CTA is not modelled), or its next message once the previous
// is sent and the connection's slot is free (NCCL_STEPS: message i reuses the slot of message
// i-8).
func (x *p2pSim) trySend(g int32) {
	if x.sendRun[g] || x.sendFin[g] {
		return
	}
	sg := &x.net.segs[g]
	wire := x.net.wire[sg.part]
	p := x.net.prog[g]
	if sg.out < 0 {
		if x.cta != nil && wire[0] > 0 {
			x.sendRun[g] = true // Copy on the shared CTA, at the direct copy's rate (copyScale)
			route := x.cta[p : p+1]
			if x.selfRoute != nil && x.selfRoute[p] != nil {
				route = x.selfRoute[p] // its CTA link, then its GPU's memory
			}
			x.e.StartFlow(route, ctaTraffic(coll.Copy, wire[0]*x.pay, wire[0], 0)*x.copyScale, x.capRate, int64(g)<<2|p2pCopyWork)
			return
		}
		var route []LinkID
		if x.selfRoute != nil {
			route = x.selfRoute[p]
		}
		if m := x.memLane(g); m > 0 && wire[0] > 0 {
			x.sendRun[g] = true // Copy: load and store the payload
			x.e.StartFlow(route, ctaTraffic(coll.Copy, wire[0]*x.pay, wire[0], 0)*x.copyScale, m, int64(g)<<2|p2pCopyWork)
			return
		}
		if lane := x.net.segLane[g]; lane > 0 && wire[0] > 0 {
			x.sendRun[g] = true
			x.e.StartFlow(route, wire[0], lane, int64(g)<<2|p2pCopyWork)
			return
		}
		x.done()
		x.sendFin[g] = true
		x.finish(g)
		return
	}
	i := x.sendNext[g]
	if i >= int32(len(wire)) {
		x.sendFin[g] = true
		x.finish(g)
		return
	}
	if i >= 8 && x.consumed[sg.out] < i-7 {
		return
	}
	capRate := x.capRate
	if x.stagedSend(sg.out) {
		// Timing.NetStage: the CTA writes the message into the connection's buffer (its Send
		// traffic on its CTA, on no link of the route); the NIC then carries it (nicStart).
		x.sendRun[g] = true
		tr := ctaTraffic(coll.Send, wire[i]*x.pay, wire[i], 1)
		switch m := x.memLane(g); {
		case x.cta != nil:
			x.e.StartFlow(x.cta[p:p+1], tr, capRate, int64(sg.out)<<2)
		case m > 0:
			x.e.StartFlow(nil, tr, m, int64(sg.out)<<2)
		default:
			x.e.StartFlow(nil, wire[i], x.net.segLane[g], int64(sg.out)<<2)
		}
		return
	}
	if x.cta != nil {
		// The sender's CTA link bounds the message with whatever the CTA's other lanes leave.
		x.sendRun[g] = true
		x.e.StartFlow(x.ctaRoute[sg.out], wire[i], capRate, int64(sg.out)<<2)
		return
	}
	if m := x.memLane(g); m > 0 {
		// Send: load the payload, store the wire form into the peer's FIFO.
		if r := m * Rate(wire[i]/ctaTraffic(coll.Send, wire[i]*x.pay, wire[i], 1)); capRate <= 0 || r < capRate {
			capRate = r
		}
	} else if lane := x.net.segLane[g]; lane > 0 && (capRate <= 0 || lane < capRate) {
		capRate = lane
	}
	x.sendRun[g] = true
	x.e.StartFlow(x.net.route[sg.out], wire[i], capRate, int64(sg.out)<<2)
}

// tryRecv starts segment g's next receive on its receiving lane if its message has arrived: a
// copy out of the FIFO at the lane's rate, or nothing without a CTA model.
func (x *p2pSim) tryRecv(g int32) {
	for !x.recvRun[g] && !x.recvFin[g] {
		sg := &x.net.segs[g]
		wire := x.net.wire[sg.part]
		i := x.recvNext[g]
		if sg.in < 0 || i >= int32(len(wire)) {
			x.recvFin[g] = true
			x.finish(g)
			return
		}
		if x.arrived[sg.in] <= i {
			return
		}
		if p := x.net.prog[g]; x.cta != nil {
			x.recvRun[g] = true // Recv on the shared CTA
			x.e.StartFlow(x.cta[p:p+1], ctaTraffic(coll.Recv, wire[i]*x.pay, wire[i], 0), x.capRate, int64(g)<<2|p2pRecvWork)
			return
		}
		if m := x.memLane(g); m > 0 {
			x.recvRun[g] = true // Recv: load the FIFO's wire bytes, store the payload
			x.e.StartFlow(nil, ctaTraffic(coll.Recv, wire[i]*x.pay, wire[i], 0), m, int64(g)<<2|p2pRecvWork)
			return
		}
		if lane := x.net.segLane[g]; lane > 0 {
			x.recvRun[g] = true
			x.e.StartFlow(nil, wire[i], lane, int64(g)<<2|p2pRecvWork)
			return
		}
		x.recvDone(g)
	}
}

// recvDone completes segment g's current receive: the message's slot is free for its sender.
func (x *p2pSim) recvDone(g int32) {
	sg := &x.net.segs[g]
	x.recvNext[g]++
	x.consumed[sg.in]++
	x.done()
	if s := x.net.sendSeg[sg.in]; x.active(s) {
		x.trySend(s)
	}
}

func (x *p2pSim) FlowDone(tag int64) {
	id := int32(tag >> 2)
	switch tag & 3 {
	case p2pNIC:
		// A network message's NIC stage: it arrives, and its connection's next one goes.
		x.e.After(x.net.lat[id], evArrive, int64(id))
		x.nic.left(int(id))
		x.nicStart(id)
	case p2pSend:
		if x.stagedSend(id) {
			x.nic.wrote(int(id)) // its CTA has written it: the NIC takes it from here
			x.nicStart(id)
		} else {
			x.e.After(x.net.lat[id], evArrive, int64(id))
		}
		if x.fence > 0 {
			x.e.After(x.fence, evComplete, int64(id)) // the fence holds the sending lane
			return
		}
		x.sent(id)
	case p2pRecvWork:
		x.recvRun[id] = false
		x.recvDone(id)
		x.tryRecv(id)
	case p2pCopyWork:
		x.sendRun[id] = false
		x.done()
		x.sendFin[id] = true
		x.finish(id)
	}
}

// sent completes the send on slot s that is running.
func (x *p2pSim) sent(s int32) {
	g := x.net.sendSeg[s]
	x.sendRun[g] = false
	x.sendNext[g]++
	x.done()
	x.trySend(g)
}
