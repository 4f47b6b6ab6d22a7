package engine

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
)

// A launch is one call, or one group of calls, made by every rank of the clique: the n-th launch
// of every rank meet here (the rendezvous), agree on one coll schedule, and enqueue their parts of
// it concurrently, each on its own device's thread.

// plan is a compiled schedule with the message tables every launch of it uses.
type plan struct {
	s      *coll.Schedule
	ix     *coll.Index // the schedule's validated message table
	maxMsg []int64     // [conn]: largest Simple message (payload bytes)
	// maxLine [coll.LL or coll.LL128][conn]: the largest message of the line protocol (bytes of
	// lines); lineSlot: bytes of one of a connection's NCCL_STEPS slots of the protocol (its
	// buffer / NCCL_STEPS, rounded up to whole lines).
	maxLine  [2][]int64
	lineSlot [2]int64
	lanes    [][]int // [rank*NChannels+ch]: the lanes the program uses, in order of first use
	lasts    [][]int // [rank*NChannels+ch]: the index of each lane's last step, ascending

	creditOnce sync.Once
	creditSet  []bool // credited(): by global message number
}

// sendStep is the step of conn's sending program that sends message seq.
func (pl *plan) sendStep(conn, seq int) int {
	c := &pl.s.Conns[conn]
	return pl.ix.Local(c.From*pl.s.NChannels+c.Channel, pl.ix.Sender[pl.ix.MsgStart[conn]+int32(seq)])
}

// recvStep is the step of conn's receiving program that consumes message seq.
func (pl *plan) recvStep(conn, seq int) int {
	c := &pl.s.Conns[conn]
	return pl.ix.Local(c.To*pl.s.NChannels+c.Channel, pl.ix.Receiver[pl.ix.MsgStart[conn]+int32(seq)])
}

// segment maps bytes [off, off+n) of a logical buffer to device memory.
type segment struct {
	off, n int64
	p      cuda.DevPtr
}

// opBuf is one rank's buffers of one operation.
type opBuf struct {
	send, recv []segment
	// scale: multiply the send buffer by this before the schedule runs (PreMulSum; Avg on floats).
	scale  float64
	avgInt bool // Avg on integers: divide by nRanks at the PostOp step
	dt     coll.DataType
}

type launch struct {
	cl    *clique
	calls [][]*call
	n     int

	ready bool
	err   error // set before ready: the launch fails on every rank
	pl    *plan // nil: nothing to run (every call empty)
	bufs  [][]opBuf

	xp  *xproc // ranks in other processes (InitRank): progress and the end count in the segment
	gen uint64
	// flags: the ranks (in other processes) order this launch's steps through device flags
	// (flags.go), not interprocess events: the launch is being captured, or Config.DeviceFlags.
	flags bool

	mu       sync.Mutex
	cond     *sync.Cond
	prog     [][]int         // [rank][channel]: steps enqueued (their events recorded)
	out      [][]cuda.DevPtr // [conn][seq]: where the message's bytes are
	finished int
	failed   error
	// left: the ranks whose part of the launch has ended (Comm.launch, whatever its outcome). Until
	// every rank has left, a peer may still read this rank's events (join's peerEvent): Destroy
	// waits for it (waitLeft).
	left int
}

// arrive is the rendezvous of the gen-th launch: it returns once every rank has arrived (with
// the launch prepared) or fails after the timeout, naming the ranks that did not come.
func (cl *clique) arrive(rank int, gen uint64, calls []*call) (*launch, error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	L := cl.pending[gen]
	if L == nil {
		L = &launch{cl: cl, calls: make([][]*call, cl.n), n: cl.n}
		L.cond = sync.NewCond(&L.mu)
		cl.pending[gen] = L
	}
	if L.err != nil {
		return nil, L.err
	}
	L.calls[rank] = calls
	arrived := 0
	for _, c := range L.calls {
		if c != nil {
			arrived++
		}
	}
	if arrived == cl.n {
		delete(cl.pending, gen)
		L.err = L.prepare()
		L.ready = true
		cl.cond.Broadcast()
	}
	if !L.ready {
		deadline := time.Now().Add(cl.cfg.Timeout)
		t := time.AfterFunc(cl.cfg.Timeout, func() {
			cl.mu.Lock()
			cl.cond.Broadcast()
			cl.mu.Unlock()
		})
		for !L.ready && L.err == nil && time.Now().Before(deadline) {
			cl.cond.Wait()
		}
		t.Stop()
		if !L.ready && L.err == nil {
			var missing []string
			for r, c := range L.calls {
				if c == nil {
					missing = append(missing, fmt.Sprint(r))
				}
			}
			L.err = fmt.Errorf("%w: rank %d waited %v for ranks [%s] to launch their call %d (%v); one goroutine driving several ranks must use GroupStart/GroupEnd",
				ErrTimeout, rank, cl.cfg.Timeout, strings.Join(missing, " "), gen, calls[0].f)
		}
	}
	if L.err != nil {
		return nil, L.err
	}
	return L, nil
}

