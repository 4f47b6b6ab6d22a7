package comm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"
	"unsafe"
	"weak"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/group"
	"github.com/simccl/simccl/realnet"
)

// Stream orders and tracks queued calls, as a CUDA stream does for NCCL: Synchronize waits for
// every call queued on it so far. A nil *Stream in an API call means the communicator's default
// stream.
type Stream struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending int
	err     error
}

// NewStream returns an idle stream.
func NewStream() *Stream {
	s := &Stream{}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *Stream) add() {
	s.mu.Lock()
	s.pending++
	s.mu.Unlock()
}

func (s *Stream) done(err error) {
	s.mu.Lock()
	s.pending--
	if err != nil && s.err == nil {
		s.err = err
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

// Synchronize waits until every call queued on the stream has finished and returns the first error
// any of them returned since the previous Synchronize (clearing it).
func (s *Stream) Synchronize() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.pending > 0 {
		s.cond.Wait()
	}
	err := s.err
	s.err = nil
	return err
}

// Query reports whether the stream is idle (cudaStreamQuery).
func (s *Stream) Query() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending == 0
}

// call is one API call: a collective (through a coll schedule) or a point-to-point operation.
type call struct {
	f       coll.Func
	p2pSend bool // SendRecv: true Send, false Recv
	peer    int
	count   int64
	dt      coll.DataType
	op      coll.RedOp
	scalar  float64
	root    int
	send    []byte
	recv    []byte
	stream  *Stream
}

// task is what the executor runs: the calls of one group (or one call).
type task struct {
	calls   []*call
	streams []*Stream
}

func (c *Comm) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Comm) submit(t *task) error {
	c.stateMu.Lock()
	if c.destroyed {
		c.stateMu.Unlock()
		if err := c.GetAsyncError(); err != nil {
			return err
		}
		return fmt.Errorf("rank %d: %w", c.rank, ErrDestroyed)
	}
	for _, s := range t.streams {
		s.add()
	}
	c.queue = append(c.queue, t)
	c.stateMu.Unlock()
	c.kick()
	return nil
}

func (c *Comm) executor() {
	defer close(c.stopped)
	for {
		c.stateMu.Lock()
		if len(c.queue) == 0 {
			d := c.destroyed
			c.stateMu.Unlock()
			if d {
				return
			}
			<-c.wake
			continue
		}
		t := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		c.stateMu.Unlock()
		err := c.GetAsyncError()
		if err == nil && len(t.calls) > 0 {
			err = c.run(t.calls)
			if err != nil {
				c.fail(err)
				err = c.GetAsyncError()
			}
		}
		for _, s := range t.streams {
			s.done(err)
		}
	}
}

// processGroup is the process-wide group (GroupStart/GroupEnd); each Comm has its own.
var processGroup group.Group[*Comm, *call]

// GroupStart opens a process-wide group (ncclGroupStart): calls on any communicator until the
// matching GroupEnd are queued and launched together, per communicator, by GroupEnd. NCCL keeps the
// depth per thread; Go has no thread identity, so this group is process-wide and meant for one
// goroutine driving several communicators. Goroutine ranks use Comm.GroupStart instead.
func GroupStart() { processGroup.Start() }

// GroupEnd closes a process-wide group and launches its calls (ncclGroupEnd).
func GroupEnd() error {
	comms, calls, ok := processGroup.End()
	if !ok {
		return fmt.Errorf("%w: GroupEnd without GroupStart", ErrInvalidArgument)
	}
	var errs []error
	for _, c := range comms {
		errs = append(errs, c.launch(calls[c]))
	}
	return errors.Join(errs...)
}

// GroupStart opens a group on this communicator: its calls are queued until the matching GroupEnd
// and run together (matching Send/Recv pairs must be in one group).
func (c *Comm) GroupStart() { c.group.Start() }

// GroupEnd closes the communicator's group and launches its calls.
func (c *Comm) GroupEnd() error {
	_, calls, ok := c.group.End()
	if !ok {
		return fmt.Errorf("%w: GroupEnd without GroupStart", ErrInvalidArgument)
	}
	return c.launch(calls[c])
}

