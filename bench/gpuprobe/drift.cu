// drift.cu — whether the channels of a 2-rank ring part from each other over a long call, and how
// much one channel's slices vary in time: an input to simccl's question of why NCCL's 24-channel
// rings on 2 H200 move more data per second the longer the call (all_gather 257 GB/s of busbw
// between 128 and 256 MiB, 322 between 4 and 8 GiB; BENCHMARKS.md "(skew)"), where a max-min fair
// replay keeps its channels in lockstep. Needs two GPUs with peer access. Build and run on the
// device machine:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/drift bench/gpuprobe/drift.cu && /tmp/drift OUTDIR
//
// The kernel is chan.cu's ring (slice.cu's primitives in NCCL Simple's order: CopySend then Recv,
// all_gather's pair, with __threadfence() before each tail), one CTA of 512 threads per channel,
// run for 40 to 640 slices a channel (the sources and outputs reused modulo 40 slices). Thread 0 of
// every CTA on GPU 0 records %globaltimer when each of its slices' sends starts.
//
// Output: OUTDIR/drift.csv "channels,slice_bytes,slices,us" (the slower GPU's kernel time, median
// of 5 after a warm-up), and OUTDIR/drift_ts.csv "channels,slice_bytes,slices,channel,slice,ns"
// (GPU 0's timestamps of the last timed run, ns from the earliest of that run) for the runs of
// 1 and 24 channels.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int kFlagStride = 16;    // unsigned long longs per channel's counter: 128 bytes
constexpr int kMaxChannels = 24;
constexpr int kSrcSlices = 40;     // source slices held per channel; slice k reads slice k % 40
constexpr int kMaxSlices = 640;
constexpr size_t kMaxSlice = 1 << 20;

#include "simple.cuh"  // channelRing, longRing, twoPeers, allocRing, bothTimed

// One ring channel per CTA; ts (GPU 0 only, else null) gets slice k's send start of channel c at
// ts[c * kMaxSlices + k]. The output holds 2 × kSrcSlices slices per channel: recvSlice writes
// slice k's copy at (slices + k), so the reuse runs over a window of kSrcSlices (longRing).
__global__ void ring(const float4* src0, float4* dst0, float4* myFifo0, float4* peerFifo0,
                     volatile unsigned long long* myFlags, volatile unsigned long long* peerFlags,
                     int slices, size_t n, unsigned long long* ts) {
  const int c = blockIdx.x;
  const ChannelRing r = channelRing(c, src0, dst0, myFifo0, peerFifo0, myFlags, peerFlags, kSrcSlices, kMaxSlice,
                                    kFlagStride);
  longRing(r, slices, n, kSrcSlices, ts ? ts + (size_t)c * kMaxSlices : nullptr);
}

int main(int argc, char** argv) {
  if (argc != 2) { fprintf(stderr, "usage: drift OUTDIR\n"); return 2; }
  if (!twoPeers()) return 1;
  const std::string dir = argv[1];
  FILE* out = fopen((dir + "/drift.csv").c_str(), "w");
  FILE* tsOut = fopen((dir + "/drift_ts.csv").c_str(), "w");
  if (!out || !tsOut) { fprintf(stderr, "cannot write in %s\n", dir.c_str()); return 1; }
  const size_t flagBytes = (size_t)2 * kMaxChannels * kFlagStride * sizeof(unsigned long long);
  TwoGPURing r = allocRing(kMaxChannels, kMaxSlice, kSrcSlices, flagBytes);
  unsigned long long* ts = nullptr;
  CK(cudaSetDevice(0));
  CK(cudaMalloc(&ts, sizeof(unsigned long long) * kMaxChannels * kMaxSlices));
  std::vector<unsigned long long> host(kMaxChannels * kMaxSlices);
  fprintf(out, "channels,slice_bytes,slices,us\n");
  fprintf(tsOut, "channels,slice_bytes,slices,channel,slice,ns\n");
  for (int ch : {1, 8, 16, 24})
    for (size_t bytes : {(size_t)512 << 10, (size_t)1 << 20})
      for (int slices : {40, 80, 160, 320, 640}) {
        float us = bothTimed(r, [&](int d) {
          ring<<<ch, 512, 0, r.st[d]>>>(r.src[d], r.dst[d], r.fifo[d], r.fifo[1 - d], r.flags[d], r.flags[1 - d],
                                      slices, bytes / 16, d == 0 ? ts : nullptr);
        });
        fprintf(out, "%d,%zu,%d,%.3f\n", ch, bytes, slices, us);
        fflush(out);
        if ((ch == 1 || ch == 24) && slices == kMaxSlices) {
          CK(cudaSetDevice(0));
          CK(cudaMemcpy(host.data(), ts, sizeof(unsigned long long) * host.size(), cudaMemcpyDeviceToHost));
          unsigned long long t0 = ~0ull;
          for (int c = 0; c < ch; c++) t0 = std::min(t0, host[c * kMaxSlices]);
          for (int c = 0; c < ch; c++)
            for (int k = 0; k < slices; k++)
              fprintf(tsOut, "%d,%zu,%d,%d,%d,%llu\n", ch, bytes, slices, c, k, host[c * kMaxSlices + k] - t0);
        }
      }
  fclose(out);
  fclose(tsOut);
  return 0;
}
