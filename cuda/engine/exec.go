package engine

import (
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
)

// The executor: one rank's part of a launch, enqueued on its device's thread (schedule contract
// of coll/schedule.go, rules 1–5, mapped to the GPU):
//
//   - Each (channel, lane) of the rank has its own non-blocking stream; every step is enqueued on
//     its lane's stream in program order, then an event is recorded (one event per step). A
//     dependency on another lane's step is a cuStreamWaitEvent on that step's event.
//   - Messages are pulled: the step that consumes a message reads the sender's memory directly
//     (peer access), after cuStreamWaitEvent on the event of the sending step, and combines it in
//     the same kernel that writes its own output (reduce: out = op(Src, message); copy: out =
//     message). The sender exposes either the data itself, when that memory is written by no
//     other step of the launch (its input out of place, or a Dst that only this step writes), or a
//     copy in its staging buffer for the connection: NCCL_STEPS slots of SlotBytes, at the
//     message's Slot. A step that writes a slot first waits for the event of the receiving step
//     that consumed the message named by Xfer.CreditSeq (rule 3, NCCL's credits, in reverse).
//   - A wait may only be enqueued after the event it names has been recorded (cuStreamWaitEvent
//     waits for the most recent record): ranks enqueue concurrently and a rank blocks, on the
//     host, until the peer has enqueued the step it needs. Every rank enqueues each program in
//     list order, the channels round robin (enqueueAll), which rule 1 makes deadlock-free.
//   - The launch starts with an event on the caller's stream that every lane stream waits for,
//     and ends with the caller's stream waiting for the last event of every lane of every rank:
//     after it, no peer still reads this rank's memory and this rank's results are complete.
//   - PreMulSum and Avg on floats scale the input once into a private buffer first (the
//     premulsum kernel against zeros, on the caller's stream), then the schedule sums; Avg on
//     integers sums and the PostOp step divides (ncclAvg, NCCL 2.28).

// launch runs one launch of this rank's calls (a single call or a group).
func (c *Comm) launch(calls []*call) error {
	if len(calls) == 0 {
		return nil
	}
	if err := c.GetAsyncError(); err != nil {
		return err
	}
	user := calls[0].stream
	for _, k := range calls[1:] {
		if k.stream != user {
			return fmt.Errorf("%w: rank %d: the calls of one group must use one stream", ErrInvalidArgument, c.rank)
		}
	}
	if c.cl.xp != nil {
		flags := c.cl.cfg.DeviceFlags || c.capturing(user)
		for _, k := range calls {
			k.flags = flags
		}
	}
	c.mu.Lock()
	gen := c.gen
	c.gen++
	c.mu.Unlock()
	var L *launch
	var err error
	if xp := c.cl.xp; xp != nil {
		L, err = xp.arrive(c.cl, c.rank, gen, calls)
	} else {
		L, err = c.cl.arrive(c.rank, gen, calls)
	}
	if err != nil {
		c.fail(err)
		c.tellPeers()
		return err
	}
	if L.pl == nil {
		return nil
	}
	// A rank alone in its process (InitRank) enqueues from the calling thread, with its device's
	// context made current there: the hand-off to the device's thread and back cost about 40% of
	// the host time of a small call (a CPU profile on 2 H200, BENCHMARKS.md "2026-11-28 (5)"). A
	// communicator is used by one thread at a time (NCCL's rule), so nothing else touches its
	// device state meanwhile.
	do := c.dev.Do
	if c.cl.xp != nil {
		do = c.dev.OnThisThread
	} else {
		// In this process a peer's join reads this rank's events (peerEvent) after this rank's
		// own join may have returned: Destroy waits for every rank to leave the launch before it
		// frees them (seen on libnccl's api_check under load: a rank destroyed its communicator
		// as soon as its ncclGroupEnd returned, and the peer's join indexed the emptied events,
		// "index out of range [1] with length 0").
		c.mu.Lock()
		c.last = L
		c.mu.Unlock()
		defer L.leave()
	}
	err = do(func(x *cuda.Ctx) error { return c.run(x, L, user) })
	if err != nil {
		err = fmt.Errorf("rank %d: %w", c.rank, err)
		L.abort(err)
		c.fail(err)
		c.tellPeers()
	}
	return err
}

// capturing reports whether the caller's stream is capturing into a CUDA graph: across processes
// such a launch is ordered by device flags (flags.go), since the driver refuses to record an
// interprocess event on a capturing stream (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, seen on
// H200). A stream the driver cannot query is left to the launch, which reports it. The query is
// made on the calling thread (no hand-off to the device's thread: it is on every call's path).
func (c *Comm) capturing(s cuda.Stream) bool {
	var capturing bool
	_ = c.dev.OnThisThread(func(x *cuda.Ctx) error {
		var err error
		capturing, err = x.IsCapturing(s)
		return err
	})
	return capturing
}