func (c *Comm) launch(calls []*call) error {
	if len(calls) == 0 {
		return nil
	}
	seen := map[*Stream]bool{}
	t := &task{calls: calls}
	for _, k := range calls {
		if !seen[k.stream] {
			seen[k.stream] = true
			t.streams = append(t.streams, k.stream)
		}
	}
	return c.submit(t)
}

// enqueue validates nothing: the API functions have; it places the call in a group or launches it.
func (c *Comm) enqueue(k *call) error {
	if err := c.GetAsyncError(); err != nil {
		return err
	}
	if k.stream == nil {
		k.stream = c.defStream
	}
	if processGroup.Hold(c, k) || c.group.Hold(c, k) {
		return nil
	}
	return c.launch([]*call{k})
}

// run executes the calls of one task: the collectives (AllToAll included) as one compiled coll
// schedule, the sends and receives as another (runP2P), concurrently.
func (c *Comm) run(calls []*call) error {
	var colls, p2p []*call
	for _, k := range calls {
		if k.count == 0 && k.f != coll.SendRecv {
			continue // a send or receive of nothing still pairs with a send to or receive from itself
		}
		if k.f == coll.SendRecv {
			p2p = append(p2p, k)
		} else {
			colls = append(colls, k)
		}
	}
	var p2pErr error
	var wg sync.WaitGroup
	if len(p2p) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p2pErr = c.runP2P(p2p)
		}()
	}
	var err error
	if len(colls) > 0 {
		err = c.runColls(colls)
	}
	wg.Wait()
	if err == nil {
		err = p2pErr
	}
	return err
}

// schedule compiles (or fetches from the cache) the schedule of a list of collectives: the
// planner's plans for them (Plan), one operation each, run one after another on every channel.
func (c *Comm) schedule(colls []*call) (*coll.Schedule, error) {
	kb := make([]byte, 0, 48*len(colls)) // the cache key, built without fmt: this runs on every call
	for _, k := range colls {
		for _, v := range [...]int64{int64(k.f), k.count, int64(k.dt), int64(k.op), int64(k.root)} {
			kb = strconv.AppendInt(kb, v, 10)
			kb = append(kb, '/')
		}
		kb = append(kb, ';')
	}
	callKey := string(kb)
	c.schedMu.Lock()
	s, ok := c.scheds[callKey]
	c.schedMu.Unlock()
	if ok {
		return s, nil
	}
	plans := make([]coll.Plan, len(colls))
	for i, k := range colls {
		p, _, err := c.Plan(coll.Call{Func: k.f, Count: k.count, DataType: k.dt, Op: k.op, Root: k.root})
		if err != nil {
			return nil, err
		}
		if err := c.checkBuffers(&p); err != nil {
			return nil, err
		}
		plans[i] = p
		// The process-wide cache is shared by communicators whose planners may differ: its key
		// names the plan too.
		for _, v := range [...]int64{int64(p.Algo), int64(p.Proto), int64(p.NChannels), int64(p.ChannelLo), p.ChunkSize} {
			kb = strconv.AppendInt(kb, v, 10)
			kb = append(kb, '/')
		}
		kb = append(kb, ';')
	}
	key := string(kb)
	s, err := sharedCompile(key, plans)
	if err != nil {
		return nil, err
	}
	c.schedMu.Lock()
	if len(c.scheds) > 256 {
		c.scheds = map[string]*coll.Schedule{}
		c.connected = map[*coll.Schedule]bool{}
	}
	c.scheds[callKey] = s
	c.schedMu.Unlock()
	return s, nil
}

// checkBuffers checks that a plan's Simple buffer (NCCL_BUFFSIZE) is the engine's connections:
// NCCL_STEPS slots of SlotBytes.
func (c *Comm) checkBuffers(p *coll.Plan) error {
	b := p.BuffSize[coll.Simple]
	if b == 0 {
		b = coll.DefaultBuffSize[coll.Simple]
	}
	if b != int64(realnet.Steps*c.cfg.SlotBytes) {
		return fmt.Errorf("%w: the plan's Simple buffer is %d bytes (NCCL_BUFFSIZE), the engine's connections hold %d slots of %d (Config.SlotBytes): set NCCL_BUFFSIZE to %d", ErrInvalidArgument, b, realnet.Steps, c.cfg.SlotBytes, realnet.Steps*c.cfg.SlotBytes)
	}
	return nil
}

