package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/realnet"
)

// One process per rank (ncclCommInitRank across processes). The executor is exec.go's; what the
// in-process clique keeps in Go memory — the launch rendezvous, the per-(rank, channel) progress,
// the end-of-launch count — lives in a shared-memory segment (a file in /dev/shm mapped by every
// rank), and what a rank reads of its peers' GPUs goes through CUDA IPC:
//
//   - Events: every step event is created with CU_EVENT_INTERPROCESS; its cuIpcGetEventHandle is
//     published in the segment once, and a peer opens it (cuIpcOpenEventHandle) the first time it
//     waits on it.
//   - Messages: a rank never reads a peer's user buffers (their allocations are the caller's, and
//     may be freed or reused without telling us). Every message goes through the sender's staging
//     buffer for the connection, a fixed allocation of 2×NCCL_STEPS slots exported once with
//     cuIpcGetMemHandle; the receiver finds the message at the slot its Xfer names, so no
//     address is exchanged per launch.
//   - Rendezvous: a rank writes its calls of the launch (without pointers) into its part of the
//     segment and then its launch number; once every rank's number is there, every rank checks
//     and plans the launch itself (the plan is a function of the calls, so all agree).
//   - Progress: per (rank, channel) one 64-bit word, launch<<24 | steps enqueued, polled.
//   - Liveness: every rank's pid is in the segment; waits poll it (and an abort flag any rank may
//     raise), so a dead or aborting peer makes the others' waits fail within a poll interval
//     instead of after Config.Timeout; GetAsyncError checks it too.
//
// A rank's descriptor of launch g+1 can only be written once every rank has finished enqueueing
// launch g (the end-of-launch join), after each has read the descriptors of g: one descriptor
// area per rank suffices.

// Bootstrap is what InitRank needs of the ranks' out-of-band channel; realnet.Bootstrap has it.
type Bootstrap interface {
	AllGather(data []byte) ([][]byte, error)
	Barrier() error
}

// Segment layout limits.
const (
	xMaxChannels = 64
	xMaxSteps    = 2048 // per program (rank, channel)
	xMaxCalls    = 1024 // per rank per launch
	xMaxStaging  = 1024 // staging buffers per rank
	xCallWords   = 8
	xHandleBytes = 64

	xHdr        = 64
	xRankPid    = 0
	xRankArr    = 8
	xRankFin    = 16
	xRankNCalls = 24
	xRankProg   = 64
	xRankCalls  = xRankProg + 8*xMaxChannels
	xRankStage  = xRankCalls + 8*xCallWords*xMaxCalls
	xStageEntry = 16 + xHandleBytes
	xRankEvents = xRankStage + xStageEntry*xMaxStaging
	xEventEntry = 8 + xHandleBytes
	xRankBytes  = xRankEvents + xEventEntry*xMaxChannels*xMaxSteps

	xMagic   = 0x73696d63636c7870 // "simcclxp"
	xProgBit = 24
)

// xproc is a communicator's view of the segment and of its peers' exported objects.
type xproc struct {
	rank, n int
	seg     []byte
	pids    []int
	slot    int64

	mu       sync.Mutex
	events   map[[3]int]cuda.Event // (rank, channel, step) → opened peer event
	staging  map[[2]int]cuda.DevPtr
	lastLive time.Time
	dead     error
}

func (xp *xproc) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&xp.seg[off])) }
func (xp *xproc) rankOff(r int) int   { return xHdr + r*xRankBytes }

