package main

/*
#include "ncclshim.h"
*/
import "C"

import (
	"math/rand/v2"
	"sync/atomic"
	"unsafe"

	"github.com/simccl/simccl/intercept/trace"
)

// realOK is set once the real library is loaded (record mode's fast path skips the lock).
var realOK atomic.Bool

// forward reports whether calls go to the real library, loading it on first use. In virtual
// mode it is false; in record mode a library that cannot be loaded makes every call fail.
func forward() (fwd, ok bool) {
	if st.virtual {
		return false, true
	}
	if realOK.Load() {
		return true, true
	}
	st.mu.Lock()
	ok = ensureReal()
	st.mu.Unlock()
	if ok {
		realOK.Store(true)
	}
	return true, ok
}

func okResult(r C.ncclResult_t) bool { return r == 0 || r == 7 } // ncclSuccess, ncclInProgress

//export ncclGetVersion
func ncclGetVersion(version *C.int) C.ncclResult_t {
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	if fwd {
		return C.r_GetVersion(version)
	}
	if version == nil {
		return ncclInvalidArgument
	}
	*version = ncclVersionCode
	return ncclSuccess
}

//export ncclGetUniqueId
func ncclGetUniqueId(id *C.ncclUniqueId) C.ncclResult_t {
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	if fwd {
		return C.r_GetUniqueId(id)
	}
	if id == nil {
		return ncclInvalidArgument
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(id)), 128)
	for i := 0; i < 128; i += 8 {
		v := rand.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return ncclSuccess
}

// newVirtual allocates the C object that stands for a virtual communicator.
func newVirtual() C.ncclComm_t { return C.ncclComm_t(C.malloc(16)) }

func registerInit(c C.ncclComm_t, id string, rank, nranks int, t0, dur int64) {
	st.mu.Lock()
	ci := &commInfo{id: id, rank: rank, nranks: nranks, dev: rank % st.gpus}
	if st.virtual {
		ci.handle = unsafe.Pointer(c)
	}
	st.comms[uintptr(c)] = ci
	emitComm(ci, trace.OpCommInit, "", 0, t0, dur)
	st.mu.Unlock()
}

func initRank(comm *C.ncclComm_t, nranks C.int, id *C.ncclUniqueId, rank C.int, cfg C.ncclConfigPtr, withCfg bool) C.ncclResult_t {
	if comm == nil || nranks < 1 || rank < 0 || rank >= nranks {
		return ncclInvalidArgument
	}
	t0 := now()
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	var res C.ncclResult_t
	if fwd {
		if withCfg {
			res = C.r_CommInitRankConfig(comm, nranks, id, rank, cfg)
		} else {
			res = C.r_CommInitRank(comm, nranks, id, rank)
		}
		if !okResult(res) || *comm == nil {
			return res
		}
	} else {
		*comm = newVirtual()
	}
	registerInit(*comm, idOf(id), int(rank), int(nranks), t0, now()-t0)
	return res
}

//export ncclCommInitRank
func ncclCommInitRank(comm *C.ncclComm_t, nranks C.int, commId C.ncclUniqueId, rank C.int) C.ncclResult_t {
	return initRank(comm, nranks, &commId, rank, nil, false)
}

//export ncclCommInitRankConfig
func ncclCommInitRankConfig(comm *C.ncclComm_t, nranks C.int, commId C.ncclUniqueId, rank C.int, config C.ncclConfigPtr) C.ncclResult_t {
	return initRank(comm, nranks, &commId, rank, config, true)
}

//export ncclCommInitAll
func ncclCommInitAll(comms *C.ncclComm_t, ndev C.int, devlist *C.int) C.ncclResult_t {
	if comms == nil || ndev < 1 {
		return ncclInvalidArgument
	}
	t0 := now()
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	cs := unsafe.Slice(comms, int(ndev))
	var res C.ncclResult_t
	if fwd {
		res = C.r_CommInitAll(comms, ndev, devlist)
		if !okResult(res) {
			return res
		}
	} else {
		for i := range cs {
			cs[i] = newVirtual()
		}
	}
	dur := now() - t0
	st.mu.Lock()
	st.anon++
	id := "all" + itoa(st.pid) + "." + itoa(st.anon)
	st.mu.Unlock()
	for i, c := range cs {
		registerInit(c, id, i, int(ndev), t0, dur)
	}
	return res
}