// sharedSchedules holds the schedules compiled in this process, so that the goroutine ranks of one
// communicator (and any other communicator with the same plans) share one copy: a schedule holds
// every rank's programs, so a copy per rank would make memory grow as ranks³. A schedule is a pure
// function of its plans and is never modified once compiled. Entries are weak: a schedule lives as
// long as some communicator's cache holds it. Concurrent first uses wait for one compile.
var sharedSchedules = struct {
	sync.Mutex
	m map[string]*sharedSchedule
}{m: map[string]*sharedSchedule{}}

type sharedSchedule struct {
	plans []coll.Plan
	done  chan struct{} // closed when s and err are set
	s     weak.Pointer[coll.Schedule]
	err   error
}

// sharedCompile returns the process's schedule of plans (key names them, as the communicators'
// caches do), compiling it once.
func sharedCompile(key string, plans []coll.Plan) (*coll.Schedule, error) {
	key = strconv.Itoa(plans[0].NRanks) + "/" + strconv.FormatInt(plans[0].BuffSize[coll.Simple], 10) + "/" + key
	sh := &sharedSchedules
	for {
		sh.Lock()
		e, ok := sh.m[key]
		if !ok {
			e = &sharedSchedule{plans: plans, done: make(chan struct{})}
			sh.m[key] = e
			sh.Unlock()
			s, err := coll.Compile(plans...)
			if err == nil {
				e.s = weak.Make(s)
				runtime.AddCleanup(s, func(e *sharedSchedule) {
					sh.Lock()
					if sh.m[key] == e {
						delete(sh.m, key)
					}
					sh.Unlock()
				}, e)
			} else {
				e.err = err
				sh.Lock()
				delete(sh.m, key) // errors are not kept
				sh.Unlock()
			}
			close(e.done)
			return s, err
		}
		sh.Unlock()
		<-e.done
		if !reflect.DeepEqual(e.plans, plans) {
			return coll.Compile(plans...) // the key does not name everything a plan holds: no sharing
		}
		if e.err != nil {
			return nil, e.err
		}
		if s := e.s.Value(); s != nil {
			return s, nil
		}
		sh.Lock() // collected: compile again
		if sh.m[key] == e {
			delete(sh.m, key)
		}
		sh.Unlock()
	}
}

// Schedule returns the coll schedule this communicator runs for one collective (the plan it
// compiles: algorithm from Config.Algo, Simple protocol, channels by size, its slot size), so that
// a real run can be timed by simnet or checked by coll.Execute step for step. The schedule is shared
// with the other ranks of the process: read it, never modify it.
func (c *Comm) Schedule(f coll.Func, count int64, dt coll.DataType, op coll.RedOp, root int) (*coll.Schedule, error) {
	if f == coll.SendRecv {
		return nil, fmt.Errorf("%w: SendRecv is planned per group of sends and receives, not one call", ErrInvalidArgument)
	}
	base, _, err := c.resolveOp(op)
	if err != nil {
		return nil, err
	}
	return c.schedule([]*call{{f: f, count: count, dt: dt, op: base, root: root}})
}

// opBufs are one operation's buffers on this rank.
type opBufs struct {
	send, recv []byte
	// sendSeg/recvSeg, when set, make the send or receive buffer the segments laid end to end
	// (point-to-point: the group's calls' buffers); a step's range lies within one segment.
	sendSeg, recvSeg []segment
}

// segment is a piece of a logical buffer: its offset in it and its memory.
type segment struct {
	off int64
	b   []byte
}

