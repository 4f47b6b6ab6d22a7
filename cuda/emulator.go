package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/simccl/simccl/coll"
)

// The emulated driver: a CPU stand-in for libcuda.so.1 with several "devices" whose memory lives
// in host RAM, so that code built on this package (the collective engine in cuda/engine, runccl's
// cuda backend) runs and is checked element by element on machines without a GPU.
//
// What it models, and how faithfully:
//   - Devices: Emulate(n) gives n devices of compute capability 9.0 with 132 SMs; every pair can
//     access each other's memory once the context enabled it (cuCtxEnablePeerAccess); a kernel
//     that touches memory of a device whose peer access was not enabled fails the stream with
//     CUDA_ERROR_ILLEGAL_ADDRESS, as does any access outside an allocation.
//   - Contexts: the current context is per OS thread (Device's locked thread), as in CUDA.
//   - Streams run asynchronously and in order, each on its own goroutine, with a random delay
//     before each operation (up to EmulatorJitter) so that work on different streams interleaves
//     differently from run to run: missing cross-stream ordering shows up as wrong data.
//   - Events: cuEventRecord captures the stream position; cuStreamWaitEvent waits for the most
//     recent record issued before the wait call (a wait on a never-recorded event is a no-op), as
//     the CUDA documentation specifies. Event completion is the only synchronization between the
//     streams' goroutines (table lookups take a read lock, which orders nothing), so under the
//     race detector device memory touched by two streams without an event between them is
//     reported as a data race, whatever the timing.
//   - Kernels: the launches of the module's copy, reduce and divide kernels run the host reference
//     (emuref.go), the rules kernels.cu implements; other functions are refused at lookup. The LL
//     kernels poll their lines' flags as the GPU's do (atomic 4-byte accesses, so that the race
//     detector sees the flags, not events, ordering sender and receiver).
//   - Synchronous copies and memsets run on the device's legacy stream and wait for it.
//   - IPC handles name the address (one process); graphs are not emulated (an error).

// emulatorJitter bounds the random delay each emulated stream takes before each operation.
var emulatorJitter atomic.Int64

func init() { emulatorJitter.Store(int64(20 * time.Microsecond)) }

// SetEmulatorJitter sets the bound of the random delay an emulated stream takes before each
// operation (default 20µs; a wider spread makes ordering bugs likelier to show) and returns the
// previous one.
func SetEmulatorJitter(d time.Duration) time.Duration {
	return time.Duration(emulatorJitter.Swap(int64(d)))
}

// ErrorIllegalAddress is CUDA_ERROR_ILLEGAL_ADDRESS, the emulator's verdict on a bad access.
const ErrorIllegalAddress Result = 700

// Emulate installs the emulated driver with the given number of devices as this process's driver.
// It must be called before anything else in this package (before Init); afterwards Init returns
// nil and every device is emulated. It fails if a driver was already initialised or devices is
// not between 1 and 64.
func Emulate(devices int) error {
	if devices < 1 || devices > 64 {
		return fmt.Errorf("cuda: Emulate(%d): want 1 to 64 devices", devices)
	}
	done := false
	initOnce.Do(func() {
		drv = newEmu(devices)
		done = true
	})
	if !done {
		return errors.New("cuda: Emulate: the driver was already initialised (call Emulate before Init)")
	}
	return nil
}

// InitOrEmulate initialises the real driver, or, where none can be loaded, installs the
// emulated one with the given number of devices. It reports which (emulated = true: no GPU).
func InitOrEmulate(devices int) (emulated bool, err error) {
	if devices < 1 || devices > 64 {
		return false, fmt.Errorf("cuda: InitOrEmulate(%d): want 1 to 64 devices", devices)
	}
	initOnce.Do(func() {
		d, err := loadDriver()
		if err == nil {
			err = d.init()
		}
		if err != nil {
			drv = newEmu(devices)
			return
		}
		drv = d
	})
	if initErr != nil {
		return false, initErr
	}
	return Emulated(), nil
}

var emuUnrecordedWaits atomic.Int64

// EmulatorUnrecordedWaits counts the cuStreamWaitEvent calls the emulated driver saw on events
// never recorded (no-ops in CUDA): code that orders work across streams should make none, since
// such a wait usually means the wait was enqueued before the record it meant.
func EmulatorUnrecordedWaits() int64 { return emuUnrecordedWaits.Load() }

var emuCrossWaits atomic.Int64

// EmulatorCrossDeviceWaits counts the cuStreamWaitEvent calls whose event was last recorded on
// another device's stream: the GPU-side dependencies between ranks (tests check that the LL
// protocol's receives make none).
func EmulatorCrossDeviceWaits() int64 { return emuCrossWaits.Load() }

// EmulatorSetCapturing makes the emulated driver report stream s as capturing into a graph (or
// not) from now on, so that code which refuses to run during a capture can be tested; the
// emulator still captures nothing (its stream-capture calls fail).
func EmulatorSetCapturing(s Stream, on bool) error {
	e, ok := drv.(*emu)
	if !ok {
		return errors.New("cuda: EmulatorSetCapturing needs the emulated driver")
	}
	st, err := e.stream("EmulatorSetCapturing", s)
	if err != nil {
		return err
	}
	st.mu.Lock()
	st.capturing = on
	st.mu.Unlock()
	return nil
}

// Emulated reports whether the process runs on the emulated driver.
func Emulated() bool {
	_, ok := drv.(*emu)
	return ok
}

