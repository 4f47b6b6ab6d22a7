//go:build cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Our own minimal declarations of the CUDA driver ABI: CUresult and CUdevice are int, every handle
// is a pointer (passed to and from Go as uintptr_t), CUdeviceptr is a 64-bit integer, an IPC
// memory handle is 64 opaque bytes. No NVIDIA header is included.
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;
typedef void *H;

#define SIMCCL_FUNCS(X) \
	X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) \
	X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetAttribute) X(cuDeviceGetName) \
	X(cuDeviceTotalMem_v2) X(cuDeviceGetPCIBusId) X(cuDeviceCanAccessPeer) \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2) X(cuCtxSetCurrent) \
	X(cuCtxSynchronize) X(cuCtxEnablePeerAccess) X(cuCtxGetDevice) X(cuCtxGetCurrent) \
	X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemGetInfo_v2) X(cuMemAllocHost_v2) X(cuMemHostAlloc) \
	X(cuMemFreeHost) X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoD_v2) \
	X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2) X(cuMemcpyPeerAsync) \
	X(cuMemsetD8_v2) X(cuMemsetD8Async) \
	X(cuStreamCreate) X(cuStreamSynchronize) X(cuStreamQuery) X(cuStreamWaitEvent) \
	X(cuStreamDestroy_v2) \
	X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventQuery) \
	X(cuEventElapsedTime) X(cuEventDestroy_v2) \
	X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle_v2) X(cuIpcCloseMemHandle) \
	X(cuIpcGetEventHandle) X(cuIpcOpenEventHandle) \
	X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel) \
	X(cuStreamBeginCapture_v2) X(cuStreamEndCapture) X(cuStreamIsCapturing) X(cuGraphInstantiateWithFlags) \
	X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy) X(cuThreadExchangeStreamCaptureMode)

enum {
#define X(n) I_##n,
	SIMCCL_FUNCS(X)
#undef X
	I_COUNT
};

static const char *simccl_names[] = {
#define X(n) #n,
	SIMCCL_FUNCS(X)
#undef X
};

static void *simccl_fn[I_COUNT];
static void *simccl_wait32, *simccl_write32;

// simccl_load opens libcuda.so.1 and resolves every entry point. On failure it writes the reason
// to err and returns non-zero.
static int simccl_load(char *err, size_t errlen) {
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen(libcuda.so.1) failed");
		return 1;
	}
	for (int i = 0; i < I_COUNT; i++) {
		simccl_fn[i] = dlsym(lib, simccl_names[i]);
		if (!simccl_fn[i]) {
			snprintf(err, errlen, "libcuda.so.1 has no symbol %s (driver too old?)", simccl_names[i]);
			return 2;
		}
	}
	// Optional entry points: stream memory operations (the _v2 names are CUDA 11.7's, available
	// by default on every platform; the unsuffixed ones need NVreg_EnableStreamMemOPs).
	simccl_wait32 = dlsym(lib, "cuStreamWaitValue32_v2");
	if (!simccl_wait32) simccl_wait32 = dlsym(lib, "cuStreamWaitValue32");
	simccl_write32 = dlsym(lib, "cuStreamWriteValue32_v2");
	if (!simccl_write32) simccl_write32 = dlsym(lib, "cuStreamWriteValue32");
	return 0;
}

#define FN(name, sig) ((CUresult (*) sig) simccl_fn[I_##name])