func (c *Comm) runColls(colls []*call) error {
	s, err := c.schedule(colls)
	if err != nil {
		return err
	}
	bufs := make([]opBufs, len(colls))
	for i, k := range colls {
		bufs[i] = opBufs{send: k.send, recv: k.recv}
		if f := preScale(k.dt, k.op, k.scalar, c.n); f != 0 {
			// PreMulSum / float Avg: the inputs are scaled once, into a private copy (as NCCL runs
			// PreMulSum).
			scaled := make([]byte, len(k.send))
			if err := Scale(k.dt, scaled, k.send, f); err != nil {
				return err
			}
			bufs[i].send = scaled
		}
	}
	// Lazy connection (NCCL_RUNTIME_CONNECT=1): connect what this rank's programs use, first time only.
	c.schedMu.Lock()
	ready := c.connected[s]
	c.schedMu.Unlock()
	if !ready {
		if err := c.ensureConns(s); err != nil {
			return err
		}
		c.schedMu.Lock()
		c.connected[s] = true
		c.schedMu.Unlock()
	}
	if s.NChannels == 1 {
		return c.runProgram(s, s.Program(c.rank, 0), bufs, colls)
	}
	errs := make([]error, s.NChannels)
	var wg sync.WaitGroup
	for ch := 0; ch < s.NChannels; ch++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[ch] = c.runProgram(s, s.Program(c.rank, ch), bufs, colls)
			if errs[ch] != nil {
				c.fail(errs[ch]) // unblock the other channels at once
			}
		}()
	}
	wg.Wait()
	return firstErr(errs)
}

func firstErr(errs []error) error {
	// Prefer the root cause over the ErrClosed the abort caused on other channels.
	for _, e := range errs {
		if e != nil && !errors.Is(e, realnet.ErrClosed) {
			return e
		}
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (c *Comm) keyOf(s *coll.Schedule, id int) (realnet.Key, error) {
	if id < 0 || id >= len(s.Conns) {
		return realnet.Key{}, fmt.Errorf("comm: schedule names connection %d of %d", id, len(s.Conns))
	}
	cn := s.Conns[id]
	peer := cn.To
	if cn.To == c.rank {
		peer = cn.From
	}
	return realnet.Key{Channel: cn.Channel, Peer: peer, ConnIndex: cn.ConnIndex}, nil
}

// ensureConns connects, concurrently, every connection this rank's programs use that is not open yet.
func (c *Comm) ensureConns(s *coll.Schedule) error {
	need := map[realnet.Key]bool{}
	for ch := 0; ch < s.NChannels; ch++ {
		p := s.Program(c.rank, ch)
		for i := range p.Steps {
			st := &p.Steps[i]
			for _, xs := range [][]coll.Xfer{st.Send, st.Recv} {
				for _, x := range xs {
					k, err := c.keyOf(s, int(x.Conn))
					if err != nil {
						return err
					}
					need[k] = true
				}
			}
		}
	}
	var keys []realnet.Key
	c.connMu.Lock()
	for k := range need {
		if _, ok := c.conns[k]; !ok {
			keys = append(keys, k)
		}
	}
	c.connMu.Unlock()
	return c.connect(keys)
}

func (c *Comm) connect(keys []realnet.Key) error {
	if len(keys) == 0 {
		return nil
	}
	// base is cancelled, with the reason, when a peer is seen dead (watchPeers); ctx also when the
	// timeout passes or one connection fails.
	base, gone := context.WithCancelCause(context.Background())
	defer gone(nil)
	ctx, cancel := context.WithTimeout(base, c.cfg.Timeout)
	defer cancel()
	defer c.watchPeers(keys, gone)()
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cn, err := c.tr.Connect(ctx, k)
			if err != nil {
				if cause := context.Cause(base); cause != nil && errors.Is(err, context.Canceled) {
					err = fmt.Errorf("%w (%v)", cause, err)
				} else if errors.Is(err, context.DeadlineExceeded) {
					err = fmt.Errorf("%w: peer did not connect within %v (%v)", realnet.ErrTimeout, c.cfg.Timeout, err)
				}
				if !errors.Is(err, realnet.ErrClosed) {
					err = fmt.Errorf("%w: %w", ErrRemote, err)
				}
				errs[i] = fmt.Errorf("rank %d: connect %v (%s): %w", c.rank, k, c.tr.kind[k.Peer], err)
				cancel()
				return
			}
			var mem int64
			if m, ok := cn.(realnet.MemoryReporter); ok {
				mem = m.BufferBytes()
			}
			c.memory.Add(mem)
			c.nconns.Add(1)
			c.logf("rank %d: connected %v via %s, %d buffer bytes", c.rank, k, c.tr.kind[k.Peer], mem)
			c.connMu.Lock()
			c.conns[k] = &conn{c: cn}
			c.connMu.Unlock()
		}()
	}
	wg.Wait()
	return firstErr(errs)
}

