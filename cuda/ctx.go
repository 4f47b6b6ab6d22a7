package cuda

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// Memory -------------------------------------------------------------------------------------

// Alloc allocates n bytes of device memory (cuMemAlloc_v2; 256-byte aligned).
func (c *Ctx) Alloc(n int) (DevPtr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("cuda: alloc of %d bytes on device %d: size must be positive", n, c.d.Ordinal)
	}
	return drv.memAlloc(uint64(n))
}

// Free releases memory from Alloc.
func (c *Ctx) Free(p DevPtr) error { return drv.memFree(p) }

// MemInfo is the device's free and total memory in bytes.
func (c *Ctx) MemInfo() (free, total uint64, err error) { return drv.memGetInfo() }

// HostMem is page-locked host memory outside the Go heap (cuMemHostAlloc, portable to every
// context): the only host memory the asynchronous copies accept.
type HostMem struct {
	p unsafe.Pointer
	n int
}

// Bytes is the memory as a slice; it is valid until Free.
func (h *HostMem) Bytes() []byte {
	if h == nil || h.p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(h.p), h.n)
}

// Len is the size in bytes.
func (h *HostMem) Len() int { return h.n }

// HostAlloc allocates n bytes of pinned host memory, portable to every context.
func (c *Ctx) HostAlloc(n int) (*HostMem, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: pinned host alloc of %d bytes: size must be positive", n)
	}
	p, err := drv.memHostAlloc(uint64(n), HostAllocPortable)
	if err != nil {
		return nil, err
	}
	return &HostMem{p: p, n: n}, nil
}

// FreeHost releases pinned host memory; the HostMem must not be used afterwards.
func (c *Ctx) FreeHost(h *HostMem) error {
	if h == nil || h.p == nil {
		return nil
	}
	err := drv.memFreeHost(h.p)
	h.p, h.n = nil, 0
	return err
}

func hostRange(h *HostMem, off, n int) (unsafe.Pointer, error) {
	if h == nil || h.p == nil {
		return nil, errors.New("cuda: host memory is nil or freed")
	}
	if off < 0 || n < 0 || off+n > h.n {
		return nil, fmt.Errorf("cuda: host range [%d, %d) outside the %d-byte buffer", off, off+n, h.n)
	}
	return unsafe.Add(h.p, off), nil
}

// The driver's "synchronous" copies and memsets run on the legacy default stream and may return
// before the data has landed: from pageable host memory the call returns once the bytes are
// staged, device-to-device copies and memsets of device memory return at once. Streams from
// NewStream do not wait for the legacy stream, so the synchronous methods below wait for it
// (cuStreamSynchronize on stream 0) before returning: afterwards the bytes are in place for work
// on any stream.

// CopyHtoD copies Go memory to the device and returns once it has landed.
func (c *Ctx) CopyHtoD(dst DevPtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := drv.memcpyHtoD(dst, unsafe.Pointer(&src[0]), uint64(len(src))); err != nil {
		return err
	}
	return drv.streamSynchronize(0)
}

// CopyDtoH copies device memory into Go memory and returns once it is there (the driver waits
// for the legacy stream before copying; work on other streams must be synchronized first).
func (c *Ctx) CopyDtoH(dst []byte, src DevPtr) error {
	if len(dst) == 0 {
		return nil
	}
	return drv.memcpyDtoH(unsafe.Pointer(&dst[0]), src, uint64(len(dst)))
}

// CopyDtoD copies n bytes between device addresses (any devices, unified addressing) and returns
// once the copy is done.
func (c *Ctx) CopyDtoD(dst, src DevPtr, n int) error {
	if n == 0 {
		return nil
	}
	if err := drv.memcpyDtoD(dst, src, uint64(n)); err != nil {
		return err
	}
	return drv.streamSynchronize(0)
}

// CopyHtoDAsync copies n bytes of pinned memory at off to the device, in stream order.
func (c *Ctx) CopyHtoDAsync(dst DevPtr, src *HostMem, off, n int, s Stream) error {
	p, err := hostRange(src, off, n)
	if err != nil || n == 0 {
		return err
	}
	return drv.memcpyHtoDAsync(dst, p, uint64(n), s)
}

