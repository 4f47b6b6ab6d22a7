package simnet

import (
	"errors"
	"fmt"
	"math"

	"github.com/simccl/simccl/coll"
)

// RingSpec is a ring collective for the compact executor (SimulateRing), which replays NCCL's ring
// algorithm without materialising a coll.Schedule: every (channel, rank) is a small state machine,
// so memory stays proportional to ranks × channels, not to the number of steps. It exists for
// clusters whose schedules would not fit in memory (1,024 to 16,384 GPUs and more).
type RingSpec struct {
	Func  coll.Func // AllReduce, AllGather or ReduceScatter
	Bytes int64     // NCCL's nBytes: the buffer (AllReduce) or the total gathered/scattered bytes
	Proto coll.Proto
	// Rings holds, per channel, the ring order over all ranks.
	Rings [][]int
	// Chunk is the payload of one step on one channel (tuning's calcCollChunking; 0: the
	// protocol's default step).
	Chunk int64
	// Merge is the coarse mode: Merge consecutive ring steps of a loop travel as one message of
	// Merge× the bytes that pays Merge× the per-step latency (1 = exact; 0 = automatic: the
	// smallest factor that keeps the messages under MaxMessages). A Simple ring is never merged
	// (its steps go in slices, whose pipelining a merged message loses; runRing).
	Merge       int
	MaxMessages int64 // 0: MessageBudget
	// PerRank replays every rank (no symmetric replay), Strict relaxes no link, Exact never lets
	// an approximation stand for the exact replay (as in TreeSpec): no latency or ECMP mean, and
	// no merged steps unless Merge asks for them. MeanOversubscribed: as in TreeSpec.
	PerRank, Strict, Exact, MeanOversubscribed bool
}

// MessageBudget is the one budget of the compact executors' coarse modes: the number of simulated
// messages a replay aims to stay under when its spec gives no MaxMessages. SimulateRing merges K
// ring steps per message past it (mode ring-coarse-K); SimulateTree simulates only the first
// chunks past it and extrapolates the steady state (mode tree-steady-C); SimulateP2P merges K
// chunks per message (p2p-coarse-K). Machine.Run, bench/sim and docs/cluster.md use it; the error
// of each coarse mode against the exact replay is measured in docs/cluster.md.
const MessageBudget = 2_000_000

// RingResult is the outcome of SimulateRing.
type RingResult struct {
	Time     Time
	Events   uint64
	Messages int64
	Merge    int // the merge factor used
	Groups   int // channel groups (channels with identical rings and routes run as one)
	Loops    int
	Steps    int // ring steps per loop (before merging)
	// Rotation is the rotation of nodes whose orbits a symmetric replay ran one rank of (0:
	// every rank replayed).
	Rotation int
	// LatencyMean: ranks whose routes differ only in switch latency were replayed as one, with
	// their mean latency. ECMPMean: the ECMP mean model stands for the exact replay, a relaxed
	// link having carried more than its capacity (relax.go, docs/cluster.md).
	LatencyMean, ECMPMean bool
	// Overload is, in a symmetric replay, the largest load over capacity seen on a relaxed link
	// (above 1 where hash collisions overloaded one).
	Overload float64
}

type ringLane struct {
	ring  []int32 // ranks in ring order
	lanes int     // channels it stands for
	ch    int     // first channel
	// per position: routes to the next position
	route [][]LinkID
	lat   []Time
	net   []bool // per position: its route to the next crosses the network (ClassNet)
	// state per position
	step     []int32 // next step to run, global over loops: l*(S+1)+t
	running  []bool
	arrived  []int32 // messages received from prev
	consumed []int32 // messages of mine the next has consumed
	// Timing.NetStage: per position whose route crosses the network, its NIC's queue
	nic nicQueues
}

