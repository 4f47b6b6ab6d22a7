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