const emuDevShift = 40 // device d's memory starts at (d+1)<<40

type emuAlloc struct {
	base uint64
	data []byte
	dev  int
}

type emu struct {
	n int

	// mu guards the tables; lookups take it for reading only, so that it creates no
	// happens-before edge between streams (a race detector then sees device memory accessed by
	// two streams without an event between them as the race it is).
	mu sync.RWMutex
	// evMu guards event completion, the only synchronization between streams (and the host's
	// waits); evCond signals completions.
	evMu    sync.Mutex
	evCond  *sync.Cond
	cur     map[int]int
	allocs  []*emuAlloc // sorted by base
	next    []uint64
	peers   map[[2]int]bool
	streams map[Stream]*emuStream
	legacy  []*emuStream
	events  map[Event]*emuEvent
	funcs   map[Function]string
	handle  uintptr
	host    map[unsafe.Pointer][]byte
}

type emuEvent struct {
	recorded  atomic.Uint64 // records issued (host side)
	dev       atomic.Int32  // device of the stream of the last record, plus one
	completed uint64        // highest record reached by its stream (evMu)
	ipc       bool          // created with CU_EVENT_INTERPROCESS
}

type emuStream struct {
	e    *emu
	dev  int
	mu   sync.Mutex
	cond *sync.Cond
	q    []func() error
	enq  uint64
	done uint64
	err  error
	rng  *rand.Rand
	// capturing: what cuStreamIsCapturing reports (EmulatorSetCapturing; nothing is captured)
	capturing bool
}

func newEmu(n int) *emu {
	e := &emu{n: n, cur: map[int]int{}, next: make([]uint64, n), peers: map[[2]int]bool{},
		streams: map[Stream]*emuStream{}, events: map[Event]*emuEvent{}, funcs: map[Function]string{},
		host: map[unsafe.Pointer][]byte{}}
	e.evCond = sync.NewCond(&e.evMu)
	for d := 0; d < n; d++ {
		e.next[d] = uint64(d+1) << emuDevShift
		e.legacy = append(e.legacy, e.newStream(d))
	}
	return e
}

func (e *emu) newStream(dev int) *emuStream {
	s := &emuStream{e: e, dev: dev, rng: rand.New(rand.NewPCG(rand.Uint64(), uint64(dev)))}
	s.cond = sync.NewCond(&s.mu)
	go s.run()
	return s
}