static CUresult s_init(void) { return FN(cuInit, (unsigned))(0); }
static CUresult s_driverVersion(int *v) { return FN(cuDriverGetVersion, (int *))(v); }
static CUresult s_errorName(CUresult r, const char **s) { return FN(cuGetErrorName, (CUresult, const char **))(r, s); }
static CUresult s_errorString(CUresult r, const char **s) { return FN(cuGetErrorString, (CUresult, const char **))(r, s); }
static CUresult s_deviceGet(CUdevice *d, int i) { return FN(cuDeviceGet, (CUdevice *, int))(d, i); }
static CUresult s_deviceCount(int *n) { return FN(cuDeviceGetCount, (int *))(n); }
static CUresult s_deviceAttribute(int *v, int a, CUdevice d) { return FN(cuDeviceGetAttribute, (int *, int, CUdevice))(v, a, d); }
static CUresult s_deviceName(char *s, int n, CUdevice d) { return FN(cuDeviceGetName, (char *, int, CUdevice))(s, n, d); }
static CUresult s_deviceTotalMem(size_t *b, CUdevice d) { return FN(cuDeviceTotalMem_v2, (size_t *, CUdevice))(b, d); }
static CUresult s_devicePCIBusId(char *s, int n, CUdevice d) { return FN(cuDeviceGetPCIBusId, (char *, int, CUdevice))(s, n, d); }
static CUresult s_canAccessPeer(int *v, CUdevice d, CUdevice p) { return FN(cuDeviceCanAccessPeer, (int *, CUdevice, CUdevice))(v, d, p); }
static CUresult s_primaryRetain(uintptr_t *c, CUdevice d) { return FN(cuDevicePrimaryCtxRetain, (H *, CUdevice))((H *)c, d); }
static CUresult s_primaryRelease(CUdevice d) { return FN(cuDevicePrimaryCtxRelease_v2, (CUdevice))(d); }
static CUresult s_ctxSetCurrent(uintptr_t c) { return FN(cuCtxSetCurrent, (H))((H)c); }
static CUresult s_ctxSynchronize(void) { return FN(cuCtxSynchronize, (void))(); }
static CUresult s_ctxGetDevice(int *d) { return FN(cuCtxGetDevice, (int *))(d); }
static CUresult s_ctxGetCurrent(uintptr_t *c) { return FN(cuCtxGetCurrent, (H *))((H *)c); }
static CUresult s_ctxEnablePeer(uintptr_t c) { return FN(cuCtxEnablePeerAccess, (H, unsigned))((H)c, 0); }
static CUresult s_memAlloc(CUdeviceptr *p, size_t n) { return FN(cuMemAlloc_v2, (CUdeviceptr *, size_t))(p, n); }
static CUresult s_memFree(CUdeviceptr p) { return FN(cuMemFree_v2, (CUdeviceptr))(p); }
static CUresult s_memGetInfo(size_t *f, size_t *t) { return FN(cuMemGetInfo_v2, (size_t *, size_t *))(f, t); }
static CUresult s_memAllocHost(void **p, size_t n) { return FN(cuMemAllocHost_v2, (void **, size_t))(p, n); }
static CUresult s_memHostAlloc(void **p, size_t n, unsigned f) { return FN(cuMemHostAlloc, (void **, size_t, unsigned))(p, n, f); }
static CUresult s_memFreeHost(void *p) { return FN(cuMemFreeHost, (void *))(p); }
static CUresult s_htod(CUdeviceptr d, const void *h, size_t n) { return FN(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))(d, h, n); }
static CUresult s_dtoh(void *h, CUdeviceptr d, size_t n) { return FN(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))(h, d, n); }
static CUresult s_dtod(CUdeviceptr d, CUdeviceptr s, size_t n) { return FN(cuMemcpyDtoD_v2, (CUdeviceptr, CUdeviceptr, size_t))(d, s, n); }
static CUresult s_htodAsync(CUdeviceptr d, const void *h, size_t n, uintptr_t st) { return FN(cuMemcpyHtoDAsync_v2, (CUdeviceptr, const void *, size_t, H))(d, h, n, (H)st); }
static CUresult s_dtohAsync(void *h, CUdeviceptr d, size_t n, uintptr_t st) { return FN(cuMemcpyDtoHAsync_v2, (void *, CUdeviceptr, size_t, H))(h, d, n, (H)st); }
static CUresult s_dtodAsync(CUdeviceptr d, CUdeviceptr s, size_t n, uintptr_t st) { return FN(cuMemcpyDtoDAsync_v2, (CUdeviceptr, CUdeviceptr, size_t, H))(d, s, n, (H)st); }
static CUresult s_peerAsync(CUdeviceptr d, uintptr_t dc, CUdeviceptr s, uintptr_t sc, size_t n, uintptr_t st) {
	return FN(cuMemcpyPeerAsync, (CUdeviceptr, H, CUdeviceptr, H, size_t, H))(d, (H)dc, s, (H)sc, n, (H)st);
}
static CUresult s_memsetD8(CUdeviceptr d, unsigned char v, size_t n) { return FN(cuMemsetD8_v2, (CUdeviceptr, unsigned char, size_t))(d, v, n); }
static CUresult s_memsetD8Async(CUdeviceptr d, unsigned char v, size_t n, uintptr_t st) { return FN(cuMemsetD8Async, (CUdeviceptr, unsigned char, size_t, H))(d, v, n, (H)st); }
static CUresult s_streamCreate(uintptr_t *s, unsigned f) { return FN(cuStreamCreate, (H *, unsigned))((H *)s, f); }
static CUresult s_streamSync(uintptr_t s) { return FN(cuStreamSynchronize, (H))((H)s); }
static CUresult s_streamQuery(uintptr_t s) { return FN(cuStreamQuery, (H))((H)s); }
static CUresult s_streamWaitEvent(uintptr_t s, uintptr_t e) { return FN(cuStreamWaitEvent, (H, H, unsigned))((H)s, (H)e, 0); }
static CUresult s_streamDestroy(uintptr_t s) { return FN(cuStreamDestroy_v2, (H))((H)s); }
static CUresult s_eventCreate(uintptr_t *e, unsigned f) { return FN(cuEventCreate, (H *, unsigned))((H *)e, f); }
static CUresult s_eventRecord(uintptr_t e, uintptr_t s) { return FN(cuEventRecord, (H, H))((H)e, (H)s); }
static CUresult s_eventSync(uintptr_t e) { return FN(cuEventSynchronize, (H))((H)e); }
static CUresult s_eventQuery(uintptr_t e) { return FN(cuEventQuery, (H))((H)e); }
static CUresult s_eventElapsed(float *ms, uintptr_t a, uintptr_t b) { return FN(cuEventElapsedTime, (float *, H, H))(ms, (H)a, (H)b); }
static CUresult s_eventDestroy(uintptr_t e) { return FN(cuEventDestroy_v2, (H))((H)e); }
static CUresult s_ipcGet(void *h64, CUdeviceptr p) { return FN(cuIpcGetMemHandle, (CUipcMemHandle *, CUdeviceptr))((CUipcMemHandle *)h64, p); }
static CUresult s_ipcOpen(CUdeviceptr *p, const void *h64, unsigned f) {
	CUipcMemHandle h;
	memcpy(&h, h64, sizeof h);
	return FN(cuIpcOpenMemHandle_v2, (CUdeviceptr *, CUipcMemHandle, unsigned))(p, h, f);
}
static CUresult s_ipcClose(CUdeviceptr p) { return FN(cuIpcCloseMemHandle, (CUdeviceptr))(p); }
// CUipcEventHandle is 64 opaque bytes, passed by value to cuIpcOpenEventHandle.
typedef struct { char reserved[64]; } simccl_ipc_event_handle;
static CUresult s_ipcGetEvent(void *h64, uintptr_t e) { return FN(cuIpcGetEventHandle, (simccl_ipc_event_handle *, H))((simccl_ipc_event_handle *)h64, (H)e); }
static CUresult s_ipcOpenEvent(uintptr_t *e, const void *h64) {
	simccl_ipc_event_handle h;
	memcpy(&h, h64, sizeof h);
	return FN(cuIpcOpenEventHandle, (H *, simccl_ipc_event_handle))((H *)e, h);
}