// CopyDtoHAsync copies n bytes from the device into pinned memory at off, in stream order.
func (c *Ctx) CopyDtoHAsync(dst *HostMem, off int, src DevPtr, n int, s Stream) error {
	p, err := hostRange(dst, off, n)
	if err != nil || n == 0 {
		return err
	}
	return drv.memcpyDtoHAsync(p, src, uint64(n), s)
}

// CopyDtoDAsync copies n bytes between device addresses in stream order.
func (c *Ctx) CopyDtoDAsync(dst, src DevPtr, n int, s Stream) error {
	if n == 0 {
		return nil
	}
	return drv.memcpyDtoDAsync(dst, src, uint64(n), s)
}

// CopyPeerAsync copies n bytes from src on device srcDev to dst on device dstDev (copy engines,
// cuMemcpyPeerAsync), in order on stream s of this context.
func (c *Ctx) CopyPeerAsync(dst DevPtr, dstDev *Device, src DevPtr, srcDev *Device, n int, s Stream) error {
	if n == 0 {
		return nil
	}
	return drv.memcpyPeerAsync(dst, dstDev.ctx, src, srcDev.ctx, uint64(n), s)
}

// Memset sets n bytes to v and returns once they are set.
func (c *Ctx) Memset(dst DevPtr, v byte, n int) error {
	if err := drv.memsetD8(dst, v, uint64(n)); err != nil {
		return err
	}
	return drv.streamSynchronize(0)
}

// MemsetAsync sets n bytes to v in stream order.
func (c *Ctx) MemsetAsync(dst DevPtr, v byte, n int, s Stream) error {
	return drv.memsetD8Async(dst, v, uint64(n), s)
}

// Synchronize waits for all work of the context.
func (c *Ctx) Synchronize() error { return drv.ctxSynchronize() }

// Streams and events ---------------------------------------------------------------------------

// NewStream creates a stream that does not synchronize with stream 0.
func (c *Ctx) NewStream() (Stream, error) { return drv.streamCreate(StreamNonBlocking) }

// StreamSync waits for the stream's work.
func (c *Ctx) StreamSync(s Stream) error { return drv.streamSynchronize(s) }

// StreamDone reports whether all work on the stream has finished (cuStreamQuery).
func (c *Ctx) StreamDone(s Stream) (bool, error) { return ready(drv.streamQuery(s)) }

// StreamWait makes future work on s wait for event e.
func (c *Ctx) StreamWait(s Stream, e Event) error { return drv.streamWaitEvent(s, e) }

// WaitFlag makes future work on s wait until the 32-bit word at p is at least v (cuStreamWaitValue32
// with CU_STREAM_WAIT_VALUE_GEQ: (int32)(*p - v) >= 0). p is device memory this context can
// read: its own, a peer's with peer access, or memory opened through IPC. A stream memory
// operation, not a kernel: it holds no SM while it waits, and a stream capture records it as a
// graph node, so a graph replay waits again.
func (c *Ctx) WaitFlag(s Stream, p DevPtr, v uint32) error {
	return drv.streamWaitValue32(s, p, v, streamWaitValueGEQ)
}

// WriteFlag writes v to the 32-bit word at p in stream order (cuStreamWriteValue32): the writes
// of earlier work on s are visible before it (the default memory barrier).
func (c *Ctx) WriteFlag(s Stream, p DevPtr, v uint32) error {
	return drv.streamWriteValue32(s, p, v, 0)
}

// CU_STREAM_WAIT_VALUE_GEQ (cuda.h, CUstreamWaitValue_flags).
const streamWaitValueGEQ = 0

// DestroyStream destroys the stream (its queued work still completes).
func (c *Ctx) DestroyStream(s Stream) error { return drv.streamDestroy(s) }

// NewEvent creates an event; timing=false makes it cheaper (CU_EVENT_DISABLE_TIMING).
func (c *Ctx) NewEvent(timing bool) (Event, error) {
	if timing {
		return drv.eventCreate(0)
	}
	return drv.eventCreate(EventDisableTiming)
}

// NewIPCEvent creates an event another process can wait on (CU_EVENT_INTERPROCESS, which needs
// CU_EVENT_DISABLE_TIMING): export it with IPCEventHandle, open it there with IPCOpenEvent.
func (c *Ctx) NewIPCEvent() (Event, error) {
	return drv.eventCreate(EventDisableTiming | EventInterprocess)
}