// watchPeers checks, every realnet.ShmLivenessPeriod while connect waits, whether a peer of keys is
// known to be dead (peerGone) and then cancels the wait with realnet.ErrPeerGone: a rank that dies
// before a lazy connection to it is made is noticed at once, not after Config.Timeout. It returns
// the function that stops the watch.
func (c *Comm) watchPeers(keys []realnet.Key, gone context.CancelCauseFunc) (stop func()) {
	var peers []int
	seen := map[int]bool{}
	for _, k := range keys {
		if !seen[k.Peer] {
			seen[k.Peer] = true
			peers = append(peers, k.Peer)
		}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(realnet.ShmLivenessPeriod)
		defer t.Stop()
		for {
			for _, p := range peers {
				if c.peerGone(p) {
					gone(fmt.Errorf("rank %d: %w", p, realnet.ErrPeerGone))
					return
				}
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done) }
}

// connectAll makes the ring and tree connections of every channel at init, as
// NCCL_RUNTIME_CONNECT=0 does: those of the planner's Ring and Tree all-reduce plans for a large
// buffer (which use the communicator's channels), listed by coll.Connections.
func (c *Comm) connectAll() error {
	if c.n == 1 {
		return nil
	}
	need := map[realnet.Key]bool{}
	for _, a := range []coll.Algo{coll.Ring, coll.Tree} {
		call := coll.Call{Func: coll.AllReduce, Count: 1 << 28, DataType: coll.Float32, Op: coll.Sum, Exclude: Exclude}
		for b := coll.Algo(0); b < coll.NumAlgos; b++ {
			call.Exclude.Algos[b] = call.Exclude.Algos[b] || b != a
		}
		p, err := c.planner.Plan(call)
		if err != nil {
			continue // the algorithm is disabled (NCCL_ALGO): NCCL does not connect it either
		}
		conns, err := coll.Connections(&p)
		if err != nil {
			return err
		}
		for _, cn := range conns {
			switch c.rank {
			case cn.From:
				need[realnet.Key{Channel: cn.Channel, Peer: cn.To, ConnIndex: cn.ConnIndex}] = true
			case cn.To:
				need[realnet.Key{Channel: cn.Channel, Peer: cn.From, ConnIndex: cn.ConnIndex}] = true
			}
		}
	}
	var keys []realnet.Key
	for k := range need {
		keys = append(keys, k)
	}
	return c.connect(keys)
}

func (c *Comm) getConn(k realnet.Key) (*conn, error) {
	c.connMu.Lock()
	cn, ok := c.conns[k]
	c.connMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("comm: rank %d: connection %v not open", c.rank, k)
	}
	return cn, nil
}

// ref resolves a schedule buffer reference to a byte range of the operation's buffers.
func ref(b *opBufs, r *coll.BufRef, n int64) ([]byte, error) {
	buf, segs := b.send, b.sendSeg
	if r.Buf == coll.BufRecv {
		buf, segs = b.recv, b.recvSeg
	}
	if segs != nil {
		i := sort.Search(len(segs), func(i int) bool { return segs[i].off+int64(len(segs[i].b)) > r.Offset })
		if i == len(segs) || r.Offset < segs[i].off || r.Offset+n > segs[i].off+int64(len(segs[i].b)) {
			return nil, fmt.Errorf("comm: schedule reads %s[%d:%d] across the group's buffers", r.Buf, r.Offset, r.Offset+n)
		}
		return segs[i].b[r.Offset-segs[i].off : r.Offset-segs[i].off+n], nil
	}
	if r.Offset < 0 || r.Offset+n > int64(len(buf)) {
		return nil, fmt.Errorf("comm: schedule reads %s[%d:%d] of a %d-byte buffer", r.Buf, r.Offset, r.Offset+n, len(buf))
	}
	return buf[r.Offset : r.Offset+n], nil
}