// s_moduleLoad loads a NUL-terminated image with the JIT's error and info logs captured
// (CU_JIT_INFO_LOG_BUFFER 3, its size 4, CU_JIT_ERROR_LOG_BUFFER 5, its size 6).
static CUresult s_moduleLoad(uintptr_t *m, const void *image, char *errlog, size_t errsz, char *infolog, size_t infosz) {
	int opts[4] = {5, 6, 3, 4};
	void *vals[4] = {errlog, (void *)(uintptr_t)errsz, infolog, (void *)(uintptr_t)infosz};
	return FN(cuModuleLoadDataEx, (H *, const void *, unsigned, int *, void **))((H *)m, image, 4, opts, vals);
}
static CUresult s_moduleUnload(uintptr_t m) { return FN(cuModuleUnload, (H))((H)m); }
static CUresult s_moduleGetFunction(uintptr_t *f, uintptr_t m, const char *name) { return FN(cuModuleGetFunction, (H *, H, const char *))((H *)f, (H)m, name); }

// s_launch builds the kernel-parameter array (pointers into buf at the given offsets) on the C
// stack; the driver copies the values during the call.
static CUresult s_launch(uintptr_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
		unsigned shm, uintptr_t st, char *buf, int *offs, int n) {
	void *params[32];
	if (n > 32) return 1; // CUDA_ERROR_INVALID_VALUE
	for (int i = 0; i < n; i++) params[i] = buf + offs[i];
	return FN(cuLaunchKernel, (H, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, H, void **, void **))(
		(H)f, gx, gy, gz, bx, by, bz, shm, (H)st, params, NULL);
}
static CUresult s_beginCapture(uintptr_t s, int mode) { return FN(cuStreamBeginCapture_v2, (H, int))((H)s, mode); }
static CUresult s_endCapture(uintptr_t s, uintptr_t *g) { return FN(cuStreamEndCapture, (H, H *))((H)s, (H *)g); }
static CUresult s_isCapturing(uintptr_t s, int *status) { return FN(cuStreamIsCapturing, (H, int *))((H)s, status); }
static CUresult s_graphInstantiate(uintptr_t *e, uintptr_t g) { return FN(cuGraphInstantiateWithFlags, (H *, H, unsigned long long))((H *)e, (H)g, 0); }
static CUresult s_graphLaunch(uintptr_t e, uintptr_t s) { return FN(cuGraphLaunch, (H, H))((H)e, (H)s); }
static CUresult s_graphDestroy(uintptr_t g) { return FN(cuGraphDestroy, (H))((H)g); }
static CUresult s_graphExecDestroy(uintptr_t e) { return FN(cuGraphExecDestroy, (H))((H)e); }
// CUDA_ERROR_NOT_SUPPORTED (801) where the driver lacks the stream memory operations.
static CUresult s_waitValue32(uintptr_t s, CUdeviceptr p, unsigned v, unsigned f) {
	if (!simccl_wait32) return 801;
	return ((CUresult (*)(H, CUdeviceptr, unsigned, unsigned))simccl_wait32)((H)s, p, v, f);
}
static CUresult s_writeValue32(uintptr_t s, CUdeviceptr p, unsigned v, unsigned f) {
	if (!simccl_write32) return 801;
	return ((CUresult (*)(H, CUdeviceptr, unsigned, unsigned))simccl_write32)((H)s, p, v, f);
}
static CUresult s_exchangeCaptureMode(int *mode) { return FN(cuThreadExchangeStreamCaptureMode, (int *))(mode); }
*/
import "C"