// InitRank makes this process's rank of an n-rank clique whose ranks are in different processes
// (ncclCommInitRank, one process per GPU): every rank calls it with its own device, the same
// bootstrap group, the same segment name (a file name in dir, "" for /dev/shm, made from the
// communicator's secret so that others cannot guess it) and planner. Rank 0 creates the segment
// (exclusively, mode 0600); it is unlinked once every rank has mapped it.
func InitRank(dev *cuda.Device, rank, n int, b Bootstrap, dir, name string, cfg *Config) (*Comm, error) {
	o, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if n < 1 || rank < 0 || rank >= n || dev == nil || b == nil || name == "" || filepath.Base(name) != name {
		return nil, fmt.Errorf("%w: InitRank rank %d of %d (device %v, segment %q)", ErrInvalidArgument, rank, n, dev, name)
	}
	if o.Planner.NRanks() != n {
		return nil, fmt.Errorf("%w: the planner plans for %d ranks, the communicator has %d", ErrInvalidArgument, o.Planner.NRanks(), n)
	}
	// Every rank names its GPU; two ranks on one GPU need ShareGPUs, as in InitAll.
	info, err := b.AllGather([]byte(dev.PCIBusID + "|" + fmt.Sprint(dev.Ordinal)))
	if err != nil {
		return nil, fmt.Errorf("engine: InitRank: bootstrap: %w", err)
	}
	seen := map[string]bool{}
	for _, v := range info {
		if id := string(v); seen[id] && !o.ShareGPUs && !cuda.Emulated() {
			return nil, fmt.Errorf("%w: GPU %s has two ranks (one rank per GPU, as NCCL; Config.ShareGPUs allows it)", ErrInvalidArgument, id)
		}
		seen[string(v)] = true
	}
	if dir == "" {
		dir = "/dev/shm"
	}
	path := filepath.Join(dir, name)
	size := xHdr + n*xRankBytes
	var f *os.File
	if rank == 0 {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err == nil {
			err = f.Truncate(int64(size))
		}
	}
	if berr := b.Barrier(); berr != nil && err == nil {
		err = berr
	}
	if rank != 0 && err == nil {
		f, err = os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	}
	var seg []byte
	if err == nil {
		var st os.FileInfo
		if st, err = f.Stat(); err == nil && st.Size() != int64(size) {
			err = fmt.Errorf("segment %s has %d bytes, want %d", path, st.Size(), size)
		}
		if err == nil {
			seg, err = syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		}
	}
	if f != nil {
		f.Close()
	}
	ok := []byte{1}
	if err != nil {
		ok[0] = 0
	}
	all, berr := b.AllGather(ok)
	if rank == 0 {
		os.Remove(path) // mapped by everyone (or failed): nothing stays behind in /dev/shm
	}
	if err == nil && berr != nil {
		err = berr
	}
	if err == nil {
		for r, v := range all {
			if len(v) != 1 || v[0] != 1 {
				err = fmt.Errorf("rank %d could not map the segment", r)
				break
			}
		}
	}
	if err != nil {
		if seg != nil {
			syscall.Munmap(seg)
		}
		return nil, fmt.Errorf("engine: InitRank rank %d: shared segment: %w", rank, err)
	}
	xp := &xproc{rank: rank, n: n, seg: seg, slot: int64(o.SlotBytes), events: map[[3]int]cuda.Event{}, staging: map[[2]int]cuda.DevPtr{}}
	atomic.StoreUint64(xp.u64(xp.rankOff(rank)+xRankPid), uint64(os.Getpid()))
	if rank == 0 {
		atomic.StoreUint64(xp.u64(0), xMagic)
		atomic.StoreUint64(xp.u64(8), uint64(n))
	}
	if err := b.Barrier(); err != nil {
		syscall.Munmap(seg)
		return nil, fmt.Errorf("engine: InitRank rank %d: bootstrap: %w", rank, err)
	}
	if atomic.LoadUint64(xp.u64(0)) != xMagic || atomic.LoadUint64(xp.u64(8)) != uint64(n) {
		syscall.Munmap(seg)
		return nil, fmt.Errorf("engine: InitRank rank %d: the segment is not this communicator's", rank)
	}
	for r := 0; r < n; r++ {
		xp.pids = append(xp.pids, int(atomic.LoadUint64(xp.u64(xp.rankOff(r)+xRankPid))))
	}
	cl := &clique{n: n, cfg: o, pending: map[uint64]*launch{}, plans: map[string]*plan{}, xp: xp}
	cl.cond = sync.NewCond(&cl.mu)
	c := &Comm{rank: rank, cl: cl, dev: dev, streams: map[[2]int]cuda.Stream{}, staging: map[int]stageBuf{}, llStaging: map[int]stageBuf{}, tmp: map[[2]int]stageBuf{}}
	err = dev.Do(func(x *cuda.Ctx) error {
		var err error
		if c.k, err = x.LoadKernels(); err != nil {
			return err
		}
		if c.start, err = x.NewEvent(false); err != nil {
			return err
		}
		c.flags, err = xp.newFlagArea(x)
		return err
	})
	if err == nil {
		err = b.Barrier()
	}
	if err != nil {
		_ = c.Destroy()
		return nil, fmt.Errorf("engine: InitRank rank %d on %v: %w", rank, dev, err)
	}
	cl.comms = []*Comm{c}
	return c, nil
}

