package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// DevPtr is a device address (CUdeviceptr). With unified addressing (every 64-bit Linux
// platform CUDA supports) it names one byte of one device's memory in the whole process.
type DevPtr uint64

// Add offsets the address by n bytes.
func (p DevPtr) Add(n int) DevPtr { return p + DevPtr(n) }

// Stream, Event, Module, Function, Graph and GraphExec are driver handles (CUstream, CUevent,
// CUmodule, CUfunction, CUgraph, CUgraphExec). Stream 0 is the context's legacy default stream.
type (
	Stream    uintptr
	Event     uintptr
	Module    uintptr
	Function  uintptr
	Graph     uintptr
	GraphExec uintptr
)

// IPCHandle is a CUipcMemHandle: 64 opaque bytes that another process on the same host opens with
// Ctx.IPCOpen to map the allocation (one process per GPU).
type IPCHandle [64]byte

// CaptureMode is a CUstreamCaptureMode.
type CaptureMode int

// Stream capture modes (CU_STREAM_CAPTURE_MODE_*).
const (
	CaptureGlobal      CaptureMode = 0
	CaptureThreadLocal CaptureMode = 1
	CaptureRelaxed     CaptureMode = 2
)

// Flags of the driver API used by this package.
const (
	StreamNonBlocking   = 1  // CU_STREAM_NON_BLOCKING: no implicit sync with stream 0
	EventDisableTiming  = 2  // CU_EVENT_DISABLE_TIMING
	EventInterprocess   = 4  // CU_EVENT_INTERPROCESS
	HostAllocPortable   = 1  // CU_MEMHOSTALLOC_PORTABLE: pinned for every context
	HostAllocDeviceMap  = 2  // CU_MEMHOSTALLOC_DEVICEMAP
	IPCLazyEnablePeer   = 1  // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
	attrMaxThreads      = 1  // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	attrSMCount         = 16 // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	attrUnifiedAddr     = 41 // CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING
	attrComputeCapMajor = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	attrComputeCapMinor = 76 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	attrL2Size          = 38 // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
	attrSharedPerBlock  = 8  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK
	attrPCIBus          = 33 // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
	attrMaxGridX        = 5  // CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X
)

// ErrClosed is returned by work submitted to a closed Device.
var ErrClosed = errors.New("cuda: device closed")

// Device is one GPU with its primary context, owned by one goroutine locked to its OS thread:
// the context is current on that thread only, and every driver call that needs it runs there
// (Do). A Device is safe for concurrent use; submitted functions run one at a time, in order.
type Device struct {
	Ordinal  int
	Name     string
	PCIBusID string
	Major    int // compute capability
	Minor    int
	SMs      int
	L2Bytes  int
	TotalMem uint64

	dev  int32
	ctx  uintptr
	work chan func()
	done chan struct{}

	mu     sync.RWMutex
	closed bool
	c      *Ctx
}

// Ctx is a device's context as seen from its own thread; it exists only inside Device.Do. Its
// methods call the driver directly (no hand-off) and must not be used after fn returns.
type Ctx struct {
	d *Device
}

// Device is the device whose thread runs this context.
func (c *Ctx) Device() *Device { return c.d }

// Open starts the device's thread, retains its primary context and makes it current there.
func Open(ordinal int) (*Device, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	n, err := drv.deviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device ordinal %d out of range (this process sees %d devices)", ordinal, n)
	}
	d := &Device{Ordinal: ordinal, work: make(chan func()), done: make(chan struct{})}
	d.c = &Ctx{d: d}
	ready := make(chan error, 1)
	go d.loop(ready)
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("cuda: open device %d: %w", ordinal, err)
	}
	return d, nil
}

func (d *Device) loop(ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	defer close(d.done)
	err := d.setup()
	ready <- err
	if err != nil {
		return
	}
	for fn := range d.work {
		fn()
	}
	// Closing: finish outstanding work, then drop our reference on the primary context.
	_ = drv.ctxSynchronize()
	_ = drv.primaryCtxRelease(d.dev)
}

