// ramp.cu — what each further chunk of a short call costs on 2 GPUs: an input to simccl's question
// of why NCCL's 16-channel send/recv on 2 H200 takes 31–33 µs for a channel's second 512 KiB chunk
// where later chunks take 25.7–27.6 (testdata/nccl/h200x2 graphscan, p2pchscan), and why its
// 24-channel rings at 16–64 MiB are slower than their per-slice cost at 1 GiB says. Needs two GPUs
// with peer access. Build and run on the device machine:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/ramp bench/gpuprobe/ramp.cu && /tmp/ramp OUTDIR
//
// Three kernels, one CTA of 512 threads per channel, both GPUs at once (simple.cuh's bothTimed):
//   p2p  — NCCL Simple's send/recv over P2P write: the CTA's first 256 threads send (wait for a
//          credit of the peer's 8-slot FIFO, copy the chunk into it over NVLink, __threadfence(),
//          post the tail in the peer's memory), the other 256 receive at the same time (wait for
//          the peer's tail, copy the chunk out of the local FIFO into the output, post the head
//          back); every chunk its own source and output, nothing reused;
//   p2p_serial — the same pair with all 512 threads taking a chunk's send, then its receive;
//   ring — drift.cu's 2-rank ring (all_gather's CopySend then Recv, one slice at a time, 4 slots).
// For 1–64 chunks (slices) of 512 KiB a channel on 1–32 channels.
//
// Output: OUTDIR/ramp.csv "kernel,channels,chunk_bytes,chunks,us" (the slower GPU's kernel time,
// median of 5 after a warm-up) and OUTDIR/ramp_ts.csv "kernel,channels,chunks,channel,chunk,what,ns"
// (GPU 0's %globaltimer stamps of the last timed run, ns from the earliest stamp of that run; what:
// send_start, send_end, recv_start, recv_end for p2p and p2p_serial, send_start for ring) for the
// p2p and p2p_serial runs of 16 channels and 2, 4, 8 and 32 chunks, the p2p runs of 8, 24 and 32
// channels and 2 and 8 chunks, and the ring runs of 24 channels and 2, 4, 8 and 32 slices.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <algorithm>
#include <functional>
#include <initializer_list>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int kFlagStride = 16;   // unsigned long longs per counter: 128 bytes
constexpr int kMaxChannels = 32;
constexpr int kMaxChunks = 64;
constexpr size_t kChunk = 512 << 10;
constexpr int kP2PSlots = 8;      // NCCL_STEPS: a p2p connection's FIFO holds 8 chunks
constexpr int kThreads = 512;
constexpr int kHalf = kThreads / 2;

#include "simple.cuh"  // copyGroupOut, channelRing, longRing, globalNs, twoPeers, allocRing, bothTimed

__device__ void barGroup(int id, int nthreads) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nthreads) : "memory"); }

// P2PChan is channel c's share of the buffers as a send/recv kernel sees them: its source and
// output (kMaxChunks chunks each), its FIFO and the peer's (kP2PSlots chunks each), its tail and
// head counters and the peer's, and its stamps (4 a chunk; null: none).
struct P2PChan {
  const float4* src;
  float4 *dst, *myFifo, *peerFifo;
  volatile unsigned long long *myTail, *myHead, *peerTail, *peerHead;
  unsigned long long* t;
};

__device__ P2PChan p2pChan(int c, const float4* src0, float4* dst0, float4* myFifo0, float4* peerFifo0,
                           volatile unsigned long long* myFlags, volatile unsigned long long* peerFlags,
                           unsigned long long* ts) {
  const size_t n = kChunk / 16;
  P2PChan p;
  p.src = src0 + (size_t)c * kMaxChunks * n;
  p.dst = dst0 + (size_t)c * kMaxChunks * n;
  p.myFifo = myFifo0 + (size_t)c * kP2PSlots * n;
  p.peerFifo = peerFifo0 + (size_t)c * kP2PSlots * n;
  p.myTail = myFlags + (2 * c) * kFlagStride;
  p.myHead = myFlags + (2 * c + 1) * kFlagStride;
  p.peerTail = peerFlags + (2 * c) * kFlagStride;
  p.peerHead = peerFlags + (2 * c + 1) * kFlagStride;
  p.t = ts ? ts + ((size_t)c * kMaxChunks) * 4 : nullptr;
  return p;
}