// exec is one rank's state during one launch.
type exec struct {
	c     *Comm
	x     *cuda.Ctx
	L     *launch
	s     *coll.Schedule
	bufs  []opBuf
	stage []cuda.DevPtr // [conn]: this rank's staging buffer for the connections it sends on
	// lineStage: [coll.LL or coll.LL128][conn]: this rank's buffer of the line protocol for the
	// connections it sends such messages on
	lineStage [2][]cuda.DevPtr
	slot      int64
	writes    []interval
	maxW      int64
	user      cuda.Stream
	next      []int // per channel: the next step of this rank's program to enqueue
	left      int   // steps not enqueued yet
}

// interval is a range of device addresses a step writes.
type interval struct {
	lo, hi   cuda.DevPtr
	ch, step int
}

func (c *Comm) run(x *cuda.Ctx, L *launch, user cuda.Stream) error {
	// The caller's stream may be capturing into a CUDA graph, in any mode: the first launch of a
	// shape allocates staging buffers and creates streams and events, which a CaptureGlobal
	// capture forbids on every thread. They are not work to capture, so this device thread runs
	// the launch in relaxed mode (what NCCL does around its own allocations); the steps it
	// enqueues on capturing streams are captured all the same.
	prev, err := x.ExchangeCaptureMode(cuda.CaptureRelaxed)
	if err != nil {
		return err
	}
	defer x.ExchangeCaptureMode(prev)
	e, err := c.begin(x, L, user)
	if err != nil {
		return err
	}
	if err := e.enqueueAll(); err != nil {
		return err
	}
	return e.finish()
}

// begin prepares this rank's part of a launch: streams, events, staging, the pre-scaled inputs,
// the start event every lane waits for.
func (c *Comm) begin(x *cuda.Ctx, L *launch, user cuda.Stream) (*exec, error) {
	s := L.pl.s
	e := &exec{c: c, x: x, L: L, s: s, bufs: append([]opBuf(nil), L.bufs[c.rank]...), slot: int64(c.cl.cfg.SlotBytes), user: user}
	if err := e.setup(); err != nil {
		return nil, err
	}
	if err := e.prescale(user); err != nil {
		return nil, err
	}
	if err := e.index(); err != nil {
		return nil, err
	}
	if err := x.Record(c.start, user); err != nil {
		return nil, err
	}
	for ch := 0; ch < s.NChannels; ch++ {
		for _, l := range L.pl.lanes[c.rank*s.NChannels+ch] {
			if err := x.StreamWait(c.streams[[2]int{ch, l}], c.start); err != nil {
				return nil, err
			}
		}
	}
	e.next = make([]int, s.NChannels)
	for ch := range e.next {
		e.left += len(s.Program(c.rank, ch).Steps)
	}
	return e, nil
}

// finish counts this rank's enqueueing done and joins (see join).
func (e *exec) finish() error {
	e.done()
	return e.join()
}

// done counts this rank's enqueueing done.
func (e *exec) done() {
	L := e.L
	if L.xp != nil {
		L.xp.finish(L.gen)
	}
	L.mu.Lock()
	L.finished++
	L.cond.Broadcast()
	L.mu.Unlock()
}

