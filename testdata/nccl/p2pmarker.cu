// p2pmarker.cu — which side of a send/recv kernel holds the GPU time that NCCL's channel stamps leave
// out (testdata/nccl/h200x2/README.md, "chprof-2026-11-30/": back-to-back send/recv kernels on 2 H200
// stand 6.2 µs + one step at 41 GB/s apart). One process drives both GPUs (ncclCommInitAll); every
// timed call is a group of one send and one receive per rank, with a one-thread kernel before it and
// one after it on the same stream that store %globaltimer, all enqueued behind a 20 ms spin so that
// the host is out of the way. Run it with testdata/nccl/chprof.c loaded: the markers and NCCL's
// stamps share the GPU's clock, so the marker before a call against the call's first channel start,
// and the call's last channel stop against the marker after it, say where the time goes.
//
//   nvcc -O2 -o /tmp/p2pmarker testdata/nccl/p2pmarker.cu -I$inc -L$lib -lnccl -Xlinker -rpath=$lib
//   NCCL_PROFILER_PLUGIN=/tmp/libchprof.so CHPROF_DIR=OUT CHPROF_MIN_BYTES=1048576 /tmp/p2pmarker > OUT/markers.csv
//
// Output: "rank,bytes,iter,before_ns,after_ns" (the markers' %globaltimer on that rank's GPU).
#include <cuda_runtime.h>
#include <nccl.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
#define NK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { \
  fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); exit(1); } } while (0)

__global__ void mark(unsigned long long* t) {
  unsigned long long v;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
  *t = v;
}

__global__ void spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}

int main() {
  const int n = 2, iters = 20, warm = 5;
  const size_t maxBytes = (size_t)128 << 20;
  int devs[n] = {0, 1};
  ncclComm_t comms[n];
  NK(ncclCommInitAll(comms, n, devs));
  float *sb[n], *rb[n];
  unsigned long long* marks[n];
  cudaStream_t st[n];
  for (int d = 0; d < n; d++) {
    CK(cudaSetDevice(d));
    CK(cudaMalloc(&sb[d], maxBytes));
    CK(cudaMalloc(&rb[d], maxBytes));
    CK(cudaMalloc(&marks[d], sizeof(unsigned long long) * 2 * iters));
    CK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
  }
  auto call = [&](size_t bytes) {
    NK(ncclGroupStart());
    for (int d = 0; d < n; d++) {
      NK(ncclSend(sb[d], bytes / 4, ncclFloat, 1 - d, comms[d], st[d]));
      NK(ncclRecv(rb[d], bytes / 4, ncclFloat, 1 - d, comms[d], st[d]));
    }
    NK(ncclGroupEnd());
  };
  printf("rank,bytes,iter,before_ns,after_ns\n");
  std::vector<unsigned long long> host(2 * iters);
  for (size_t bytes = (size_t)1 << 20; bytes <= maxBytes; bytes *= 2) {
    for (int w = 0; w < warm; w++) call(bytes);
    for (int d = 0; d < n; d++) { CK(cudaSetDevice(d)); CK(cudaStreamSynchronize(st[d])); }
    for (int d = 0; d < n; d++) { CK(cudaSetDevice(d)); spin<<<1, 1, 0, st[d]>>>(20000000ull); CK(cudaGetLastError()); }
    for (int it = 0; it < iters; it++) {
      for (int d = 0; d < n; d++) { CK(cudaSetDevice(d)); mark<<<1, 1, 0, st[d]>>>(marks[d] + 2 * it); }
      call(bytes);
      for (int d = 0; d < n; d++) { CK(cudaSetDevice(d)); mark<<<1, 1, 0, st[d]>>>(marks[d] + 2 * it + 1); }
    }
    for (int d = 0; d < n; d++) {
      CK(cudaSetDevice(d));
      CK(cudaStreamSynchronize(st[d]));
      CK(cudaMemcpy(host.data(), marks[d], sizeof(unsigned long long) * 2 * iters, cudaMemcpyDeviceToHost));
      for (int it = 0; it < iters; it++)
        printf("%d,%zu,%d,%llu,%llu\n", d, bytes, it, host[2 * it], host[2 * it + 1]);
    }
    fflush(stdout);
  }
  for (int d = 0; d < n; d++) NK(ncclCommDestroy(comms[d]));
  return 0;
}