func (d *Device) setup() (err error) {
	if d.dev, err = drv.deviceGet(d.Ordinal); err != nil {
		return err
	}
	if d.ctx, err = drv.primaryCtxRetain(d.dev); err != nil {
		return err
	}
	if err = drv.ctxSetCurrent(d.ctx); err != nil {
		_ = drv.primaryCtxRelease(d.dev)
		return err
	}
	attr := func(a int) int {
		if err != nil {
			return 0
		}
		var v int
		v, err = drv.deviceAttribute(a, d.dev)
		return v
	}
	d.Major, d.Minor = attr(attrComputeCapMajor), attr(attrComputeCapMinor)
	d.SMs, d.L2Bytes = attr(attrSMCount), attr(attrL2Size)
	if ua := attr(attrUnifiedAddr); err == nil && ua == 0 {
		err = errors.New("device lacks unified addressing")
	}
	if err == nil {
		d.Name, err = drv.deviceName(d.dev)
	}
	if err == nil {
		d.PCIBusID, err = drv.devicePCIBusID(d.dev)
	}
	if err == nil {
		d.TotalMem, err = drv.deviceTotalMem(d.dev)
	}
	if err != nil {
		_ = drv.primaryCtxRelease(d.dev)
	}
	return err
}

// Do runs fn on the device's thread with its context current and returns fn's error. A panic in
// fn is recovered and returned as an error. fn must not call Do on the same device (it would
// wait for itself); use the Ctx it is given.
func (d *Device) Do(fn func(c *Ctx) error) error {
	d.mu.RLock()
	if d.closed {
		d.mu.RUnlock()
		return ErrClosed
	}
	res := make(chan error, 1)
	d.work <- func() {
		defer func() {
			if r := recover(); r != nil {
				res <- fmt.Errorf("cuda: device %d: panic in submitted work: %v", d.Ordinal, r)
			}
		}()
		res <- fn(d.c)
	}
	d.mu.RUnlock()
	return <-res
}

// Close synchronizes the device, releases the primary context and ends the thread (not from
// inside Do: it would wait for itself). Memory, streams and modules not freed before are
// released with the context when no one else holds it.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.work)
	d.mu.Unlock()
	<-d.done
	return nil
}

func (d *Device) String() string {
	return fmt.Sprintf("cuda:%d %s (sm_%d%d, %d SMs, %s)", d.Ordinal, d.Name, d.Major, d.Minor, d.SMs, d.PCIBusID)
}

// OnThisThread runs fn on the calling goroutine's OS thread with d's context current there, and
// then makes the thread's previous context current again: a caller's thread (a program calling
// through cgo, whose CUDA runtime keeps its own context current) is left as it was. Like Borrow,
// fn must not touch state that work submitted through Do also touches.
func (d *Device) OnThisThread(fn func(c *Ctx) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d.mu.RLock()
	closed := d.closed
	d.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	prev, err := drv.ctxGetCurrent()
	if err != nil {
		return err
	}
	if prev != d.ctx {
		if err := drv.ctxSetCurrent(d.ctx); err != nil {
			return err
		}
		defer drv.ctxSetCurrent(prev)
	}
	return fn(d.c)
}

// Borrow runs fn on the calling goroutine, locked to its OS thread for the call, where use(d)
// makes device d's context current on that thread (switching only when d's context differs from
// the current one) and returns d's Ctx. It lets one thread enqueue work for several devices in
// turn — what a single host thread driving all the GPUs of a process does — without handing work
// to each device's own thread. The devices' threads keep running their own work meanwhile: fn
// must not touch state that work submitted through Do also touches. No context is left current.
func Borrow(fn func(use func(d *Device) (*Ctx, error)) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cur uintptr
	use := func(d *Device) (*Ctx, error) {
		d.mu.RLock()
		closed := d.closed
		d.mu.RUnlock()
		if closed {
			return nil, ErrClosed
		}
		if d.ctx != cur {
			if err := drv.ctxSetCurrent(d.ctx); err != nil {
				return nil, err
			}
			cur = d.ctx
		}
		return d.c, nil
	}
	err := fn(use)
	if cur != 0 {
		_ = drv.ctxSetCurrent(0)
	}
	return err
}

// Context is the device's CUcontext handle (what cuCtxSetCurrent takes), for C code that enqueues
// on the device itself (cuda/libnccl's one-rank path). The emulated driver's contexts are handles
// of its own.
func (d *Device) Context() uintptr { return d.ctx }
