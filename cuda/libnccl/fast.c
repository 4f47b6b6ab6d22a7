// The C surface of the collective and group calls (the Go side is api.go's go* functions): a
// call of a one-rank communicator in this process whose result is its input (every collective but
// PreMulSum, send/recv and all-to-all) is enqueued here without entering Go, as one copy kernel
// launch on the caller's stream, or nothing in place (engine's alone path, the same kernel with
// the same grid). ncclGroupStart/End nest per thread, as NCCL's groups do: such calls inside a
// group are held on the thread and run at the outermost ncclGroupEnd in call order; the first call
// of the group that needs Go (any other call or communicator) opens the thread's group in Go
// (its own: not the process-wide one, which other threads' groups would share), hands it the held
// calls in order, and every later call of the group goes to Go; the outermost ncclGroupEnd then
// ends the thread's group in Go. SIMCCL_NCCL_FAST=0 sends every call to Go (api.go does not set fast).
#include <stdlib.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include "_cgo_export.h"

typedef int (*fn_getctx)(uintptr_t *);
typedef int (*fn_setctx)(uintptr_t);
typedef int (*fn_launch)(uintptr_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, uintptr_t, void **, void **);
typedef int (*fn_dtod)(unsigned long long, unsigned long long, size_t, uintptr_t);
static fn_getctx p_getctx;
static fn_setctx p_setctx;
static fn_launch p_launch;
static fn_dtod p_dtod;

int simccl_fast_driver(void) {
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!lib) return 0;
	p_getctx = (fn_getctx)dlsym(lib, "cuCtxGetCurrent");
	p_setctx = (fn_setctx)dlsym(lib, "cuCtxSetCurrent");
	p_launch = (fn_launch)dlsym(lib, "cuLaunchKernel");
	p_dtod = (fn_dtod)dlsym(lib, "cuMemcpyDtoDAsync_v2");
	return p_getctx && p_setctx && p_launch && p_dtod;
}

enum { F_ALLREDUCE, F_ALLGATHER, F_REDUCESCATTER, F_BROADCAST, F_REDUCE };

typedef struct {
	int f;
	const void *send;
	void *recv;
	size_t count;
	int dt, op, root;
	ncclComm_t comm;
	cudaStream_t stream;
} held_call;

enum { MAX_HELD = 256 };
static __thread int g_depth;     // ncclGroupStart nesting on this thread
static __thread int g_forwarded; // this thread's group has opened Go's group
static __thread uintptr_t g_group; // that group (goGroupStart's handle): the thread's own, not the process's
static __thread int g_n;         // calls held
// The held calls live on the heap, one array per thread that groups calls: Go's c-shared library
// makes all of this library's thread-local storage static, and glibc keeps only a small reserve
// of static TLS for libraries loaded with dlopen (ctypes.CDLL, a program's dlopen of
// libnccl.so.2): 16 KiB of calls here made dlopen fail with "cannot allocate memory in static TLS
// block". Per thread it is allocated once and kept.
static __thread held_call *g_held;
static pthread_key_t g_held_key; // frees a thread's array when the thread exits
static pthread_once_t g_held_once = PTHREAD_ONCE_INIT;
static void held_key(void) { pthread_key_create(&g_held_key, free); }

static held_call *held_array(void) {
	if (!g_held) {
		pthread_once(&g_held_once, held_key);
		g_held = (held_call *)malloc(MAX_HELD * sizeof(held_call));
		if (g_held) pthread_setspecific(g_held_key, g_held);
	}
	return g_held;
}

static const int dt_size[12] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

// eligible: the call may take the C path (else Go checks and runs it, reporting any error).
static int eligible(const held_call *k, size_t *bytes) {
	const simccl_handle *h = (const simccl_handle *)k->comm;
	if (!h || !h->fast || k->dt < 0 || k->dt >= 12 || k->count > ((size_t)1 << 56)) return 0;
	if ((k->f == F_ALLREDUCE || k->f == F_REDUCESCATTER || k->f == F_REDUCE) && (k->op < 0 || k->op > 4)) return 0; // PreMulSum: Go
	if ((k->f == F_BROADCAST || k->f == F_REDUCE) && k->root != 0) return 0;
	*bytes = k->count * (size_t)dt_size[k->dt];
	if (*bytes > 0 && (!k->send || !k->recv)) return 0;
	return 1;
}

