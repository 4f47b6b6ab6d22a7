// chan.cu — whether a channel of a 2-rank ring moves less data per second when more channels run
// beside it: an input to simccl's GPU-side cost model. NCCL 2.28 on 2 and 4 H200 pinned to 2, 4
// and 8 Ring/Simple channels moves 4–7% less per channel at 8 than at 2, at every size from 16 MiB
// to 1 GiB, where the simulation keeps one channel's rate (BENCHMARKS.md "(channel count)"). Needs
// two GPUs with peer access. Build and run on the device machine:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/chan bench/gpuprobe/chan.cu && /tmp/chan > chan.csv
//
// The kernel is slice.cu's ring, one CTA of 512 threads per channel, every channel with its own
// FIFO (4 slots) and its own head and tail counters (each on its own 128-byte line): per slice,
// wait for a credit, copy the slice into the peer's FIFO (stores over NVLink), fence, post the
// tail in the peer's memory; then wait for the peer's tail, take the slice out of the local FIFO,
// post the head back. Modes: "ag" (CopySend then Recv: all_gather's pair), "rs" (Send then
// RecvReduceCopy: reduce_scatter's pair), "push" (the send alone, no receive, no flags: the data
// path without the protocol). Fences: 0 none, 1 __threadfence(), 2 __threadfence_system().
//
// Output: CSV "mode,fence,channels,slice_bytes,slices,us" (the slower GPU's kernel time, median of
// 5 after one warm-up) for 8 and 40 slices per channel; a slice's time per channel is the
// difference over 32.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int kFlagStride = 16;    // unsigned long longs per channel's counter: 128 bytes
constexpr int kMaxChannels = 24;
constexpr int kMaxSlices = 40;
constexpr size_t kMaxSlice = 512 << 10;

#include "simple.cuh"  // copyOut, sendSlice, recvSlice, kSlots, channelRing, median, twoPeers, allocRing, bothTimed

// mode: 0 rs, 1 ag, 2 push. Channel c = blockIdx.x.
__global__ void ring(const float4* src0, float4* dst0, float4* myFifo0, float4* peerFifo0,
                     volatile unsigned long long* myFlags, volatile unsigned long long* peerFlags,
                     int slices, size_t n, int mode, int fence) {
  const ChannelRing r = channelRing(blockIdx.x, src0, dst0, myFifo0, peerFifo0, myFlags, peerFlags, kMaxSlices,
                                    kMaxSlice, kFlagStride);
  if (mode == 2) {  // the data path alone
    for (int k = 0; k < slices; k++) copyOut(r.src + (size_t)k * n, nullptr, r.peerFifo + (size_t)(k % kSlots) * n, nullptr, n);
    return;
  }
  const bool ag = mode == 1;
  for (int k = 0; k < slices; k++) {
    sendSlice(r.src, r.dst, r.peerFifo, r.myHead, r.peerTail, k, n, ag, fence);
    recvSlice(r.src, r.dst, r.myFifo, r.myTail, r.peerHead, k, slices, n, ag);
  }
}

int main() {
  if (!twoPeers()) return 1;
  const size_t flagBytes = (size_t)2 * kMaxChannels * kFlagStride * sizeof(unsigned long long);
  TwoGPURing r = allocRing(kMaxChannels, kMaxSlice, kMaxSlices, flagBytes);
  printf("mode,fence,channels,slice_bytes,slices,us\n");
  const char* names[] = {"rs", "ag", "push"};
  const size_t sizes[] = {128 << 10, 512 << 10};
  const int chans[] = {1, 2, 4, 8, 12, 16, 24};
  for (int mode = 0; mode < 3; mode++)
    for (int fence : {0, 1, 2}) {
      if (mode == 2 && fence > 0) continue;
      for (int ch : chans)
        for (size_t bytes : sizes)
          for (int slices : {8, kMaxSlices}) {
            float us = bothTimed(r, [&](int d) {
              ring<<<ch, 512, 0, r.st[d]>>>(r.src[d], r.dst[d], r.fifo[d], r.fifo[1 - d], r.flags[d], r.flags[1 - d],
                                          slices, bytes / 16, mode, fence);
            });
            printf("%s,%d,%d,%zu,%d,%.3f\n", names[mode], fence, ch, bytes, slices, us);
            fflush(stdout);
          }
    }
  return 0;
}
