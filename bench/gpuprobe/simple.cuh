// simple.cuh — what slice.cu and chan.cu share (included from the same folder, so their one-line
// nvcc builds are unchanged): NCCL's copy loop and the two halves of a 2-rank ring's slice in
// NCCL Simple's order.
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdio>
#include <vector>
#include <algorithm>

constexpr int kSlots = 4;  // NCCL_STEPS (8) / 2 steps per slice

// copyGroupOut: dst0[i] = src[i] (+ add[i] when add), and dst1[i] = the same when dst1, by the
// nthreads threads of a group (tid its own index in it); 4 16-byte loads in flight per thread
// (NCCL's unroll).
__device__ void copyGroupOut(const float4* src, const float4* add, float4* dst0, float4* dst1, size_t n, int tid,
                             int nthreads) {
  size_t warp = tid / 32, lane = tid % 32, warps = nthreads / 32;
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

// copyOut is copyGroupOut by the whole CTA.
__device__ void copyOut(const float4* src, const float4* add, float4* dst0, float4* dst1, size_t n) {
  copyGroupOut(src, add, dst0, dst1, n, threadIdx.x, blockDim.x);
}

// sendSlice sends slice k (n float4s) of a ring channel: wait for a credit (the peer's head
// counter, kSlots slots of FIFO), copy the slice into the peer's FIFO (and the local output for
// all_gather's CopySend), fence (1 __threadfence(), 2 __threadfence_system()), post the tail in
// the peer's memory.
__device__ void sendSlice(const float4* src, float4* dst, float4* peerFifo,
                          volatile unsigned long long* myHead, volatile unsigned long long* peerTail,
                          int k, size_t n, bool ag, int fence) {
  if (threadIdx.x == 0) while ((long long)*myHead < (long long)k - kSlots + 1) {}
  __syncthreads();
  copyOut(src + (size_t)k * n, nullptr, peerFifo + (size_t)(k % kSlots) * n, ag ? dst + (size_t)k * n : nullptr, n);
  if (fence == 1) __threadfence();
  if (fence == 2) __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) *peerTail = k + 1;
}

// recvSlice receives slice k: wait for the tail the peer posted, take the slice out of the local
// FIFO into the output (all_gather's Recv; reduce_scatter's RecvReduceCopy adds the local input),
// post the head back.
__device__ void recvSlice(const float4* src, float4* dst, const float4* myFifo,
                          volatile unsigned long long* myTail, volatile unsigned long long* peerHead,
                          int k, int slices, size_t n, bool ag) {
  if (threadIdx.x == 0) while (*myTail < (unsigned long long)k + 1) {}
  __syncthreads();
  copyOut(myFifo + (size_t)(k % kSlots) * n, ag ? nullptr : src + (size_t)k * n,
          dst + (size_t)(slices + k) * n, nullptr, n);
  __syncthreads();
  if (threadIdx.x == 0) *peerHead = k + 1;
}

// ChannelRing is channel c's share of a TwoGPURing's buffers, as a ring kernel sees them: its
// source and output (srcSlices and twice that slices of maxSlice bytes), its FIFO and the peer's,
// and its tail and head counters and the peer's, each on its own line of flagStride counters.
struct ChannelRing {
  const float4* src;
  float4 *dst, *myFifo, *peerFifo;
  volatile unsigned long long *myTail, *myHead, *peerTail, *peerHead;
};

__device__ ChannelRing channelRing(int c, const float4* src0, float4* dst0, float4* myFifo0, float4* peerFifo0,
                                   volatile unsigned long long* myFlags, volatile unsigned long long* peerFlags,
                                   int srcSlices, size_t maxSlice, int flagStride) {
  const size_t n = maxSlice / 16;
  ChannelRing r;
  r.src = src0 + (size_t)c * srcSlices * n;
  r.dst = dst0 + (size_t)c * 2 * srcSlices * n;
  r.myFifo = myFifo0 + (size_t)c * kSlots * n;
  r.peerFifo = peerFifo0 + (size_t)c * kSlots * n;
  r.myTail = myFlags + (2 * c) * flagStride;
  r.myHead = myFlags + (2 * c + 1) * flagStride;
  r.peerTail = peerFlags + (2 * c) * flagStride;
  r.peerHead = peerFlags + (2 * c + 1) * flagStride;
  return r;
}