func sameStart(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// runProgram runs one rank's program on one channel, following Deps (lanes run concurrently).
func (c *Comm) runProgram(s *coll.Schedule, p *coll.Program, bufs []opBufs, calls []*call) error {
	oneLane := true
	for i := range p.Steps {
		oneLane = oneLane && p.Steps[i].Lane == p.Steps[0].Lane
	}
	if oneLane {
		// The common case (rings): the steps in order, on this goroutine.
		sc := c.scratchFor(p.Channel, 0)
		for i := range p.Steps {
			if err := c.runStep(s, &p.Steps[i], bufs, calls, sc); err != nil {
				return err
			}
		}
		return nil
	}
	lanes := map[int][]int{}
	var order []int
	for i := range p.Steps {
		l := p.Steps[i].Lane
		if _, ok := lanes[int(l)]; !ok {
			order = append(order, int(l))
		}
		lanes[int(l)] = append(lanes[int(l)], i)
	}
	done := make([]chan struct{}, len(p.Steps))
	for i := range done {
		done[i] = make(chan struct{})
	}
	abort := make(chan struct{})
	var once sync.Once
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for li, l := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := c.scratchFor(p.Channel, li)
			for _, i := range lanes[l] {
				for _, d := range p.Steps[i].Deps {
					if d < 0 || d >= len(done) {
						errs[li] = fmt.Errorf("comm: step %d depends on step %d of %d", i, d, len(done))
						once.Do(func() { close(abort) })
						return
					}
					select {
					case <-done[d]:
					case <-abort:
						return
					}
				}
				if err := c.runStep(s, &p.Steps[i], bufs, calls, sc); err != nil {
					errs[li] = err
					once.Do(func() { close(abort) })
					c.fail(err)
					return
				}
				close(done[i])
			}
		}()
	}
	wg.Wait()
	return firstErr(errs)
}

// scratch holds a step's private result (out) and a receive buffer for transports without
// DirectReceiver (rx). Each (channel, lane) keeps its own across calls: only that channel's lane
// goroutine of the communicator's executor touches it.
type scratch struct{ out, rx []byte }

func (c *Comm) scratchFor(channel, lane int) *scratch {
	if channel < 0 || channel >= len(c.scr) || lane < 0 || lane >= len(c.scr[0]) {
		return &scratch{}
	}
	return &c.scr[channel][lane]
}