// sendChunk sends chunk k by a group of nthreads threads (tid its index in it, bar its barrier:
// 0 is the whole CTA's): wait for a credit of the peer's FIFO, copy the chunk into it over NVLink,
// __threadfence(), post the tail in the peer's memory.
__device__ void sendChunk(const P2PChan& p, int k, int tid, int nthreads, int bar) {
  const size_t n = kChunk / 16;
  if (tid == 0) while ((long long)*p.myHead < (long long)k - kP2PSlots + 1) {}
  barGroup(bar, nthreads);
  if (p.t && tid == 0) p.t[4 * k + 0] = globalNs();
  copyGroupOut(p.src + (size_t)k * n, nullptr, p.peerFifo + (size_t)(k % kP2PSlots) * n, nullptr, n, tid, nthreads);
  __threadfence();
  barGroup(bar, nthreads);
  if (tid == 0) {
    *p.peerTail = k + 1;
    if (p.t) p.t[4 * k + 1] = globalNs();
  }
}

// recvChunk receives chunk k the same way: wait for the peer's tail, copy the chunk out of the
// local FIFO into the output, post the head back.
__device__ void recvChunk(const P2PChan& p, int k, int tid, int nthreads, int bar) {
  const size_t n = kChunk / 16;
  if (tid == 0) while (*p.myTail < (unsigned long long)k + 1) {}
  barGroup(bar, nthreads);
  if (p.t && tid == 0) p.t[4 * k + 2] = globalNs();
  copyGroupOut(p.myFifo + (size_t)(k % kP2PSlots) * n, nullptr, p.dst + (size_t)k * n, nullptr, n, tid, nthreads);
  barGroup(bar, nthreads);
  if (tid == 0) {
    *p.peerHead = k + 1;
    if (p.t) p.t[4 * k + 3] = globalNs();
  }
}

// One send/recv channel per CTA, its halves at once: the first kHalf threads send every chunk
// (barrier 1), the others receive them (barrier 2); ts (GPU 0 only, else null) gets the stamps.
__global__ void p2p(const float4* src0, float4* dst0, float4* myFifo0, float4* peerFifo0,
                    volatile unsigned long long* myFlags, volatile unsigned long long* peerFlags, int chunks,
                    unsigned long long* ts) {
  const P2PChan p = p2pChan(blockIdx.x, src0, dst0, myFifo0, peerFifo0, myFlags, peerFlags, ts);
  const bool sender = threadIdx.x < kHalf;
  const int tid = sender ? threadIdx.x : threadIdx.x - kHalf;
  for (int k = 0; k < chunks; k++) {
    if (sender) sendChunk(p, k, tid, kHalf, 1);
    else recvChunk(p, k, tid, kHalf, 2);
  }
}

// p2pSerial is p2p with the CTA's kThreads threads taking each chunk's send and then its receive,
// in program order, instead of two halves at once: the other way a channel could run its pair.
__global__ void p2pSerial(const float4* src0, float4* dst0, float4* myFifo0, float4* peerFifo0,
                          volatile unsigned long long* myFlags, volatile unsigned long long* peerFlags, int chunks,
                          unsigned long long* ts) {
  const P2PChan p = p2pChan(blockIdx.x, src0, dst0, myFifo0, peerFifo0, myFlags, peerFlags, ts);
  for (int k = 0; k < chunks; k++) {
    sendChunk(p, k, threadIdx.x, kThreads, 0);
    recvChunk(p, k, threadIdx.x, kThreads, 0);
  }
}

// drift.cu's ring: one ring channel per CTA, slices of kChunk, the sources and outputs reused
// modulo kMaxChunks slices (none here: at most kMaxChunks slices run).
__global__ void ring(const float4* src0, float4* dst0, float4* myFifo0, float4* peerFifo0,
                     volatile unsigned long long* myFlags, volatile unsigned long long* peerFlags, int slices,
                     unsigned long long* ts) {
  const int c = blockIdx.x;
  const ChannelRing r = channelRing(c, src0, dst0, myFifo0, peerFifo0, myFlags, peerFlags, kMaxChunks, kChunk,
                                    kFlagStride);
  longRing(r, slices, kChunk / 16, kMaxChunks, ts ? ts + (size_t)c * kMaxChunks * 4 : nullptr);
}

