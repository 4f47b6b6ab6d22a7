package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// driver is the CUDA driver API as this package uses it: one method per driver entry point, with
// Go types. driver_cgo.go implements it over libcuda.so.1 (dlopen/dlsym, versioned names);
// without cgo no implementation exists and Init reports ErrNoDriver.
type driver interface {
	init() error
	driverVersion() (int, error)
	deviceCount() (int, error)
	deviceGet(ordinal int) (int32, error)
	deviceAttribute(attr int, dev int32) (int, error)
	deviceName(dev int32) (string, error)
	deviceTotalMem(dev int32) (uint64, error)
	devicePCIBusID(dev int32) (string, error)
	canAccessPeer(dev, peer int32) (bool, error)
	primaryCtxRetain(dev int32) (uintptr, error)
	primaryCtxRelease(dev int32) error
	ctxSetCurrent(ctx uintptr) error
	ctxSynchronize() error
	ctxGetDevice() (int32, error)
	ctxGetCurrent() (uintptr, error)
	ctxEnablePeerAccess(peer uintptr) error
	memAlloc(n uint64) (DevPtr, error)
	memFree(p DevPtr) error
	memGetInfo() (free, total uint64, err error)
	memHostAlloc(n uint64, flags uint32) (unsafe.Pointer, error)
	memFreeHost(p unsafe.Pointer) error
	memcpyHtoD(dst DevPtr, src unsafe.Pointer, n uint64) error
	memcpyDtoH(dst unsafe.Pointer, src DevPtr, n uint64) error
	memcpyDtoD(dst, src DevPtr, n uint64) error
	memcpyHtoDAsync(dst DevPtr, src unsafe.Pointer, n uint64, s Stream) error
	memcpyDtoHAsync(dst unsafe.Pointer, src DevPtr, n uint64, s Stream) error
	memcpyDtoDAsync(dst, src DevPtr, n uint64, s Stream) error
	memcpyPeerAsync(dst DevPtr, dstCtx uintptr, src DevPtr, srcCtx uintptr, n uint64, s Stream) error
	memsetD8(dst DevPtr, v byte, n uint64) error
	memsetD8Async(dst DevPtr, v byte, n uint64, s Stream) error
	streamCreate(flags uint32) (Stream, error)
	streamSynchronize(s Stream) error
	streamQuery(s Stream) error
	streamWaitEvent(s Stream, e Event) error
	streamWaitValue32(s Stream, p DevPtr, v, flags uint32) error
	streamWriteValue32(s Stream, p DevPtr, v, flags uint32) error
	streamDestroy(s Stream) error
	eventCreate(flags uint32) (Event, error)
	eventRecord(e Event, s Stream) error
	eventSynchronize(e Event) error
	eventQuery(e Event) error
	eventElapsed(start, end Event) (float32, error)
	eventDestroy(e Event) error
	ipcGetMemHandle(p DevPtr) (IPCHandle, error)
	ipcOpenMemHandle(h IPCHandle, flags uint32) (DevPtr, error)
	ipcCloseMemHandle(p DevPtr) error
	ipcGetEventHandle(e Event) (IPCHandle, error)
	ipcOpenEventHandle(h IPCHandle) (Event, error)
	moduleLoadData(image []byte) (Module, string, error)
	moduleUnload(m Module) error
	moduleGetFunction(m Module, name string) (Function, error)
	launchKernel(f Function, grid, block [3]uint32, shmem uint32, s Stream, args []byte, offs []int32) error
	streamBeginCapture(s Stream, mode CaptureMode) error
	streamEndCapture(s Stream) (Graph, error)
	streamIsCapturing(s Stream) (bool, error)
	graphInstantiate(g Graph) (GraphExec, error)
	graphLaunch(e GraphExec, s Stream) error
	graphDestroy(g Graph) error
	graphExecDestroy(e GraphExec) error
	exchangeCaptureMode(mode CaptureMode) (CaptureMode, error)
}

// ErrNoDriver is returned (wrapped, with the reason) by Init and everything that needs the driver
// when libcuda.so.1 cannot be loaded or initialised: no NVIDIA driver on this machine, a build
// without cgo, or a driver that lacks an entry point.
var ErrNoDriver = errors.New("cuda: no CUDA driver")

// Result is a CUresult, the driver API's status code.
type Result int

// CUresult values this package tests for (the driver API's CUresult enumeration).
const (
	Success                  Result = 0
	ErrorInvalidValue        Result = 1
	ErrorOutOfMemory         Result = 2
	ErrorNotInitialized      Result = 3
	ErrorNoDevice            Result = 100
	ErrorInvalidDevice       Result = 101
	ErrorNotReady            Result = 600
	ErrorPeerAlreadyEnabled  Result = 704
	ErrorPeerAccessNotEnable Result = 705
)

func (r Result) Error() string { return fmt.Sprintf("cuda: CUresult %d", int(r)) }

// Error is a failed driver call: the entry point, its CUresult and the driver's name and text
// for it (cuGetErrorName, cuGetErrorString). errors.Is(err, ErrorOutOfMemory) matches the code.
type Error struct {
	Call string // driver entry point, e.g. "cuMemAlloc_v2"
	Code Result
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Text string // e.g. "out of memory"
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = fmt.Sprintf("CUresult %d", int(e.Code))
	}
	s := "cuda: " + e.Call + ": " + name
	if e.Text != "" {
		s += " (" + e.Text + ")"
	}
	return s
}

// Unwrap exposes the code, so that errors.Is(err, cuda.ErrorOutOfMemory) works.
func (e *Error) Unwrap() error { return e.Code }

var (
	initOnce sync.Once
	drv      driver
	initErr  error
)

// Init loads libcuda.so.1 and calls cuInit once per process. It returns an error wrapping
// ErrNoDriver when no usable driver is present; later calls return the same result.
func Init() error {
	initOnce.Do(func() {
		d, err := loadDriver()
		if err != nil {
			initErr = fmt.Errorf("%w: %v", ErrNoDriver, err)
			return
		}
		if err := d.init(); err != nil {
			initErr = fmt.Errorf("%w: %v", ErrNoDriver, err)
			return
		}
		drv = d
	})
	return initErr
}

// DriverVersion is the CUDA version the driver supports, as 1000×major + 10×minor (13000 = 13.0).
func DriverVersion() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	return drv.driverVersion()
}

// DeviceCount is the number of CUDA devices visible to this process.
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	return drv.deviceCount()
}

// CurrentDevice is the device ordinal of the context current on the calling OS thread
// (cuCtxGetDevice: what cudaGetDevice reports once the runtime made a context current), and
// false when no context is current there. A goroutine must be locked to its thread for the answer
// to mean anything (a cgo callback from C is).
func CurrentDevice() (int, bool) {
	if err := Init(); err != nil {
		return 0, false
	}
	d, err := drv.ctxGetDevice()
	if err != nil {
		return 0, false
	}
	return int(d), true
}

// CanAccessPeer reports whether device ordinal a can map memory of device ordinal b.
func CanAccessPeer(a, b int) (bool, error) {
	if err := Init(); err != nil {
		return false, err
	}
	da, err := drv.deviceGet(a)
	if err != nil {
		return false, err
	}
	db, err := drv.deviceGet(b)
	if err != nil {
		return false, err
	}
	return drv.canAccessPeer(da, db)
}