// runStep executes one primitive (schedule.go rule 4).
func (c *Comm) runStep(s *coll.Schedule, st *coll.Step, bufs []opBufs, calls []*call, sc *scratch) error {
	if st.Op < 0 || int(st.Op) >= len(bufs) {
		return fmt.Errorf("comm: step %d names operation %d of %d", st.Index, st.Op, len(bufs))
	}
	b := &bufs[st.Op]
	k := calls[st.Op]
	n := st.Bytes
	var src, dst []byte
	var err error
	if st.Src != nil {
		if src, err = ref(b, st.Src, n); err != nil {
			return err
		}
	}
	if st.Dst != nil {
		if dst, err = ref(b, st.Dst, n); err != nil {
			return err
		}
	}
	prim := st.Prim
	// out is where the step's result lives: Dst when the primitive writes one, else scratch.
	var out []byte
	switch {
	case prim.WritesDst() && dst != nil:
		out = dst
	case prim.Receives():
		if int64(cap(sc.out)) < n {
			sc.out = make([]byte, n)
		}
		out = sc.out[:n]
	default:
		out = src // Send: the local data itself
	}
	if prim.ReadsSrc() && src == nil && prim != coll.Send {
		return fmt.Errorf("comm: step %d (%v) has no source", st.Index, prim)
	}
	if c.cfg.Observe != nil {
		for _, x := range st.Send {
			cn := s.Conns[x.Conn]
			c.cfg.Observe(Message{Channel: cn.Channel, From: cn.From, To: cn.To, ConnIndex: cn.ConnIndex, Step: int(st.Index), Seq: int(x.Seq), Bytes: n})
		}
	}
	if done, err := c.slotStep(s, st, k, src, dst, sc); done {
		return err
	}
	if prim == coll.LocalReduce {
		if dst == nil || src == nil {
			return fmt.Errorf("comm: step %d (Reduce) needs a source and a destination", st.Index)
		}
		if err := Reduce(k.dt, k.op, dst, src); err != nil {
			return err
		}
		out = dst
	} else if prim.Reduces() {
		// The first message is combined with Src straight into out (one pass); any further ones
		// (a tree node's other children) are folded into out.
		fused := !sameStart(out, src)
		for xi, x := range st.Recv {
			key, err := c.keyOf(s, int(x.Conn))
			if err != nil {
				return err
			}
			cn, err := c.getConn(key)
			if err != nil {
				return err
			}
			off := 0
			var rerr error
			cn.recvMu.Lock()
			sc.rx, err = realnet.RecvFunc(cn.c, int(n), time.Now().Add(c.cfg.Timeout), sc.rx, func(piece []byte) {
				if rerr == nil {
					if fused && xi == 0 {
						rerr = ReduceInto(k.dt, k.op, out[off:off+len(piece)], src[off:off+len(piece)], piece)
					} else {
						rerr = Reduce(k.dt, k.op, out[off:off+len(piece)], piece)
					}
				}
				off += len(piece)
			})
			cn.recvMu.Unlock()
			if err != nil {
				return c.remote(key, err)
			}
			if rerr != nil {
				return rerr
			}
		}
		if len(st.Recv) == 0 && fused {
			copy(out, src)
		}
	} else if prim.Receives() {
		if len(st.Recv) != 1 {
			return fmt.Errorf("comm: step %d (%v) receives %d messages, want 1", st.Index, prim, len(st.Recv))
		}
		key, err := c.keyOf(s, int(st.Recv[0].Conn))
		if err != nil {
			return err
		}
		cn, err := c.getConn(key)
		if err != nil {
			return err
		}
		cn.recvMu.Lock()
		err = cn.c.Recv(out, time.Now().Add(c.cfg.Timeout))
		cn.recvMu.Unlock()
		if err != nil {
			return c.remote(key, err)
		}
	} else if (prim == coll.Copy || prim == coll.CopySend) && dst != nil && !sameStart(dst, src) {
		copy(dst, src)
		out = dst
	}
	if st.PostOp && k.op == coll.Avg && !isFloat(k.dt) {
		DivideInt(k.dt, out, c.n)
	}
	for _, x := range st.Send {
		key, err := c.keyOf(s, int(x.Conn))
		if err != nil {
			return err
		}
		cn, err := c.getConn(key)
		if err != nil {
			return err
		}
		cn.sendMu.Lock()
		err = cn.c.Send(out, time.Now().Add(c.cfg.Timeout))
		cn.sendMu.Unlock()
		if err != nil {
			return c.remote(key, err)
		}
	}
	return nil
}

// slotBlock is the block a slot step combines and then copies on while it is still in the L1/L2 cache.
const slotBlock = 32 << 10

