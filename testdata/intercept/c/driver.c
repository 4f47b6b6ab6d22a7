// Drives NCCL's C API like an application would (our own declarations of NCCL 2.28 nccl.h), for the
// shim's tests and overhead benchmark. Usage: driver NRANKS RANK ITERS. Prints "ns_per_call N"
// (the mean host time of one ncclAllReduce over ITERS calls) and "ok".
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <time.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef void *ncclComm_t;
int ncclGetVersion(int *v);
int ncclGetUniqueId(ncclUniqueId *id);
int ncclCommInitRank(ncclComm_t *c, int n, ncclUniqueId id, int r);
int ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t *nc, void *cfg);
int ncclCommCount(ncclComm_t c, int *v);
int ncclCommUserRank(ncclComm_t c, int *v);
int ncclCommDestroy(ncclComm_t c);
int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st);
int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, void *st);
int ncclReduce(const void *s, void *r, size_t n, int dt, int op, int root, ncclComm_t c, void *st);
int ncclAllGather(const void *s, void *r, size_t n, int dt, ncclComm_t c, void *st);
int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st);
int ncclSend(const void *b, size_t n, int dt, int peer, ncclComm_t c, void *st);
int ncclRecv(void *b, size_t n, int dt, int peer, ncclComm_t c, void *st);
int ncclGroupStart(void);
int ncclGroupEnd(void);
const char *ncclGetErrorString(int e);

#define CHECK(x) do { int r_ = (x); if (r_ != 0) { fprintf(stderr, "%s: %d %s\n", #x, r_, ncclGetErrorString(r_)); return 1; } } while (0)

int main(int argc, char **argv) {
	if (argc != 4) { fprintf(stderr, "usage: driver NRANKS RANK ITERS\n"); return 2; }
	int n = atoi(argv[1]), rank = atoi(argv[2]);
	long iters = atol(argv[3]);
	int v = 0;
	CHECK(ncclGetVersion(&v));
	ncclUniqueId id;
	CHECK(ncclGetUniqueId(&id));
	ncclComm_t comm, sub;
	CHECK(ncclCommInitRank(&comm, n, id, rank));
	int cnt = 0, me = -1;
	CHECK(ncclCommCount(comm, &cnt));
	CHECK(ncclCommUserRank(comm, &me));
	if (cnt != n || me != rank) { fprintf(stderr, "count %d rank %d\n", cnt, me); return 1; }
	char buf[64];
	CHECK(ncclAllReduce(buf, buf, 1024, 7, 0, comm, NULL));
	CHECK(ncclBroadcast(buf, buf, 4096, 9, 1, comm, NULL));
	CHECK(ncclReduce(buf, buf, 8, 6, 2, 0, comm, NULL));
	CHECK(ncclAllGather(buf, buf, 256, 7, comm, NULL));
	CHECK(ncclReduceScatter(buf, buf, 512, 7, 4, comm, NULL));
	CHECK(ncclGroupStart());
	CHECK(ncclSend(buf, 100, 0, (rank + 1) % n, comm, NULL));
	CHECK(ncclRecv(buf, 100, 0, (rank + n - 1) % n, comm, NULL));
	CHECK(ncclGroupEnd());
	CHECK(ncclCommSplit(comm, rank % 2, rank, &sub, NULL));
	CHECK(ncclAllReduce(buf, buf, 64, 7, 0, sub, NULL));
	CHECK(ncclCommDestroy(sub));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < iters; i++) CHECK(ncclAllReduce(buf, buf, 1 << 20, 7, 0, comm, NULL));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	printf("ns_per_call %.1f\n", iters > 0 ? ns / iters : 0.0);
	CHECK(ncclCommDestroy(comm));
	printf("ok\n");
	return 0;
}
