// memcpy.cu — a device-to-device cudaMemcpyAsync timed as nccl-tests times a collective: after 5
// warm-up copies, ITERS copies back to back on one stream between two events, per size, 8 B to
// 2^MAXEXP bytes (source and destination distinct buffers of that size). This is the copy NCCL
// makes for a one-rank collective; run beside testdata/nccl/onerank.sh it says what NCCL's
// one-rank rows are made of, measured without NCCL.
//
//   nvcc -O3 -arch=sm_90 -o /tmp/memcpy bench/gpuprobe/memcpy.cu && MAXEXP=30 /tmp/memcpy > memcpy.csv
//
// Output: CSV rows "memcpy_loop,bytes,us" (µs per copy, the mean over the loop; one header line).
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

int main() {
  int maxexp = getenv("MAXEXP") ? atoi(getenv("MAXEXP")) : 30;
  int iters = getenv("ITERS") ? atoi(getenv("ITERS")) : 20;
  if (maxexp < 3 || maxexp > 34 || iters < 1) {
    fprintf(stderr, "memcpy: MAXEXP in 3..34 and ITERS >= 1\n");
    return 2;
  }
  size_t maxBytes = (size_t)1 << maxexp;
  void *a, *b;
  CK(cudaMalloc(&a, maxBytes));
  CK(cudaMalloc(&b, maxBytes));
  CK(cudaMemset(a, 1, maxBytes));
  CK(cudaMemset(b, 0, maxBytes));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  printf("kind,bytes,us\n");
  for (size_t bytes = 8; bytes <= maxBytes; bytes *= 2) {
    for (int w = 0; w < 5; w++) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < iters; i++) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    printf("memcpy_loop,%zu,%.3f\n", bytes, ms * 1e3 / iters);
  }
  return 0;
}