import (
	"errors"
	"unsafe"
)

// cgoDriver reaches libcuda.so.1 through the function pointers resolved by simccl_load.
type cgoDriver struct{}

func loadDriver() (driver, error) {
	var buf [512]C.char
	if C.simccl_load(&buf[0], C.size_t(len(buf))) != 0 {
		return nil, errors.New(C.GoString(&buf[0]))
	}
	return cgoDriver{}, nil
}

// check turns a CUresult into nil or an *Error naming the call.
func check(call string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: Result(r)}
	var s *C.char
	if C.s_errorName(r, &s) == 0 && s != nil {
		e.Name = C.GoString(s)
	}
	s = nil
	if C.s_errorString(r, &s) == 0 && s != nil {
		e.Text = C.GoString(s)
	}
	return e
}

func (cgoDriver) init() error { return check("cuInit", C.s_init()) }

func (cgoDriver) driverVersion() (int, error) {
	var v C.int
	err := check("cuDriverGetVersion", C.s_driverVersion(&v))
	return int(v), err
}

func (cgoDriver) deviceCount() (int, error) {
	var n C.int
	err := check("cuDeviceGetCount", C.s_deviceCount(&n))
	return int(n), err
}

func (cgoDriver) deviceGet(ordinal int) (int32, error) {
	var d C.CUdevice
	err := check("cuDeviceGet", C.s_deviceGet(&d, C.int(ordinal)))
	return int32(d), err
}