//export ncclCommSplit
func ncclCommSplit(comm C.ncclComm_t, color, key C.int, newcomm *C.ncclComm_t, config C.ncclConfigPtr) C.ncclResult_t {
	if newcomm == nil {
		return ncclInvalidArgument
	}
	t0 := now()
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	var res C.ncclResult_t
	if fwd {
		res = C.r_CommSplit(comm, color, key, newcomm, config)
		if !okResult(res) {
			return res
		}
	} else if color < 0 { // NCCL_SPLIT_NOCOLOR (-1): no new communicator
		*newcomm = nil
	} else {
		*newcomm = newVirtual()
	}
	dur := now() - t0
	st.mu.Lock()
	defer st.mu.Unlock()
	parent := lookup(comm)
	k := parent.splits
	parent.splits++
	if *newcomm == nil {
		return res
	}
	// Virtual mode cannot know the other ranks' colours: the new communicator keeps the
	// parent's size and rank (intercept/README.md says so).
	ci := &commInfo{id: parent.id + "/s" + itoa(k) + "c" + itoa(int(color)), rank: parent.rank, nranks: parent.nranks, dev: parent.dev}
	if fwd {
		var n, r C.int
		if C.r_CommInt(C.F_CommCount, *newcomm, &n) == 0 {
			ci.nranks = int(n)
		}
		if C.r_CommInt(C.F_CommUserRank, *newcomm, &r) == 0 {
			ci.rank = int(r)
		}
	} else {
		ci.handle = unsafe.Pointer(*newcomm)
	}
	st.comms[uintptr(*newcomm)] = ci
	emitComm(ci, trace.OpCommSplit, parent.id, int(color), t0, dur)
	return res
}

// endComm records Finalize/Destroy/Abort and forwards it (f is the real function's index).
func endComm(comm C.ncclComm_t, f C.int, op string, drop bool) C.ncclResult_t {
	t0 := now()
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	var res C.ncclResult_t
	st.mu.Lock()
	ci := lookup(comm)
	st.mu.Unlock()
	if fwd {
		res = C.r_Comm1(f, comm)
	}
	st.mu.Lock()
	emitComm(ci, op, "", 0, t0, now()-t0)
	if drop {
		delete(st.comms, uintptr(comm))
		if ci.handle != nil {
			C.free(ci.handle)
		}
	}
	flushLocked()
	st.mu.Unlock()
	return res
}

//export ncclCommFinalize
func ncclCommFinalize(comm C.ncclComm_t) C.ncclResult_t {
	return endComm(comm, C.F_CommFinalize, trace.OpCommFinalize, false)
}

//export ncclCommDestroy
func ncclCommDestroy(comm C.ncclComm_t) C.ncclResult_t {
	return endComm(comm, C.F_CommDestroy, trace.OpCommDestroy, true)
}

//export ncclCommAbort
func ncclCommAbort(comm C.ncclComm_t) C.ncclResult_t {
	return endComm(comm, C.F_CommAbort, trace.OpCommDestroy, true)
}

// query answers the int-valued communicator queries.
func query(comm C.ncclComm_t, f C.int, v *C.int, pick func(*commInfo) int) C.ncclResult_t {
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	if fwd {
		return C.r_CommInt(f, comm, v)
	}
	if v == nil || comm == nil {
		return ncclInvalidArgument
	}
	st.mu.Lock()
	*v = C.int(pick(lookup(comm)))
	st.mu.Unlock()
	return ncclSuccess
}

//export ncclCommGetAsyncError
func ncclCommGetAsyncError(comm C.ncclComm_t, asyncError *C.ncclResult_t) C.ncclResult_t {
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	if fwd {
		return C.r_CommInt(C.F_CommGetAsyncError, comm, (*C.int)(unsafe.Pointer(asyncError)))
	}
	if asyncError == nil {
		return ncclInvalidArgument
	}
	*asyncError = ncclSuccess
	return ncclSuccess
}

//export ncclCommCount
func ncclCommCount(comm C.ncclComm_t, count *C.int) C.ncclResult_t {
	return query(comm, C.F_CommCount, count, func(c *commInfo) int { return c.nranks })
}

//export ncclCommCuDevice
func ncclCommCuDevice(comm C.ncclComm_t, device *C.int) C.ncclResult_t {
	return query(comm, C.F_CommCuDevice, device, func(c *commInfo) int { return c.dev })
}

//export ncclCommUserRank
func ncclCommUserRank(comm C.ncclComm_t, rank *C.int) C.ncclResult_t {
	return query(comm, C.F_CommUserRank, rank, func(c *commInfo) int { return c.rank })
}

// record appends the record of one data call that returned res.
// recorded forwards one collective or point-to-point call to the real library (real; not in
// virtual mode) and records it.
func recorded(comm C.ncclComm_t, op string, count C.size_t, dt, redop, root int, stream C.cudaStream_t, real func() C.ncclResult_t) C.ncclResult_t {
	t0 := now()
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	var res C.ncclResult_t
	if fwd {
		res = real()
	}
	record(comm, op, count, dt, redop, root, stream, t0, fwd, res)
	return res
}