// join waits until every rank has enqueued its part and makes the caller's stream wait for every
// lane of every rank: after it, no peer still reads this rank's memory and this rank's results
// are complete.
func (e *exec) join() error {
	x, L, s := e.x, e.L, e.s
	all := func() bool { return L.finished == L.n }
	if L.xp != nil {
		all = func() bool { return L.xp.allFinished(L.gen) }
	}
	if err := L.waitFor("every rank to enqueue the launch", all); err != nil {
		return err
	}
	if joinHook != nil {
		joinHook(e.c)
	}
	if L.flags {
		for ch := 0; ch < s.NChannels; ch++ {
			for _, last := range L.pl.lasts[e.c.rank*s.NChannels+ch] {
				if err := x.StreamWait(e.user, e.ev(ch, last)); err != nil {
					return err
				}
			}
		}
		return e.joinFlags()
	}
	for r := 0; r < L.n; r++ {
		for ch := 0; ch < s.NChannels; ch++ {
			for _, last := range L.pl.lasts[r*s.NChannels+ch] {
				ev, err := e.peerEvent(r, ch, last)
				if err != nil {
					return err
				}
				if err := x.StreamWait(e.user, ev); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// joinHook, when set (tests), runs in join once every rank has enqueued its part, before the
// peers' events are read.
var joinHook func(c *Comm)

// ready reports whether channel ch's next step would not block: the peers have enqueued the
// messages it receives and the consumptions its credits name. Called with L.mu held.
func (e *exec) ready(ch int) bool {
	s, L := e.s, e.L
	p := s.Program(e.c.rank, ch)
	if e.next[ch] >= len(p.Steps) {
		return false
	}
	if e.L.flags {
		return true // device flags order the steps: the host need not wait for a peer's enqueueing
	}
	st := &p.Steps[e.next[ch]]
	for _, x := range st.Recv {
		if L.progress(s.Conns[x.Conn].From, ch) <= L.pl.sendStep(int(x.Conn), int(x.Seq)) {
			return false
		}
	}
	for _, x := range st.Send {
		if x.CreditSeq >= 0 && L.progress(s.Conns[x.Conn].To, ch) <= L.pl.recvStep(int(x.Conn), int(x.CreditSeq)) {
			return false
		}
	}
	return true
}

// pass enqueues the next step of every channel that is ready, in channel order (before, if not
// nil, runs first each time: the one-thread launch makes the rank's device current with it), and
// reports whether any step was enqueued.
func (e *exec) pass(before func() error) (bool, error) {
	moved := false
	for ch := range e.next {
		e.L.mu.Lock()
		ok := e.ready(ch)
		e.L.mu.Unlock()
		if !ok {
			continue
		}
		if before != nil {
			if err := before(); err != nil {
				return moved, err
			}
		}
		if err := e.stepNext(ch); err != nil {
			return moved, err
		}
		moved = true
	}
	return moved, nil
}

// stepNext enqueues channel ch's next step and publishes the progress.
func (e *exec) stepNext(ch int) error {
	p := e.s.Program(e.c.rank, ch)
	i := e.next[ch]
	if err := e.step(ch, &p.Steps[i]); err != nil {
		return fmt.Errorf("channel %d step %d (%v): %w", ch, i, p.Steps[i].Prim, err)
	}
	e.L.advance(e.c.rank, ch, i)
	e.next[ch]++
	e.left--
	return nil
}

// enqueueAll enqueues every channel's program, round robin: each pass enqueues the next step of
// every channel whose peers have already enqueued what it waits for (the messages it receives, the
// consumptions its credits name), so that a channel blocked on a peer does not hold the others
// back and the channels' work reaches the GPU interleaved. Each program still goes in list order,
// so a step is only passed over, never reordered; when no channel can move, the rank sleeps until
// a peer advances. Rule 1's deadlock freedom of list order (credits included) carries over.
func (e *exec) enqueueAll() error {
	L := e.L
	for e.left > 0 {
		moved, err := e.pass(nil)
		if err != nil {
			return err
		}
		if !moved {
			err := L.waitFor(fmt.Sprintf("a peer of rank %d to enqueue a step its channels wait for (next steps %v)", e.c.rank, e.next), func() bool {
				for ch := range e.next {
					if e.ready(ch) {
						return true
					}
				}
				return false
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// lanes lists the lanes a program uses.
func lanes(p *coll.Program) []int {
	var ls []int
	seen := map[int]bool{}
	for i := range p.Steps {
		if l := p.Steps[i].Lane; !seen[int(l)] {
			seen[int(l)] = true
			ls = append(ls, int(l))
		}
	}
	return ls
}

// lastOfLanes is the index of the last step of every lane.
func lastOfLanes(p *coll.Program) []int {
	last := map[int]int{}
	for i := range p.Steps {
		last[int(p.Steps[i].Lane)] = i
	}
	var out []int
	for _, i := range last {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

func stageKey(cn *coll.Conn) int { return cn.Channel<<24 | cn.To<<8 | cn.ConnIndex }

// lineKey is the key the buffer of line protocol p (LL or LL128) is published under across
// processes (beside the Simple staging buffer of the same connection: channels are fewer than 64,
// so stageKey stays below bit 30).
func lineKey(cn *coll.Conn, p coll.Proto) int {
	if p == coll.LL128 {
		return stageKey(cn) | 1<<31
	}
	return stageKey(cn) | 1<<30
}

// isLine: protocol p's messages travel as flagged lines (LL, LL128; stepLL).
func isLine(p coll.Proto) bool { return p == coll.LL || p == coll.LL128 }

// setup makes the streams, events and staging buffers the launch needs on this rank.
func (e *exec) setup() error {
	c, x, s := e.c, e.x, e.s
	for len(c.events) < s.NChannels {
		c.events = append(c.events, nil)
	}
	for ch := 0; ch < s.NChannels; ch++ {
		p := s.Program(c.rank, ch)
		for len(c.events[ch]) < len(p.Steps) {
			if xp := e.L.xp; xp != nil {
				ev, err := x.NewIPCEvent()
				if err != nil {
					return err
				}
				c.events[ch] = append(c.events[ch], ev)
				if err := xp.publishEvent(x, ch, len(c.events[ch])-1, ev); err != nil {
					return err
				}
				continue
			}
			ev, err := x.NewEvent(false)
			if err != nil {
				return err
			}
			c.events[ch] = append(c.events[ch], ev)
		}
		for e.L.flags && len(c.fevents) <= ch {
			c.fevents = append(c.fevents, nil)
		}
		for e.L.flags && len(c.fevents[ch]) < len(p.Steps) {
			ev, err := x.NewEvent(false)
			if err != nil {
				return err
			}
			c.fevents[ch] = append(c.fevents[ch], ev)
		}
		for _, l := range e.L.pl.lanes[c.rank*s.NChannels+ch] {
			if _, ok := c.streams[[2]int{ch, l}]; !ok {
				st, err := x.NewStream()
				if err != nil {
					return err
				}
				c.streams[[2]int{ch, l}] = st
			}
		}
	}
	e.stage = make([]cuda.DevPtr, len(s.Conns))
	for i := range s.Conns {
		cn := &s.Conns[i]
		if cn.From != c.rank || e.L.pl.maxMsg[i] == 0 {
			continue
		}
		// NCCL_STEPS slots, plus room for a message that wraps past the last slot to be written
		// contiguously (its tail lands beyond the ring; the credits still protect it, since a
		// byte of the tail belongs to one slot number).
		need := int64(coll.NCCLSteps)*e.slot + e.L.pl.maxMsg[i]
		k := stageKey(cn)
		b, ok := c.staging[k]
		if xp := e.L.xp; xp != nil {
			// Across processes a staging buffer is exported once: its size is fixed at the
			// largest any message needs (a message spans at most NCCL_STEPS slots).
			if !ok {
				p, err := x.Alloc(int(2 * coll.NCCLSteps * e.slot))
				if err != nil {
					return err
				}
				b = stageBuf{p, 2 * coll.NCCLSteps * e.slot}
				c.staging[k] = b
				if err := xp.publishStaging(x, k, p); err != nil {
					return err
				}
			}
			if b.size < need {
				return fmt.Errorf("a %d-byte message does not fit the staging buffer", e.L.pl.maxMsg[i])
			}
			e.stage[i] = b.p
			continue
		}
		if !ok || b.size < need {
			if ok {
				c.retired = append(c.retired, b.p) // a peer of an earlier launch may still read it: freed by Destroy
			}
			p, err := x.Alloc(int(need))
			if err != nil {
				return err
			}
			b = stageBuf{p, need}
			c.staging[k] = b
		}
		e.stage[i] = b.p
	}
	return e.setupLL()
}

// setupLL makes the LL and LL128 buffers of the connections this rank sends such messages on:
// NCCL_STEPS slots of the plan's slot size for the protocol (plus room for a message wrapping past
// the last slot), zeroed before any peer can read them (a private stream, synchronized: the first
// launch of a shape may run inside a capture).
func (e *exec) setupLL() error {
	c, x, pl := e.c, e.x, e.L.pl
	for _, proto := range []coll.Proto{coll.LL, coll.LL128} {
		e.lineStage[proto] = make([]cuda.DevPtr, len(e.s.Conns))
		for i := range e.s.Conns {
			cn := &e.s.Conns[i]
			maxMsg := pl.maxLine[proto][i]
			if cn.From != c.rank || maxMsg == 0 {
				continue
			}
			need := int64(coll.NCCLSteps)*pl.lineSlot[proto] + maxMsg
			k := lineKey(cn, proto)
			b, ok := c.llStaging[k]
			if ok && b.size >= need {
				e.lineStage[proto][i] = b.p
				continue
			}
			if ok && e.L.xp != nil {
				return fmt.Errorf("a %d-byte %v message does not fit the %v buffer (%d bytes)", maxMsg, proto, proto, b.size)
			}
			size := need
			if e.L.xp != nil {
				size = max(need, 2*coll.NCCLSteps*pl.lineSlot[proto]) // published once: sized for any message
			}
			p, err := x.Alloc(int(size))
			if err != nil {
				return err
			}
			if c.aux == 0 {
				if c.aux, err = x.NewStream(); err != nil {
					return err
				}
			}
			if err := x.MemsetAsync(p, 0, int(size), c.aux); err != nil {
				return err
			}
			if err := x.StreamSync(c.aux); err != nil {
				return err
			}
			if ok {
				c.retired = append(c.retired, b.p) // a peer of an earlier launch may still read it: freed by Destroy
			}
			c.llStaging[k] = stageBuf{p, size}
			if xp := e.L.xp; xp != nil {
				if err := xp.publishStaging(x, k, p); err != nil {
					return err
				}
			}
			e.lineStage[proto][i] = p
		}
	}
	return nil
}

// tmpFor is room for n bytes on (channel, lane)'s stream: the raw result of an LL step that is
// not fused into one kernel. Steps of one lane run in stream order, so they share it.
func (e *exec) tmpFor(ch, lane int, n int64) (cuda.DevPtr, error) {
	c := e.c
	k := [2]int{ch, lane}
	b := c.tmp[k]
	if b.size >= n {
		return b.p, nil
	}
	if b.p != 0 {
		c.retired = append(c.retired, b.p)
	}
	p, err := e.x.Alloc(int(max(n, 4096)))
	if err != nil {
		return 0, err
	}
	c.tmp[k] = stageBuf{p, max(n, 4096)}
	return p, nil
}

// prescale writes the scaled copy of the send buffer of every PreMulSum / float-Avg operation.
func (e *exec) prescale(user cuda.Stream) error {
	c, x := e.c, e.x
	for len(c.scratch) < len(e.bufs) {
		c.scratch = append(c.scratch, stageBuf{})
	}
	for i := range e.bufs {
		b := &e.bufs[i]
		if b.scale == 0 || len(b.send) == 0 {
			continue
		}
		n := b.send[0].n
		if err := c.growScratch(x, i, 2*n); err != nil {
			return fmt.Errorf("scratch for the pre-scaled input: %w", err)
		}
		scaled, zero := c.scratch[i].p, c.scratch[i].p.Add(int(n))
		if err := x.MemsetAsync(zero, 0, int(n), user); err != nil {
			return err
		}
		if err := c.k.Reduce(x, user, b.dt, coll.PreMulSum, scaled, b.send[0].p, zero, int(n)/b.dt.Size(), b.scale, cuda.ScaleA); err != nil {
			return err
		}
		b.send = []segment{{0, n, scaled}}
	}
	return nil
}

func (c *Comm) growScratch(x *cuda.Ctx, i int, need int64) error {
	if c.scratch[i].size >= need {
		return nil
	}
	if c.scratch[i].p != 0 {
		c.retired = append(c.retired, c.scratch[i].p)
	}
	p, err := x.Alloc(int(need))
	if err != nil {
		return err
	}
	c.scratch[i] = stageBuf{p, need}
	return nil
}

// resolve maps a buffer reference of operation op to device memory.
// operands are step st's buffers, its element count, and its source and destination (0 where it
// has none).
func (e *exec) operands(st *coll.Step) (b *opBuf, count int, src, dst cuda.DevPtr, err error) {
	b = &e.bufs[st.Op]
	count = int(st.Bytes / int64(b.dt.Size()))
	if src, err = e.resolve(int(st.Op), st.Src, st.Bytes); err != nil {
		return nil, 0, 0, 0, err
	}
	if dst, err = e.resolve(int(st.Op), st.Dst, st.Bytes); err != nil {
		return nil, 0, 0, 0, err
	}
	return b, count, src, dst, nil
}

func (e *exec) resolve(op int, r *coll.BufRef, n int64) (cuda.DevPtr, error) {
	if r == nil {
		return 0, nil
	}
	b := &e.bufs[op]
	segs := b.send
	if r.Buf == coll.BufRecv {
		segs = b.recv
	}
	for _, sg := range segs {
		if r.Offset >= sg.off && r.Offset+n <= sg.off+sg.n {
			return sg.p.Add(int(r.Offset - sg.off)), nil
		}
	}
	return 0, fmt.Errorf("schedule names %s[%d:%d] of operation %d, outside the rank's buffers (a null buffer?)", r.Buf, r.Offset, r.Offset+n, op)
}

// index lists the device ranges every step of this rank writes, for the stability test.
func (e *exec) index() error {
	s := e.s
	for ch := 0; ch < s.NChannels; ch++ {
		p := s.Program(e.c.rank, ch)
		for i := range p.Steps {
			st := &p.Steps[i]
			if st.Op < 0 || int(st.Op) >= len(e.bufs) {
				return fmt.Errorf("step %d names operation %d of %d", i, st.Op, len(e.bufs))
			}
			if !st.Prim.WritesDst() || st.Dst == nil || st.Bytes == 0 {
				continue
			}
			d, err := e.resolve(int(st.Op), st.Dst, st.Bytes)
			if err != nil {
				return err
			}
			e.writes = append(e.writes, interval{d, d.Add(int(st.Bytes)), ch, i})
			e.maxW = max(e.maxW, st.Bytes)
		}
	}
	sort.Slice(e.writes, func(i, j int) bool { return e.writes[i].lo < e.writes[j].lo })
	return nil
}

// stable reports whether [p, p+n) is written by no step of the launch other than (ch, step):
// then a peer may read it directly until the launch ends.
func (e *exec) stable(p cuda.DevPtr, n int64, ch, step int) bool {
	if n == 0 {
		return true
	}
	hi := p.Add(int(n))
	// Intervals starting at or after p-maxW are the only ones that can reach p.
	i := sort.Search(len(e.writes), func(i int) bool { return int64(e.writes[i].lo) > int64(p)-e.maxW })
	for ; i < len(e.writes) && e.writes[i].lo < hi; i++ {
		w := e.writes[i]
		if w.hi > p && (w.ch != ch || w.step != step) {
			return false
		}
	}
	return true
}

// ev is this rank's event of (ch, step) for its own order: the interprocess one, or in a
// flag-mode launch a plain one.
func (e *exec) ev(ch, step int) cuda.Event {
	if e.L.flags {
		return e.c.fevents[ch][step]
	}
	return e.c.events[ch][step]
}

// record marks step st of channel ch done on its stream: its event, and in a flag-mode launch the
// flags its peers wait on.
func (e *exec) record(ch int, st *coll.Step, stream cuda.Stream) error {
	if err := e.x.Record(e.ev(ch, int(st.Index)), stream); err != nil {
		return err
	}
	if e.L.flags {
		return e.signal(stream, st)
	}
	return nil
}

// waitPeer makes stream st wait for step (of rank's program on channel ch), once enqueued.
func (e *exec) waitPeer(st cuda.Stream, rank, ch, step int) error {
	if err := e.L.waitStep(rank, ch, step); err != nil {
		return err
	}
	ev, err := e.peerEvent(rank, ch, step)
	if err != nil {
		return err
	}
	return e.x.StreamWait(st, ev)
}

// peerEvent is the event rank records after its step on channel ch (opened through IPC when the
// rank is in another process).
func (e *exec) peerEvent(rank, ch, step int) (cuda.Event, error) {
	if rank == e.c.rank {
		return e.ev(ch, step), nil
	}
	if e.L.xp != nil {
		return e.L.xp.peerEvent(e.x, rank, ch, step)
	}
	return e.c.cl.comms[rank].events[ch][step], nil
}

// slotFor is where message x's bytes go in this rank's staging buffer of protocol proto (for LL
// and LL128 its buffer of that protocol, as lines), after waiting for its credit (the consumption
// of message CreditSeq by the receiver).
func (e *exec) slotFor(st cuda.Stream, ch int, x coll.Xfer, bytes int64, proto coll.Proto) (cuda.DevPtr, error) {
	slot, stage := e.slot, e.stage
	if isLine(proto) {
		slot, stage, bytes = e.L.pl.lineSlot[proto], e.lineStage[proto], cuda.LineWire(proto, bytes)
	}
	if bytes > int64(max(x.Steps, 1))*slot {
		return 0, fmt.Errorf("a %d-byte message on %d slots of %d bytes", bytes, x.Steps, slot)
	}
	if x.Slot < 0 || x.Slot >= coll.NCCLSteps {
		return 0, fmt.Errorf("message slot %d", x.Slot)
	}
	if x.CreditSeq >= 0 {
		cn := &e.s.Conns[x.Conn]
		if e.L.flags {
			if err := e.awaitFlag(st, flagConsumed, e.msgNum(int(x.Conn), int(x.CreditSeq))); err != nil {
				return 0, err
			}
		} else if err := e.waitPeer(st, cn.To, ch, e.L.pl.recvStep(int(x.Conn), int(x.CreditSeq))); err != nil {
			return 0, err
		}
	}
	if stage[x.Conn] == 0 {
		return 0, fmt.Errorf("no staging buffer for connection %d", x.Conn)
	}
	return stage[x.Conn].Add(int(int64(x.Slot) * slot)), nil
}

var errSwitch = errors.New("switch primitives (NVLS/CollNet) are not supported")

// step enqueues one step (rule 4).
func (e *exec) step(ch int, st *coll.Step) error {
	c, x := e.c, e.x
	lane := st.Lane
	stream := c.streams[[2]int{ch, int(lane)}]
	prog := e.s.Program(c.rank, ch)
	for _, d := range st.Deps {
		if d < 0 || d >= int(st.Index) {
			return fmt.Errorf("depends on step %d (not an earlier step)", d)
		}
		if prog.Steps[d].Lane != lane {
			if err := x.StreamWait(stream, e.ev(ch, d)); err != nil {
				return err
			}
		}
	}
	if isLine(st.Proto) {
		return e.stepLL(ch, st, stream)
	}
	n := st.Bytes
	b, count, src, dst, err := e.operands(st)
	if err != nil {
		return err
	}
	// The messages this step consumes: the sender's memory, once its step is enqueued.
	var in []cuda.DevPtr
	for _, rx := range st.Recv {
		cn := &e.s.Conns[rx.Conn]
		if e.L.flags {
			if err := e.awaitFlag(stream, flagReady, e.msgNum(int(rx.Conn), int(rx.Seq))); err != nil {
				return err
			}
		} else if err := e.waitPeer(stream, cn.From, ch, e.L.pl.sendStep(int(rx.Conn), int(rx.Seq))); err != nil {
			return err
		}
		var p cuda.DevPtr
		if e.L.xp != nil {
			// Across processes every message is in the sender's staging buffer, at its slot.
			if n > 0 {
				base, err := e.L.xp.peerStaging(x, cn.From, stageKey(cn), e.c.cl.cfg.Timeout)
				if err != nil {
					return err
				}
				p = base.Add(int(int64(rx.Slot) * e.slot))
			}
		} else {
			e.L.mu.Lock()
			p = e.L.out[rx.Conn][rx.Seq]
			e.L.mu.Unlock()
		}
		if p == 0 && n > 0 {
			return fmt.Errorf("message %d on connection %d has no address", rx.Seq, rx.Conn)
		}
		in = append(in, p)
	}
	prim := st.Prim
	if prim == coll.RecvReduceForward {
		return errSwitch
	}
	if prim.Receives() && len(in) == 0 {
		return fmt.Errorf("%v receives no message", prim)
	}
	if (prim.ReadsSrc() && src == 0) || (prim.WritesDst() && dst == 0) {
		return fmt.Errorf("%v without its source or destination", prim)
	}
	// out: where the step's result lives. A step that receives and writes no Dst computes into
	// the staging slot of its first outgoing message.
	var out cuda.DevPtr
	inSlot := false
	switch {
	case prim.WritesDst():
		out = dst
	case prim == coll.Send:
		out = src
	default: // RecvReduceSend, RecvSend
		if len(st.Send) == 0 {
			return fmt.Errorf("%v sends nothing", prim)
		}
		if out, err = e.slotFor(stream, ch, st.Send[0], n, coll.Simple); err != nil {
			return err
		}
		inSlot = true
	}
	k := c.k
	switch prim {
	case coll.Recv, coll.RecvCopySend, coll.RecvSend:
		err = k.Copy(x, stream, out, in[0], int(n))
	case coll.CopySend, coll.Copy:
		if dst != src {
			err = k.Copy(x, stream, dst, src, int(n))
		}
	case coll.LocalReduce:
		err = k.Reduce(x, stream, b.dt, e.redOp(int(st.Op)), dst, dst, src, count, 0, 0)
	case coll.RecvReduceSend, coll.RecvReduceCopy, coll.RecvReduceCopySend:
		op := e.redOp(int(st.Op))
		err = k.Reduce(x, stream, b.dt, op, out, src, in[0], count, 0, 0)
		for _, p := range in[1:] {
			if err == nil {
				err = k.Reduce(x, stream, b.dt, op, out, out, p, count, 0, 0)
			}
		}
	}
	if err != nil {
		return err
	}
	if st.PostOp && b.avgInt && count > 0 {
		if err := k.Divide(x, stream, b.dt, out, out, count, uint64(e.L.n)); err != nil {
			return err
		}
	}
	// Expose the result to each receiver: in place if stable, else through a staging slot.
	addrs := make([]cuda.DevPtr, len(st.Send))
	for i, sx := range st.Send {
		switch {
		case inSlot && i == 0:
			addrs[i] = out
		case n == 0 || (!inSlot && e.L.xp == nil && e.stable(out, n, ch, int(st.Index))):
			addrs[i] = out
		default:
			p, err := e.slotFor(stream, ch, sx, n, coll.Simple)
			if err != nil {
				return err
			}
			if err := k.Copy(x, stream, p, out, int(n)); err != nil {
				return err
			}
			addrs[i] = p
		}
	}
	if err := e.record(ch, st, stream); err != nil {
		return err
	}
	e.L.mu.Lock()
	for i, sx := range st.Send {
		e.L.out[sx.Conn][sx.Seq] = addrs[i]
	}
	e.L.mu.Unlock()
	return nil
}

// redOp is the reduction the schedule's operation op runs (Avg and PreMulSum run as Sum).
func (e *exec) redOp(op int) coll.RedOp {
	o := e.s.Ops[op].RedOp
	if o == coll.Avg || o == coll.PreMulSum {
		return coll.Sum
	}
	return o
}

// stepLL enqueues one step of an LL or LL128 operation (after its same-program dependencies,
// which step has made its stream wait for). Every message travels as lines of the step's protocol
// in the sender's buffer of that protocol, at its slot, with flag Seq+1 (cuda.Kernels.LineCopy,
// LineReduce: 16-byte LL lines or 128-byte LL128 lines): the receiving kernel polls the flags,
// so its stream does not wait for the sending step's event; the host still waits until the
// sender has enqueued that step (for the address, as on the Simple path). A step with one
// message in and at most one out is one kernel (receive, combine, write Dst and the outgoing
// lines in one pass); otherwise the raw result goes to Dst (or the lane's tmp buffer) and each
// outgoing message is packed from it. Credits (slot reuse) wait on the receiver's step event as
// on the Simple path.
func (e *exec) stepLL(ch int, st *coll.Step, stream cuda.Stream) error {
	x, L := e.x, e.L
	llSteps.Add(1)
	if st.Proto == coll.LL128 {
		ll128Steps.Add(1)
	}
	n := st.Bytes
	b, count, src, dst, err := e.operands(st)
	if err != nil {
		return err
	}
	prim := st.Prim
	if prim == coll.RecvReduceForward {
		return errSwitch
	}
	if (prim.ReadsSrc() && src == 0) || (prim.WritesDst() && dst == 0) {
		return fmt.Errorf("%v without its source or destination", prim)
	}
	in := make([]cuda.DevPtr, len(st.Recv))
	for i, rx := range st.Recv {
		cn := &e.s.Conns[rx.Conn]
		if !L.flags { // in flag mode the message's address (the sender's buffer) is known already
			if err := L.waitStep(cn.From, ch, L.pl.sendStep(int(rx.Conn), int(rx.Seq))); err != nil {
				return err
			}
		}
		if n == 0 {
			continue
		}
		if L.xp != nil {
			base, err := L.xp.peerStaging(x, cn.From, lineKey(cn, st.Proto), e.c.cl.cfg.Timeout)
			if err != nil {
				return err
			}
			in[i] = base.Add(int(int64(rx.Slot) * L.pl.lineSlot[st.Proto]))
		} else {
			L.mu.Lock()
			in[i] = L.out[rx.Conn][rx.Seq]
			L.mu.Unlock()
		}
		if in[i] == 0 {
			return fmt.Errorf("%v message %d on connection %d has no address", st.Proto, rx.Seq, rx.Conn)
		}
	}
	if prim.Receives() && len(in) == 0 {
		return fmt.Errorf("%v receives no message", prim)
	}
	if !prim.Receives() && len(in) > 0 {
		return fmt.Errorf("%v receives %d messages", prim, len(in))
	}
	outs := make([]cuda.DevPtr, len(st.Send))
	for i, sx := range st.Send {
		if outs[i], err = e.slotFor(stream, ch, sx, n, st.Proto); err != nil {
			return err
		}
	}
	if len(st.Send) > 0 && !prim.Sends() {
		return fmt.Errorf("%v sends %d messages", prim, len(st.Send))
	}
	if n > 0 {
		if err := e.computeLL(ch, st, stream, b, count, src, dst, in, outs); err != nil {
			return err
		}
	}
	if err := e.record(ch, st, stream); err != nil {
		return err
	}
	L.mu.Lock()
	for i, sx := range st.Send {
		L.out[sx.Conn][sx.Seq] = outs[i]
	}
	L.mu.Unlock()
	return nil
}

// llFlag is the flag of message x's LL lines: its number on the connection plus one. The lines of
// a consumed message are zeroed by its receiver, so the same flag in the next launch (or graph
// replay) cannot be mistaken for it.
func llFlag(x coll.Xfer) uint32 { return uint32(x.Seq + 1) }

// computeLL enqueues the kernels of an LL or LL128 step with n > 0 bytes (stepLL).
func (e *exec) computeLL(ch int, st *coll.Step, stream cuda.Stream, b *opBuf, count int, src, dst cuda.DevPtr, in, outs []cuda.DevPtr) error {
	x, k, prim, n, p := e.x, e.c.k, st.Prim, int(st.Bytes), st.Proto
	postDiv := st.PostOp && b.avgInt
	raw := cuda.DevPtr(0) // the raw result the kernels write (Dst when the primitive has one)
	if prim.WritesDst() {
		raw = dst
	}
	if len(st.Recv) <= 1 && len(outs) <= 1 && !postDiv { // one kernel
		var out cuda.DevPtr
		var of uint32
		if len(outs) == 1 {
			out, of = outs[0], llFlag(st.Send[0])
		}
		switch prim {
		case coll.Copy:
			if dst != src {
				return k.Copy(x, stream, dst, src, n)
			}
			return nil
		case coll.LocalReduce:
			return k.Reduce(x, stream, b.dt, e.redOp(int(st.Op)), dst, dst, src, count, 0, 0)
		case coll.Send, coll.CopySend:
			if raw == src {
				raw = 0
			}
			if raw == 0 && out == 0 {
				return nil
			}
			return k.LineCopy(x, stream, p, raw, src, 0, 0, out, of, n)
		case coll.Recv, coll.RecvCopySend, coll.RecvSend:
			return k.LineCopy(x, stream, p, raw, 0, in[0], llFlag(st.Recv[0]), out, of, n)
		case coll.RecvReduceSend, coll.RecvReduceCopy, coll.RecvReduceCopySend:
			return k.LineReduce(x, stream, p, b.dt, e.redOp(int(st.Op)), raw, src, in[0], llFlag(st.Recv[0]), out, of, count, 0, 0)
		}
		return fmt.Errorf("%v: no %v kernel", prim, p)
	}
	// Several messages in or out, or the integer Avg's division: the raw result first.
	if raw == 0 {
		var err error
		if raw, err = e.tmpFor(ch, int(st.Lane), int64(n)); err != nil {
			return err
		}
	}
	var err error
	switch prim {
	case coll.Send, coll.CopySend:
		if prim == coll.CopySend && dst != src {
			err = k.Copy(x, stream, dst, src, n)
		}
		raw = src
	case coll.Recv, coll.RecvCopySend, coll.RecvSend:
		if len(in) != 1 {
			return fmt.Errorf("%v receives %d messages", prim, len(in))
		}
		err = k.LineCopy(x, stream, p, raw, 0, in[0], llFlag(st.Recv[0]), 0, 0, n)
	case coll.RecvReduceSend, coll.RecvReduceCopy, coll.RecvReduceCopySend:
		op := e.redOp(int(st.Op))
		a := src
		for i, m := range in {
			if err == nil {
				err = k.LineReduce(x, stream, p, b.dt, op, raw, a, m, llFlag(st.Recv[i]), 0, 0, count, 0, 0)
			}
			a = raw
		}
	default:
		return fmt.Errorf("%v: no %v kernel", prim, p)
	}
	if err == nil && postDiv && count > 0 {
		err = k.Divide(x, stream, b.dt, raw, raw, count, uint64(e.L.n))
	}
	for i, out := range outs {
		if err == nil {
			err = k.LineCopy(x, stream, p, 0, raw, 0, 0, out, llFlag(st.Send[i]), n)
		}
	}
	return err
}

// llSteps counts the LL and LL128 steps enqueued (for tests); ll128Steps the LL128 ones.
var llSteps, ll128Steps atomic.Int64