// globalNs is the GPU's %globaltimer, ns.
__device__ unsigned long long globalNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// longRing runs slices slices of n float4s on ring channel r, all_gather's pair (CopySend, then
// Recv, the device fence), reusing its srcSlices source and output slices modulo srcSlices (the
// FIFO slot and the counters follow the slice); ts, where set, gets slice k's send start at ts[k]
// from thread 0 (drift.cu, place.cu).
__device__ void longRing(const ChannelRing& r, int slices, size_t n, int srcSlices, unsigned long long* ts) {
  for (int k = 0; k < slices; k++) {
    if (ts && threadIdx.x == 0) ts[k] = globalNs();
    const int w = k % srcSlices;
    const float4* s = r.src + (size_t)w * n - (size_t)k * n;  // sendSlice adds k * n
    float4* d = r.dst + (size_t)w * n - (size_t)k * n;
    sendSlice(s, d, r.peerFifo, r.myHead, r.peerTail, k, n, true, 1);
    recvSlice(s, d + (size_t)(srcSlices - slices) * n, r.myFifo, r.myTail, r.peerHead, k, slices, n, true);
  }
}

// median of a probe's timed repetitions.
static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// twoPeers reports whether GPUs 0 and 1 exist, and enables peer access between them.
static bool twoPeers() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
    fprintf(stderr, "needs 2 GPUs, found %d\n", n);
    return false;
  }
  for (int d = 0; d < 2; d++) {
    cudaError_t e = cudaSetDevice(d);
    if (e == cudaSuccess) e = cudaDeviceEnablePeerAccess(1 - d, 0);
    if (e != cudaSuccess) { fprintf(stderr, "GPU %d: peer access: %s\n", d, cudaGetErrorString(e)); return false; }
  }
  return true;
}

// TwoGPURing is what a 2-rank ring probe holds on each of the two GPUs: the channels' sources
// (slices × maxSlice bytes each, zeroed), outputs (twice that), FIFOs (kSlots slices each) and
// flags (flagBytes in all), a stream and the two events bothTimed records.
struct TwoGPURing {
  float4 *src[2], *dst[2], *fifo[2];
  unsigned long long* flags[2];
  size_t flagBytes;
  cudaStream_t st[2];
  cudaEvent_t e0[2], e1[2];
};

// allocRing allocates a TwoGPURing of `channels` channels. CK is the including file's error check.
static TwoGPURing allocRing(int channels, size_t maxSlice, int slices, size_t flagBytes) {
  TwoGPURing r;
  r.flagBytes = flagBytes;
  const size_t perCh = maxSlice * slices;
  for (int d = 0; d < 2; d++) {
    CK(cudaSetDevice(d));
    CK(cudaMalloc(&r.src[d], perCh * channels));
    CK(cudaMalloc(&r.dst[d], 2 * perCh * channels));
    CK(cudaMalloc(&r.fifo[d], maxSlice * kSlots * channels));
    CK(cudaMalloc(&r.flags[d], flagBytes));
    CK(cudaMemset(r.src[d], 0, perCh * channels));
    CK(cudaStreamCreateWithFlags(&r.st[d], cudaStreamNonBlocking));
    CK(cudaEventCreate(&r.e0[d])); CK(cudaEventCreate(&r.e1[d]));
  }
  return r;
}

// bothTimed times one launch on each of the two GPUs of ring g at once, 6 times over: before each,
// both GPUs' flags are zeroed and both GPUs synchronised; launch(d) then enqueues GPU d's kernel on
// g.st[d] between the events g.e0[d] and g.e1[d]. It returns the median of the last 5 runs of the
// slower GPU's time, in µs (the first run warms up). CK is the including file's error check.
template <class Launch>
static float bothTimed(const TwoGPURing& g, Launch launch) {
  std::vector<float> t;
  for (int r = 0; r < 6; r++) {
    for (int d = 0; d < 2; d++) {
      CK(cudaSetDevice(d)); CK(cudaMemset(g.flags[d], 0, g.flagBytes));
      CK(cudaDeviceSynchronize());
    }
    for (int d = 0; d < 2; d++) {
      CK(cudaSetDevice(d));
      CK(cudaEventRecord(g.e0[d], g.st[d]));
      launch(d);
      CK(cudaGetLastError());
      CK(cudaEventRecord(g.e1[d], g.st[d]));
    }
    float worst = 0;
    for (int d = 0; d < 2; d++) {
      CK(cudaSetDevice(d)); CK(cudaEventSynchronize(g.e1[d]));
      float ms; CK(cudaEventElapsedTime(&ms, g.e0[d], g.e1[d])); worst = std::max(worst, ms);
    }
    if (r > 0) t.push_back(worst * 1e3f);
  }
  return median(t);
}
