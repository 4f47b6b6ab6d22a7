// Forwarding to the real libnccl: dlopen/dlsym and one typed call wrapper per function.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "ncclshim.h"

// Function pointers of the real library, filled by simccl_load.
static void *simccl_fn[F_N];
static const char *simccl_names[F_N] = {
	"ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitAll",
	"ncclCommSplit", "ncclCommFinalize", "ncclCommDestroy", "ncclCommAbort", "ncclCommGetAsyncError",
	"ncclCommCount", "ncclCommCuDevice", "ncclCommUserRank", "ncclAllReduce", "ncclBroadcast", "ncclReduce",
	"ncclAllGather", "ncclReduceScatter", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd",
	"ncclGetErrorString", "ncclGetLastError",
	// optional (F_NRequired and up): NCCL 2.23 ncclCommInitRankScalable, 2.11 PreMulSum ops,
	// 2.19 ncclMemAlloc/Free and buffer registration, the legacy in-place ncclBcast, and 2.28
	// ncclAlltoAll
	"ncclCommInitRankScalable", "ncclRedOpCreatePreMulSum", "ncclRedOpDestroy", "ncclMemAlloc", "ncclMemFree",
	"ncclCommRegister", "ncclCommDeregister", "ncclBcast", "ncclAlltoAll",
};
static void *simccl_handle;

// Records still buffered when the program exits are written by an atexit handler.
extern void simcclFlush(void);
static void simccl_atexit(void) { simcclFlush(); }
__attribute__((constructor)) static void simccl_register_atexit(void) { atexit(simccl_atexit); }

// simccl_load opens the real library (path first, then the usual sonames) and resolves every
// forwarded symbol. It returns NULL on success or a message.
const char *simccl_load(const char *path) {
	static char msg[512];
	const char *cands[] = {path, "libnccl.so.2", "libnccl.so", NULL};
	for (int i = 0; i < 3; i++) {
		if (cands[i] == NULL || cands[i][0] == 0) continue;
		simccl_handle = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
		if (simccl_handle) break;
		if (i == 0) {
			const char *e = dlerror();
			snprintf(msg, sizeof msg, "dlopen %s: %s", cands[i], e ? e : "?");
			return msg;
		}
	}
	if (!simccl_handle) {
		const char *e = dlerror();
		snprintf(msg, sizeof msg, "no real NCCL (set SIMCCL_REAL_NCCL): %s", e ? e : "?");
		return msg;
	}
	for (int i = 0; i < F_N; i++) {
		simccl_fn[i] = dlsym(simccl_handle, simccl_names[i]);
		if (simccl_fn[i] == NULL && i >= F_NRequired) continue; // an older NCCL: calls to it fail
		if (simccl_fn[i] == NULL) {
			snprintf(msg, sizeof msg, "real NCCL lacks %s", simccl_names[i]);
			return msg;
		}
		// The symbol must not be our own (a library path pointing back at the shim).
		Dl_info a, b;
		if (dladdr(simccl_fn[i], &a) && dladdr((void *)simccl_load, &b) && a.dli_fbase == b.dli_fbase) {
			snprintf(msg, sizeof msg, "%s resolves to the shim itself", simccl_names[i]);
			return msg;
		}
	}
	return NULL;
}

ncclResult_t r_GetVersion(int *v) { return ((ncclResult_t(*)(int *))simccl_fn[F_GetVersion])(v); }
ncclResult_t r_GetUniqueId(ncclUniqueId *id) { return ((ncclResult_t(*)(ncclUniqueId *))simccl_fn[F_GetUniqueId])(id); }
ncclResult_t r_CommInitRank(ncclComm_t *c, int n, ncclUniqueId *id, int r) {
	return ((ncclResult_t(*)(ncclComm_t *, int, ncclUniqueId, int))simccl_fn[F_CommInitRank])(c, n, *id, r);
}
ncclResult_t r_CommInitRankConfig(ncclComm_t *c, int n, ncclUniqueId *id, int r, ncclConfigPtr cfg) {
	return ((ncclResult_t(*)(ncclComm_t *, int, ncclUniqueId, int, void *))simccl_fn[F_CommInitRankConfig])(c, n, *id, r, cfg);
}
ncclResult_t r_CommInitAll(ncclComm_t *c, int n, const int *dev) {
	return ((ncclResult_t(*)(ncclComm_t *, int, const int *))simccl_fn[F_CommInitAll])(c, n, dev);
}
ncclResult_t r_CommSplit(ncclComm_t c, int color, int key, ncclComm_t *nc, ncclConfigPtr cfg) {
	return ((ncclResult_t(*)(ncclComm_t, int, int, ncclComm_t *, void *))simccl_fn[F_CommSplit])(c, color, key, nc, cfg);
}
ncclResult_t r_Comm1(int f, ncclComm_t c) { return ((ncclResult_t(*)(ncclComm_t))simccl_fn[f])(c); }
ncclResult_t r_CommInt(int f, ncclComm_t c, int *v) { return ((ncclResult_t(*)(ncclComm_t, int *))simccl_fn[f])(c, v); }
ncclResult_t r_AllReduce(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, cudaStream_t st) {
	return ((ncclResult_t(*)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t))simccl_fn[F_AllReduce])(s, r, n, dt, op, c, st);
}
ncclResult_t r_Broadcast(const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, cudaStream_t st) {
	return ((ncclResult_t(*)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t))simccl_fn[F_Broadcast])(s, r, n, dt, root, c, st);
}
ncclResult_t r_Reduce(const void *s, void *r, size_t n, int dt, int op, int root, ncclComm_t c, cudaStream_t st) {
	return ((ncclResult_t(*)(const void *, void *, size_t, int, int, int, ncclComm_t, cudaStream_t))simccl_fn[F_Reduce])(s, r, n, dt, op, root, c, st);
}
ncclResult_t r_AllGather(const void *s, void *r, size_t n, int dt, ncclComm_t c, cudaStream_t st) {
	return ((ncclResult_t(*)(const void *, void *, size_t, int, ncclComm_t, cudaStream_t))simccl_fn[F_AllGather])(s, r, n, dt, c, st);
}
ncclResult_t r_ReduceScatter(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, cudaStream_t st) {
	return ((ncclResult_t(*)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t))simccl_fn[F_ReduceScatter])(s, r, n, dt, op, c, st);
}
ncclResult_t r_P2P(int f, void *b, size_t n, int dt, int peer, ncclComm_t c, cudaStream_t st) {
	return ((ncclResult_t(*)(void *, size_t, int, int, ncclComm_t, cudaStream_t))simccl_fn[f])(b, n, dt, peer, c, st);
}
ncclResult_t r_Group(int f) { return ((ncclResult_t(*)(void))simccl_fn[f])(); }
const char *r_GetErrorString(ncclResult_t e) { return ((const char *(*)(ncclResult_t))simccl_fn[F_GetErrorString])(e); }
const char *r_GetLastError(ncclComm_t c) { return ((const char *(*)(ncclComm_t))simccl_fn[F_GetLastError])(c); }

