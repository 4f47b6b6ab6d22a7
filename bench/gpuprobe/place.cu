// place.cu — which SM each ring channel's CTA runs on, beside how fast each channel moves: an input
// to simccl's question of why a call's channels progress unequally on 2 H200 (drift.cu: with 24
// channels on a saturated NVLink, three groups by CTA index at 14.2, 12.1–13.9 and 10.4–11.1 GB/s;
// NCCL's send/recv on 16 channels: four of them 40% faster at 8–16 MiB). Needs two GPUs with peer
// access. Build and run on the device machine:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/place bench/gpuprobe/place.cu && /tmp/place OUTDIR
//
// The kernel is drift.cu's ring (NCCL Simple's all_gather pair, 512 threads a CTA, one CTA a
// channel), 320 slices of 512 KiB a channel, on 8, 16, 24 and 32 channels, twice. Thread 0 of every
// CTA on both GPUs records %smid (and %nsmid) and, on GPU 0, %globaltimer when each slice's send
// starts.
//
// Output: OUTDIR/place.csv "run,channels,gpu,channel,smid,nsmid,first_ns,last_ns,slices" per
// channel (first_ns, last_ns: GPU 0's first and last slice start, ns from the run's earliest;
// GPU 1's rows carry 0), and OUTDIR/place_time.csv "run,channels,us" (the slower GPU's kernel
// time, median of 5 after a warm-up).
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int kFlagStride = 16;    // unsigned long longs per channel's counter: 128 bytes
constexpr int kMaxChannels = 32;
constexpr int kSrcSlices = 40;     // source slices held per channel; slice k reads slice k % 40
constexpr int kSlices = 320;
constexpr size_t kSlice = 512 << 10;

#include "simple.cuh"  // channelRing, longRing, globalNs, twoPeers, allocRing, bothTimed

__device__ unsigned smid() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

__device__ unsigned nsmid() {
  unsigned s;
  asm volatile("mov.u32 %0, %%nsmid;" : "=r"(s));
  return s;
}

// One ring channel per CTA (drift.cu's, longRing); sm gets each CTA's %smid and %nsmid, ts (GPU 0 only,
// else null) slice k's send start of channel c at ts[c * kSlices + k].
__global__ void ring(const float4* src0, float4* dst0, float4* myFifo0, float4* peerFifo0,
                     volatile unsigned long long* myFlags, volatile unsigned long long* peerFlags,
                     int slices, size_t n, unsigned long long* ts, unsigned* sm) {
  const int c = blockIdx.x;
  if (threadIdx.x == 0) {
    sm[2 * c] = smid();
    sm[2 * c + 1] = nsmid();
  }
  const ChannelRing r = channelRing(c, src0, dst0, myFifo0, peerFifo0, myFlags, peerFlags, kSrcSlices, kSlice,
                                    kFlagStride);
  longRing(r, slices, n, kSrcSlices, ts ? ts + (size_t)c * kSlices : nullptr);
}

int main(int argc, char** argv) {
  if (argc != 2) { fprintf(stderr, "usage: place OUTDIR\n"); return 2; }
  if (!twoPeers()) return 1;
  const std::string dir = argv[1];
  FILE* out = fopen((dir + "/place.csv").c_str(), "w");
  FILE* tOut = fopen((dir + "/place_time.csv").c_str(), "w");
  if (!out || !tOut) { fprintf(stderr, "cannot write in %s\n", dir.c_str()); return 1; }
  const size_t flagBytes = (size_t)2 * kMaxChannels * kFlagStride * sizeof(unsigned long long);
  TwoGPURing r = allocRing(kMaxChannels, kSlice, kSrcSlices, flagBytes);
  unsigned long long* ts = nullptr;
  unsigned* sm[2];
  for (int d = 0; d < 2; d++) {
    CK(cudaSetDevice(d));
    CK(cudaMalloc(&sm[d], sizeof(unsigned) * 2 * kMaxChannels));
    if (d == 0) CK(cudaMalloc(&ts, sizeof(unsigned long long) * kMaxChannels * kSlices));
  }
  std::vector<unsigned long long> host(kMaxChannels * kSlices);
  std::vector<unsigned> hsm(2 * kMaxChannels);
  fprintf(out, "run,channels,gpu,channel,smid,nsmid,first_ns,last_ns,slices\n");
  fprintf(tOut, "run,channels,us\n");
  for (int run = 1; run <= 2; run++)
    for (int ch : {8, 16, 24, 32}) {
      float us = bothTimed(r, [&](int d) {
        ring<<<ch, 512, 0, r.st[d]>>>(r.src[d], r.dst[d], r.fifo[d], r.fifo[1 - d], r.flags[d], r.flags[1 - d],
                                    kSlices, kSlice / 16, d == 0 ? ts : nullptr, sm[d]);
      });
      fprintf(tOut, "%d,%d,%.3f\n", run, ch, us);
      fflush(tOut);
      CK(cudaSetDevice(0));
      CK(cudaMemcpy(host.data(), ts, sizeof(unsigned long long) * host.size(), cudaMemcpyDeviceToHost));
      unsigned long long t0 = ~0ull;
      for (int c = 0; c < ch; c++) t0 = std::min(t0, host[c * kSlices]);
      for (int d = 0; d < 2; d++) {
        CK(cudaSetDevice(d));
        CK(cudaMemcpy(hsm.data(), sm[d], sizeof(unsigned) * hsm.size(), cudaMemcpyDeviceToHost));
        for (int c = 0; c < ch; c++) {
          unsigned long long first = d == 0 ? host[c * kSlices] - t0 : 0;
          unsigned long long last = d == 0 ? host[c * kSlices + kSlices - 1] - t0 : 0;
          fprintf(out, "%d,%d,%d,%d,%u,%u,%llu,%llu,%d\n", run, ch, d, c, hsm[2 * c], hsm[2 * c + 1], first, last, kSlices);
        }
      }
      fflush(out);
    }
  fclose(out);
  fclose(tOut);
  return 0;
}