func (cgoDriver) deviceAttribute(attr int, dev int32) (int, error) {
	var v C.int
	err := check("cuDeviceGetAttribute", C.s_deviceAttribute(&v, C.int(attr), C.CUdevice(dev)))
	return int(v), err
}

func (cgoDriver) deviceName(dev int32) (string, error) {
	var buf [256]C.char
	if err := check("cuDeviceGetName", C.s_deviceName(&buf[0], C.int(len(buf)), C.CUdevice(dev))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (cgoDriver) deviceTotalMem(dev int32) (uint64, error) {
	var n C.size_t
	err := check("cuDeviceTotalMem_v2", C.s_deviceTotalMem(&n, C.CUdevice(dev)))
	return uint64(n), err
}

func (cgoDriver) devicePCIBusID(dev int32) (string, error) {
	var buf [64]C.char
	if err := check("cuDeviceGetPCIBusId", C.s_devicePCIBusId(&buf[0], C.int(len(buf)), C.CUdevice(dev))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (cgoDriver) canAccessPeer(dev, peer int32) (bool, error) {
	var v C.int
	err := check("cuDeviceCanAccessPeer", C.s_canAccessPeer(&v, C.CUdevice(dev), C.CUdevice(peer)))
	return v != 0, err
}

func (cgoDriver) primaryCtxRetain(dev int32) (uintptr, error) {
	var c C.uintptr_t
	err := check("cuDevicePrimaryCtxRetain", C.s_primaryRetain(&c, C.CUdevice(dev)))
	return uintptr(c), err
}

func (cgoDriver) primaryCtxRelease(dev int32) error {
	return check("cuDevicePrimaryCtxRelease_v2", C.s_primaryRelease(C.CUdevice(dev)))
}

func (cgoDriver) ctxSetCurrent(ctx uintptr) error {
	return check("cuCtxSetCurrent", C.s_ctxSetCurrent(C.uintptr_t(ctx)))
}

func (cgoDriver) ctxSynchronize() error { return check("cuCtxSynchronize", C.s_ctxSynchronize()) }

func (cgoDriver) ctxGetCurrent() (uintptr, error) {
	var c C.uintptr_t
	err := check("cuCtxGetCurrent", C.s_ctxGetCurrent(&c))
	return uintptr(c), err
}

func (cgoDriver) ctxGetDevice() (int32, error) {
	var d C.int
	err := check("cuCtxGetDevice", C.s_ctxGetDevice(&d))
	return int32(d), err
}

func (cgoDriver) ctxEnablePeerAccess(peer uintptr) error {
	return check("cuCtxEnablePeerAccess", C.s_ctxEnablePeer(C.uintptr_t(peer)))
}

func (cgoDriver) memAlloc(n uint64) (DevPtr, error) {
	var p C.CUdeviceptr
	err := check("cuMemAlloc_v2", C.s_memAlloc(&p, C.size_t(n)))
	return DevPtr(p), err
}

func (cgoDriver) memFree(p DevPtr) error { return check("cuMemFree_v2", C.s_memFree(C.CUdeviceptr(p))) }

func (cgoDriver) memGetInfo() (free, total uint64, err error) {
	var f, t C.size_t
	err = check("cuMemGetInfo_v2", C.s_memGetInfo(&f, &t))
	return uint64(f), uint64(t), err
}

func (cgoDriver) memHostAlloc(n uint64, flags uint32) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if flags == 0 {
		err := check("cuMemAllocHost_v2", C.s_memAllocHost(&p, C.size_t(n)))
		return p, err
	}
	err := check("cuMemHostAlloc", C.s_memHostAlloc(&p, C.size_t(n), C.unsigned(flags)))
	return p, err
}

func (cgoDriver) memFreeHost(p unsafe.Pointer) error {
	return check("cuMemFreeHost", C.s_memFreeHost(p))
}

func (cgoDriver) memcpyHtoD(dst DevPtr, src unsafe.Pointer, n uint64) error {
	return check("cuMemcpyHtoD_v2", C.s_htod(C.CUdeviceptr(dst), src, C.size_t(n)))
}

func (cgoDriver) memcpyDtoH(dst unsafe.Pointer, src DevPtr, n uint64) error {
	return check("cuMemcpyDtoH_v2", C.s_dtoh(dst, C.CUdeviceptr(src), C.size_t(n)))
}

func (cgoDriver) memcpyDtoD(dst, src DevPtr, n uint64) error {
	return check("cuMemcpyDtoD_v2", C.s_dtod(C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n)))
}

func (cgoDriver) memcpyHtoDAsync(dst DevPtr, src unsafe.Pointer, n uint64, s Stream) error {
	return check("cuMemcpyHtoDAsync_v2", C.s_htodAsync(C.CUdeviceptr(dst), src, C.size_t(n), C.uintptr_t(s)))
}

func (cgoDriver) memcpyDtoHAsync(dst unsafe.Pointer, src DevPtr, n uint64, s Stream) error {
	return check("cuMemcpyDtoHAsync_v2", C.s_dtohAsync(dst, C.CUdeviceptr(src), C.size_t(n), C.uintptr_t(s)))
}

func (cgoDriver) memcpyDtoDAsync(dst, src DevPtr, n uint64, s Stream) error {
	return check("cuMemcpyDtoDAsync_v2", C.s_dtodAsync(C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n), C.uintptr_t(s)))
}

func (cgoDriver) memcpyPeerAsync(dst DevPtr, dstCtx uintptr, src DevPtr, srcCtx uintptr, n uint64, s Stream) error {
	return check("cuMemcpyPeerAsync", C.s_peerAsync(C.CUdeviceptr(dst), C.uintptr_t(dstCtx), C.CUdeviceptr(src),
		C.uintptr_t(srcCtx), C.size_t(n), C.uintptr_t(s)))
}

func (cgoDriver) memsetD8(dst DevPtr, v byte, n uint64) error {
	return check("cuMemsetD8_v2", C.s_memsetD8(C.CUdeviceptr(dst), C.uchar(v), C.size_t(n)))
}

func (cgoDriver) memsetD8Async(dst DevPtr, v byte, n uint64, s Stream) error {
	return check("cuMemsetD8Async", C.s_memsetD8Async(C.CUdeviceptr(dst), C.uchar(v), C.size_t(n), C.uintptr_t(s)))
}

func (cgoDriver) streamCreate(flags uint32) (Stream, error) {
	var s C.uintptr_t
	err := check("cuStreamCreate", C.s_streamCreate(&s, C.unsigned(flags)))
	return Stream(s), err
}

func (cgoDriver) streamSynchronize(s Stream) error {
	return check("cuStreamSynchronize", C.s_streamSync(C.uintptr_t(s)))
}

func (cgoDriver) streamQuery(s Stream) error {
	return check("cuStreamQuery", C.s_streamQuery(C.uintptr_t(s)))
}

func (cgoDriver) streamWaitValue32(s Stream, p DevPtr, v, flags uint32) error {
	return check("cuStreamWaitValue32_v2", C.s_waitValue32(C.uintptr_t(s), C.CUdeviceptr(p), C.unsigned(v), C.unsigned(flags)))
}

func (cgoDriver) streamWriteValue32(s Stream, p DevPtr, v, flags uint32) error {
	return check("cuStreamWriteValue32_v2", C.s_writeValue32(C.uintptr_t(s), C.CUdeviceptr(p), C.unsigned(v), C.unsigned(flags)))
}

func (cgoDriver) streamWaitEvent(s Stream, e Event) error {
	return check("cuStreamWaitEvent", C.s_streamWaitEvent(C.uintptr_t(s), C.uintptr_t(e)))
}

func (cgoDriver) streamDestroy(s Stream) error {
	return check("cuStreamDestroy_v2", C.s_streamDestroy(C.uintptr_t(s)))
}

func (cgoDriver) eventCreate(flags uint32) (Event, error) {
	var e C.uintptr_t
	err := check("cuEventCreate", C.s_eventCreate(&e, C.unsigned(flags)))
	return Event(e), err
}

func (cgoDriver) eventRecord(e Event, s Stream) error {
	return check("cuEventRecord", C.s_eventRecord(C.uintptr_t(e), C.uintptr_t(s)))
}

func (cgoDriver) eventSynchronize(e Event) error {
	return check("cuEventSynchronize", C.s_eventSync(C.uintptr_t(e)))
}

func (cgoDriver) eventQuery(e Event) error {
	return check("cuEventQuery", C.s_eventQuery(C.uintptr_t(e)))
}

func (cgoDriver) eventElapsed(start, end Event) (float32, error) {
	var ms C.float
	err := check("cuEventElapsedTime", C.s_eventElapsed(&ms, C.uintptr_t(start), C.uintptr_t(end)))
	return float32(ms), err
}

func (cgoDriver) eventDestroy(e Event) error {
	return check("cuEventDestroy_v2", C.s_eventDestroy(C.uintptr_t(e)))
}

func (cgoDriver) ipcGetMemHandle(p DevPtr) (IPCHandle, error) {
	var h IPCHandle
	err := check("cuIpcGetMemHandle", C.s_ipcGet(unsafe.Pointer(&h[0]), C.CUdeviceptr(p)))
	return h, err
}

func (cgoDriver) ipcOpenMemHandle(h IPCHandle, flags uint32) (DevPtr, error) {
	var p C.CUdeviceptr
	err := check("cuIpcOpenMemHandle_v2", C.s_ipcOpen(&p, unsafe.Pointer(&h[0]), C.unsigned(flags)))
	return DevPtr(p), err
}

func (cgoDriver) ipcCloseMemHandle(p DevPtr) error {
	return check("cuIpcCloseMemHandle", C.s_ipcClose(C.CUdeviceptr(p)))
}

func (cgoDriver) ipcGetEventHandle(e Event) (IPCHandle, error) {
	var h IPCHandle
	err := check("cuIpcGetEventHandle", C.s_ipcGetEvent(unsafe.Pointer(&h[0]), C.uintptr_t(e)))
	return h, err
}

func (cgoDriver) ipcOpenEventHandle(h IPCHandle) (Event, error) {
	var e C.uintptr_t
	err := check("cuIpcOpenEventHandle", C.s_ipcOpenEvent(&e, unsafe.Pointer(&h[0])))
	return Event(e), err
}

func (cgoDriver) moduleLoadData(image []byte) (Module, string, error) {
	// The image must stay put and be NUL-terminated for the JIT: copy it outside the Go heap.
	img := C.malloc(C.size_t(len(image) + 1))
	defer C.free(img)
	copy(unsafe.Slice((*byte)(img), len(image)+1), image)
	*(*byte)(unsafe.Add(img, len(image))) = 0
	const logSize = 16 << 10
	logs := (*C.char)(C.calloc(2, logSize))
	defer C.free(unsafe.Pointer(logs))
	errLog := logs
	infoLog := (*C.char)(unsafe.Add(unsafe.Pointer(logs), logSize))
	var m C.uintptr_t
	r := C.s_moduleLoad(&m, img, errLog, logSize, infoLog, logSize)
	log := C.GoString(errLog)
	if info := C.GoString(infoLog); info != "" {
		if log != "" {
			log += "\n"
		}
		log += info
	}
	return Module(m), log, check("cuModuleLoadDataEx", r)
}

func (cgoDriver) moduleUnload(m Module) error {
	return check("cuModuleUnload", C.s_moduleUnload(C.uintptr_t(m)))
}

func (cgoDriver) moduleGetFunction(m Module, name string) (Function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.uintptr_t
	err := check("cuModuleGetFunction("+name+")", C.s_moduleGetFunction(&f, C.uintptr_t(m), cs))
	return Function(f), err
}

func (cgoDriver) launchKernel(f Function, grid, block [3]uint32, shmem uint32, s Stream, args []byte, offs []int32) error {
	var bp *C.char
	var op *C.int
	if len(offs) > 0 {
		bp = (*C.char)(unsafe.Pointer(&args[0]))
		op = (*C.int)(unsafe.Pointer(&offs[0]))
	}
	return check("cuLaunchKernel", C.s_launch(C.uintptr_t(f), C.unsigned(grid[0]), C.unsigned(grid[1]), C.unsigned(grid[2]),
		C.unsigned(block[0]), C.unsigned(block[1]), C.unsigned(block[2]), C.unsigned(shmem), C.uintptr_t(s), bp, op, C.int(len(offs))))
}

func (cgoDriver) streamBeginCapture(s Stream, mode CaptureMode) error {
	return check("cuStreamBeginCapture_v2", C.s_beginCapture(C.uintptr_t(s), C.int(mode)))
}

func (cgoDriver) streamEndCapture(s Stream) (Graph, error) {
	var g C.uintptr_t
	err := check("cuStreamEndCapture", C.s_endCapture(C.uintptr_t(s), &g))
	return Graph(g), err
}

// streamIsCapturing: CU_STREAM_CAPTURE_STATUS_NONE is 0; ACTIVE (1) and INVALIDATED (2, a
// capture that failed and has not ended yet) are both a capture in progress.
func (cgoDriver) streamIsCapturing(s Stream) (bool, error) {
	var st C.int
	err := check("cuStreamIsCapturing", C.s_isCapturing(C.uintptr_t(s), &st))
	return st != 0, err
}

func (cgoDriver) graphInstantiate(g Graph) (GraphExec, error) {
	var e C.uintptr_t
	err := check("cuGraphInstantiateWithFlags", C.s_graphInstantiate(&e, C.uintptr_t(g)))
	return GraphExec(e), err
}

func (cgoDriver) graphLaunch(e GraphExec, s Stream) error {
	return check("cuGraphLaunch", C.s_graphLaunch(C.uintptr_t(e), C.uintptr_t(s)))
}

func (cgoDriver) graphDestroy(g Graph) error {
	return check("cuGraphDestroy", C.s_graphDestroy(C.uintptr_t(g)))
}

func (cgoDriver) graphExecDestroy(e GraphExec) error {
	return check("cuGraphExecDestroy", C.s_graphExecDestroy(C.uintptr_t(e)))
}

func (cgoDriver) exchangeCaptureMode(mode CaptureMode) (CaptureMode, error) {
	m := C.int(mode)
	err := check("cuThreadExchangeStreamCaptureMode", C.s_exchangeCaptureMode(&m))
	return CaptureMode(m), err
}