// r_Has reports whether the real library has function f (the optional ones may be missing).
int r_Has(int f) { return simccl_fn[f] != NULL; }

// The optional functions: ncclInvalidUsage (5) where the real library lacks them.
#define SIMCCL_NEED(f) if (simccl_fn[f] == NULL) return 5
ncclResult_t r_CommInitRankScalable(ncclComm_t *c, int n, int r, int nId, ncclUniqueId *ids, ncclConfigPtr cfg) {
	SIMCCL_NEED(F_CommInitRankScalable);
	return ((ncclResult_t(*)(ncclComm_t *, int, int, int, ncclUniqueId *, void *))simccl_fn[F_CommInitRankScalable])(c, n, r, nId, ids, cfg);
}
ncclResult_t r_RedOpCreatePreMulSum(int *op, void *scalar, int dt, int residence, ncclComm_t c) {
	SIMCCL_NEED(F_RedOpCreatePreMulSum);
	return ((ncclResult_t(*)(int *, void *, int, int, ncclComm_t))simccl_fn[F_RedOpCreatePreMulSum])(op, scalar, dt, residence, c);
}
ncclResult_t r_RedOpDestroy(int op, ncclComm_t c) {
	SIMCCL_NEED(F_RedOpDestroy);
	return ((ncclResult_t(*)(int, ncclComm_t))simccl_fn[F_RedOpDestroy])(op, c);
}
ncclResult_t r_MemAlloc(void **ptr, size_t size) {
	SIMCCL_NEED(F_MemAlloc);
	return ((ncclResult_t(*)(void **, size_t))simccl_fn[F_MemAlloc])(ptr, size);
}
ncclResult_t r_MemFree(void *ptr) {
	SIMCCL_NEED(F_MemFree);
	return ((ncclResult_t(*)(void *))simccl_fn[F_MemFree])(ptr);
}
ncclResult_t r_CommRegister(ncclComm_t c, void *buff, size_t size, void **handle) {
	SIMCCL_NEED(F_CommRegister);
	return ((ncclResult_t(*)(ncclComm_t, void *, size_t, void **))simccl_fn[F_CommRegister])(c, buff, size, handle);
}
ncclResult_t r_CommDeregister(ncclComm_t c, void *handle) {
	SIMCCL_NEED(F_CommDeregister);
	return ((ncclResult_t(*)(ncclComm_t, void *))simccl_fn[F_CommDeregister])(c, handle);
}
// simccl_in_bcast is set on the thread that forwards ncclBcast: NCCL implements it by calling its
// public ncclBroadcast, which binds to the shim's, and that inner call must not be recorded again.
static __thread int simccl_in_bcast;
int simccl_nested(void) { return simccl_in_bcast; }
ncclResult_t r_Bcast(void *b, size_t n, int dt, int root, ncclComm_t c, cudaStream_t st) {
	SIMCCL_NEED(F_Bcast);
	simccl_in_bcast = 1;
	ncclResult_t r = ((ncclResult_t(*)(void *, size_t, int, int, ncclComm_t, cudaStream_t))simccl_fn[F_Bcast])(b, n, dt, root, c, st);
	simccl_in_bcast = 0;
	return r;
}
ncclResult_t r_AlltoAll(const void *s, void *r, size_t n, int dt, ncclComm_t c, cudaStream_t st) {
	SIMCCL_NEED(F_AlltoAll);
	return ((ncclResult_t(*)(const void *, void *, size_t, int, ncclComm_t, cudaStream_t))simccl_fn[F_AlltoAll])(s, r, n, dt, c, st);
}