func record(comm C.ncclComm_t, op string, count C.size_t, dt, redop, root int, stream C.cudaStream_t, t0 int64, fwd bool, res C.ncclResult_t) {
	if !okResult(res) {
		return
	}
	var dur int64
	if fwd {
		dur = now() - t0
	}
	st.mu.Lock()
	emit(lookup(comm), op, int64(count), dt, redop, root, unsafe.Pointer(stream), t0, dur)
	st.mu.Unlock()
}

//export ncclAllReduce
func ncclAllReduce(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype, op C.int, comm C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return recorded(comm, trace.OpAllReduce, count, int(datatype), int(op), -1, stream, func() C.ncclResult_t { return C.r_AllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream) })
}

//export ncclBroadcast
func ncclBroadcast(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype, root C.int, comm C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	t0 := now()
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	var res C.ncclResult_t
	if fwd {
		res = C.r_Broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream)
		if C.simccl_nested() != 0 {
			return res // NCCL's ncclBcast calling ncclBroadcast: ncclBcast records the call
		}
	}
	record(comm, trace.OpBroadcast, count, int(datatype), -1, int(root), stream, t0, fwd, res)
	return res
}

//export ncclReduce
func ncclReduce(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype, op, root C.int, comm C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return recorded(comm, trace.OpReduce, count, int(datatype), int(op), int(root), stream, func() C.ncclResult_t { return C.r_Reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream) })
}

//export ncclAllGather
func ncclAllGather(sendbuff, recvbuff unsafe.Pointer, sendcount C.size_t, datatype C.int, comm C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return recorded(comm, trace.OpAllGather, sendcount, int(datatype), -1, -1, stream, func() C.ncclResult_t { return C.r_AllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream) })
}

//export ncclReduceScatter
func ncclReduceScatter(sendbuff, recvbuff unsafe.Pointer, recvcount C.size_t, datatype, op C.int, comm C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return recorded(comm, trace.OpReduceScatter, recvcount, int(datatype), int(op), -1, stream, func() C.ncclResult_t {
		return C.r_ReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream)
	})
}

//export ncclSend
func ncclSend(sendbuff unsafe.Pointer, count C.size_t, datatype, peer C.int, comm C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return recorded(comm, trace.OpSend, count, int(datatype), -1, int(peer), stream, func() C.ncclResult_t { return C.r_P2P(C.F_Send, sendbuff, count, datatype, peer, comm, stream) })
}

//export ncclRecv
func ncclRecv(recvbuff unsafe.Pointer, count C.size_t, datatype, peer C.int, comm C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return recorded(comm, trace.OpRecv, count, int(datatype), -1, int(peer), stream, func() C.ncclResult_t { return C.r_P2P(C.F_Recv, recvbuff, count, datatype, peer, comm, stream) })
}

// ncclGroupStart/End keep the nesting depth NCCL keeps (group.cc). NCCL's depth is per
// thread; the shim's is per process, which is what programs that issue NCCL calls from one
// thread (PyTorch's ProcessGroupNCCL) see.
//
//export ncclGroupStart
func ncclGroupStart() C.ncclResult_t {
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	var res C.ncclResult_t
	if fwd {
		res = C.r_Group(C.F_GroupStart)
	}
	if res == 0 {
		st.mu.Lock()
		st.depth++
		if st.depth == 1 {
			st.gid++
		}
		st.mu.Unlock()
	}
	return res
}

//export ncclGroupEnd
func ncclGroupEnd() C.ncclResult_t {
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	var res C.ncclResult_t
	if fwd {
		res = C.r_Group(C.F_GroupEnd)
	}
	st.mu.Lock()
	if st.depth == 0 {
		st.mu.Unlock()
		if fwd {
			return res
		}
		return ncclInvalidUsage
	}
	st.depth--
	st.mu.Unlock()
	return res
}

// errorStrings are NCCL's ncclResult_t meanings (ncclGetErrorString, NCCL 2.28), for virtual mode.
var errorStrings = []string{"no error", "unhandled cuda error", "unhandled system error", "internal error",
	"invalid argument", "invalid usage", "remote process exited or there was a network error", "NCCL operation in progress", "timeout"}

var cErrorStrings []*C.char