// IPCEventHandle exports an event made by NewIPCEvent (cuIpcGetEventHandle).
func (c *Ctx) IPCEventHandle(e Event) (IPCHandle, error) { return drv.ipcGetEventHandle(e) }

// IPCOpenEvent opens another process's event (cuIpcOpenEventHandle): cuStreamWaitEvent on it
// waits for that process's most recent record. Destroy it with DestroyEvent.
func (c *Ctx) IPCOpenEvent(h IPCHandle) (Event, error) { return drv.ipcOpenEventHandle(h) }

// Record records e on stream s.
func (c *Ctx) Record(e Event, s Stream) error { return drv.eventRecord(e, s) }

// EventSync waits for the event.
func (c *Ctx) EventSync(e Event) error { return drv.eventSynchronize(e) }

// EventDone reports whether the event's work has finished (cuEventQuery).
func (c *Ctx) EventDone(e Event) (bool, error) { return ready(drv.eventQuery(e)) }

// Elapsed is the time between two recorded timing events.
func (c *Ctx) Elapsed(start, end Event) (float64, error) {
	ms, err := drv.eventElapsed(start, end)
	return float64(ms) * 1e-3, err // seconds
}

// DestroyEvent destroys the event.
func (c *Ctx) DestroyEvent(e Event) error { return drv.eventDestroy(e) }

func ready(err error) (bool, error) {
	if err == nil {
		return true, nil
	}
	if errors.Is(err, ErrorNotReady) {
		return false, nil
	}
	return false, err
}

// Peers and IPC --------------------------------------------------------------------------------

// EnablePeer lets kernels and copies of this context read and write memory of peer (one direction:
// call it on each side for both). Enabling twice is not an error.
func (c *Ctx) EnablePeer(peer *Device) error {
	if peer == c.d || peer.Ordinal == c.d.Ordinal {
		return nil // the same GPU (possibly opened twice): nothing to enable
	}
	ok, err := drv.canAccessPeer(c.d.dev, peer.dev)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("cuda: device %d cannot access device %d directly (cuDeviceCanAccessPeer = 0)", c.d.Ordinal, peer.Ordinal)
	}
	err = drv.ctxEnablePeerAccess(peer.ctx)
	if errors.Is(err, ErrorPeerAlreadyEnabled) {
		return nil
	}
	return err
}

// IPCHandle exports an allocation from Alloc (its base address) to other processes of the host.
func (c *Ctx) IPCHandle(p DevPtr) (IPCHandle, error) { return drv.ipcGetMemHandle(p) }

// IPCOpen maps another process's allocation into this context, enabling peer access lazily when it
// lives on another device. Close it with IPCClose.
func (c *Ctx) IPCOpen(h IPCHandle) (DevPtr, error) { return drv.ipcOpenMemHandle(h, IPCLazyEnablePeer) }

// IPCClose unmaps memory from IPCOpen.
func (c *Ctx) IPCClose(p DevPtr) error { return drv.ipcCloseMemHandle(p) }

// Modules and launches -------------------------------------------------------------------------

// ModuleError is a module that failed to load, with the JIT's log.
type ModuleError struct {
	Err error
	Log string
}

func (e *ModuleError) Error() string {
	if e.Log == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + "\nJIT log:\n" + e.Log
}

func (e *ModuleError) Unwrap() error { return e.Err }

// LoadModule loads PTX or a cubin (cuModuleLoadDataEx with the JIT's error and info logs; a
// failure returns a *ModuleError carrying the log).
func (c *Ctx) LoadModule(image []byte) (Module, error) {
	if len(image) == 0 {
		return 0, errors.New("cuda: load module: empty image")
	}
	m, log, err := drv.moduleLoadData(image)
	if err != nil {
		return 0, &ModuleError{Err: err, Log: log}
	}
	return m, nil
}

// UnloadModule unloads a module.
func (c *Ctx) UnloadModule(m Module) error { return drv.moduleUnload(m) }

// Function looks up a kernel by its (extern "C") name.
func (c *Ctx) Function(m Module, name string) (Function, error) {
	return drv.moduleGetFunction(m, name)
}

