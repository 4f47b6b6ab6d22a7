// Our own minimal declarations of NCCL's C types (NCCL 2.28 nccl.h): a communicator is
// an opaque pointer, the unique id 128 opaque bytes, enums are C ints at the ABI. No nccl.h needed.
#ifndef SIMCCL_NCCLSHIM_H
#define SIMCCL_NCCLSHIM_H
#include <stddef.h>
#include <stdlib.h>
typedef int ncclResult_t;
typedef void *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef void *cudaStream_t;
typedef void *ncclConfigPtr; // ncclConfig_t *, passed through untouched

// Indexes of the forwarded functions (forward.c).
enum {
	F_GetVersion, F_GetUniqueId, F_CommInitRank, F_CommInitRankConfig, F_CommInitAll, F_CommSplit,
	F_CommFinalize, F_CommDestroy, F_CommAbort, F_CommGetAsyncError, F_CommCount, F_CommCuDevice,
	F_CommUserRank, F_AllReduce, F_Broadcast, F_Reduce, F_AllGather, F_ReduceScatter, F_Send, F_Recv,
	F_GroupStart, F_GroupEnd, F_GetErrorString, F_GetLastError,
	F_NRequired, // the ones above must exist; those below are newer or optional (NULL when absent)
	F_CommInitRankScalable = F_NRequired, F_RedOpCreatePreMulSum, F_RedOpDestroy, F_MemAlloc, F_MemFree,
	F_CommRegister, F_CommDeregister, F_Bcast, F_AlltoAll, F_N
};
const char *simccl_load(const char *path);
ncclResult_t r_GetVersion(int *v);
ncclResult_t r_GetUniqueId(ncclUniqueId *id);
ncclResult_t r_CommInitRank(ncclComm_t *c, int n, ncclUniqueId *id, int r);
ncclResult_t r_CommInitRankConfig(ncclComm_t *c, int n, ncclUniqueId *id, int r, ncclConfigPtr cfg);
ncclResult_t r_CommInitAll(ncclComm_t *c, int n, const int *dev);
ncclResult_t r_CommSplit(ncclComm_t c, int color, int key, ncclComm_t *nc, ncclConfigPtr cfg);
ncclResult_t r_Comm1(int f, ncclComm_t c);
ncclResult_t r_CommInt(int f, ncclComm_t c, int *v);
ncclResult_t r_AllReduce(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, cudaStream_t st);
ncclResult_t r_Broadcast(const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, cudaStream_t st);
ncclResult_t r_Reduce(const void *s, void *r, size_t n, int dt, int op, int root, ncclComm_t c, cudaStream_t st);
ncclResult_t r_AllGather(const void *s, void *r, size_t n, int dt, ncclComm_t c, cudaStream_t st);
ncclResult_t r_ReduceScatter(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, cudaStream_t st);
ncclResult_t r_P2P(int f, void *b, size_t n, int dt, int peer, ncclComm_t c, cudaStream_t st);
ncclResult_t r_Group(int f);
const char *r_GetErrorString(ncclResult_t e);
const char *r_GetLastError(ncclComm_t c);
int r_Has(int f);
int simccl_nested(void);
ncclResult_t r_CommInitRankScalable(ncclComm_t *c, int n, int r, int nId, ncclUniqueId *ids, ncclConfigPtr cfg);
ncclResult_t r_RedOpCreatePreMulSum(int *op, void *scalar, int dt, int residence, ncclComm_t c);
ncclResult_t r_RedOpDestroy(int op, ncclComm_t c);
ncclResult_t r_MemAlloc(void **ptr, size_t size);
ncclResult_t r_MemFree(void *ptr);
ncclResult_t r_CommRegister(ncclComm_t c, void *buff, size_t size, void **handle);
ncclResult_t r_CommDeregister(ncclComm_t c, void *handle);
ncclResult_t r_Bcast(void *b, size_t n, int dt, int root, ncclComm_t c, cudaStream_t st);
ncclResult_t r_AlltoAll(const void *s, void *r, size_t n, int dt, ncclComm_t c, cudaStream_t st);
#endif