//export ncclGetErrorString
func ncclGetErrorString(result C.ncclResult_t) *C.char {
	if fwd, ok := forward(); fwd && ok {
		return C.r_GetErrorString(result)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if cErrorStrings == nil {
		for _, s := range append(errorStrings, "unknown result code") {
			cErrorStrings = append(cErrorStrings, C.CString(s))
		}
	}
	if result < 0 || int(result) >= len(errorStrings) {
		return cErrorStrings[len(errorStrings)]
	}
	return cErrorStrings[result]
}

var emptyCString = C.CString("")

//export ncclGetLastError
func ncclGetLastError(comm C.ncclComm_t) *C.char {
	if fwd, ok := forward(); fwd && ok {
		return C.r_GetLastError(comm)
	}
	return emptyCString
}

func itoa(v int) string {
	if v < 0 {
		return "-" + itoa(-v)
	}
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}

//export ncclCommInitRankScalable
func ncclCommInitRankScalable(comm *C.ncclComm_t, nranks, myrank, nID C.int, commIds *C.ncclUniqueId, cfg C.ncclConfigPtr) C.ncclResult_t {
	if comm == nil || nranks < 1 || myrank < 0 || myrank >= nranks || nID < 1 || commIds == nil {
		return ncclInvalidArgument
	}
	t0 := now()
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	var res C.ncclResult_t
	if fwd {
		res = C.r_CommInitRankScalable(comm, nranks, myrank, nID, commIds, cfg)
		if !okResult(res) || *comm == nil {
			return res
		}
	} else {
		*comm = newVirtual()
	}
	// Every rank passes the same ids: the first names the communicator, as ncclCommInitRank's one.
	registerInit(*comm, idOf(commIds), int(myrank), int(nranks), t0, now()-t0)
	return res
}

// virtualOps numbers the reduction operations virtual communicators create: NCCL's user ops
// follow its built-in ones (ncclNumOps = 5), and the trace spells them all "premulsum".
var virtualOps atomic.Int32

//export ncclRedOpCreatePreMulSum
func ncclRedOpCreatePreMulSum(op *C.int, scalar unsafe.Pointer, datatype, residence C.int, comm C.ncclComm_t) C.ncclResult_t {
	if op == nil || comm == nil {
		return ncclInvalidArgument
	}
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	if fwd {
		return C.r_RedOpCreatePreMulSum(op, scalar, datatype, residence, comm)
	}
	*op = C.int(5 + virtualOps.Add(1) - 1)
	return ncclSuccess
}

//export ncclRedOpDestroy
func ncclRedOpDestroy(op C.int, comm C.ncclComm_t) C.ncclResult_t {
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	if fwd {
		return C.r_RedOpDestroy(op, comm)
	}
	if op < 5 || comm == nil {
		return ncclInvalidArgument
	}
	return ncclSuccess
}

// ncclMemAlloc and ncclMemFree allocate device memory through the real library; virtual mode has
// none to give (the program's own cudaMalloc still works there).
//
//export ncclMemAlloc
func ncclMemAlloc(ptr *unsafe.Pointer, size C.size_t) C.ncclResult_t {
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	if !fwd {
		return ncclInvalidUsage
	}
	return C.r_MemAlloc(ptr, size)
}

//export ncclMemFree
func ncclMemFree(ptr unsafe.Pointer) C.ncclResult_t {
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	if !fwd {
		return ncclInvalidUsage
	}
	return C.r_MemFree(ptr)
}

// ncclCommRegister and ncclCommDeregister register a buffer with the real communicator; a
// virtual one has nothing to register and hands the buffer back as the handle.
//
//export ncclCommRegister
func ncclCommRegister(comm C.ncclComm_t, buff unsafe.Pointer, size C.size_t, handle *unsafe.Pointer) C.ncclResult_t {
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	if fwd {
		return C.r_CommRegister(comm, buff, size, handle)
	}
	if comm == nil || handle == nil {
		return ncclInvalidArgument
	}
	*handle = buff
	return ncclSuccess
}

//export ncclCommDeregister
func ncclCommDeregister(comm C.ncclComm_t, handle unsafe.Pointer) C.ncclResult_t {
	fwd, ok := forward()
	if !ok {
		return ncclSystemError
	}
	if fwd {
		return C.r_CommDeregister(comm, handle)
	}
	if comm == nil {
		return ncclInvalidArgument
	}
	return ncclSuccess
}

// ncclBcast is NCCL's legacy in-place broadcast: recorded as a Broadcast.
//
//export ncclBcast
func ncclBcast(buff unsafe.Pointer, count C.size_t, datatype, root C.int, comm C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return recorded(comm, trace.OpBroadcast, count, int(datatype), -1, int(root), stream, func() C.ncclResult_t { return C.r_Bcast(buff, count, datatype, root, comm, stream) })
}

// ncclAlltoAll (NCCL 2.28): every rank sends count elements to every rank; recorded as an AllToAll
// of count elements per peer.
//
//export ncclAlltoAll
func ncclAlltoAll(sendbuff, recvbuff unsafe.Pointer, count C.size_t, datatype C.int, comm C.ncclComm_t, stream C.cudaStream_t) C.ncclResult_t {
	return recorded(comm, trace.OpAllToAll, count, int(datatype), -1, -1, stream, func() C.ncclResult_t { return C.r_AlltoAll(sendbuff, recvbuff, count, datatype, comm, stream) })
}
