package main

/*
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
// Our own declarations of NCCL's C types and the handle an ncclComm_t points to (fast.h).
#include "fast.h"
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"runtime/cgo"
	"slices"
	"sync"
	"unsafe"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
	"github.com/simccl/simccl/cuda/engine"
	"github.com/simccl/simccl/realnet"
)

func main() {}

// Handles: an ncclComm_t is a small C allocation of ours (never dereferenced by the caller), the
// key of the communicator in this table.
var handles = struct {
	sync.RWMutex
	m map[uintptr]*comm
}{m: map[uintptr]*comm{}}

func newHandle(c *comm) C.ncclComm_t {
	profileStart()
	h := (*C.simccl_handle)(C.calloc(1, C.size_t(unsafe.Sizeof(C.simccl_handle{}))))
	handles.Lock()
	handles.m[uintptr(unsafe.Pointer(h))] = c
	handles.Unlock()
	enableFast(h, c)
	return C.ncclComm_t(unsafe.Pointer(h))
}

// fastDriver: fast.c found the driver entry points it calls (once per process).
var fastDriver = sync.OnceValue(func() bool { return C.simccl_fast_driver() != 0 })

// enableFast lets fast.c enqueue the one-rank calls of c itself (engine.Comm.OneRank) unless
// SIMCCL_NCCL_FAST=0. On the emulated driver fast.c's copies come back to Go (goOneRankCopy), so
// that the tests run its group logic.
func enableFast(h *C.simccl_handle, c *comm) {
	if os.Getenv("SIMCCL_NCCL_FAST") == "0" {
		return
	}
	ctx, f, grid, kmax, ok := c.e.OneRank()
	if !ok {
		return
	}
	emu := cuda.Emulated()
	if !emu && !fastDriver() {
		return
	}
	h.ctx, h.copy, h.max_grid, h.kernel_max = C.uintptr_t(ctx), C.uintptr_t(f), C.unsigned(grid), C.size_t(max(kmax, 0))
	if emu {
		h.emulated = 1
	}
	h.fast = 1
}

// noFast takes the communicator behind h off fast.c's path (failed, destroyed or aborted).
func noFast(h C.ncclComm_t) {
	if h != nil {
		(*C.simccl_handle)(unsafe.Pointer(h)).fast = 0
	}
}

func get(h C.ncclComm_t) *comm {
	handles.RLock()
	defer handles.RUnlock()
	return handles.m[uintptr(h)]
}

func drop(h C.ncclComm_t) {
	noFast(h)
	handles.Lock()
	delete(handles.m, uintptr(h))
	handles.Unlock()
	C.free(unsafe.Pointer(h))
	profileStop()
}

func ret(err error) C.ncclResult_t { return C.ncclResult_t(fail(err)) }

func bad() C.ncclResult_t { return C.ncclResult_t(ncclInvalidArgument) }

func toID(id *C.ncclUniqueId) realnet.UniqueID {
	var u realnet.UniqueID
	copy(u[:], unsafe.Slice((*byte)(unsafe.Pointer(id)), realnet.UniqueIDBytes))
	return u
}

//export ncclGetVersion
func ncclGetVersion(version *C.int) C.ncclResult_t {
	if version == nil {
		return bad()
	}
	*version = versionCode
	return 0
}

//export ncclGetUniqueId
func ncclGetUniqueId(id *C.ncclUniqueId) C.ncclResult_t {
	if id == nil {
		return bad()
	}
	u, err := getUniqueID()
	if err != nil {
		return ret(err)
	}
	C.memcpy(unsafe.Pointer(id), unsafe.Pointer(&u[0]), C.size_t(len(u)))
	return 0
}

func commInit(out *C.ncclComm_t, n C.int, id *C.ncclUniqueId, rank C.int) C.ncclResult_t {
	if out == nil || id == nil {
		return bad()
	}
	*out = nil
	c, err := initRank(int(n), toID(id), int(rank), currentOrdinal())
	if err != nil {
		return ret(err)
	}
	*out = newHandle(c)
	return 0
}

//export ncclCommInitRank
func ncclCommInitRank(comm *C.ncclComm_t, nranks C.int, commId C.ncclUniqueId, rank C.int) C.ncclResult_t {
	return commInit(comm, nranks, &commId, rank)
}

//export ncclCommInitRankConfig
func ncclCommInitRankConfig(comm *C.ncclComm_t, nranks C.int, commId C.ncclUniqueId, rank C.int, config C.ncclConfigPtr) C.ncclResult_t {
	return commInit(comm, nranks, &commId, rank)
}

//export ncclCommInitRankScalable
func ncclCommInitRankScalable(comm *C.ncclComm_t, nranks C.int, myrank C.int, nId C.int, commIds *C.ncclUniqueId, config C.ncclConfigPtr) C.ncclResult_t {
	if nId < 1 {
		return bad()
	}
	return commInit(comm, nranks, commIds, myrank)
}

//export ncclCommInitAll
func ncclCommInitAll(comms *C.ncclComm_t, ndev C.int, devlist *C.int) C.ncclResult_t {
	if comms == nil || ndev < 1 {
		return bad()
	}
	ords := make([]int, ndev)
	if devlist != nil {
		for i, d := range unsafe.Slice(devlist, int(ndev)) {
			ords[i] = int(d)
		}
	} else {
		for i := range ords {
			ords[i] = i
		}
	}
	cs, err := initAll(ords)
	if err != nil {
		return ret(err)
	}
	out := unsafe.Slice(comms, int(ndev))
	for i, c := range cs {
		out[i] = newHandle(c)
	}
	return 0
}

//export ncclCommSplit
func ncclCommSplit(comm C.ncclComm_t, color, key C.int, newcomm *C.ncclComm_t, config C.ncclConfigPtr) C.ncclResult_t {
	c := get(comm)
	if c == nil || newcomm == nil {
		return bad()
	}
	*newcomm = nil
	nc, err := c.split(int(color), int(key))
	if err != nil {
		return ret(err)
	}
	if nc != nil {
		*newcomm = newHandle(nc)
	}
	return 0
}

//export ncclCommFinalize
func ncclCommFinalize(comm C.ncclComm_t) C.ncclResult_t {
	if get(comm) == nil {
		return bad()
	}
	return 0
}

//export ncclCommDestroy
func ncclCommDestroy(comm C.ncclComm_t) C.ncclResult_t {
	c := get(comm)
	if c == nil {
		return bad()
	}
	err := c.destroy()
	drop(comm)
	return ret(err)
}

//export ncclCommAbort
func ncclCommAbort(comm C.ncclComm_t) C.ncclResult_t {
	c := get(comm)
	if c == nil {
		return bad()
	}
	err := c.abort()
	drop(comm)
	return ret(err)
}

//export ncclCommGetAsyncError
func ncclCommGetAsyncError(comm C.ncclComm_t, asyncError *C.ncclResult_t) C.ncclResult_t {
	c := get(comm)
	if c == nil || asyncError == nil {
		return bad()
	}
	err := c.e.GetAsyncError()
	if err != nil {
		*asyncError = ret(err)
	} else {
		*asyncError = 0
	}
	return 0
}

//export ncclCommCount
func ncclCommCount(comm C.ncclComm_t, count *C.int) C.ncclResult_t {
	c := get(comm)
	if c == nil || count == nil {
		return bad()
	}
	*count = C.int(c.n)
	return 0
}

//export ncclCommCuDevice
func ncclCommCuDevice(comm C.ncclComm_t, device *C.int) C.ncclResult_t {
	c := get(comm)
	if c == nil || device == nil {
		return bad()
	}
	*device = C.int(c.ordinal)
	return 0
}

//export ncclCommUserRank
func ncclCommUserRank(comm C.ncclComm_t, rank *C.int) C.ncclResult_t {
	c := get(comm)
	if c == nil || rank == nil {
		return bad()
	}
	*rank = C.int(c.rank)
	return 0
}

func ptr(p unsafe.Pointer) cuda.DevPtr { return cuda.DevPtr(uintptr(p)) }

func stream(s C.cudaStream_t) cuda.Stream { return cuda.Stream(uintptr(s)) }

// retc is ret for a call on communicator c (handle h): a failed communicator leaves fast.c's
// path (its calls then come here and report the error).
func retc(h C.ncclComm_t, c *comm, err error) C.ncclResult_t {
	if err != nil && c.e.GetAsyncError() != nil {
		noFast(h)
	}
	return ret(err)
}

//export goAllReduce
func goAllReduce(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype, op C.int, comm C.ncclComm_t, s C.cudaStream_t) C.ncclResult_t {
	c := get(comm)
	if c == nil {
		return bad()
	}
	return retc(comm, c, c.e.AllReduce(ptr(sendbuff), ptr(recvbuff), int(count), coll.DataType(datatype), coll.RedOp(op), stream(s)))
}

//export goBroadcast
func goBroadcast(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype, root C.int, comm C.ncclComm_t, s C.cudaStream_t) C.ncclResult_t {
	c := get(comm)
	if c == nil {
		return bad()
	}
	return retc(comm, c, c.e.Broadcast(ptr(sendbuff), ptr(recvbuff), int(count), coll.DataType(datatype), int(root), stream(s)))
}

//export goReduce
func goReduce(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype, op, root C.int, comm C.ncclComm_t, s C.cudaStream_t) C.ncclResult_t {
	c := get(comm)
	if c == nil {
		return bad()
	}
	return retc(comm, c, c.e.Reduce(ptr(sendbuff), ptr(recvbuff), int(count), coll.DataType(datatype), coll.RedOp(op), int(root), stream(s)))
}

//export goAllGather
func goAllGather(sendbuff, recvbuff unsafe.Pointer, sendcount C.size_t, datatype C.int, comm C.ncclComm_t, s C.cudaStream_t) C.ncclResult_t {
	c := get(comm)
	if c == nil {
		return bad()
	}
	return retc(comm, c, c.e.AllGather(ptr(sendbuff), ptr(recvbuff), int(sendcount), coll.DataType(datatype), stream(s)))
}

//export goReduceScatter
func goReduceScatter(sendbuff, recvbuff unsafe.Pointer, recvcount C.size_t, datatype, op C.int, comm C.ncclComm_t, s C.cudaStream_t) C.ncclResult_t {
	c := get(comm)
	if c == nil {
		return bad()
	}
	return retc(comm, c, c.e.ReduceScatter(ptr(sendbuff), ptr(recvbuff), int(recvcount), coll.DataType(datatype), coll.RedOp(op), stream(s)))
}

//export goAlltoAll
func goAlltoAll(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype C.int, comm C.ncclComm_t, s C.cudaStream_t) C.ncclResult_t {
	c := get(comm)
	if c == nil {
		return bad()
	}
	return retc(comm, c, c.e.AllToAll(ptr(sendbuff), ptr(recvbuff), int(count), coll.DataType(datatype), stream(s)))
}

//export goSend
func goSend(sendbuff unsafe.Pointer, count C.size_t, datatype, peer C.int, comm C.ncclComm_t, s C.cudaStream_t) C.ncclResult_t {
	c := get(comm)
	if c == nil {
		return bad()
	}
	return retc(comm, c, c.e.Send(ptr(sendbuff), int(count), coll.DataType(datatype), int(peer), stream(s)))
}

//export goRecv
func goRecv(recvbuff unsafe.Pointer, count C.size_t, datatype, peer C.int, comm C.ncclComm_t, s C.cudaStream_t) C.ncclResult_t {
	c := get(comm)
	if c == nil {
		return bad()
	}
	return retc(comm, c, c.e.Recv(ptr(recvbuff), int(count), coll.DataType(datatype), int(peer), stream(s)))
}

// threadGroup is one C thread's group once it went to Go (fast.c's forward): the communicators
// its calls were made on, each holding them in its own group (engine.Comm.GroupStart), ended
// together by the thread's outermost ncclGroupEnd (engine.GroupEndComms). NCCL's groups are per
// thread. Go's process-wide group (engine.GroupStart) would merge the groups of threads that
// drive one rank each, and the first thread's ncclGroupEnd then only closed an inner level,
// returning at once with its calls not launched: api_check.c went on to free the buffers and
// destroy the communicator those calls use, and the other thread's ncclGroupEnd launched them
// later (a panic in peerEvent on the destroyed rank's events, "device closed", or an LL flag that
// never came, under load). A communicator is used by one thread at a time (NCCL's rule), so its
// own group is the thread's.
type threadGroup struct {
	comms []*engine.Comm
}

// goGroupStart makes the calling thread's group in Go; fast.c keeps the handle (per thread) and
// passes it to goGroupJoin and goGroupEnd.
//
//export goGroupStart
func goGroupStart() C.uintptr_t {
	return C.uintptr_t(cgo.NewHandle(&threadGroup{}))
}

// goGroupJoin opens comm's group for the thread's group grp, at comm's first call in it: the
// call that follows is held there. An unknown comm is left to the call, which reports it.
//
//export goGroupJoin
func goGroupJoin(grp C.uintptr_t, comm C.ncclComm_t) {
	c := get(comm)
	if c == nil {
		return
	}
	g := cgo.Handle(grp).Value().(*threadGroup)
	if !slices.Contains(g.comms, c.e) {
		c.e.GroupStart()
		g.comms = append(g.comms, c.e)
	}
}

// goGroupEnd ends the thread's group grp: it launches the calls of every communicator the
// thread called in it, and no other thread's.
//
//export goGroupEnd
func goGroupEnd(grp C.uintptr_t) C.ncclResult_t {
	h := cgo.Handle(grp)
	g := h.Value().(*threadGroup)
	h.Delete()
	return ret(engine.GroupEndComms(g.comms))
}

// goGroupMisuse is fast.c's ncclGroupEnd without an ncclGroupStart on the calling thread: the
// error the engine gives for it, leaving any other thread's group alone.
//
//export goGroupMisuse
func goGroupMisuse() C.ncclResult_t {
	return ret(fmt.Errorf("%w: ncclGroupEnd without ncclGroupStart on this thread", engine.ErrInvalidArgument))
}

// goOneRankCopy is fast.c's copy on the emulated driver: the engine's one-rank path (a copy of
// n bytes on the caller's stream).
//
//export goOneRankCopy
func goOneRankCopy(comm C.ncclComm_t, sendbuff, recvbuff unsafe.Pointer, n C.size_t, s C.cudaStream_t) C.ncclResult_t {
	c := get(comm)
	if c == nil {
		return bad()
	}
	return retc(comm, c, c.e.AllGather(ptr(sendbuff), ptr(recvbuff), int(n), coll.Uint8, stream(s)))
}

// goOneRankFailed records the failure of fast.c's launch (kernel) or copy (CUresult code) as the
// communicator's error.
//
//export goOneRankFailed
func goOneRankFailed(comm C.ncclComm_t, code C.int, kernel C.int) C.ncclResult_t {
	call := "cuMemcpyDtoDAsync_v2"
	if kernel != 0 {
		call = "cuLaunchKernel"
	}
	err := &cuda.Error{Call: call, Code: cuda.Result(code), Text: "one-rank copy enqueued by libnccl's C path"}
	noFast(comm)
	if c := get(comm); c != nil {
		c.e.Fail(err)
	}
	return ret(err)
}

// ncclScalarResidence_t (NCCL 2.28): the scalar is in device memory (0) or host memory (1).
const scalarHostImmediate = 1

//export ncclRedOpCreatePreMulSum
func ncclRedOpCreatePreMulSum(op *C.int, scalar unsafe.Pointer, datatype, residence C.int, comm C.ncclComm_t) C.ncclResult_t {
	c := get(comm)
	if c == nil || op == nil || scalar == nil {
		return bad()
	}
	if residence != scalarHostImmediate {
		return ret(errUsageOf("ncclRedOpCreatePreMulSum with a device-resident scalar (ncclScalarDevice) is not implemented"))
	}
	var v float64
	switch coll.DataType(datatype) {
	case coll.Float32:
		v = float64(*(*float32)(scalar))
	case coll.Float64:
		v = *(*float64)(scalar)
	case coll.Float16:
		v = halfToFloat(*(*uint16)(scalar))
	case coll.Bfloat16:
		v = float64(math.Float32frombits(uint32(*(*uint16)(scalar)) << 16))
	case coll.Int8:
		v = float64(*(*int8)(scalar))
	case coll.Uint8:
		v = float64(*(*uint8)(scalar))
	case coll.Int32:
		v = float64(*(*int32)(scalar))
	case coll.Uint32:
		v = float64(*(*uint32)(scalar))
	case coll.Int64:
		v = float64(*(*int64)(scalar))
	case coll.Uint64:
		v = float64(*(*uint64)(scalar))
	default:
		return bad()
	}
	*op = C.int(c.e.RedOpCreatePreMulSum(v))
	return 0
}

//export ncclRedOpDestroy
func ncclRedOpDestroy(op C.int, comm C.ncclComm_t) C.ncclResult_t {
	if get(comm) == nil || op < C.int(coll.PreMulSum) {
		return bad()
	}
	return 0 // the engine keeps its scalars; a destroyed op is not reused by the caller
}

//export ncclMemAlloc
func ncclMemAlloc(p *unsafe.Pointer, size C.size_t) C.ncclResult_t {
	if p == nil {
		return bad()
	}
	d, err := memAlloc(int(size))
	if err != nil {
		return ret(err)
	}
	*(*uintptr)(unsafe.Pointer(p)) = uintptr(d) // a device address, never dereferenced here
	return 0
}

//export ncclMemFree
func ncclMemFree(p unsafe.Pointer) C.ncclResult_t { return ret(memFree(ptr(p))) }

//export ncclCommRegister
func ncclCommRegister(comm C.ncclComm_t, buff unsafe.Pointer, size C.size_t, handle *unsafe.Pointer) C.ncclResult_t {
	if get(comm) == nil || handle == nil {
		return bad()
	}
	*handle = buff // registration is an optimisation the engine does not need
	return 0
}

//export ncclCommDeregister
func ncclCommDeregister(comm C.ncclComm_t, handle unsafe.Pointer) C.ncclResult_t {
	if get(comm) == nil {
		return bad()
	}
	return 0
}

// errorStrings are ncclGetErrorString's texts, by ncclResult_t.
var errorStrings = []string{"no error", "unhandled cuda error (run with SIMCCL_NCCL_DEBUG=1 for details)", "unhandled system error", "internal error",
	"invalid argument", "invalid usage", "remote process exited or there was a network error", "NCCL operation in progress", "timeout"}

var cStrings = struct {
	sync.Mutex
	errs []*C.char
	last *C.char
}{}

//export ncclGetErrorString
func ncclGetErrorString(result C.ncclResult_t) *C.char {
	cStrings.Lock()
	defer cStrings.Unlock()
	if cStrings.errs == nil {
		for _, s := range append(errorStrings, "unknown result code") {
			cStrings.errs = append(cStrings.errs, C.CString(s))
		}
	}
	if result < 0 || int(result) >= len(errorStrings) {
		return cStrings.errs[len(errorStrings)]
	}
	return cStrings.errs[result]
}

//export ncclGetLastError
func ncclGetLastError(comm C.ncclComm_t) *C.char {
	cStrings.Lock()
	defer cStrings.Unlock()
	if cStrings.last != nil {
		C.free(unsafe.Pointer(cStrings.last))
	}
	cStrings.last = C.CString(lastError())
	return cStrings.last
}

// Stubs: NCCL 2.28 functions PyTorch imports that this library does not implement. They fail
// with ncclInvalidUsage whatever their arguments (an int return ignoring its arguments is safe to
// call with any on the C ABI), so that a program importing them loads and never hands our
// communicator to another library.

//export ncclCommShrink
func ncclCommShrink() C.ncclResult_t { return stub("ncclCommShrink") }

//export ncclCommWindowRegister
func ncclCommWindowRegister() C.ncclResult_t { return stub("ncclCommWindowRegister") }

//export ncclCommWindowDeregister
func ncclCommWindowDeregister() C.ncclResult_t { return stub("ncclCommWindowDeregister") }

//export ncclGroupSimulateEnd
func ncclGroupSimulateEnd() C.ncclResult_t { return stub("ncclGroupSimulateEnd") }

//export ncclCommSuspend
func ncclCommSuspend() C.ncclResult_t { return stub("ncclCommSuspend") }

//export ncclCommResume
func ncclCommResume() C.ncclResult_t { return stub("ncclCommResume") }

//export ncclCommGetUniqueId
func ncclCommGetUniqueId() C.ncclResult_t { return stub("ncclCommGetUniqueId") }

//export ncclCommInitRankConfigSplit
func ncclCommInitRankConfigSplit() C.ncclResult_t { return stub("ncclCommInitRankConfigSplit") }

//export ncclDevCommCreate
func ncclDevCommCreate() C.ncclResult_t { return stub("ncclDevCommCreate") }

//export ncclDevCommDestroy
func ncclDevCommDestroy() C.ncclResult_t { return stub("ncclDevCommDestroy") }

//export ncclCommQueryProperties
func ncclCommQueryProperties() C.ncclResult_t { return stub("ncclCommQueryProperties") }

//export ncclAllGatherV
func ncclAllGatherV() C.ncclResult_t { return stub("ncclAllGatherV") }

//export ncclGather
func ncclGather() C.ncclResult_t { return stub("ncclGather") }

//export ncclScatter
func ncclScatter() C.ncclResult_t { return stub("ncclScatter") }

func stub(name string) C.ncclResult_t {
	return ret(errUsageOf(name + " is not implemented by simccl's libnccl"))
}