type ringSim struct {
	e      *Engine
	groups []*ringLane
	S      int32 // sends per loop (after merging)
	L      int32 // loops
	// K is the messages a step is sent as, and W the messages a connection may have in flight:
	// a Simple step goes in chunkSteps/sliceSteps slices of sliceSteps of the NCCL_STEPS buffer
	// slots each (K = 2, W = 4), as coll's schedule sends it (until stop 57 one message with a
	// window of eight: −24…+57% from the schedule across the network); other protocols one
	// message a step in NCCL_STEPS slots (K = 1, W = 8).
	K, W     int32
	msgBytes []float64
	stepLat  Time
	cap      Rate
	cta      Rate    // one CTA's data rate (Timing.CTARate; 0: not modelled)
	staged   bool    // Timing.NetStage with the CTA modelled: network messages in two stages
	nicCap   Rate    // the per-flow cap of a message's NIC stage (Timing.PerFlowCap)
	skew     Time    // channel c's groups start c × skew late (Timing.ChannelSkew)
	recvB    float64 // bytes the receive-only step of a loop reads and copies or reduces locally
	// The memory-traffic model (Timing.CTAMem), where it applies: per merged send step its cap
	// (the step's traffic at the CTA's rate), the receive-only step's time, and the time a Simple
	// step's slice costs hold the CTA after its sends (Timing.Slice, or the fence of
	// Timing.Fence, once per slice).
	capT  []Rate
	recvT float64
	hold  []Time
	// recvHold is the slice cost of the receive-only step (Timing.Slice), after its local work.
	recvHold Time
	done     int64
	total    int64
	end      Time
}

// SimulateRing times a ring collective on the links of e reached through r.
func SimulateRing(e *Engine, r Router, spec RingSpec, tm Timing) (*RingResult, error) {
	n := r.NumRanks()
	if len(spec.Rings) == 0 {
		return nil, fmt.Errorf("simnet: ring simulation without rings")
	}
	for c, ring := range spec.Rings {
		if len(ring) != n {
			return nil, fmt.Errorf("simnet: ring %d has %d ranks, the cluster %d", c, len(ring), n)
		}
	}
	if spec.Proto < 0 || spec.Proto >= coll.NumProtos {
		return nil, fmt.Errorf("simnet: bad protocol %v", spec.Proto)
	}
	var stepsPerLoop int
	switch spec.Func {
	case coll.AllReduce:
		stepsPerLoop = 2 * (n - 1)
	case coll.AllGather, coll.ReduceScatter:
		stepsPerLoop = n - 1
	default:
		return nil, fmt.Errorf("simnet: compact ring executor runs AllReduce, AllGather, ReduceScatter, not %v", spec.Func)
	}
	if n == 1 || spec.Bytes <= 0 {
		return &RingResult{Time: tm.Launch}, nil
	}
	nch := len(spec.Rings)
	// Steps as coll cuts them (its channel parts, chunk loops and wire-byte rule): the compact
	// executor replays loops of equal steps of their mean size.
	loops, _, wire := coll.StepSizes(spec.Func, coll.Ring, spec.Proto, spec.Bytes, n, nch, spec.Chunk)
	if loops == 0 {
		return &RingResult{Time: tm.Launch}, nil
	}

	if cl, ok := r.(*Cluster); ok && !spec.PerRank && !spec.Strict && cl.NumNodes > 1 {
		res, credit, visits, err := symmetricRing(e, cl, spec, tm, stepsPerLoop, loops, wire)
		if err != nil {
			return nil, err
		}
		if res != nil && res.ECMPMean && exactAffordable(visits, float64(n)/float64(res.Rotation*cl.Node.NumGPUs)) {
			// ECMP collisions: replay every rank on a copy of e's links if that fits the work
			// budget; else the mean model stands.
			c := e.replayCopy()
			c.maxWork = exactWork
			pr, err := perRankRing(c, r, spec, tm, stepsPerLoop, loops, wire)
			switch {
			case err == nil:
				for l := range e.links {
					e.links[l].bytes += c.links[l].bytes
					e.links[l].busy += c.LinkBusy(LinkID(l))
				}
				e.now = c.now
				pr.Events += res.Events
				return pr, nil
			case !errors.Is(err, errBudget):
				return nil, err
			}
		}
		if res != nil {
			credit()
			return res, nil
		}
	}
	return perRankRing(e, r, spec, tm, stepsPerLoop, loops, wire)
}