func sameColl(a, b *call) bool {
	return a.f == b.f && a.count == b.count && a.dt == b.dt && a.op == b.op && a.root == b.root
}

// prepare checks that the ranks' calls agree, builds the plans and compiles (or fetches) the
// schedule. It runs once, under the clique's lock, when the last rank arrives.
func (L *launch) prepare() error {
	n := L.n
	// The collectives (and AllToAll) of every rank, in call order, must match rank 0's.
	var colls [][]*call
	type p2pKey struct{ from, to int }
	sends := map[p2pKey][]*call{}
	recvs := map[p2pKey][]*call{}
	var sendOrder [][]*call
	for r := 0; r < n; r++ {
		var cs, ss []*call
		for _, k := range L.calls[r] {
			if k.f == coll.SendRecv {
				if k.p2pSend {
					sends[p2pKey{r, k.peer}] = append(sends[p2pKey{r, k.peer}], k)
					ss = append(ss, k)
				} else {
					recvs[p2pKey{k.peer, r}] = append(recvs[p2pKey{k.peer, r}], k)
				}
				continue
			}
			cs = append(cs, k)
		}
		colls = append(colls, cs)
		sendOrder = append(sendOrder, ss)
	}
	for r := 1; r < n; r++ {
		if len(colls[r]) != len(colls[0]) {
			return fmt.Errorf("%w: rank %d launched %d collectives, rank 0 %d", ErrMismatch, r, len(colls[r]), len(colls[0]))
		}
		for i, k := range colls[r] {
			if k0 := colls[0][i]; !sameColl(k, k0) {
				return fmt.Errorf("%w: call %d: rank %d has %v count %d %v %v root %d, rank 0 %v count %d %v %v root %d",
					ErrMismatch, i, r, k.f, k.count, k.dt, k.op, k.root, k0.f, k0.count, k0.dt, k0.op, k0.root)
			}
		}
	}
	for key, ss := range sends {
		rs := recvs[key]
		if len(rs) != len(ss) {
			return fmt.Errorf("%w: rank %d sends %d messages to rank %d, which receives %d from it", ErrMismatch, key.from, len(ss), key.to, len(rs))
		}
		for i := range ss {
			sb, rb := ss[i].count*int64(ss[i].dt.Size()), rs[i].count*int64(rs[i].dt.Size())
			if sb != rb {
				return fmt.Errorf("%w: send %d from rank %d to rank %d has %d bytes, the matching receive %d", ErrMismatch, i, key.from, key.to, sb, rb)
			}
		}
	}
	for key, rs := range recvs {
		if len(sends[key]) != len(rs) {
			return fmt.Errorf("%w: rank %d receives %d messages from rank %d, which sends %d to it", ErrMismatch, key.to, len(rs), key.from, len(sends[key]))
		}
	}

	cfg := &L.cl.cfg
	var plans []coll.Plan
	L.bufs = make([][]opBuf, n)
	for i, k0 := range colls[0] {
		if k0.count == 0 {
			continue
		}
		elt := int64(k0.dt.Size())
		p, _, err := cfg.plan(coll.Call{Func: k0.f, Count: k0.count, DataType: k0.dt, Op: k0.op, Root: k0.root})
		if err != nil {
			return err
		}
		if k0.op == coll.Avg {
			p.Op = coll.Sum // Avg runs as Sum (floats pre-scaled, integers divided at the PostOp step)
		}
		if k0.op == coll.PreMulSum {
			p.Op = coll.Sum // the inputs are pre-scaled
		}
		plans = append(plans, p)
		send, recv := sendRecvBytes(k0.f, k0.count*elt, n)
		for r := 0; r < n; r++ {
			k := colls[r][i]
			b := opBuf{dt: k.dt}
			if send > 0 && k.send != 0 {
				b.send = []segment{{0, send, k.send}}
			}
			if recv > 0 && k.recv != 0 {
				b.recv = []segment{{0, recv, k.recv}}
			}
			switch {
			case k.op == coll.PreMulSum:
				b.scale = k.scalar
			case k.op == coll.Avg && isFloat(k.dt):
				b.scale = 1 / float64(n)
			case k.op == coll.Avg:
				b.avgInt = true
			}
			L.bufs[r] = append(L.bufs[r], b)
		}
	}
	// Point-to-point: one SendRecv operation in bytes; each rank's sends laid out back to back in
	// its call order, each rank's receives in the order of the transfer list (coll's layout).
	var transfers []coll.Transfer
	sendSeg := make([][]segment, n)
	recvSeg := make([][]segment, n)
	sendOff := make([]int64, n)
	recvOff := make([]int64, n)
	used := map[p2pKey]int{}
	for r := 0; r < n; r++ {
		for _, k := range sendOrder[r] {
			key := p2pKey{r, k.peer}
			rk := recvs[key][used[key]]
			used[key]++
			b := k.count * int64(k.dt.Size())
			if b == 0 {
				continue
			}
			transfers = append(transfers, coll.Transfer{From: r, To: k.peer, Count: b})
			sendSeg[r] = append(sendSeg[r], segment{sendOff[r], b, k.send})
			recvSeg[k.peer] = append(recvSeg[k.peer], segment{recvOff[k.peer], b, rk.recv})
			sendOff[r] += b
			recvOff[k.peer] += b
		}
	}
	if len(transfers) > 0 {
		// The planner plans each transfer as NCCL plans one of its size to its peer.
		p, _, err := cfg.plan(coll.Call{Func: coll.SendRecv, DataType: coll.Uint8, Transfers: transfers})
		if err != nil {
			return err
		}
		plans = append(plans, p)
		for r := 0; r < n; r++ {
			L.bufs[r] = append(L.bufs[r], opBuf{send: sendSeg[r], recv: recvSeg[r], dt: coll.Uint8})
		}
	}
	if len(plans) == 0 {
		return nil
	}
	pl, err := L.cl.plan(plans)
	if err != nil {
		return err
	}
	L.pl = pl
	L.prog = make([][]int, n)
	for r := range L.prog {
		L.prog[r] = make([]int, pl.s.NChannels)
	}
	L.out = make([][]cuda.DevPtr, len(pl.s.Conns))
	for i, cn := range pl.s.Conns {
		L.out[i] = make([]cuda.DevPtr, cn.Messages)
	}
	return nil
}