// slotStep runs a receive-and-forward step (RecvReduceSend, RecvReduceCopySend, RecvCopySend,
// RecvSend) in place in the slots of SlotConn connections, as NCCL's primitives do (prims_*.h):
// each incoming piece is combined with Src straight into the outgoing slot (and Dst), a block at a
// time, with no staging buffer and no second pass over the message. It reports done false, doing
// nothing, when the step or its connections do not qualify; the generic path then runs it.
//
// Progress is never worse than the generic path's (receive everything, then send): an outgoing slot
// is only taken when one is free at once; from the first piece that finds none, the results go to
// Dst (or scratch) and are sent, blocking, after the whole message has been received.
func (c *Comm) slotStep(s *coll.Schedule, st *coll.Step, k *call, src, dst []byte, sc *scratch) (bool, error) {
	reduces := false
	switch st.Prim {
	case coll.RecvReduceSend, coll.RecvReduceCopySend:
		reduces = true
	case coll.RecvCopySend, coll.RecvSend:
	default:
		return false, nil
	}
	if len(st.Recv) != 1 || len(st.Send) != 1 || (reduces && src == nil) || (st.PostOp && k.op == coll.Avg && !isFloat(k.dt)) {
		return false, nil
	}
	if !st.Prim.WritesDst() {
		dst = nil
	}
	rkey, err := c.keyOf(s, int(st.Recv[0].Conn))
	if err != nil {
		return true, err
	}
	tkey, err := c.keyOf(s, int(st.Send[0].Conn))
	if err != nil {
		return true, err
	}
	rcn, err := c.getConn(rkey)
	if err != nil {
		return true, err
	}
	tcn, err := c.getConn(tkey)
	if err != nil {
		return true, err
	}
	rx, ok1 := rcn.c.(realnet.SlotConn)
	tx, ok2 := tcn.c.(realnet.SlotConn)
	slotBytes := rcn.c.SlotBytes()
	if !ok1 || !ok2 || tcn.c.SlotBytes() != slotBytes || slotBytes%16 != 0 {
		return false, nil
	}
	n := int(st.Bytes)
	deadline := time.Now().Add(c.cfg.Timeout)
	rcn.recvMu.Lock()
	defer rcn.recvMu.Unlock()
	tcn.sendMu.Lock()
	defer tcn.sendMu.Unlock()

	deferred := -1 // offset of the first piece whose sending waits for the end of the message
	var stage []byte
	for off, first := 0, true; first || off < n; first = false {
		piece, total, err := rx.PeekRecv(deadline)
		if err != nil {
			return true, c.remote(rkey, err)
		}
		m := len(piece)
		if total != n || m != min(slotBytes, n-off) {
			return true, c.remote(rkey, fmt.Errorf("recv: want a %d-byte message, got a piece of %d bytes at %d of a %d-byte message: %w", n, m, off, total, realnet.ErrSize))
		}
		var slot []byte
		if deferred < 0 {
			sl, ok, err := tx.ReserveSend(false, deadline)
			if err != nil {
				return true, c.remote(tkey, err)
			}
			if ok {
				slot = sl[:m]
			} else {
				deferred = off
			}
		}
		var target []byte
		switch {
		case dst != nil:
			target = dst[off : off+m]
		case slot != nil:
			target = slot
		default:
			if stage == nil {
				if cap(sc.out) < n {
					sc.out = make([]byte, n)
				}
				stage = sc.out[:n]
			}
			target = stage[off : off+m]
		}
		for b := 0; b < m; b += slotBlock {
			e := min(b+slotBlock, m)
			if reduces {
				if err := ReduceInto(k.dt, k.op, target[b:e], src[off+b:off+e], piece[b:e]); err != nil {
					return true, err
				}
			} else {
				copy(target[b:e], piece[b:e])
			}
			if slot != nil && dst != nil {
				copy(slot[b:e], target[b:e])
			}
		}
		rx.ReleaseRecv()
		if slot != nil {
			tx.PublishSend(m, n)
		}
		off += m
	}
	if deferred >= 0 {
		from := dst
		if from == nil {
			from = stage
		}
		for off, first := deferred, true; first || off < n; first = false {
			sl, _, err := tx.ReserveSend(true, deadline)
			if err != nil {
				return true, c.remote(tkey, err)
			}
			m := min(slotBytes, n-off)
			copy(sl, from[off:off+m])
			tx.PublishSend(m, n)
			off += m
		}
	}
	return true, nil
}

// remote wraps a transport error with the place and ErrRemote (unless it was a local abort).
func (c *Comm) remote(k realnet.Key, err error) error {
	if errors.Is(err, realnet.ErrClosed) {
		if e := c.GetAsyncError(); e != nil {
			return e
		}
		return fmt.Errorf("rank %d: %v: %w", c.rank, k, err)
	}
	return fmt.Errorf("rank %d: %w: %v (%s): %w", c.rank, ErrRemote, k, c.tr.kind[k.Peer], err)
}
