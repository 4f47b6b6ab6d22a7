// copyout.cuh — the copy loop slice.cu and chan.cu share (included from the same folder, so
// their one-line nvcc builds are unchanged).
#pragma once
#include <cuda_runtime.h>
#include <cstddef>

// copyOut: dst0[i] = src[i] (+ add[i] when add), and dst1[i] = the same when dst1; 4 16-byte
// loads in flight per thread (NCCL's unroll).
__device__ void copyOut(const float4* src, const float4* add, float4* dst0, float4* dst1, size_t n) {
  size_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (size_t base = warp * 32 * 4; base < n; base += warps * 32 * 4) {
    float4 v[4];
#pragma unroll
    for (int u = 0; u < 4; u++) { size_t i = base + u * 32 + lane; if (i < n) v[u] = src[i]; }
    if (add) {
#pragma unroll
      for (int u = 0; u < 4; u++) {
        size_t i = base + u * 32 + lane;
        if (i < n) { float4 a = add[i]; v[u].x += a.x; v[u].y += a.y; v[u].z += a.z; v[u].w += a.w; }
      }
    }
#pragma unroll
    for (int u = 0; u < 4; u++) { size_t i = base + u * 32 + lane; if (i < n) dst0[i] = v[u]; }
    if (dst1) {
#pragma unroll
      for (int u = 0; u < 4; u++) { size_t i = base + u * 32 + lane; if (i < n) dst1[i] = v[u]; }
    }
  }
}