// perRankRing is SimulateRing replaying every rank.
func perRankRing(e *Engine, r Router, spec RingSpec, tm Timing, stepsPerLoop, loops int, wire float64) (*RingResult, error) {
	n := r.NumRanks()
	// Channel groups: channels with the same ring and the same routes share every link equally,
	// so they run as one flow of lanes× the bytes, where every group has as many lanes.
	type key struct {
		ring  string
		route string
	}
	var groups []*ringLane
	idx := map[key]int{}
	for c, ring := range spec.Rings {
		g := &ringLane{ring: make([]int32, n), ch: c, route: make([][]LinkID, n), lat: make([]Time, n), net: make([]bool, n)}
		sig := make([]byte, 0, n*8)
		for i, rk := range ring {
			if rk < 0 || rk >= n {
				return nil, fmt.Errorf("simnet: ring %d lists rank %d, out of range", c, rk)
			}
			g.ring[i] = int32(rk)
		}
		var rsig []byte
		for i := range ring {
			next := ring[(i+1)%n]
			route, class := r.Route(ring[i], next, c, nil)
			g.route[i] = route
			g.lat[i] = e.RouteLatency(route) + tm.StepLat[class][spec.Proto]
			g.net[i] = class == ClassNet
			for _, l := range route {
				rsig = fmt.Appendf(rsig, "%d,", l)
			}
			rsig = append(rsig, ';')
		}
		for _, rk := range ring {
			sig = fmt.Appendf(sig, "%d,", rk)
		}
		k := key{string(sig), string(rsig)}
		// With a start skew (Timing.ChannelSkew) each channel starts at its own time: no groups.
		if j, ok := idx[k]; ok && tm.ChannelSkew <= 0 {
			groups[j].lanes++
			continue
		}
		g.lanes = 1
		idx[k] = len(groups)
		groups = append(groups, g)
	}
	// A group's flow stands for its lanes only where every flow it meets stands for as many:
	// max-min fairness counts flows, so a group of two sharing a link with a lone channel would
	// get half of it where its two channels get two thirds. Unequal groups run channel by channel.
	for _, g := range groups {
		if g.lanes != groups[0].lanes {
			var single []*ringLane
			for _, g := range groups {
				for l := 0; l < g.lanes; l++ {
					c := *g
					c.lanes = 1
					single = append(single, &c)
				}
			}
			groups = single
			break
		}
	}
	return runRing(e, groups, spec, tm, stepsPerLoop, loops, wire, nil)
}