// Args packs kernel arguments: each value is laid out at its natural alignment, as the kernel's
// parameter list expects. Supported: DevPtr, uint64, int64, uint32, int32, float32, float64,
// uintptr, int (as 64-bit).
type Args struct {
	buf  []byte
	offs []int32
	// inline room for the common argument lists (a launch per small call must not pay for
	// growing slices): buf and offs start in it.
	inl  [96]byte
	inlo [12]int32
}

func (a *Args) put(v uint64, size int) {
	if a.buf == nil {
		a.buf, a.offs = a.inl[:0], a.inlo[:0]
	}
	off := (len(a.buf) + size - 1) &^ (size - 1)
	for len(a.buf) < off+size {
		a.buf = append(a.buf, 0)
	}
	for i := 0; i < size; i++ {
		a.buf[off+i] = byte(v >> (8 * i))
	}
	a.offs = append(a.offs, int32(off))
}

// Ptr appends a device pointer (Add without boxing its arguments).
func (a *Args) Ptr(p DevPtr) { a.put(uint64(p), 8) }

// U64 appends a 64-bit value.
func (a *Args) U64(v uint64) { a.put(v, 8) }

// U32 appends a 32-bit value.
func (a *Args) U32(v uint32) { a.put(uint64(v), 4) }

// Reset empties the argument list for reuse.
func (a *Args) Reset() { a.buf, a.offs = a.buf[:0], a.offs[:0] }

// Add appends arguments; an unsupported type is an error naming it.
func (a *Args) Add(vs ...any) error {
	for i, v := range vs {
		switch x := v.(type) {
		case DevPtr:
			a.put(uint64(x), 8)
		case uint64:
			a.put(x, 8)
		case int64:
			a.put(uint64(x), 8)
		case int:
			a.put(uint64(x), 8)
		case uintptr:
			a.put(uint64(x), 8)
		case uint32:
			a.put(uint64(x), 4)
		case int32:
			a.put(uint64(uint32(x)), 4)
		case float32:
			a.put(uint64(math.Float32bits(x)), 4)
		case float64:
			a.put(math.Float64bits(x), 8)
		default:
			return fmt.Errorf("cuda: kernel argument %d has unsupported type %T", i, v)
		}
	}
	return nil
}

// Launch runs f on a grid of grid×block threads in stream s with the given dynamic shared memory.
func (c *Ctx) Launch(f Function, grid, block [3]uint32, shmem uint32, s Stream, args *Args) error {
	var buf []byte
	var offs []int32
	if args != nil {
		buf, offs = args.buf, args.offs
	}
	return drv.launchKernel(f, grid, block, shmem, s, buf, offs)
}

// Graphs ---------------------------------------------------------------------------------------

// BeginCapture starts capturing the work submitted to s into a graph instead of running it.
func (c *Ctx) BeginCapture(s Stream, mode CaptureMode) error { return drv.streamBeginCapture(s, mode) }

// EndCapture ends the capture and returns the graph.
func (c *Ctx) EndCapture(s Stream) (Graph, error) { return drv.streamEndCapture(s) }

// IsCapturing reports whether s is capturing into a graph (cuStreamIsCapturing; a capture that
// an error invalidated counts until it ends).
func (c *Ctx) IsCapturing(s Stream) (bool, error) { return drv.streamIsCapturing(s) }

// Instantiate makes a launchable graph.
func (c *Ctx) Instantiate(g Graph) (GraphExec, error) { return drv.graphInstantiate(g) }

// LaunchGraph runs an instantiated graph on s.
func (c *Ctx) LaunchGraph(e GraphExec, s Stream) error { return drv.graphLaunch(e, s) }

// DestroyGraph destroys a captured graph.
func (c *Ctx) DestroyGraph(g Graph) error { return drv.graphDestroy(g) }

// DestroyGraphExec destroys an instantiated graph.
func (c *Ctx) DestroyGraphExec(e GraphExec) error { return drv.graphExecDestroy(e) }

// ExchangeCaptureMode sets the calling thread's stream-capture mode (cuThreadExchangeStreamCaptureMode)
// and returns the previous one. Work that must allocate or create streams and events while another
// thread's stream may be capturing in CaptureGlobal mode sets CaptureRelaxed around it and then
// restores the previous mode, as NCCL does around its own allocations.
func (c *Ctx) ExchangeCaptureMode(mode CaptureMode) (CaptureMode, error) {
	return drv.exchangeCaptureMode(mode)
}
