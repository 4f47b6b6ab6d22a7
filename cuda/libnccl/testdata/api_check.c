// The C API of simccl's libnccl, called as a C program does (on the emulated driver in the Go
// test, SIMCCL_CUDA_EMULATE=2; on a GPU as is): version, unique id, one rank, two ranks as
// threads of this process, collectives on ncclMemAlloc'd buffers, groups, split, errors.
// Usage: api_check [GPU of ncclCommInitAll's second rank, default 1]. Return codes only: the emulator's device memory is not host memory (data is checked by the Go
// tests and by testdata/dropin on a GPU).
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

typedef int ncclResult_t;
typedef void *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
ncclResult_t ncclGetVersion(int *);
ncclResult_t ncclGetUniqueId(ncclUniqueId *);
ncclResult_t ncclCommInitRank(ncclComm_t *, int, ncclUniqueId, int);
ncclResult_t ncclCommInitAll(ncclComm_t *, int, const int *);
ncclResult_t ncclCommSplit(ncclComm_t, int, int, ncclComm_t *, void *);
ncclResult_t ncclCommDestroy(ncclComm_t);
ncclResult_t ncclCommAbort(ncclComm_t);
ncclResult_t ncclCommCount(ncclComm_t, int *);
ncclResult_t ncclCommUserRank(ncclComm_t, int *);
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t *);
ncclResult_t ncclAllReduce(const void *, void *, size_t, int, int, ncclComm_t, void *);
ncclResult_t ncclAllGather(const void *, void *, size_t, int, ncclComm_t, void *);
ncclResult_t ncclReduceScatter(const void *, void *, size_t, int, int, ncclComm_t, void *);
ncclResult_t ncclBroadcast(const void *, void *, size_t, int, int, ncclComm_t, void *);
ncclResult_t ncclReduce(const void *, void *, size_t, int, int, int, ncclComm_t, void *);
ncclResult_t ncclAlltoAll(const void *, void *, size_t, int, ncclComm_t, void *);
ncclResult_t ncclSend(const void *, size_t, int, int, ncclComm_t, void *);
ncclResult_t ncclRecv(void *, size_t, int, int, ncclComm_t, void *);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclRedOpCreatePreMulSum(int *, void *, int, int, ncclComm_t);
ncclResult_t ncclRedOpDestroy(int, ncclComm_t);
ncclResult_t ncclMemAlloc(void **, size_t);
ncclResult_t ncclMemFree(void *);
ncclResult_t ncclCommRegister(ncclComm_t, void *, size_t, void **);
ncclResult_t ncclCommDeregister(ncclComm_t, void *);
const char *ncclGetErrorString(ncclResult_t);
const char *ncclGetLastError(ncclComm_t);

static int failures;
#define CHECK(call, want) do { ncclResult_t r_ = (call); if (r_ != (want)) { \
	fprintf(stderr, "%s:%d %s = %d (%s), want %d; last error: %s\n", __FILE__, __LINE__, #call, r_, ncclGetErrorString(r_), want, ncclGetLastError(NULL)); failures++; } } while (0)
#define OK(call) CHECK(call, 0)

enum { N = 1031 };
static ncclUniqueId id2;

static void run(ncclComm_t c, int n, int rank) {
	void *a, *b;
	OK(ncclMemAlloc(&a, 8 * N * n));
	OK(ncclMemAlloc(&b, 8 * N * n));
	void *h;
	OK(ncclCommRegister(c, a, 8 * N * n, &h));
	OK(ncclAllReduce(a, b, N, 7, 0, c, NULL));
	OK(ncclAllGather(a, b, N, 7, c, NULL));
	OK(ncclReduceScatter(a, b, N, 2, 2, c, NULL));
	OK(ncclBroadcast(a, b, N, 9, n - 1, c, NULL));
	OK(ncclReduce(a, b, N, 8, 3, 0, c, NULL));
	OK(ncclAlltoAll(a, b, N, 1, c, NULL));
	float scale = 0.5f;
	int op;
	OK(ncclRedOpCreatePreMulSum(&op, &scale, 7, 1, c));
	OK(ncclAllReduce(a, b, N, 7, op, c, NULL));
	OK(ncclRedOpDestroy(op, c));
	OK(ncclGroupStart());
	OK(ncclSend(a, N, 7, (rank + 1) % n, c, NULL));
	OK(ncclRecv(b, N, 7, (rank + n - 1) % n, c, NULL));
	OK(ncclGroupEnd());
	CHECK(ncclAllReduce(a, b, N, 99, 0, c, NULL), 4); // bad data type: ncclInvalidArgument
	ncclResult_t ae;
	OK(ncclCommGetAsyncError(c, &ae));
	if (ae != 0) { fprintf(stderr, "async error %d\n", ae); failures++; }
	OK(ncclCommDeregister(c, h));
	OK(ncclMemFree(a));
	OK(ncclMemFree(b));
}

static void *thread(void *arg) {
	int rank = (int)(long)arg;
	ncclComm_t c;
	OK(ncclCommInitRank(&c, 2, id2, rank));
	int n = 0, r = -1;
	OK(ncclCommCount(c, &n));
	OK(ncclCommUserRank(c, &r));
	if (n != 2 || r != rank) { fprintf(stderr, "count %d rank %d\n", n, r); failures++; }
	run(c, 2, rank);
	ncclComm_t s;
	OK(ncclCommSplit(c, 0, -rank, &s, NULL)); // one colour, ranks reversed
	OK(ncclCommUserRank(s, &r));
	if (r != 1 - rank) { fprintf(stderr, "split rank %d, want %d\n", r, 1 - rank); failures++; }
	run(s, 2, r);
	OK(ncclCommDestroy(s));
	OK(ncclCommDestroy(c));
	return NULL;
}

int main(int argc, char **argv) {
	int v = 0;
	OK(ncclGetVersion(&v));
	printf("version %d\n", v);
	ncclUniqueId id;
	OK(ncclGetUniqueId(&id));
	ncclComm_t c;
	OK(ncclCommInitRank(&c, 1, id, 0));
	run(c, 1, 0);
	OK(ncclCommDestroy(c));
	CHECK(ncclCommCount(NULL, &v), 4);

	ncclComm_t all[2];
	int devs[2] = {0, argc > 1 ? atoi(argv[1]) : 1}; // argv[1]: the second rank's GPU (0 on a one-GPU machine)
	OK(ncclCommInitAll(all, 2, devs));
	OK(ncclGroupStart());
	for (int i = 0; i < 2; i++) OK(ncclAllReduce((void *)0, (void *)0, 0, 7, 0, all[i], NULL));
	OK(ncclGroupEnd());
	OK(ncclCommDestroy(all[0]));
	OK(ncclCommAbort(all[1]));

	OK(ncclGetUniqueId(&id2));
	pthread_t t[2];
	for (long r = 0; r < 2; r++) pthread_create(&t[r], NULL, thread, (void *)r);
	for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
	printf("%s: %d failures\n", failures ? "FAIL" : "ok", failures);
	return failures != 0;
}