// runRing replays the ring groups on e (merging steps as spec says) and returns the result.
// check, where not nil, watches relaxed links (a symmetric replay); a violation it halts on
// returns errHalted.
func runRing(e *Engine, groups []*ringLane, spec RingSpec, tm Timing, stepsPerLoop, loops int, wire float64, check *relaxCheck) (*RingResult, error) {
	maxMsg := spec.MaxMessages
	if maxMsg <= 0 {
		maxMsg = MessageBudget
	}
	positions := int64(0)
	for _, g := range groups {
		positions += int64(len(g.ring))
	}
	merge := spec.Merge
	perMerge := positions * int64(loops)
	if merge <= 0 && spec.Exact {
		merge = 1 // no coarse mode either
	}
	if spec.Proto == coll.Simple {
		// A Simple step goes in slices with NCCL_STEPS slots of them in flight (ringSim.K, W);
		// a merged step, one message, cannot keep both: with the window of eight messages of
		// before stop 57 it was −13.8% from this replay (64 DGX H100 nodes, all-reduce of 1 GiB,
		// K = 2), with a window of two +39.1%, and in slices under a window of K + 1 the ring
		// deadlocks. Such rings run every step, past the message budget if need be (2,048 DGX
		// H100 nodes, forced Ring/Simple all-reduce of 1 GiB: 5.3 s where K = 8 took 0.46 s).
		merge = 1
	}
	auto := merge <= 0
	if auto {
		merge = 1
		for perMerge*int64((stepsPerLoop+merge-1)/merge) > maxMsg && merge < stepsPerLoop {
			merge *= 2
		}
	}
	if merge > stepsPerLoop {
		merge = stepsPerLoop
	}
	x := newRingSim(e, groups, spec, tm, stepsPerLoop, loops, wire, merge)
	if auto && merge > 1 {
		// Merged messages overpay their latency by up to (K−1) hop latencies a loop
		// (MaxCoarseError): merge no more than keeps that under its share of a loop's least time.
		hop := Time(0)
		for _, g := range groups {
			for pos, l := range g.lat {
				hop = max(hop, l+x.stageOverlap(g, pos, wire))
			}
		}
		if k := coarseMergeLimit(x.loopBound(), hop); k < merge {
			merge = k
			x = newRingSim(e, groups, spec, tm, stepsPerLoop, loops, wire, merge)
		}
	}
	S := int(x.S)
	for _, g := range groups {
		m := len(g.ring)
		g.step = make([]int32, m)
		g.running = make([]bool, m)
		g.arrived = make([]int32, m)
		g.consumed = make([]int32, m)
		if x.staged {
			g.nic = newNICQueues(m)
		}
	}
	x.total = positions * int64(loops) * int64(S+1) * int64(x.K)
	e.handler = x
	if check != nil {
		e.obs = check
	}
	t0 := e.Now()
	startEvents := e.Events
	e.At(t0+tm.Launch, evLaunch, 0)
	res := &RingResult{Events: e.Events - startEvents, Messages: positions * int64(loops) * int64(S) * int64(x.K),
		Merge: merge, Groups: len(groups), Loops: loops, Steps: stepsPerLoop}
	_, err := e.Run()
	res.Events = e.Events - startEvents
	if err != nil {
		return res, err
	}
	if x.done != x.total {
		return nil, fmt.Errorf("simnet: ring simulation stopped after %d of %d steps", x.done, x.total)
	}
	res.Time = x.end - t0
	return res, nil
}

// newRingSim sets up the replay of the ring groups with merge steps per message.
func newRingSim(e *Engine, groups []*ringLane, spec RingSpec, tm Timing, stepsPerLoop, loops int, wire float64, merge int) *ringSim {
	S := (stepsPerLoop + merge - 1) / merge
	x := &ringSim{e: e, groups: groups, S: int32(S), L: int32(loops), cap: tm.PerFlowCap[spec.Proto], cta: tm.CTARate, skew: tm.ChannelSkew,
		staged: tm.NetStage && tm.CTARate > 0, nicCap: tm.PerFlowCap[spec.Proto]}
	if x.cta > 0 && (x.cap <= 0 || x.cta < x.cap) {
		// Each channel is one CTA (one lane: ring kernels do not split their threads).
		x.cap = x.cta
	}
	if x.cta > 0 {
		// The last step of a loop (AllGather/AllReduce recv, ReduceScatter recvReduceCopy) copies
		// or reduces one step into the output before the channel goes on, reading the message
		// from the FIFO as it lies there: its wire bytes.
		x.recvB = wire
	}
	x.msgBytes = make([]float64, S)
	for s := 0; s < S; s++ {
		k := min(merge, stepsPerLoop-s*merge)
		x.msgBytes[s] = wire * float64(k)
	}
	x.memModel(spec, tm, stepsPerLoop, merge, wire)
	if merge > 1 {
		// Merged steps keep the channels in step: with the start skew the coarse replay drifts
		// from the exact one (a flat-rate Ring/Simple all-reduce of 256 MiB on 16 DGX H100 nodes,
		// K = 8: 12.6% from the exact replay with the skew, 7.0% without it), where the skew
		// moves the exact replay by 0.7%.
		x.skew = 0
	}
	x.stepLat = Time(merge) // multiplier applied to each hop latency
	x.K, x.W = 1, coll.NCCLSteps
	if spec.Proto == coll.Simple {
		if cs, ss := coll.RingChunkSteps(spec.Func, coll.Ring, spec.Proto); ss > 0 && cs > ss {
			x.K, x.W = int32(cs/ss), int32(coll.NCCLSteps/ss)
		}
	}
	return x
}

