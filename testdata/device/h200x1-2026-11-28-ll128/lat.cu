// One-rank latency and 1 GiB bandwidth of ncclAllReduce, ncclAllGather and ncclReduceScatter
// (out-of-place float sum), nccl-tests' timing: CUDA events around ITERS back-to-back calls on one
// non-blocking stream after warm-up calls. Run once with the real NCCL and once with
// LD_PRELOAD=libnccl.so.2 (simccl): the same program, the same binary.
// Env: TAG (first CSV column), GROUP=1 (each call inside ncclGroupStart/End, as nccl-tests' -g
// runs), REPS (timed repetitions per size, each printed; default 5), INPLACE=1 (in place: one
// rank's result is its input, so neither library enqueues GPU work and the time is the host's).
// Output rows: tag,mode,coll,bytes,us_per_call,rep,host_us_per_call (the loop's host time: the
// calls' cost on the CPU, which bounds the event time from below when the GPU keeps up).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <chrono>
#include <cuda_runtime.h>
#include <nccl.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)
#define NK(x) do { ncclResult_t r = (x); if (r != ncclSuccess) { fprintf(stderr, "%s:%d nccl %d %s\n", __FILE__, __LINE__, (int)r, ncclGetErrorString(r)); exit(1); } } while (0)
int main() {
  const char* tag = getenv("TAG") ? getenv("TAG") : "lib";
  int group = getenv("GROUP") && atoi(getenv("GROUP")) == 1;
  int reps = getenv("REPS") ? atoi(getenv("REPS")) : 5;
  int inplace = getenv("INPLACE") && atoi(getenv("INPLACE")) == 1;
  int dev = 0;
  ncclComm_t comm;
  NK(ncclCommInitAll(&comm, 1, &dev));
  size_t maxb = (size_t)1 << 30;
  float *sb, *rb; cudaStream_t st;
  CK(cudaSetDevice(0)); CK(cudaMalloc(&sb, maxb)); CK(cudaMalloc(&rb, maxb)); CK(cudaMemset(sb, 1, maxb));
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const char* names[] = {"all_reduce", "all_gather", "reduce_scatter"};
  std::vector<size_t> sizes;
  for (int e = 3; e <= 16; e++) sizes.push_back((size_t)1 << e);
  sizes.push_back((size_t)1 << 30);
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (int rep = 0; rep < reps; rep++) {
    for (int c = 0; c < 3; c++) {
      for (size_t bytes : sizes) {
        size_t cnt = bytes / 4;
        float* rbuf = inplace ? sb : rb;  // all-gather and reduce-scatter: one rank's block is the whole buffer
        auto launch = [&]() {
          if (group) NK(ncclGroupStart());
          switch (c) {
            case 0: NK(ncclAllReduce(sb, rbuf, cnt, ncclFloat, ncclSum, comm, st)); break;
            case 1: NK(ncclAllGather(sb, rbuf, cnt, ncclFloat, comm, st)); break;
            case 2: NK(ncclReduceScatter(sb, rbuf, cnt, ncclFloat, ncclSum, comm, st)); break;
          }
          if (group) NK(ncclGroupEnd());
        };
        int iters = bytes >= (1 << 20) ? 20 : 1000;
        for (int w = 0; w < 20; w++) launch();
        CK(cudaStreamSynchronize(st));
        CK(cudaEventRecord(e0, st));
        auto h0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; i++) launch();
        auto h1 = std::chrono::steady_clock::now();
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
        double host = std::chrono::duration<double, std::micro>(h1 - h0).count() / iters;
        printf("%s,%s%s,%s,%zu,%.3f,%d,%.3f\n", tag, group ? "group" : "nogroup", inplace ? "-inplace" : "", names[c], bytes, ms * 1000.0 / iters, rep, host);
        fflush(stdout);
      }
    }
  }
  ncclCommDestroy(comm);
  return 0;
}