func isFloat(t coll.DataType) bool {
	switch t {
	case coll.Float16, coll.Float32, coll.Float64, coll.Bfloat16, coll.Float8e4m3, coll.Float8e5m2:
		return true
	}
	return false
}

func sendRecvBytes(f coll.Func, size int64, n int) (send, recv int64) {
	switch f {
	case coll.AllGather:
		return size, size * int64(n)
	case coll.ReduceScatter:
		return size * int64(n), size
	case coll.AllToAll:
		return size * int64(n), size * int64(n)
	}
	return size, size
}

// plan compiles the plans (cached by their content) and indexes the messages. Called with cl.mu held.
func (cl *clique) plan(plans []coll.Plan) (*plan, error) {
	key := make([]byte, 0, 64*len(plans))
	for _, p := range plans {
		for _, v := range []int64{int64(p.Func), p.Count, int64(p.DataType), int64(p.Op), int64(p.Root), int64(p.Algo), int64(p.Proto), int64(p.NChannels), p.BuffSize[coll.LL], p.BuffSize[coll.LL128]} {
			key = strconv.AppendInt(key, v, 10)
			key = append(key, '/')
		}
		for _, t := range p.Transfers {
			key = strconv.AppendInt(key, int64(t.From), 10)
			key = append(key, '>')
			key = strconv.AppendInt(key, int64(t.To), 10)
			key = append(key, ':')
			key = strconv.AppendInt(key, t.Count, 10)
			key = append(key, ':')
			key = strconv.AppendInt(key, int64(t.NChannels), 10)
			key = append(key, ':')
			key = strconv.AppendInt(key, t.ChunkSize, 10)
			key = strconv.AppendBool(key, t.LL)
			key = append(key, ',')
		}
		key = append(key, ';')
	}
	if pl, ok := cl.plans[string(key)]; ok {
		return pl, nil
	}
	s, err := coll.Compile(plans...)
	if err != nil {
		return nil, err
	}
	if len(s.Switches) > 0 {
		return nil, fmt.Errorf("engine: schedule needs switch endpoints (NVLS/CollNet), which this engine does not run")
	}
	ix, err := coll.NewIndex(s)
	if err != nil {
		return nil, err
	}
	pl := &plan{s: s, ix: ix, maxMsg: make([]int64, len(s.Conns)), maxLine: [2][]int64{make([]int64, len(s.Conns)), make([]int64, len(s.Conns))}}
	for _, p := range plans {
		for _, proto := range []coll.Proto{coll.LL, coll.LL128} {
			b := p.BuffSize[proto]
			if b <= 0 {
				b = coll.DefaultBuffSize[proto]
			}
			line := cuda.LineWire(proto, 1)
			pl.lineSlot[proto] = max(pl.lineSlot[proto], (b/coll.NCCLSteps+line-1)/line*line)
		}
	}
	for _, p := range s.Programs {
		for _, st := range p.Steps {
			for _, x := range st.Send {
				if isLine(st.Proto) {
					pl.maxLine[st.Proto][x.Conn] = max(pl.maxLine[st.Proto][x.Conn], cuda.LineWire(st.Proto, st.Bytes))
				} else {
					pl.maxMsg[x.Conn] = max(pl.maxMsg[x.Conn], st.Bytes)
				}
			}
		}
	}
	pl.lanes = make([][]int, s.NRanks*s.NChannels)
	pl.lasts = make([][]int, s.NRanks*s.NChannels)
	for r := 0; r < s.NRanks; r++ {
		for ch := 0; ch < s.NChannels; ch++ {
			p := s.Program(r, ch)
			pl.lanes[r*s.NChannels+ch] = lanes(p)
			pl.lasts[r*s.NChannels+ch] = lastOfLanes(p)
		}
	}
	if len(cl.plans) > 256 {
		cl.plans = map[string]*plan{}
	}
	cl.plans[string(key)] = pl
	return pl, nil
}