// loopBound is a least time one loop of the replay can take: every position runs its steps one
// after the other, each no faster than its cap (the CTA's or the memory model's) nor than its
// lanes' bytes over the narrowest link of its route, each followed by its slice costs' hold.
func (x *ringSim) loopBound() Time {
	var cta, holds, bytes float64
	for s := 0; s < int(x.S); s++ {
		c := x.cap
		if x.capT != nil {
			c = x.capT[s]
		}
		if c > 0 {
			cta += x.msgBytes[s] / float64(c)
		}
		if x.hold != nil {
			holds += float64(x.hold[s])
		}
		bytes += x.msgBytes[s]
	}
	// The receive-only step: its local work, then its hold.
	recv := x.recvT
	if recv == 0 && x.recvB > 0 && x.cta > 0 {
		recv = x.recvB / float64(x.cta)
	}
	recv += float64(x.recvHold)
	link := 0.0
	for _, g := range x.groups {
		for _, route := range g.route {
			narrow := Rate(0)
			for _, l := range route {
				if c := x.e.LinkCap(l); narrow == 0 || c < narrow {
					narrow = c
				}
			}
			if narrow > 0 {
				link = max(link, bytes*float64(g.lanes)/float64(narrow))
			}
		}
	}
	return Time(max(cta, link) + holds + recv)
}

// stageOverlap is what a merged message of position pos of g pays beyond its latencies for each
// further step it stands for, where its messages go in two stages (Timing.NetStage): of one step
// of wire bytes, the shorter of its CTA's stage and its NIC's, which the exact replay overlaps
// with the next step's other stage and the merged message runs one after the other.
func (x *ringSim) stageOverlap(g *ringLane, pos int, wire float64) Time {
	if !x.staged || !g.net[pos] {
		return 0
	}
	c := x.cap
	for _, r := range x.capT {
		if c <= 0 || r < c {
			c = r
		}
	}
	narrow := Rate(0)
	for _, l := range g.route[pos] {
		if r := x.e.LinkCap(l); narrow == 0 || r < narrow {
			narrow = r
		}
	}
	if c <= 0 || narrow <= 0 {
		return 0
	}
	return Time(min(wire/float64(c), wire*float64(g.lanes)/float64(narrow)))
}

// MaxCoarseError is the share of a ring replay's time that merging its steps may add: issue #19's
// bound on every approximate mode. A merged message of K steps pays K× its hop's latency
// (StepLat and the route's), but in the exact replay a step's latency overlaps the steps that
// follow it wherever the sender, not its input, paces the ring: there a merged hop stands for K
// hops of the critical chain where the exact replay pays its latency once, and the merged replay
// comes out slow by up to about (K−1) hop latencies (10.3 µs a merged step on 64 DGX H100 nodes,
// Ring/Simple 1 GiB all-reduce in one loop, the network hop's latency being 14.6: K = 16 +1.64%,
// 32 +3.20%; where the input paces the ring, K× is what the exact chain pays). Each loop restarts
// the pipeline (its first step waits for no input), so SimulateRing merges at most the K whose
// (K−1) × the largest hop latency stays under this share of the least time one loop can take
// (coarseMergeLimit, ringSim.loopBound); past it the replay goes over its message budget rather
// than merge more. On 2 nodes, Ring/LL all-reduce of 1 GiB in 128 loops, K = 16 would be +2.41%
// (2 µs a loop); the bound merges none there.
const MaxCoarseError = 0.01

