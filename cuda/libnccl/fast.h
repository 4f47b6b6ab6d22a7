// Shared by api.go's preamble and fast.c: NCCL's C types as the ABI sees them (NCCL 2.28.9
// nccl.h: communicator = opaque pointer, unique id = 128 bytes, enums = int) and the handle that
// an ncclComm_t points to.
#ifndef SIMCCL_FAST_H
#define SIMCCL_FAST_H
#include <stddef.h>
#include <stdint.h>
typedef int ncclResult_t;
typedef void *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef void *cudaStream_t;
typedef void *ncclConfigPtr;

// simccl_handle is what an ncclComm_t points to: the key of the Go communicator, and what the
// C-side one-rank path needs (fast.c). fast is set by Go for a one-rank communicator in this
// process whose calls that C path may enqueue itself, and cleared once the communicator fails, is
// destroyed or aborted.
typedef struct {
	volatile int fast;
	int emulated;       // the emulated driver: the copy goes through Go (tests of the C logic)
	uintptr_t ctx;      // CUcontext
	uintptr_t copy;     // CUfunction simccl_copy
	unsigned max_grid;  // the copy kernel's grid cap
	size_t kernel_max;  // larger copies are cuMemcpyDtoDAsync
} simccl_handle;

// simccl_fast_driver resolves the driver entry points the C path calls (libcuda.so.1, already
// loaded by package cuda); 0 when one is missing.
int simccl_fast_driver(void);


// The C entry points of fast.c (also called by fastcalls.go, for the tests).
ncclResult_t ncclAllReduce(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclAllGather(const void *, void *, size_t, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclReduceScatter(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclSend(const void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclRecv(void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
#endif