// one_rank enqueues a held call: the copy kernel (or cuMemcpyDtoDAsync above kernel_max) on the
// caller's stream with the communicator's context current, or nothing in place.
static ncclResult_t one_rank(const held_call *k, size_t bytes) {
	simccl_handle *h = (simccl_handle *)k->comm;
	if (bytes == 0 || k->send == (const void *)k->recv) return 0;
	if (h->emulated) return goOneRankCopy(k->comm, (void *)k->send, k->recv, bytes, k->stream);
	uintptr_t prev = 0;
	int r = p_getctx(&prev);
	if (r == 0 && prev != h->ctx) r = p_setctx(h->ctx);
	if (r == 0) {
		if (bytes <= h->kernel_max) {
			unsigned long long dst = (unsigned long long)(uintptr_t)k->recv, src = (unsigned long long)(uintptr_t)k->send, n = bytes;
			void *args[3] = {&dst, &src, &n};
			unsigned long long items = (n + 15) / 16, g = (items + 511) / 512;
			if (g > h->max_grid) g = h->max_grid;
			if (g < 1) g = 1;
			r = p_launch(h->copy, (unsigned)g, 1, 1, 512, 1, 1, 0, (uintptr_t)k->stream, args, NULL);
		} else {
			r = p_dtod((unsigned long long)(uintptr_t)k->recv, (unsigned long long)(uintptr_t)k->send, bytes, (uintptr_t)k->stream);
		}
		if (prev != h->ctx) p_setctx(prev);
	}
	if (r != 0) return goOneRankFailed(k->comm, r, bytes <= h->kernel_max);
	return 0;
}

static ncclResult_t to_go(const held_call *k) {
	if (g_forwarded) goGroupJoin(g_group, k->comm);
	switch (k->f) {
	case F_ALLREDUCE: return goAllReduce((void *)k->send, k->recv, k->count, k->dt, k->op, k->comm, k->stream);
	case F_ALLGATHER: return goAllGather((void *)k->send, k->recv, k->count, k->dt, k->comm, k->stream);
	case F_REDUCESCATTER: return goReduceScatter((void *)k->send, k->recv, k->count, k->dt, k->op, k->comm, k->stream);
	case F_BROADCAST: return goBroadcast((void *)k->send, k->recv, k->count, k->dt, k->root, k->comm, k->stream);
	default: return goReduce((void *)k->send, k->recv, k->count, k->dt, k->op, k->root, k->comm, k->stream);
	}
}

// forward opens Go's group for this thread's group and hands it the held calls in order.
static ncclResult_t forward(void) {
	ncclResult_t err = 0;
	g_group = goGroupStart();
	g_forwarded = 1;
	for (int i = 0; i < g_n; i++) {
		ncclResult_t r = to_go(&g_held[i]);
		if (r != 0 && err == 0) err = r;
	}
	g_n = 0;
	return err;
}

// coll routes one collective call (see the file's comment).
static ncclResult_t coll(held_call k) {
	size_t bytes = 0;
	if (eligible(&k, &bytes)) {
		if (g_depth == 0) return one_rank(&k, bytes);
		if (!g_forwarded && held_array() && g_n < MAX_HELD) {
			g_held[g_n++] = k;
			return 0;
		}
	}
	if (g_depth > 0 && !g_forwarded) {
		ncclResult_t r = forward();
		if (r != 0) return r;
	}
	return to_go(&k);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, ncclComm_t comm, cudaStream_t stream) {
	held_call k = {F_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream};
	return coll(k);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, int datatype, ncclComm_t comm, cudaStream_t stream) {
	held_call k = {F_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, 0, 0, comm, stream};
	return coll(k);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, int datatype, int op, ncclComm_t comm, cudaStream_t stream) {
	held_call k = {F_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream};
	return coll(k);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, int datatype, int root, ncclComm_t comm, cudaStream_t stream) {
	held_call k = {F_BROADCAST, sendbuff, recvbuff, count, datatype, 0, root, comm, stream};
	return coll(k);
}

ncclResult_t ncclBcast(void *buff, size_t count, int datatype, int root, ncclComm_t comm, cudaStream_t stream) {
	return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, int root, ncclComm_t comm, cudaStream_t stream) {
	held_call k = {F_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream};
	return coll(k);
}

// The calls that always go to Go: inside a group they open Go's group first, and join comm to it.
static ncclResult_t before_go(ncclComm_t comm) {
	if (g_depth == 0) return 0;
	if (!g_forwarded) {
		ncclResult_t r = forward();
		if (r != 0) return r;
	}
	goGroupJoin(g_group, comm);
	return 0;
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, int datatype, ncclComm_t comm, cudaStream_t stream) {
	ncclResult_t r = before_go(comm);
	return r ? r : goAlltoAll((void *)sendbuff, recvbuff, count, datatype, comm, stream);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, int datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
	ncclResult_t r = before_go(comm);
	return r ? r : goSend((void *)sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, int datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
	ncclResult_t r = before_go(comm);
	return r ? r : goRecv(recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclGroupStart(void) {
	if (g_depth++ == 0) {
		g_n = 0;
		g_forwarded = 0;
	}
	return 0;
}

ncclResult_t ncclGroupEnd(void) {
	if (g_depth == 0) return goGroupMisuse(); // no group open on this thread (another thread's stays open)
	if (--g_depth > 0) return 0;
	if (g_forwarded) {
		g_forwarded = 0;
		uintptr_t g = g_group;
		g_group = 0;
		return goGroupEnd(g);
	}
	ncclResult_t err = 0;
	for (int i = 0; i < g_n; i++) {
		size_t bytes = 0;
		ncclResult_t r = eligible(&g_held[i], &bytes) ? one_rank(&g_held[i], bytes) : to_go(&g_held[i]);
		if (r != 0 && err == 0) err = r;
	}
	g_n = 0;
	return err;
}
