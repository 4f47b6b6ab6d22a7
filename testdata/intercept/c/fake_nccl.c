// A stand-in for libnccl with NCCL's C ABI (our own declarations of NCCL 2.28 nccl.h): every call
// succeeds at once and moves no data. The shim's tests and overhead benchmark forward to it.
#include <stdlib.h>
#include <string.h>
#include <stddef.h>

typedef struct { char internal[128]; } ncclUniqueId;
struct fakeComm { int n, rank; };
typedef struct fakeComm *ncclComm_t;

int ncclGetVersion(int *v) { *v = 22809; return 0; }
int ncclGetUniqueId(ncclUniqueId *id) { memset(id, 7, sizeof *id); return 0; }
int ncclCommInitRank(ncclComm_t *c, int n, ncclUniqueId id, int r) {
	(void)id;
	*c = malloc(sizeof **c);
	(*c)->n = n; (*c)->rank = r;
	return 0;
}
int ncclCommInitRankConfig(ncclComm_t *c, int n, ncclUniqueId id, int r, void *cfg) { (void)cfg; return ncclCommInitRank(c, n, id, r); }
int ncclCommInitAll(ncclComm_t *c, int n, const int *dev) {
	(void)dev;
	for (int i = 0; i < n; i++) { c[i] = malloc(sizeof *c[i]); c[i]->n = n; c[i]->rank = i; }
	return 0;
}
// Splits by colour parity in this fake: colour c keeps the ranks of the same parity.
int ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t *nc, void *cfg) {
	(void)key; (void)cfg;
	if (color < 0) { *nc = NULL; return 0; }
	*nc = malloc(sizeof **nc);
	(*nc)->n = (c->n + 1 - (c->rank % 2)) / 2; (*nc)->rank = c->rank / 2;
	return 0;
}
int ncclCommFinalize(ncclComm_t c) { (void)c; return 0; }
int ncclCommDestroy(ncclComm_t c) { free(c); return 0; }
int ncclCommAbort(ncclComm_t c) { free(c); return 0; }
int ncclCommGetAsyncError(ncclComm_t c, int *e) { (void)c; *e = 0; return 0; }
int ncclCommCount(ncclComm_t c, int *v) { *v = c->n; return 0; }
int ncclCommCuDevice(ncclComm_t c, int *v) { *v = c->rank; return 0; }
int ncclCommUserRank(ncclComm_t c, int *v) { *v = c->rank; return 0; }
int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st) { (void)s; (void)r; (void)n; (void)dt; (void)op; (void)c; (void)st; return 0; }
int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, void *st) { (void)s; (void)r; (void)n; (void)dt; (void)root; (void)c; (void)st; return 0; }
int ncclReduce(const void *s, void *r, size_t n, int dt, int op, int root, ncclComm_t c, void *st) { (void)s; (void)r; (void)n; (void)dt; (void)op; (void)root; (void)c; (void)st; return 0; }
int ncclAllGather(const void *s, void *r, size_t n, int dt, ncclComm_t c, void *st) { (void)s; (void)r; (void)n; (void)dt; (void)c; (void)st; return 0; }
int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st) { (void)s; (void)r; (void)n; (void)dt; (void)op; (void)c; (void)st; return 0; }
int ncclSend(const void *b, size_t n, int dt, int peer, ncclComm_t c, void *st) { (void)b; (void)n; (void)dt; (void)peer; (void)c; (void)st; return 0; }
int ncclRecv(void *b, size_t n, int dt, int peer, ncclComm_t c, void *st) { (void)b; (void)n; (void)dt; (void)peer; (void)c; (void)st; return 0; }
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }
const char *ncclGetErrorString(int e) { (void)e; return "fake"; }
const char *ncclGetLastError(ncclComm_t c) { (void)c; return ""; }

#ifdef FAKE_NEWER
// The newer and optional functions the shim forwards when the real library has them (built with
// -DFAKE_NEWER; without, the library is an older NCCL that lacks them).
// (Not through ncclCommInitRank: that call would bind to the shim's export and be recorded twice;
// NCCL's own functions do not call its public API either.)
int ncclCommInitRankScalable(ncclComm_t *c, int n, int r, int nId, ncclUniqueId *ids, void *cfg) {
	(void)nId; (void)ids; (void)cfg;
	*c = malloc(sizeof **c);
	(*c)->n = n; (*c)->rank = r;
	return 0;
}
int ncclRedOpCreatePreMulSum(int *op, void *scalar, int dt, int residence, ncclComm_t c) { (void)scalar; (void)dt; (void)residence; (void)c; *op = 5; return 0; }
int ncclRedOpDestroy(int op, ncclComm_t c) { (void)c; return op >= 5 ? 0 : 4; }
int ncclMemAlloc(void **p, size_t size) { *p = malloc(size); return *p ? 0 : 1; }
int ncclMemFree(void *p) { free(p); return 0; }
int ncclCommRegister(ncclComm_t c, void *buff, size_t size, void **handle) { (void)c; (void)size; *handle = buff; return 0; }
int ncclCommDeregister(ncclComm_t c, void *handle) { (void)c; (void)handle; return 0; }
// As NCCL 2.28 does: the legacy in-place broadcast calls the public ncclBroadcast (which binds to
// the shim's when the shim is loaded).
int ncclBcast(void *b, size_t n, int dt, int root, ncclComm_t c, void *st) { return ncclBroadcast(b, b, n, dt, root, c, st); }
int ncclAlltoAll(const void *s, void *r, size_t n, int dt, ncclComm_t c, void *st) { (void)s; (void)r; (void)n; (void)dt; (void)c; (void)st; return 0; }
#endif