int main(int argc, char** argv) {
  if (argc != 2) { fprintf(stderr, "usage: ramp OUTDIR\n"); return 2; }
  if (!twoPeers()) return 1;
  const std::string dir = argv[1];
  FILE* out = fopen((dir + "/ramp.csv").c_str(), "w");
  FILE* tsOut = fopen((dir + "/ramp_ts.csv").c_str(), "w");
  if (!out || !tsOut) { fprintf(stderr, "cannot write in %s\n", dir.c_str()); return 1; }
  const size_t flagBytes = (size_t)2 * kMaxChannels * kFlagStride * sizeof(unsigned long long);
  // The p2p FIFOs are kP2PSlots chunks a channel; allocRing gives kSlots (4): allocate the larger
  // by asking for twice the channels' FIFO (kMaxChannels × 2 × kSlots slots = kP2PSlots a channel).
  static_assert(kP2PSlots == 2 * kSlots, "FIFO sizing");
  TwoGPURing p = allocRing(2 * kMaxChannels, kChunk, kMaxChunks / 2, flagBytes);
  unsigned long long* ts = nullptr;
  CK(cudaSetDevice(0));
  const size_t nts = (size_t)kMaxChannels * kMaxChunks * 4;
  CK(cudaMalloc(&ts, sizeof(unsigned long long) * nts));
  std::vector<unsigned long long> host(nts);
  fprintf(out, "kernel,channels,chunk_bytes,chunks,us\n");
  fprintf(tsOut, "kernel,channels,chunks,channel,chunk,what,ns\n");
  const char* what[4] = {"send_start", "send_end", "recv_start", "recv_end"};
  auto dump = [&](const char* kernel, int ch, int chunks, int stamps) {
    CK(cudaSetDevice(0));
    CK(cudaMemcpy(host.data(), ts, sizeof(unsigned long long) * nts, cudaMemcpyDeviceToHost));
    unsigned long long t0 = ~0ull;
    for (int c = 0; c < ch; c++)
      for (int k = 0; k < chunks * stamps; k++) t0 = std::min(t0, host[(size_t)c * kMaxChunks * 4 + k]);
    for (int c = 0; c < ch; c++)
      for (int k = 0; k < chunks; k++)
        for (int s = 0; s < stamps; s++) {
          const size_t i = (size_t)c * kMaxChunks * 4 + (stamps == 4 ? 4 * k + s : k);
          fprintf(tsOut, "%s,%d,%d,%d,%d,%s,%llu\n", kernel, ch, chunks, c, k, stamps == 4 ? what[s] : "send_start",
                  host[i] - t0);
        }
  };
  const int chunkCounts[] = {1, 2, 3, 4, 6, 8, 12, 16, 32, 64};
  // sweep times kernel k on each channel count of chans and every chunk count, and keeps the
  // stamps (4 a chunk, or 1) of the runs stampAt names.
  using Kernel = void (*)(const float4*, float4*, float4*, float4*, volatile unsigned long long*,
                          volatile unsigned long long*, int, unsigned long long*);
  auto sweep = [&](const char* name, Kernel k, std::initializer_list<int> chans, int stamps,
                   std::function<bool(int, int)> stampAt) {
    for (int ch : chans)
      for (int chunks : chunkCounts) {
        const bool stamp = stampAt(ch, chunks);
        float us = bothTimed(p, [&](int d) {
          k<<<ch, kThreads, 0, p.st[d]>>>(p.src[d], p.dst[d], p.fifo[d], p.fifo[1 - d], p.flags[d], p.flags[1 - d],
                                          chunks, stamp && d == 0 ? ts : nullptr);
        });
        fprintf(out, "%s,%d,%zu,%d,%.3f\n", name, ch, kChunk, chunks, us);
        fflush(out);
        if (stamp) dump(name, ch, chunks, stamps);
      }
  };
  auto four = [](int chunks) { return chunks == 2 || chunks == 4 || chunks == 8 || chunks == 32; };
  sweep("p2p", p2p, {1, 8, 16, 24, 32}, 4, [&](int ch, int chunks) {
    return (ch == 16 && four(chunks)) || ((ch == 8 || ch == 24 || ch == 32) && (chunks == 2 || chunks == 8));
  });
  sweep("p2p_serial", p2pSerial, {1, 16, 32}, 4, [&](int ch, int chunks) { return ch == 16 && four(chunks); });
  sweep("ring", ring, {8, 16, 24}, 1, [&](int ch, int chunks) { return ch == 24 && four(chunks); });
  fclose(out);
  fclose(tsOut);
  return 0;
}