// check reports a peer that died or aborted (sticky).
func (xp *xproc) check(force bool) error {
	xp.mu.Lock()
	defer xp.mu.Unlock()
	if xp.dead != nil || xp.seg == nil {
		return xp.dead
	}
	if atomic.LoadUint64(xp.u64(16)) != 0 {
		xp.dead = fmt.Errorf("%w: rank %d aborted the communicator or failed its part of a launch", ErrPeerGone, int(atomic.LoadUint64(xp.u64(24))))
		return xp.dead
	}
	if !force && time.Since(xp.lastLive) < 20*time.Millisecond {
		return nil
	}
	xp.lastLive = time.Now()
	for r, pid := range xp.pids {
		if r != xp.rank && !realnet.ProcessAlive(pid) {
			xp.dead = fmt.Errorf("%w: rank %d (pid %d) exited", ErrPeerGone, r, pid)
			return xp.dead
		}
	}
	return nil
}

// abort tells every rank's waits to fail.
func (xp *xproc) abort() {
	atomic.StoreUint64(xp.u64(24), uint64(xp.rank))
	atomic.StoreUint64(xp.u64(16), 1)
}

// poll waits until cond holds, a peer is gone, or the timeout.
func (xp *xproc) poll(timeout time.Duration, what string, cond func() bool) error {
	if cond() {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		if cond() {
			return nil
		}
		switch {
		case i < 200:
		case i < 20000:
			runtime.Gosched()
		default:
			time.Sleep(50 * time.Microsecond)
		}
		if i%64 == 63 {
			if err := xp.check(false); err != nil {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%w: waited %v for %s", ErrTimeout, timeout, what)
			}
		}
	}
}

// progress is the number of steps rank has enqueued on channel ch in launch gen.
func (xp *xproc) progress(gen uint64, rank, ch int) int {
	v := atomic.LoadUint64(xp.u64(xp.rankOff(rank) + xRankProg + 8*ch))
	switch g := v >> xProgBit; {
	case g < gen:
		return 0
	case g > gen:
		return math.MaxInt32
	}
	return int(v & (1<<xProgBit - 1))
}

func (xp *xproc) advance(gen uint64, ch, step int) {
	atomic.StoreUint64(xp.u64(xp.rankOff(xp.rank)+xRankProg+8*ch), gen<<xProgBit|uint64(step+1))
}

