// slice.cu — what one slice of a 2-rank ring costs a CTA beyond its bytes, and which part of NCCL
// Simple's per-slice protocol costs it: an input to simccl's GPU-side cost model (NCCL 2.28 on 2 and
// 4 H200 spends 2.6 µs per all_gather primitive and slice, 1.9 per reduce_scatter one, where the
// model charges a 1.28 µs fence: testdata/nccl/h200x2/ringscan-2026-11-28.csv). Needs two GPUs with
// peer access. Build and run on the device machine:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/slice bench/gpuprobe/slice.cu && /tmp/slice > slice.csv
//
// One CTA of 512 threads on each GPU runs, per group of G slices, NCCL Simple's order: for every
// slice, wait for a credit (the peer's head counter, 4 slots of buffer), copy the slice into the
// peer's receive buffer (stores over NVLink), fence, post the tail counter in the peer's memory;
// then for every slice of the group, wait for the tail the peer posted, take the slice out of the
// local receive buffer, post the head counter back. Modes: "ag" — the send also stores the slice
// into the local output (CopySend) and the receive copies it out (Recv), all_gather's pair;
// "rs" — the send only sends (Send) and the receive adds the local input to it (RecvReduceCopy),
// reduce_scatter's pair. Fences: 0 none, 1 __threadfence(), 2 __threadfence_system().
//
// Output: CSV "mode,fence,group,slice_bytes,slices,us" (the slower GPU's time of one kernel, median
// of 5) for 8 and 40 slices; the cost of a slice is the difference over 32, its bytes' share is
// what the same slice costs at the largest size, per byte.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

#include "simple.cuh"  // copyOut, sendSlice, recvSlice, kSlots, median, twoPeers, allocRing, bothTimed

__global__ void ring(const float4* src, float4* dst, float4* myFifo, float4* peerFifo,
                     volatile unsigned long long* myTail, volatile unsigned long long* peerTail,
                     volatile unsigned long long* myHead, volatile unsigned long long* peerHead,
                     int slices, size_t n, int group, int ag, int fence) {
  for (int g = 0; g < slices; g += group) {
    int end = min(g + group, slices);
    for (int k = g; k < end; k++) sendSlice(src, dst, peerFifo, myHead, peerTail, k, n, ag, fence);
    for (int k = g; k < end; k++) recvSlice(src, dst, myFifo, myTail, peerHead, k, slices, n, ag);
  }
}

int main() {
  if (!twoPeers()) return 1;
  const size_t maxSlice = 1 << 20;
  const int maxSlices = 40;
  // flags: [0] tail (written by the peer), [1] head (written by the peer)
  TwoGPURing r = allocRing(1, maxSlice, maxSlices, 2 * sizeof(unsigned long long));
  printf("mode,fence,group,slice_bytes,slices,us\n");
  const size_t sizes[] = {64 << 10, 256 << 10, 1 << 20};
  for (int ag = 1; ag >= 0; ag--)
    for (int fence = 0; fence < 3; fence++)
      for (int group : {1, 2})
        for (size_t bytes : sizes)
          for (int slices : {8, maxSlices}) {
            float us = bothTimed(r, [&](int d) {
              ring<<<1, 512, 0, r.st[d]>>>(r.src[d], r.dst[d], r.fifo[d], r.fifo[1 - d], r.flags[d], r.flags[1 - d],
                                         r.flags[d] + 1, r.flags[1 - d] + 1, slices, bytes / 16, group, ag, fence);
            });
            printf("%s,%d,%d,%zu,%d,%.3f\n", ag ? "ag" : "rs", fence, group, bytes, slices, us);
            fflush(stdout);
          }
  return 0;
}
