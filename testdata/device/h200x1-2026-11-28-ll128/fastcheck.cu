// One-rank results through libnccl's C path (cuda/libnccl/fast.c) on a GPU: out-of-place
// ncclAllReduce / ncclAllGather / ncclReduceScatter / ncclBroadcast / ncclReduce of float data,
// alone and inside groups where each call reads the previous call's output (held calls run in
// order), sizes 4 B to 4 MiB (the copy kernel up to 1 MiB, cuMemcpyDtoDAsync above), on a
// non-blocking stream and on the legacy default stream; every element compared with the input.
// Prints "fastcheck ok" or the first mismatch.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)
#define NK(x) do { ncclResult_t r = (x); if (r != ncclSuccess) { printf("%s:%d nccl %d %s\n", __FILE__, __LINE__, (int)r, ncclGetErrorString(r)); return 1; } } while (0)
int main() {
  ncclComm_t comm; int dev = 0;
  NK(ncclCommInitAll(&comm, 1, &dev));
  const size_t maxn = (4 << 20) / 4;
  float *buf[6];
  for (int i = 0; i < 6; i++) CK(cudaMalloc(&buf[i], maxn * 4));
  std::vector<float> in(maxn), out(maxn);
  for (size_t i = 0; i < maxn; i++) in[i] = (float)(i % 1009) - 77.0f;
  cudaStream_t ns; CK(cudaStreamCreateWithFlags(&ns, cudaStreamNonBlocking));
  size_t sizes[] = {1, 2, 13, 256, 1031, 16384, 65536, 262144, 262145, maxn};
  int checks = 0;
  for (int si = 0; si < 2; si++) {
    cudaStream_t st = si ? (cudaStream_t)0 : ns;
    for (size_t n : sizes) {
      for (int grouped = 0; grouped < 2; grouped++) {
        CK(cudaMemcpy(buf[0], in.data(), n * 4, cudaMemcpyHostToDevice));
        for (int i = 1; i < 6; i++) CK(cudaMemset(buf[i], 0xa5, n * 4));
        if (grouped) NK(ncclGroupStart());
        NK(ncclAllReduce(buf[0], buf[1], n, ncclFloat, ncclSum, comm, st));
        NK(ncclAllGather(buf[1], buf[2], n, ncclFloat, comm, st));
        NK(ncclReduceScatter(buf[2], buf[3], n, ncclFloat, ncclMax, comm, st));
        NK(ncclBroadcast(buf[3], buf[4], n, ncclFloat, 0, comm, st));
        NK(ncclReduce(buf[4], buf[5], n, ncclFloat, ncclMin, 0, comm, st));
        if (grouped) NK(ncclGroupEnd());
        CK(cudaStreamSynchronize(st));
        CK(cudaDeviceSynchronize());
        for (int b = 1; b < 6; b++) {
          CK(cudaMemcpy(out.data(), buf[b], n * 4, cudaMemcpyDeviceToHost));
          for (size_t i = 0; i < n; i++)
            if (out[i] != in[i]) { printf("fastcheck FAIL: stream %d n %zu grouped %d buffer %d element %zu: %g, want %g\n", si, n, grouped, b, i, out[i], in[i]); return 1; }
          checks++;
        }
      }
    }
  }
  NK(ncclCommDestroy(comm));
  printf("fastcheck ok: %d buffers checked\n", checks);
  return 0;
}