// coarseMergeLimit is the largest power of two K with (K−1) × hop ≤ MaxCoarseError × loop.
func coarseMergeLimit(loop, hop Time) int {
	if hop <= 0 {
		return math.MaxInt32
	}
	k := 1
	for float64(2*k-1)*float64(hop) <= MaxCoarseError*float64(loop) {
		k *= 2
	}
	return k
}

// Tags: group<<32 | position, with localTag set for the local work of a receive-only step,
// ctaTag for the CTA's stage of a network message and nicTag for its NIC's (Timing.NetStage).
func ringTag(g, pos int) int64 { return int64(g)<<32 | int64(pos) }

const (
	localTag = int64(1) << 62
	ctaTag   = int64(1) << 61
	nicTag   = int64(1) << 60
)

func (x *ringSim) Fire(kind int32, arg int64) {
	switch kind {
	case evLaunch:
		for gi, g := range x.groups {
			if d := x.skew * Time(g.ch); d > 0 {
				x.e.After(d, evSkewed, int64(gi))
				continue
			}
			for pos := range g.ring {
				x.try(gi, pos)
			}
		}
	case evSkewed: // a channel starting late (Timing.ChannelSkew)
		for pos := range x.groups[arg].ring {
			x.try(int(arg), pos)
		}
	case evComplete:
		if arg&localTag != 0 {
			arg &^= localTag
			x.received(int(arg>>32), int(arg&0xffffffff))
			return
		}
		x.sent(int(arg>>32), int(arg&0xffffffff))
	case evArrive:
		gi, pos := int(arg>>32), int(arg&0xffffffff)
		g := x.groups[gi]
		next := (pos + 1) % len(g.ring)
		g.arrived[next]++
		x.try(gi, next)
	}
}

// try starts the next step of (group, position) if it can run.
func (x *ringSim) try(gi, pos int) {
	g := x.groups[gi]
	for !g.running[pos] {
		// j counts the position's messages: K for each of a loop's S+1 steps.
		j := g.step[pos]
		U := (x.S + 1) * x.K
		if j >= x.L*U {
			return
		}
		l, t, i := j/U, j%U/x.K, j%x.K
		if t > 0 && g.arrived[pos] < (l*x.S+t-1)*x.K+i+1 {
			return // the message this step consumes has not arrived
		}
		k := float64(x.K)
		if t == x.S && x.recvT > 0 {
			g.running[pos] = true
			x.e.StartFlow(nil, x.recvT/k*float64(g.lanes), Rate(g.lanes), ringTag(gi, pos)|localTag)
			return
		}
		if t == x.S && x.recvB > 0 {
			// Receive-only step with the CTA modelled: the local copy or reduction holds the
			// channel for its bytes at the CTA's rate (no link); FlowDone completes it.
			g.running[pos] = true
			x.e.StartFlow(nil, x.recvB/k*float64(g.lanes), x.cta*Rate(g.lanes), ringTag(gi, pos)|localTag)
			return
		}
		if t == x.S {
			// Receive-only step: consumes message l*S+S-1 and completes at once.
			x.consume(gi, pos)
			g.step[pos]++
			x.finishStep()
			continue
		}
		m := (l*x.S+t)*x.K + i
		if m >= x.W && g.consumed[pos] < m-x.W+1 {
			return // NCCL_STEPS: the slots of message m-W not yet freed by the next rank
		}
		g.running[pos] = true
		c := x.cap
		if x.capT != nil {
			c = x.capT[t]
		}
		if x.staged && g.net[pos] {
			// Timing.NetStage: the CTA writes the message (its bytes at the step's cap, on no
			// link), then the NIC carries it (nicStart).
			x.e.StartFlow(nil, x.msgBytes[t]/k*float64(g.lanes), c*Rate(g.lanes), ringTag(gi, pos)|ctaTag)
			return
		}
		x.e.StartFlow(g.route[pos], x.msgBytes[t]/k*float64(g.lanes), c*Rate(g.lanes), ringTag(gi, pos))
		return
	}
}