func (s *emuStream) run() {
	for {
		s.mu.Lock()
		for len(s.q) == 0 {
			s.cond.Wait()
		}
		op := s.q[0]
		s.q[0] = nil
		s.q = s.q[1:]
		j, jmax := time.Duration(0), time.Duration(emulatorJitter.Load())
		if jmax > 0 {
			j = time.Duration(s.rng.Int64N(int64(jmax)))
		}
		if op == nil { // destroyed
			// The sentinel counts as done: a wait that began after the destroy counted it (enq),
			// as cuCtxSynchronize does when another thread destroys one of the context's streams
			// meanwhile (it listed the stream before). Without it that wait never returned:
			// libnccl's api_check hung in ncclCommDestroy's synchronize while the other rank's
			// thread destroyed its streams.
			s.done++
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if j > jmax/2 {
			time.Sleep(j)
		}
		err := op()
		s.mu.Lock()
		if err != nil && s.err == nil {
			s.err = err
		}
		s.done++
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

func (s *emuStream) push(op func() error) {
	s.mu.Lock()
	s.q = append(s.q, op)
	s.enq++
	s.cond.Broadcast()
	s.mu.Unlock()
}

// wait blocks until every operation queued so far has run and returns the stream's sticky error.
func (s *emuStream) wait() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	target := s.enq
	for s.done < target {
		s.cond.Wait()
	}
	return s.err
}

func emuErr(call string, code Result, name, format string, args ...any) error {
	return &Error{Call: call, Code: code, Name: name, Text: fmt.Sprintf(format, args...)}
}

func (e *emu) invalid(call, format string, args ...any) error {
	return emuErr(call, ErrorInvalidValue, "CUDA_ERROR_INVALID_VALUE", format, args...)
}

// device is the current context's device on the calling thread.
func (e *emu) device(call string) (int, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	d, ok := e.cur[gettid()]
	if !ok {
		return 0, emuErr(call, 201, "CUDA_ERROR_INVALID_CONTEXT", "no current context on this thread")
	}
	return d, nil
}

func (e *emu) stream(call string, s Stream) (*emuStream, error) {
	if s == 0 {
		d, err := e.device(call)
		if err != nil {
			return nil, err
		}
		return e.legacy[d], nil
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	st, ok := e.streams[s]
	if !ok {
		return nil, emuErr(call, 400, "CUDA_ERROR_INVALID_HANDLE", "unknown stream %#x", uintptr(s))
	}
	return st, nil
}

// mem resolves n bytes at p inside one allocation; dev ≥ 0 checks that a kernel of device dev may
// touch it (its own memory or a peer whose access it enabled).
func (e *emu) mem(call string, p DevPtr, n uint64, dev int) ([]byte, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	i := sort.Search(len(e.allocs), func(i int) bool { return e.allocs[i].base > uint64(p) }) - 1
	if i < 0 || uint64(p)+n > e.allocs[i].base+uint64(len(e.allocs[i].data)) {
		return nil, emuErr(call, ErrorIllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS", "%d bytes at %#x are outside every allocation", n, uint64(p))
	}
	a := e.allocs[i]
	if dev >= 0 && a.dev != dev && !e.peers[[2]int{dev, a.dev}] {
		return nil, emuErr(call, ErrorIllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS",
			"device %d touched memory of device %d at %#x without peer access", dev, a.dev, uint64(p))
	}
	off := uint64(p) - a.base
	return a.data[off : off+n : off+n], nil
}

func (e *emu) newHandle() uintptr {
	e.handle++
	return e.handle
}

func (e *emu) init() error                 { return nil }
func (e *emu) driverVersion() (int, error) { return 13000, nil }
func (e *emu) deviceCount() (int, error)   { return e.n, nil }
func (e *emu) deviceGet(o int) (int32, error) {
	if o < 0 || o >= e.n {
		return 0, emuErr("cuDeviceGet", ErrorInvalidDevice, "CUDA_ERROR_INVALID_DEVICE", "ordinal %d of %d", o, e.n)
	}
	return int32(o), nil
}
func (e *emu) deviceAttribute(a int, _ int32) (int, error) {
	switch a {
	case attrComputeCapMajor:
		return 9, nil
	case attrComputeCapMinor:
		return 0, nil
	case attrSMCount:
		return 132, nil
	case attrUnifiedAddr:
		return 1, nil
	case attrMaxThreads:
		return 1024, nil
	case attrL2Size:
		return 50 << 20, nil
	}
	return 0, nil
}
func (e *emu) deviceName(d int32) (string, error) { return "Emulated GPU", nil }
func (e *emu) deviceTotalMem(int32) (uint64, error) {
	return 1 << 36, nil
}
func (e *emu) devicePCIBusID(d int32) (string, error) {
	return fmt.Sprintf("0000:%02x:00.0", 0x10+d), nil
}
func (e *emu) canAccessPeer(a, b int32) (bool, error)         { return a != b, nil }
func (e *emu) primaryCtxRetain(d int32) (uintptr, error)      { return uintptr(d) + 1, nil }
func (e *emu) primaryCtxRelease(int32) error                  { return nil }
func (e *emu) memGetInfo() (free, total uint64, err error)    { return 1 << 36, 1 << 36, nil }
func (e *emu) eventElapsed(start, end Event) (float32, error) { return 0, nil }

func (e *emu) ctxSetCurrent(ctx uintptr) error {
	if ctx == 0 { // no context current on this thread, as cuCtxSetCurrent(NULL)
		e.mu.Lock()
		delete(e.cur, gettid())
		e.mu.Unlock()
		return nil
	}
	if int(ctx) > e.n {
		return e.invalid("cuCtxSetCurrent", "context %#x", ctx)
	}
	e.mu.Lock()
	e.cur[gettid()] = int(ctx) - 1
	e.mu.Unlock()
	return nil
}

func (e *emu) ctxGetCurrent() (uintptr, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	d, ok := e.cur[gettid()]
	if !ok {
		return 0, nil
	}
	return uintptr(d + 1), nil
}

func (e *emu) ctxGetDevice() (int32, error) {
	d, err := e.device("cuCtxGetDevice")
	return int32(d), err
}

func (e *emu) ctxSynchronize() error {
	d, err := e.device("cuCtxSynchronize")
	if err != nil {
		return err
	}
	e.mu.RLock()
	ss := []*emuStream{e.legacy[d]}
	for _, s := range e.streams {
		if s.dev == d {
			ss = append(ss, s)
		}
	}
	e.mu.RUnlock()
	var errs []error
	for _, s := range ss {
		errs = append(errs, s.wait())
	}
	return errors.Join(errs...)
}

func (e *emu) ctxEnablePeerAccess(peer uintptr) error {
	d, err := e.device("cuCtxEnablePeerAccess")
	if err != nil {
		return err
	}
	if peer == 0 || int(peer) > e.n {
		return e.invalid("cuCtxEnablePeerAccess", "context %#x", peer)
	}
	k := [2]int{d, int(peer) - 1}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.peers[k] {
		return emuErr("cuCtxEnablePeerAccess", ErrorPeerAlreadyEnabled, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "")
	}
	e.peers[k] = true
	return nil
}

func (e *emu) memAlloc(n uint64) (DevPtr, error) {
	d, err := e.device("cuMemAlloc_v2")
	if err != nil {
		return 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	a := &emuAlloc{base: e.next[d], data: make([]byte, n), dev: d}
	e.next[d] += (n + 511) &^ 255 // 256-byte aligned, with a gap so that overruns are caught
	i := sort.Search(len(e.allocs), func(i int) bool { return e.allocs[i].base > a.base })
	e.allocs = append(e.allocs, nil)
	copy(e.allocs[i+1:], e.allocs[i:])
	e.allocs[i] = a
	return DevPtr(a.base), nil
}

func (e *emu) memFree(p DevPtr) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, a := range e.allocs {
		if a.base == uint64(p) {
			e.allocs = append(e.allocs[:i], e.allocs[i+1:]...)
			return nil
		}
	}
	return e.invalid("cuMemFree_v2", "%#x is not the start of an allocation", uint64(p))
}

func (e *emu) memHostAlloc(n uint64, _ uint32) (unsafe.Pointer, error) {
	b := make([]byte, n)
	p := unsafe.Pointer(&b[0])
	e.mu.Lock()
	e.host[p] = b
	e.mu.Unlock()
	return p, nil
}

func (e *emu) memFreeHost(p unsafe.Pointer) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.host[p]; !ok {
		return e.invalid("cuMemFreeHost", "pointer not from cuMemHostAlloc")
	}
	delete(e.host, p)
	return nil
}

func hostBytes(p unsafe.Pointer, n uint64) []byte { return unsafe.Slice((*byte)(p), n) }

// copyOp is a copy of n bytes between device memory (or host memory when the pointer is set).
func (e *emu) copyOp(call string, dst DevPtr, hdst unsafe.Pointer, src DevPtr, hsrc unsafe.Pointer, n uint64) func() error {
	return func() error {
		var d, s []byte
		var err error
		if hdst != nil {
			d = hostBytes(hdst, n)
		} else if d, err = e.mem(call, dst, n, -1); err != nil {
			return err
		}
		if hsrc != nil {
			s = hostBytes(hsrc, n)
		} else if s, err = e.mem(call, src, n, -1); err != nil {
			return err
		}
		copy(d, s)
		return nil
	}
}

// syncOp runs op on the current device's legacy stream and waits for it.
func (e *emu) syncOp(call string, op func() error) error {
	d, err := e.device(call)
	if err != nil {
		return err
	}
	e.legacy[d].push(op)
	return e.legacy[d].wait()
}

func (e *emu) asyncOp(call string, s Stream, op func() error) error {
	st, err := e.stream(call, s)
	if err != nil {
		return err
	}
	st.push(op)
	return nil
}

func (e *emu) memcpyHtoD(dst DevPtr, src unsafe.Pointer, n uint64) error {
	return e.syncOp("cuMemcpyHtoD_v2", e.copyOp("cuMemcpyHtoD_v2", dst, nil, 0, src, n))
}
func (e *emu) memcpyDtoH(dst unsafe.Pointer, src DevPtr, n uint64) error {
	return e.syncOp("cuMemcpyDtoH_v2", e.copyOp("cuMemcpyDtoH_v2", 0, dst, src, nil, n))
}
func (e *emu) memcpyDtoD(dst, src DevPtr, n uint64) error {
	return e.syncOp("cuMemcpyDtoD_v2", e.copyOp("cuMemcpyDtoD_v2", dst, nil, src, nil, n))
}
func (e *emu) memcpyHtoDAsync(dst DevPtr, src unsafe.Pointer, n uint64, s Stream) error {
	return e.asyncOp("cuMemcpyHtoDAsync_v2", s, e.copyOp("cuMemcpyHtoDAsync_v2", dst, nil, 0, src, n))
}
func (e *emu) memcpyDtoHAsync(dst unsafe.Pointer, src DevPtr, n uint64, s Stream) error {
	return e.asyncOp("cuMemcpyDtoHAsync_v2", s, e.copyOp("cuMemcpyDtoHAsync_v2", 0, dst, src, nil, n))
}
func (e *emu) memcpyDtoDAsync(dst, src DevPtr, n uint64, s Stream) error {
	return e.asyncOp("cuMemcpyDtoDAsync_v2", s, e.copyOp("cuMemcpyDtoDAsync_v2", dst, nil, src, nil, n))
}
func (e *emu) memcpyPeerAsync(dst DevPtr, _ uintptr, src DevPtr, _ uintptr, n uint64, s Stream) error {
	return e.asyncOp("cuMemcpyPeerAsync", s, e.copyOp("cuMemcpyPeerAsync", dst, nil, src, nil, n))
}

func (e *emu) memsetOp(call string, dst DevPtr, v byte, n uint64) func() error {
	return func() error {
		b, err := e.mem(call, dst, n, -1)
		for i := range b {
			b[i] = v
		}
		return err
	}
}
func (e *emu) memsetD8(dst DevPtr, v byte, n uint64) error {
	return e.syncOp("cuMemsetD8_v2", e.memsetOp("cuMemsetD8_v2", dst, v, n))
}
func (e *emu) memsetD8Async(dst DevPtr, v byte, n uint64, s Stream) error {
	return e.asyncOp("cuMemsetD8Async", s, e.memsetOp("cuMemsetD8Async", dst, v, n))
}

func (e *emu) streamCreate(uint32) (Stream, error) {
	d, err := e.device("cuStreamCreate")
	if err != nil {
		return 0, err
	}
	st := e.newStream(d)
	e.mu.Lock()
	defer e.mu.Unlock()
	h := Stream(e.newHandle())
	e.streams[h] = st
	return h, nil
}

func (e *emu) streamSynchronize(s Stream) error {
	st, err := e.stream("cuStreamSynchronize", s)
	if err != nil {
		return err
	}
	return st.wait()
}

func (e *emu) streamQuery(s Stream) error {
	st, err := e.stream("cuStreamQuery", s)
	if err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		return st.err
	}
	if st.done < st.enq {
		return ErrorNotReady
	}
	return nil
}

func (e *emu) event(call string, ev Event) (*emuEvent, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	x, ok := e.events[ev]
	if !ok {
		return nil, emuErr(call, 400, "CUDA_ERROR_INVALID_HANDLE", "unknown event %#x", uintptr(ev))
	}
	return x, nil
}

func (e *emu) streamWaitEvent(s Stream, ev Event) error {
	st, err := e.stream("cuStreamWaitEvent", s)
	if err != nil {
		return err
	}
	x, err := e.event("cuStreamWaitEvent", ev)
	if err != nil {
		return err
	}
	target := x.recorded.Load() // the most recent record issued before this call
	if target == 0 {
		emuUnrecordedWaits.Add(1)
	}
	if d := x.dev.Load(); d != 0 && int(d-1) != st.dev {
		emuCrossWaits.Add(1)
	}
	st.push(func() error {
		e.evMu.Lock()
		for x.completed < target {
			e.evCond.Wait()
		}
		e.evMu.Unlock()
		return nil
	})
	return nil
}

// flagOp checks a stream memory operation on the 4-byte word at p (the emulator knows flags 0:
// CU_STREAM_WAIT_VALUE_GEQ, a write with its memory barrier) and returns the stream and the word,
// which the stream's device must be able to touch.
func (e *emu) flagOp(call string, s Stream, p DevPtr, flags uint32) (*emuStream, *uint32, error) {
	st, err := e.stream(call, s)
	if err != nil {
		return nil, nil, err
	}
	if flags != 0 {
		return nil, nil, e.invalid(call, "flags %#x (the emulator knows 0 only)", flags)
	}
	if p%4 != 0 {
		return nil, nil, emuErr(call, 1, "CUDA_ERROR_INVALID_VALUE", "address %#x is not 4-byte aligned", uint64(p))
	}
	b, err := e.mem(call, p, 4, st.dev)
	if err != nil {
		return nil, nil, err
	}
	return st, (*uint32)(unsafe.Pointer(&b[0])), nil
}

// emuFlagTimeout bounds an emulated flag wait: CUDA would wait forever; a test that never writes
// the flag fails the stream instead of hanging.
const emuFlagTimeout = 20 * time.Second

// streamWaitValue32 polls the word atomically (as the GPU's front end does; the atomic access
// is what orders the writer's earlier work before the waiter's later work, also for the race
// detector).
func (e *emu) streamWaitValue32(s Stream, p DevPtr, v, flags uint32) error {
	const call = "cuStreamWaitValue32_v2"
	st, w, err := e.flagOp(call, s, p, flags)
	if err != nil {
		return err
	}
	st.push(func() error {
		deadline := time.Now().Add(emuFlagTimeout)
		for i := 0; int32(atomic.LoadUint32(w)-v) < 0; i++ {
			if i < 100 {
				runtime.Gosched()
				continue
			}
			if time.Now().After(deadline) {
				return emuErr(call, 702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the word at %#x stayed below %d for %v", uint64(p), v, emuFlagTimeout)
			}
			time.Sleep(20 * time.Microsecond)
		}
		return nil
	})
	return nil
}

func (e *emu) streamWriteValue32(s Stream, p DevPtr, v, flags uint32) error {
	st, w, err := e.flagOp("cuStreamWriteValue32_v2", s, p, flags)
	if err != nil {
		return err
	}
	st.push(func() error {
		atomic.StoreUint32(w, v)
		return nil
	})
	return nil
}

func (e *emu) streamDestroy(s Stream) error {
	e.mu.Lock()
	st, ok := e.streams[s]
	delete(e.streams, s)
	e.mu.Unlock()
	if !ok {
		return emuErr("cuStreamDestroy_v2", 400, "CUDA_ERROR_INVALID_HANDLE", "unknown stream %#x", uintptr(s))
	}
	st.push(nil) // the goroutine ends after the queued work
	return nil
}

func (e *emu) eventCreate(flags uint32) (Event, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if flags&EventInterprocess != 0 && flags&EventDisableTiming == 0 {
		return 0, emuErr("cuEventCreate", 1, "CUDA_ERROR_INVALID_VALUE", "CU_EVENT_INTERPROCESS needs CU_EVENT_DISABLE_TIMING")
	}
	h := Event(e.newHandle())
	e.events[h] = &emuEvent{ipc: flags&EventInterprocess != 0}
	return h, nil
}

// The emulator's "processes" share one address space: an event handle names the event itself,
// and opening it gives a second handle to the same event (destroying either leaves the other).
func (e *emu) ipcGetEventHandle(ev Event) (IPCHandle, error) {
	x, err := e.event("cuIpcGetEventHandle", ev)
	if err != nil {
		return IPCHandle{}, err
	}
	if !x.ipc {
		return IPCHandle{}, emuErr("cuIpcGetEventHandle", 1, "CUDA_ERROR_INVALID_VALUE", "event %#x was not created with CU_EVENT_INTERPROCESS", uintptr(ev))
	}
	var h IPCHandle
	for i := 0; i < 8; i++ {
		h[i] = byte(uint64(ev) >> (8 * i))
	}
	copy(h[8:], "simccl-emulated-event")
	return h, nil
}

func (e *emu) ipcOpenEventHandle(h IPCHandle) (Event, error) {
	var v uint64
	for i := 0; i < 8; i++ {
		v |= uint64(h[i]) << (8 * i)
	}
	x, err := e.event("cuIpcOpenEventHandle", Event(v))
	if err != nil {
		return 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	a := Event(e.newHandle())
	e.events[a] = x
	return a, nil
}

func (e *emu) eventRecord(ev Event, s Stream) error {
	st, err := e.stream("cuEventRecord", s)
	if err != nil {
		return err
	}
	x, err := e.event("cuEventRecord", ev)
	if err != nil {
		return err
	}
	x.dev.Store(int32(st.dev + 1))
	target := x.recorded.Add(1)
	st.push(func() error {
		e.evMu.Lock()
		if x.completed < target {
			x.completed = target
		}
		e.evCond.Broadcast()
		e.evMu.Unlock()
		return nil
	})
	return nil
}

func (e *emu) eventSynchronize(ev Event) error {
	x, err := e.event("cuEventSynchronize", ev)
	if err != nil {
		return err
	}
	target := x.recorded.Load()
	e.evMu.Lock()
	defer e.evMu.Unlock()
	for x.completed < target {
		e.evCond.Wait()
	}
	return nil
}

func (e *emu) eventQuery(ev Event) error {
	x, err := e.event("cuEventQuery", ev)
	if err != nil {
		return err
	}
	target := x.recorded.Load()
	e.evMu.Lock()
	defer e.evMu.Unlock()
	if x.completed < target {
		return ErrorNotReady
	}
	return nil
}

func (e *emu) eventDestroy(ev Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.events, ev)
	return nil
}

func (e *emu) ipcGetMemHandle(p DevPtr) (IPCHandle, error) {
	var h IPCHandle
	for i := 0; i < 8; i++ {
		h[i] = byte(uint64(p) >> (8 * i))
	}
	copy(h[8:], "simccl-emulated")
	return h, nil
}

func (e *emu) ipcOpenMemHandle(h IPCHandle, flags uint32) (DevPtr, error) {
	var p uint64
	for i := 0; i < 8; i++ {
		p |= uint64(h[i]) << (8 * i)
	}
	if _, err := e.mem("cuIpcOpenMemHandle_v2", DevPtr(p), 1, -1); err != nil {
		return 0, err
	}
	if flags&IPCLazyEnablePeer != 0 {
		// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: the opening context may access the allocation's
		// device from now on.
		d, err := e.device("cuIpcOpenMemHandle_v2")
		if err != nil {
			return 0, err
		}
		e.mu.Lock()
		i := sort.Search(len(e.allocs), func(i int) bool { return e.allocs[i].base > p }) - 1
		if i >= 0 {
			e.peers[[2]int{d, e.allocs[i].dev}] = true
		}
		e.mu.Unlock()
	}
	return DevPtr(p), nil
}

func (e *emu) ipcCloseMemHandle(DevPtr) error { return nil }

func (e *emu) moduleLoadData([]byte) (Module, string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Module(e.newHandle()), "", nil
}

func (e *emu) moduleUnload(Module) error { return nil }

func (e *emu) moduleGetFunction(_ Module, name string) (Function, error) {
	if _, _, _, err := emuKernel(name); err != nil {
		return 0, emuErr("cuModuleGetFunction", 500, "CUDA_ERROR_NOT_FOUND", "%v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	f := Function(e.newHandle())
	e.funcs[f] = name
	return f, nil
}

// emuKernel parses a kernel name: "copy", or "reduce"/"divide" with the type and op.
func emuKernel(name string) (kind string, t coll.DataType, op coll.RedOp, err error) {
	if name == "simccl_copy" {
		return "copy", 0, 0, nil
	}
	if name == "simccl_ll_copy" {
		return "llcopy", 0, 0, nil
	}
	if name == "simccl_ll128_copy" {
		return "ll128copy", 0, 0, nil
	}
	typeOf := func(s string) (coll.DataType, bool) {
		for i, n := range kernelTypeNames {
			if n == s {
				return coll.DataType(i), true
			}
		}
		return 0, false
	}
	if rest, ok := strings.CutPrefix(name, "simccl_divide_"); ok {
		if t, ok := typeOf(rest); ok && isIntType(t) {
			return "divide", t, 0, nil
		}
	}
	for _, k := range [...][2]string{{"simccl_reduce_", "reduce"}, {"simccl_ll_reduce_", "llreduce"}, {"simccl_ll128_reduce_", "ll128reduce"}} {
		if rest, ok := strings.CutPrefix(name, k[0]); ok {
			if o, ts, ok := strings.Cut(rest, "_"); ok {
				t, tok := typeOf(ts)
				for _, op := range kernelOps {
					if kernelOpName(op) == o && tok {
						return k[1], t, op, nil
					}
				}
			}
		}
	}
	return "", 0, 0, fmt.Errorf("no kernel %q in the module", name)
}

func argU64(args []byte, offs []int32, i int) uint64 {
	if i >= len(offs) || int(offs[i])+8 > len(args) {
		return 0
	}
	return getElt(args[offs[i]:], 0, 8)
}

func argU32(args []byte, offs []int32, i int) uint32 {
	if i >= len(offs) || int(offs[i])+4 > len(args) {
		return 0
	}
	return uint32(getElt(args[offs[i]:], 0, 4))
}

// emuLLTimeout bounds an emulated LL receive's wait for its flags (the kernels trap after 10 s).
var emuLLTimeout = 60 * time.Second

// emuLLWord is the 4-byte word k of line i of LL lines b, accessed atomically: the sender's and the
// receiver's streams touch LL lines with no event between them (the flags order them), as on a GPU.
func emuLLWord(b []byte, i uint64, k int) *uint32 {
	return (*uint32)(unsafe.Pointer(&b[i*LLLineBytes+uint64(4*k)]))
}

// emuLLWait waits until both flags of line i of b are flag, zeroes the line (as the kernels do)
// and returns its 8 payload bytes.
func emuLLWait(b []byte, i uint64, flag uint32, deadline *time.Time) ([8]byte, error) {
	var v [8]byte
	for spins := 0; ; spins++ {
		if atomic.LoadUint32(emuLLWord(b, i, 1)) == flag && atomic.LoadUint32(emuLLWord(b, i, 3)) == flag {
			lo, hi := atomic.LoadUint32(emuLLWord(b, i, 0)), atomic.LoadUint32(emuLLWord(b, i, 2))
			for k := 0; k < 4; k++ {
				v[k], v[4+k] = byte(lo>>(8*k)), byte(hi>>(8*k))
				atomic.StoreUint32(emuLLWord(b, i, k), 0)
			}
			return v, nil
		}
		switch {
		case spins < 64:
			runtime.Gosched()
		case deadline.IsZero():
			*deadline = time.Now().Add(emuLLTimeout)
		case time.Now().After(*deadline):
			return v, emuErr("cuLaunchKernel", 719, "CUDA_ERROR_LAUNCH_FAILED", "LL line %d: flag %d never came (last %d/%d)", i, flag,
				atomic.LoadUint32(emuLLWord(b, i, 1)), atomic.LoadUint32(emuLLWord(b, i, 3)))
		default:
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// emuLLStore writes line i of b: the payload halves, each before its flag.
func emuLLStore(b []byte, i uint64, v [8]byte, flag uint32) {
	var lo, hi uint32
	for k := 0; k < 4; k++ {
		lo |= uint32(v[k]) << (8 * k)
		hi |= uint32(v[4+k]) << (8 * k)
	}
	atomic.StoreUint32(emuLLWord(b, i, 0), lo)
	atomic.StoreUint32(emuLLWord(b, i, 1), flag)
	atomic.StoreUint32(emuLLWord(b, i, 2), hi)
	atomic.StoreUint32(emuLLWord(b, i, 3), flag)
}

// emuLL128Word is the 8-byte word k of line i of LL128 lines b (word 15 is the flag), accessed
// atomically: the sender writes the payload words before the flag, the receiver reads the flag
// before the payload, so a line seen with its flag carries its payload, as a 128-byte line
// written and read as a unit does on the GPU.
func emuLL128Word(b []byte, i uint64, k int) *uint64 {
	return (*uint64)(unsafe.Pointer(&b[i*LL128LineBytes+uint64(8*k)]))
}

// emuLL128Wait waits until line i of b carries flag, zeroes its flag word (as the kernels do) and
// returns its 120 payload bytes.
func emuLL128Wait(b []byte, i uint64, flag uint32, deadline *time.Time, v []byte) error {
	for spins := 0; ; spins++ {
		if atomic.LoadUint64(emuLL128Word(b, i, 15)) == uint64(flag) {
			for k := 0; k < 15; k++ {
				binary.LittleEndian.PutUint64(v[8*k:], atomic.LoadUint64(emuLL128Word(b, i, k)))
			}
			atomic.StoreUint64(emuLL128Word(b, i, 15), 0)
			return nil
		}
		switch {
		case spins < 64:
			runtime.Gosched()
		case deadline.IsZero():
			*deadline = time.Now().Add(emuLLTimeout)
		case time.Now().After(*deadline):
			return emuErr("cuLaunchKernel", 719, "CUDA_ERROR_LAUNCH_FAILED", "LL128 line %d: flag %d never came (last %d)", i, flag,
				atomic.LoadUint64(emuLL128Word(b, i, 15)))
		default:
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// emuLL128Store writes line i of b: the payload words, then the flag.
func emuLL128Store(b []byte, i uint64, v []byte, flag uint32) {
	for k := 0; k < 15; k++ {
		atomic.StoreUint64(emuLL128Word(b, i, k), binary.LittleEndian.Uint64(v[8*k:]))
	}
	atomic.StoreUint64(emuLL128Word(b, i, 15), uint64(flag))
}

// emuLL runs the line kernels' loop (LL128 when ll128, else LL): for each line, get its payload
// bytes (from the lines in, waiting for inFlag, or from src, zero-padded), transform them (f,
// may be nil; i is the line's number), store them to dst (raw, up to nbytes) and to out (lines
// with outFlag).
func (e *emu) emuLL(name string, dev int, ll128 bool, dst, src, in DevPtr, inFlag uint32, out DevPtr, outFlag uint32, nbytes uint64, f func(i uint64, v []byte)) error {
	pay, wire := uint64(LLLinePayload), uint64(LLLineBytes)
	if ll128 {
		pay, wire = LL128LinePayload, LL128LineBytes
	}
	lines := (nbytes + pay - 1) / pay
	get := func(p DevPtr, n uint64) ([]byte, error) {
		if p == 0 {
			return nil, nil
		}
		return e.mem(name, p, n, dev)
	}
	d, err := get(dst, nbytes)
	if err != nil {
		return err
	}
	sb, err := get(src, nbytes)
	if err != nil {
		return err
	}
	ib, err := get(in, lines*wire)
	if err != nil {
		return err
	}
	ob, err := get(out, lines*wire)
	if err != nil {
		return err
	}
	var deadline time.Time
	v := make([]byte, pay)
	for i := uint64(0); i < lines; i++ {
		switch {
		case ib != nil && ll128:
			if err := emuLL128Wait(ib, i, inFlag, &deadline, v); err != nil {
				return err
			}
		case ib != nil:
			w, err := emuLLWait(ib, i, inFlag, &deadline)
			if err != nil {
				return err
			}
			copy(v, w[:])
		default:
			clear(v)
			copy(v, sb[min(i*pay, nbytes):min(i*pay+pay, nbytes)])
		}
		if f != nil {
			f(i, v)
		}
		if d != nil {
			copy(d[i*pay:min(i*pay+pay, nbytes)], v)
		}
		switch {
		case ob != nil && ll128:
			emuLL128Store(ob, i, v, outFlag)
		case ob != nil:
			emuLLStore(ob, i, [8]byte(v), outFlag)
		}
	}
	return nil
}

func (e *emu) launchKernel(f Function, _, _ [3]uint32, _ uint32, s Stream, args []byte, offs []int32) error {
	const call = "cuLaunchKernel"
	e.mu.RLock()
	name, ok := e.funcs[f]
	e.mu.RUnlock()
	if !ok {
		return emuErr(call, 400, "CUDA_ERROR_INVALID_HANDLE", "unknown function %#x", uintptr(f))
	}
	kind, t, op, err := emuKernel(name)
	if err != nil {
		return err
	}
	st, err := e.stream(call, s)
	if err != nil {
		return err
	}
	a := func(i int) uint64 { return argU64(args, offs, i) }
	dev := st.dev
	switch kind {
	case "copy":
		dst, src, n := DevPtr(a(0)), DevPtr(a(1)), a(2)
		st.push(func() error {
			d, err := e.mem(name, dst, n, dev)
			if err != nil {
				return err
			}
			sb, err := e.mem(name, src, n, dev)
			if err != nil {
				return err
			}
			copy(d, sb)
			return nil
		})
	case "reduce":
		dst, pa, pb, n, scalar := DevPtr(a(0)), DevPtr(a(1)), DevPtr(a(2)), a(3), a(4)
		var flags uint32
		if len(offs) > 5 && int(offs[5])+4 <= len(args) {
			flags = uint32(getElt(args[offs[5]:], 0, 4))
		}
		size := t.Size()
		nb := n * uint64(size)
		st.push(func() error {
			d, err := e.mem(name, dst, nb, dev)
			if err != nil {
				return err
			}
			x, err := e.mem(name, pa, nb, dev)
			if err != nil {
				return err
			}
			y, err := e.mem(name, pb, nb, dev)
			if err != nil {
				return err
			}
			for i := 0; i < int(n); i++ {
				putElt(d, i, size, refReduce(t, op, getElt(x, i, size), getElt(y, i, size), scalar, flags))
			}
			return nil
		})
	case "llcopy", "ll128copy":
		dst, src, in, inFlag, out, outFlag, n := DevPtr(a(0)), DevPtr(a(1)), DevPtr(a(2)), argU32(args, offs, 3), DevPtr(a(4)), argU32(args, offs, 5), a(6)
		ll128 := kind == "ll128copy"
		st.push(func() error { return e.emuLL(name, dev, ll128, dst, src, in, inFlag, out, outFlag, n, nil) })
	case "llreduce", "ll128reduce":
		dst, pa, in, inFlag, out, outFlag, n, scalar := DevPtr(a(0)), DevPtr(a(1)), DevPtr(a(2)), argU32(args, offs, 3), DevPtr(a(4)), argU32(args, offs, 5), a(6), a(7)
		flags := argU32(args, offs, 8)
		size := t.Size()
		nb := n * uint64(size)
		ll128 := kind == "ll128reduce"
		st.push(func() error {
			x, err := e.mem(name, pa, nb, dev)
			if err != nil {
				return err
			}
			return e.emuLL(name, dev, ll128, dst, 0, in, inFlag, out, outFlag, nb, func(i uint64, m []byte) {
				per := uint64(len(m) / size)
				for k := uint64(0); k < per; k++ {
					j := int(i*per + k)
					if uint64(j) >= n {
						putElt(m, int(k), size, 0) // the padding past the message
						continue
					}
					putElt(m, int(k), size, refReduce(t, op, getElt(x, j, size), getElt(m, int(k), size), scalar, flags))
				}
			})
		})
	case "divide":
		dst, src, n, div := DevPtr(a(0)), DevPtr(a(1)), a(2), a(3)
		size := t.Size()
		nb := n * uint64(size)
		st.push(func() error {
			d, err := e.mem(name, dst, nb, dev)
			if err != nil {
				return err
			}
			x, err := e.mem(name, src, nb, dev)
			if err != nil {
				return err
			}
			mask := sizeMask(t)
			for i := 0; i < int(n); i++ {
				v := getElt(x, i, size)
				if t.IsSigned() {
					sh := uint(64 - 8*size)
					v = uint64((int64(v<<sh)>>sh)/int64(div)) & mask
				} else {
					v = (v & mask) / (div & mask)
				}
				putElt(d, i, size, v)
			}
			return nil
		})
	}
	return nil
}

var errGraphs = errors.New("cuda: graphs are not emulated")

func (e *emu) streamBeginCapture(Stream, CaptureMode) error { return errGraphs }
func (e *emu) streamEndCapture(Stream) (Graph, error)       { return 0, errGraphs }
func (e *emu) graphInstantiate(Graph) (GraphExec, error)    { return 0, errGraphs }
func (e *emu) graphLaunch(GraphExec, Stream) error          { return errGraphs }
func (e *emu) graphDestroy(Graph) error                     { return errGraphs }
func (e *emu) graphExecDestroy(GraphExec) error             { return errGraphs }

func (e *emu) streamIsCapturing(s Stream) (bool, error) {
	st, err := e.stream("cuStreamIsCapturing", s)
	if err != nil {
		return false, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.capturing, nil
}

// exchangeCaptureMode: nothing is ever captured here, so every thread's mode is moot; the
// emulator hands back the mode it is given, as a driver would on a thread still at its default.
func (e *emu) exchangeCaptureMode(m CaptureMode) (CaptureMode, error) { return m, nil }
