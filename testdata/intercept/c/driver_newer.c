// Drives NCCL's newer and optional C API (our own declarations of NCCL 2.28 nccl.h) for the shim's
// tests: ncclCommInitRankScalable, a PreMulSum reduction, ncclMemAlloc/Free, buffer registration,
// the legacy ncclBcast and ncclAlltoAll. Usage: driver_newer NRANKS RANK MEM (MEM 0: skip ncclMemAlloc, for virtual
// mode). Prints "ok".
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef void *ncclComm_t;
int ncclGetUniqueId(ncclUniqueId *id);
int ncclCommInitRankScalable(ncclComm_t *c, int n, int r, int nId, ncclUniqueId *ids, void *cfg);
int ncclRedOpCreatePreMulSum(int *op, void *scalar, int dt, int residence, ncclComm_t c);
int ncclRedOpDestroy(int op, ncclComm_t c);
int ncclMemAlloc(void **p, size_t size);
int ncclMemFree(void *p);
int ncclCommRegister(ncclComm_t c, void *buff, size_t size, void **handle);
int ncclCommDeregister(ncclComm_t c, void *handle);
int ncclBcast(void *b, size_t n, int dt, int root, ncclComm_t c, void *st);
int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st);
int ncclAlltoAll(const void *s, void *r, size_t n, int dt, ncclComm_t c, void *st);
int ncclCommDestroy(ncclComm_t c);
const char *ncclGetErrorString(int e);

#define CHECK(x) do { int r_ = (x); if (r_ != 0) { fprintf(stderr, "%s: %d %s\n", #x, r_, ncclGetErrorString(r_)); return 1; } } while (0)

int main(int argc, char **argv) {
	if (argc != 4) { fprintf(stderr, "usage: driver_newer NRANKS RANK MEM\n"); return 2; }
	int n = atoi(argv[1]), rank = atoi(argv[2]), mem = atoi(argv[3]);
	ncclUniqueId ids[2];
	CHECK(ncclGetUniqueId(&ids[0]));
	ids[1] = ids[0];
	ncclComm_t comm;
	CHECK(ncclCommInitRankScalable(&comm, n, rank, n > 1 ? 2 : 1, ids, NULL)); // NCCL wants nId <= nranks
	float scale = 0.5f;
	int op = -1;
	CHECK(ncclRedOpCreatePreMulSum(&op, &scale, 7, 0, comm)); // float, ncclScalarHostImmediate
	if (op < 5) { fprintf(stderr, "PreMulSum op %d, want a user op (>= 5)\n", op); return 1; }
	char buf[64];
	void *dev = buf;
	if (mem) CHECK(ncclMemAlloc(&dev, 1 << 20));
	void *h = NULL;
	CHECK(ncclCommRegister(comm, dev, 1 << 20, &h));
	CHECK(ncclAllReduce(dev, dev, 4096, 7, op, comm, NULL));
	CHECK(ncclBcast(dev, 2048, 9, 0, comm, NULL));
	CHECK(ncclAlltoAll(dev, (char *)dev + (1 << 19), 256 / n, 7, comm, NULL));
	CHECK(ncclCommDeregister(comm, h));
	CHECK(ncclRedOpDestroy(op, comm));
	if (mem) CHECK(ncclMemFree(dev));
	CHECK(ncclCommDestroy(comm));
	printf("ok\n");
	return 0;
}