// nicStart puts the next message the CTA of (group, position) has written on its route, if its
// NIC is free: a connection's messages go one after another.
func (x *ringSim) nicStart(gi, pos int) {
	g := x.groups[gi]
	m, ok := g.nic.take(pos)
	if !ok {
		return
	}
	t := m / x.K % x.S // its step in the loop (messages are numbered (l*S + t)*K + slice)
	x.e.StartFlow(g.route[pos], x.msgBytes[t]/float64(x.K)*float64(g.lanes), x.nicCap*Rate(g.lanes), ringTag(gi, pos)|nicTag)
}

// consume frees, at the previous position, the slot of the message this step received.
func (x *ringSim) consume(gi, pos int) {
	g := x.groups[gi]
	prev := (pos - 1 + len(g.ring)) % len(g.ring)
	g.consumed[prev]++
	x.try(gi, prev)
}

func (x *ringSim) finishStep() {
	x.done++
	if now := x.e.Now(); now > x.end {
		x.end = now
	}
}

func (x *ringSim) FlowDone(tag int64) {
	if tag&localTag != 0 {
		if x.recvHold > 0 {
			x.e.After(x.recvHold/Time(x.K), evComplete, tag) // the slice costs hold the CTA after the copy
			return
		}
		tag &^= localTag
		x.received(int(tag>>32), int(tag&0xffffffff))
		return
	}
	if tag&nicTag != 0 {
		// A network message's NIC stage: it arrives, and the connection's next one goes.
		tag &^= nicTag
		gi, pos := int(tag>>32), int(tag&0xffffffff)
		g := x.groups[gi]
		x.e.After(g.lat[pos]*x.stepLat, evArrive, tag)
		g.nic.left(pos)
		x.nicStart(gi, pos)
		return
	}
	staged := tag&ctaTag != 0
	tag &^= ctaTag
	gi, pos := int(tag>>32), int(tag&0xffffffff)
	g := x.groups[gi]
	if staged {
		// The CTA has written a network message: the NIC takes it from here.
		g.nic.wrote(pos)
		x.nicStart(gi, pos)
	} else {
		x.e.After(g.lat[pos]*x.stepLat, evArrive, tag)
	}
	if x.hold != nil {
		if h := x.hold[g.step[pos]%((x.S+1)*x.K)/x.K] / Time(x.K); h > 0 {
			x.e.After(h, evComplete, tag) // the fences hold the CTA; the slice completes after them
			return
		}
	}
	x.sent(gi, pos)
}

// received completes the receive-only step of (group, position) that is running.
func (x *ringSim) received(gi, pos int) {
	g := x.groups[gi]
	g.running[pos] = false
	x.consume(gi, pos)
	g.step[pos]++
	x.finishStep()
	x.try(gi, pos)
}

// sent completes the send step of (group, position) that is running.
func (x *ringSim) sent(gi, pos int) {
	g := x.groups[gi]
	j := g.step[pos]
	t := j % ((x.S + 1) * x.K) / x.K
	g.running[pos] = false
	g.step[pos]++
	x.finishStep()
	if t > 0 {
		x.consume(gi, pos)
	}
	x.try(gi, pos)
}