// waitFor blocks until cond holds (evaluated under L.mu), the launch failed, or the timeout.
func (L *launch) waitFor(what string, cond func() bool) error {
	if L.xp != nil {
		return L.xp.poll(L.cl.cfg.Timeout, what, func() bool {
			L.mu.Lock()
			defer L.mu.Unlock()
			return cond()
		})
	}
	L.mu.Lock()
	defer L.mu.Unlock()
	if cond() {
		return nil
	}
	if L.failed != nil {
		return L.failed
	}
	timeout := L.cl.cfg.Timeout
	deadline, t := L.wakeAfter(timeout)
	defer t.Stop()
	for !cond() {
		if L.failed != nil {
			return L.failed
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w: waited %v for %s", ErrTimeout, timeout, what)
		}
		L.cond.Wait()
	}
	return nil
}

// waitStep waits until rank's step on channel ch has been enqueued (its event recorded).
func (L *launch) waitStep(rank, ch, step int) error {
	L.mu.Lock()
	done := L.progress(rank, ch) > step
	L.mu.Unlock()
	if done { // the common case: spare the message
		return nil
	}
	return L.waitFor(fmt.Sprintf("rank %d to enqueue step %d of channel %d", rank, step, ch), func() bool { return L.progress(rank, ch) > step })
}

// progress is the number of steps of rank's program on channel ch enqueued (under L.mu).
func (L *launch) progress(rank, ch int) int {
	if L.xp != nil {
		return L.xp.progress(L.gen, rank, ch)
	}
	return L.prog[rank][ch]
}

func (L *launch) advance(rank, ch, step int) {
	if L.xp != nil {
		L.xp.advance(L.gen, ch, step)
	}
	L.mu.Lock()
	L.prog[rank][ch] = step + 1
	L.cond.Broadcast()
	L.mu.Unlock()
}

// leave counts one rank's part of the launch ended.
func (L *launch) leave() {
	L.mu.Lock()
	L.left++
	L.cond.Broadcast()
	L.mu.Unlock()
}

// waitLeft waits until every rank has left the launch (leave), or for the timeout: a peer that
// takes longer is failing the launch anyway.
func (L *launch) waitLeft(timeout time.Duration) {
	L.mu.Lock()
	defer L.mu.Unlock()
	if L.left >= L.n {
		return
	}
	deadline, t := L.wakeAfter(timeout)
	defer t.Stop()
	for L.left < L.n && time.Now().Before(deadline) {
		L.cond.Wait()
	}
}

// wakeAfter wakes L.cond's waiters once timeout has passed, so that a wait under L.mu looks at
// its deadline (returned) again; the caller stops the timer when its wait ends.
func (L *launch) wakeAfter(timeout time.Duration) (time.Time, *time.Timer) {
	deadline := time.Now().Add(timeout)
	return deadline, time.AfterFunc(timeout, func() {
		L.mu.Lock()
		L.cond.Broadcast()
		L.mu.Unlock()
	})
}

func (L *launch) abort(err error) {
	L.mu.Lock()
	if L.failed == nil {
		L.failed = err
	}
	L.cond.Broadcast()
	L.mu.Unlock()
}
