package main

/*
#include "fast.h"
static ncclResult_t c_allreduce(uintptr_t s, uintptr_t r, size_t n, int dt, int op, ncclComm_t h) { return ncclAllReduce((const void *)s, (void *)r, n, dt, op, h, 0); }
static ncclResult_t c_allgather(uintptr_t s, uintptr_t r, size_t n, int dt, ncclComm_t h) { return ncclAllGather((const void *)s, (void *)r, n, dt, h, 0); }
static ncclResult_t c_reducescatter(uintptr_t s, uintptr_t r, size_t n, int dt, int op, ncclComm_t h) { return ncclReduceScatter((const void *)s, (void *)r, n, dt, op, h, 0); }
static ncclResult_t c_send(uintptr_t s, size_t n, int dt, int peer, ncclComm_t h) { return ncclSend((const void *)s, n, dt, peer, h, 0); }
static ncclResult_t c_recv(uintptr_t r, size_t n, int dt, int peer, ncclComm_t h) { return ncclRecv((void *)r, n, dt, peer, h, 0); }
*/
import "C"

import (
	"unsafe"

	"github.com/simccl/simccl/cuda"
)

// Calls of fast.c's C entry points from Go, for the tests (fast_test.go): the C path and its
// groups, with data checked on the emulated driver.

func cAllReduce(send, recv cuda.DevPtr, count, dt, op int, h C.ncclComm_t) result {
	return result(C.c_allreduce(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(op), h))
}

func cAllGather(send, recv cuda.DevPtr, count, dt int, h C.ncclComm_t) result {
	return result(C.c_allgather(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), h))
}

func cReduceScatter(send, recv cuda.DevPtr, count, dt, op int, h C.ncclComm_t) result {
	return result(C.c_reducescatter(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(op), h))
}

func cSend(send cuda.DevPtr, count, dt, peer int, h C.ncclComm_t) result {
	return result(C.c_send(C.uintptr_t(send), C.size_t(count), C.int(dt), C.int(peer), h))
}

func cRecv(recv cuda.DevPtr, count, dt, peer int, h C.ncclComm_t) result {
	return result(C.c_recv(C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(peer), h))
}

// cComm is an ncclComm_t, for the tests (no cgo in _test.go files).
type cComm = C.ncclComm_t

func cGroupStart() result { return result(C.ncclGroupStart()) }
func cGroupEnd() result   { return result(C.ncclGroupEnd()) }

// fastOn reports whether fast.c takes h's one-rank calls.
func fastOn(h C.ncclComm_t) bool { return (*C.simccl_handle)(unsafe.Pointer(h)).fast != 0 }