// arrive is the rendezvous of launch gen across processes.
func (xp *xproc) arrive(cl *clique, rank int, gen uint64, calls []*call) (*launch, error) {
	if len(calls) > xMaxCalls {
		return nil, fmt.Errorf("%w: a launch of %d calls (at most %d across processes)", ErrInvalidArgument, len(calls), xMaxCalls)
	}
	base := xp.rankOff(rank)
	for i, k := range calls {
		w := [xCallWords]uint64{uint64(k.f), 0, uint64(int64(k.peer)), uint64(k.count), uint64(k.dt), uint64(k.op), math.Float64bits(k.scalar), uint64(int64(k.root))}
		if k.p2pSend {
			w[1] = 1
		}
		if k.flags {
			w[1] |= 2
		}
		for j, v := range w {
			atomic.StoreUint64(xp.u64(base+xRankCalls+8*(xCallWords*i+j)), v)
		}
	}
	atomic.StoreUint64(xp.u64(base+xRankNCalls), uint64(len(calls)))
	atomic.StoreUint64(xp.u64(base+xRankArr), gen+1)
	err := xp.poll(cl.cfg.Timeout, fmt.Sprintf("every rank to launch call %d (%v)", gen, calls[0].f), func() bool {
		for r := 0; r < xp.n; r++ {
			if atomic.LoadUint64(xp.u64(xp.rankOff(r)+xRankArr)) < gen+1 {
				return false
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	L := &launch{cl: cl, calls: make([][]*call, xp.n), n: xp.n, xp: xp, gen: gen}
	L.cond = sync.NewCond(&L.mu)
	for r := 0; r < xp.n; r++ {
		if r == rank {
			L.calls[r] = calls
			continue
		}
		ob := xp.rankOff(r)
		nc := int(atomic.LoadUint64(xp.u64(ob + xRankNCalls)))
		if nc > xMaxCalls {
			return nil, fmt.Errorf("engine: rank %d published %d calls", r, nc)
		}
		for i := 0; i < nc; i++ {
			var w [xCallWords]uint64
			for j := range w {
				w[j] = atomic.LoadUint64(xp.u64(ob + xRankCalls + 8*(xCallWords*i+j)))
			}
			L.calls[r] = append(L.calls[r], &call{f: coll.Func(w[0]), p2pSend: w[1]&1 == 1, flags: w[1]&2 == 2, peer: int(int64(w[2])), count: int64(w[3]),
				dt: coll.DataType(w[4]), op: coll.RedOp(w[5]), scalar: math.Float64frombits(w[6]), root: int(int64(w[7]))})
		}
	}
	L.flags = calls[0].flags
	for r := 0; r < xp.n; r++ {
		if len(L.calls[r]) > 0 && L.calls[r][0].flags != L.flags {
			return nil, fmt.Errorf("%w: rank %d orders its launch %d by %s, rank %d by %s (a CUDA graph capture must include every rank's call)",
				ErrMismatch, rank, gen, syncName(L.flags), r, syncName(!L.flags))
		}
	}
	cl.mu.Lock()
	L.err = L.prepare()
	cl.mu.Unlock()
	L.ready = true
	if L.err != nil {
		return nil, L.err
	}
	return L, nil
}

// syncName names a launch's cross-process ordering for errors.
func syncName(flags bool) string {
	if flags {
		return "device flags (capturing, or DeviceFlags)"
	}
	return "interprocess events"
}

func (xp *xproc) finish(gen uint64) {
	atomic.StoreUint64(xp.u64(xp.rankOff(xp.rank)+xRankFin), gen+1)
}

func (xp *xproc) allFinished(gen uint64) bool {
	for r := 0; r < xp.n; r++ {
		if atomic.LoadUint64(xp.u64(xp.rankOff(r)+xRankFin)) < gen+1 {
			return false
		}
	}
	return true
}

// publishEvent exports this rank's event of (ch, step).
func (xp *xproc) publishEvent(x *cuda.Ctx, ch, step int, ev cuda.Event) error {
	if ch >= xMaxChannels || step >= xMaxSteps {
		return fmt.Errorf("engine: a program of channel %d with more than %d steps (at most %d channels × %d steps across processes)", ch, step, xMaxChannels, xMaxSteps)
	}
	h, err := x.IPCEventHandle(ev)
	if err != nil {
		return err
	}
	off := xp.rankOff(xp.rank) + xRankEvents + xEventEntry*(ch*xMaxSteps+step)
	copy(xp.seg[off+8:off+8+xHandleBytes], h[:])
	atomic.StoreUint64(xp.u64(off), 1)
	return nil
}

// peerEvent is rank's event of (ch, step), opened in this process on first use.
func (xp *xproc) peerEvent(x *cuda.Ctx, rank, ch, step int) (cuda.Event, error) {
	key := [3]int{rank, ch, step}
	xp.mu.Lock()
	ev, ok := xp.events[key]
	xp.mu.Unlock()
	if ok {
		return ev, nil
	}
	if ch >= xMaxChannels || step >= xMaxSteps {
		return 0, fmt.Errorf("engine: event of channel %d step %d out of the segment", ch, step)
	}
	off := xp.rankOff(rank) + xRankEvents + xEventEntry*(ch*xMaxSteps+step)
	if atomic.LoadUint64(xp.u64(off)) != 1 {
		return 0, fmt.Errorf("engine: rank %d has not published its event of channel %d step %d", rank, ch, step)
	}
	var h cuda.IPCHandle
	copy(h[:], xp.seg[off+8:off+8+xHandleBytes])
	ev, err := x.IPCOpenEvent(h)
	if err != nil {
		return 0, fmt.Errorf("rank %d's event of channel %d step %d: %w", rank, ch, step, err)
	}
	xp.mu.Lock()
	xp.events[key] = ev
	xp.mu.Unlock()
	return ev, nil
}

// publishStaging exports this rank's staging buffer of connection key.
func (xp *xproc) publishStaging(x *cuda.Ctx, key int, p cuda.DevPtr) error {
	h, err := x.IPCHandle(p)
	if err != nil {
		return err
	}
	base := xp.rankOff(xp.rank) + xRankStage
	for i := 0; i < xMaxStaging; i++ {
		off := base + xStageEntry*i
		if atomic.LoadUint64(xp.u64(off+8)) != 0 {
			continue
		}
		binary.LittleEndian.PutUint64(xp.seg[off:], uint64(key))
		copy(xp.seg[off+16:off+16+xHandleBytes], h[:])
		atomic.StoreUint64(xp.u64(off+8), 1)
		return nil
	}
	return fmt.Errorf("engine: more than %d staging buffers", xMaxStaging)
}

// peerStaging is the staging buffer of rank's connection key, opened in this process. It waits
// (up to timeout) for the peer to publish it: a flag-mode launch does not wait for the peer's
// enqueueing, so it may get here before the peer's first launch on the connection allocated it.
func (xp *xproc) peerStaging(x *cuda.Ctx, rank, key int, timeout time.Duration) (cuda.DevPtr, error) {
	k := [2]int{rank, key}
	xp.mu.Lock()
	p, ok := xp.staging[k]
	xp.mu.Unlock()
	if ok {
		return p, nil
	}
	base := xp.rankOff(rank) + xRankStage
	at := -1
	err := xp.poll(timeout, fmt.Sprintf("rank %d to publish its buffer %#x", rank, key), func() bool {
		for i := 0; i < xMaxStaging; i++ {
			off := base + xStageEntry*i
			if atomic.LoadUint64(xp.u64(off+8)) == 0 {
				return false
			}
			if binary.LittleEndian.Uint64(xp.seg[off:]) == uint64(key) {
				at = i
				return true
			}
		}
		return false
	})
	if err != nil {
		return 0, err
	}
	off := base + xStageEntry*at
	var h cuda.IPCHandle
	copy(h[:], xp.seg[off+16:off+16+xHandleBytes])
	p, err = x.IPCOpen(h)
	if err != nil {
		return 0, fmt.Errorf("rank %d's staging buffer: %w", rank, err)
	}
	xp.mu.Lock()
	xp.staging[k] = p
	xp.mu.Unlock()
	return p, nil
}

// close releases the opened peer objects and the mapping (on the device's thread).
func (xp *xproc) close(x *cuda.Ctx) error {
	var errs []error
	xp.mu.Lock()
	defer xp.mu.Unlock()
	for _, ev := range xp.events {
		errs = append(errs, x.DestroyEvent(ev))
	}
	if !cuda.Emulated() {
		for _, p := range xp.staging {
			errs = append(errs, x.IPCClose(p))
		}
	}
	xp.events, xp.staging = nil, nil
	if xp.seg != nil {
		errs = append(errs, syscall.Munmap(xp.seg))
		xp.seg = nil
	}
	return errors.Join(errs...)
}