// ringPrims is the primitive of each step of one ring loop, as coll compiles it: the
// stepsPerLoop sending steps, then the receive-only one.
func ringPrims(f coll.Func, n int) []coll.Prim {
	var p []coll.Prim
	switch f {
	case coll.AllReduce:
		p = append(p, coll.Send)
		for j := 2; j < n; j++ {
			p = append(p, coll.RecvReduceSend)
		}
		p = append(p, coll.RecvReduceCopySend)
		for j := 1; j < n-1; j++ {
			p = append(p, coll.RecvCopySend)
		}
		p = append(p, coll.Recv)
	case coll.AllGather:
		p = append(p, coll.CopySend)
		for j := 1; j < n-1; j++ {
			p = append(p, coll.RecvCopySend)
		}
		p = append(p, coll.Recv)
	case coll.ReduceScatter:
		p = append(p, coll.Send)
		for j := 2; j < n; j++ {
			p = append(p, coll.RecvReduceSend)
		}
		p = append(p, coll.RecvReduceCopy)
	}
	return p
}

// memModel sets the memory-traffic model's caps, receive time and fence holds (Timing.CTAMem,
// Fence) where it applies: the CTA modelled and a rate for the protocol. A step of wire bytes
// carries wire × payload/wire of the protocol's payload; a Simple step is cut into
// chunkSteps/sliceSteps slices, each with its fence.
func (x *ringSim) memModel(spec RingSpec, tm Timing, stepsPerLoop, merge int, wire float64) {
	mem := tm.CTAMem[spec.Proto]
	if tm.CTARate <= 0 || mem <= 0 || wire <= 0 {
		return
	}
	n := stepsPerLoop + 1 // the ring's ranks (a symmetric replay's groups hold fewer)
	if spec.Func == coll.AllReduce {
		n = stepsPerLoop/2 + 1
	}
	prims := ringPrims(spec.Func, n)
	if len(prims) != stepsPerLoop+1 {
		return
	}
	const unit = 1 << 20
	pay := wire * float64(unit) / float64(coll.WireBytes(spec.Proto, unit))
	slices := 1
	// cost is what primitive p holds the CTA per slice: its slice cost (Timing.Slice) where set,
	// else the fence after a send.
	cost := func(coll.Prim) Time { return 0 }
	if spec.Proto == coll.Simple && tm.Fence > 0 {
		cs, ss := coll.RingChunkSteps(spec.Func, coll.Ring, spec.Proto)
		slices = max(cs/max(ss, 1), 1)
		chunk := spec.Chunk
		if chunk <= 0 {
			chunk = coll.DefaultChunkSize(spec.Func, coll.Ring, spec.Proto, 0)
		}
		// The slices of a step (bytes; coll's 16-element grain taken as 64 bytes).
		sl := coll.SimpleSlices(nil, int64(pay), slices, chunk/int64(max(cs, 1))*int64(ss)/32, 64)
		cost = func(p coll.Prim) Time {
			if !tm.Slice.set() || !sliceCosted(coll.Ring, spec.Func) {
				if p.Sends() {
					return tm.Fence
				}
				return 0
			}
			var h Time
			for _, b := range sl {
				c := tm.Slice.Of(p, b)
				if p.Sends() {
					c = max(c, tm.Fence)
				}
				h += c
			}
			return h
		}
		slices = 1 // cost sums the slices
	}
	x.capT = make([]Rate, x.S)
	x.hold = make([]Time, x.S+1)
	for s := 0; s < int(x.S); s++ {
		var traffic float64
		k := min(merge, stepsPerLoop-s*merge)
		for i := s * merge; i < s*merge+k; i++ {
			traffic += ctaTraffic(prims[i], pay, wire, 1)
		}
		x.capT[s] = Rate(x.msgBytes[s] * float64(mem) / traffic)
		if x.cap > 0 && x.cap != x.cta && x.cap < x.capT[s] {
			x.capT[s] = x.cap // a PerFlowCap below the CTA's
		}
		for i := s * merge; i < s*merge+k; i++ {
			x.hold[s] += cost(prims[i]) * Time(slices)
		}
	}
	x.recvT = ctaTraffic(prims[stepsPerLoop], pay, wire, 0) / float64(mem)
	x.recvHold = cost(prims[stepsPerLoop]) * Time(slices)
}
