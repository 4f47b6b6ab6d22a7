// peer.cu — what CTAs of one GPU can move to or from another GPU over NVLink, and what a flag costs
// between two GPUs: inputs to simccl's GPU-side cost model for collectives between GPUs (probe.cu
// measures one GPU). Needs two GPUs with peer access. Build and run on the device machine:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/peer bench/gpuprobe/peer.cu && /tmp/peer > peer.csv
//
// Output: CSV rows "kind,bytes,ctas,value,unit" (one header line):
//   pull,bytes,ctas,GBps,GB/s    a kernel of ctas×512 threads on GPU 1 copies bytes from GPU 0's
//                                memory into its own (4 16-byte loads in flight per thread, NCCL's
//                                unroll); GB/s of data crossing NVLink, launch included, per copy
//   push,bytes,ctas,GBps,GB/s    the same kernel on GPU 0, reading its memory, writing GPU 1's
//   bidir,bytes,ctas,GBps,GB/s   both GPUs push at once (a 2-rank ring's traffic): GB/s per direction
//   flag,kind,0,us,us            round trip of a flag between a CTA on each GPU through GPU 1's
//                                memory: "ll" one 8-byte store of data and flag; "fence" data,
//                                __threadfence_system(), then the flag (Simple's order)
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void copy4(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  size_t warps = (size_t)gridDim.x * blockDim.x / 32;
  for (size_t base = warp * 32 * 4; base < n; base += warps * 32 * 4) {
    int4 v[4];
#pragma unroll
    for (int u = 0; u < 4; u++) { size_t i = base + u * 32 + lane; if (i < n) v[u] = src[i]; }
#pragma unroll
    for (int u = 0; u < 4; u++) { size_t i = base + u * 32 + lane; if (i < n) dst[i] = v[u]; }
  }
}

// ping-pong: side 0 writes value 2k+1 and waits for 2k+2; side 1 waits for 2k+1 and writes 2k+2.
__global__ void pingLL(volatile unsigned long long* slot, int side, int iters) {
  if (threadIdx.x != 0) return;
  for (int k = 0; k < iters; k++) {
    unsigned long long mine = 2ull * k + 1 + side, theirs = 2ull * k + 1 + (1 - side);
    if (side == 0) { *slot = mine; while (*slot != theirs) {} }
    else { while (*slot != theirs) {} *slot = mine; }
  }
}
__global__ void pingFence(volatile int* data, volatile int* flag, int side, int iters) {
  if (threadIdx.x != 0) return;
  for (int k = 0; k < iters; k++) {
    int mine = 2 * k + 1 + side, theirs = 2 * k + 1 + (1 - side);
    if (side == 0) { *data = mine; __threadfence_system(); *flag = mine; while (*flag != theirs) {} }
    else { while (*flag != theirs) {} int d = *data; (void)d; *data = mine; __threadfence_system(); *flag = mine; }
  }
}

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main() {
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) { fprintf(stderr, "needs 2 GPUs, found %d\n", n); return 1; }
  int ok01 = 0, ok10 = 0;
  CK(cudaDeviceCanAccessPeer(&ok01, 0, 1));
  CK(cudaDeviceCanAccessPeer(&ok10, 1, 0));
  if (!ok01 || !ok10) { fprintf(stderr, "no peer access between GPU 0 and 1\n"); return 1; }
  for (int d = 0; d < 2; d++) { CK(cudaSetDevice(d)); CK(cudaDeviceEnablePeerAccess(1 - d, 0)); }
  const size_t maxb = 256 << 20;
  int4 *a[2], *b[2];
  cudaStream_t st[2];
  cudaEvent_t e0[2], e1[2];
  for (int d = 0; d < 2; d++) {
    CK(cudaSetDevice(d));
    CK(cudaMalloc(&a[d], maxb)); CK(cudaMalloc(&b[d], maxb));
    CK(cudaMemset(a[d], d + 1, maxb)); CK(cudaMemset(b[d], 0, maxb));
    CK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0[d])); CK(cudaEventCreate(&e1[d]));
  }
  printf("kind,bytes,ctas,value,unit\n");
  const size_t sizes[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20};
  const int ctas[] = {1, 2, 4, 8, 16, 24, 32, 64, 132};
  // mode 0 pull (GPU 1 reads GPU 0), 1 push (GPU 0 writes GPU 1), 2 both push
  for (int mode = 0; mode < 3; mode++) {
    const char* name = mode == 0 ? "pull" : mode == 1 ? "push" : "bidir";
    for (size_t bytes : sizes) {
      for (int c : ctas) {
        size_t n16 = bytes / 16;
        int reps = (int)std::max<size_t>(1, std::min<size_t>(50, (256u << 20) / bytes));
        std::vector<int> devs;
        if (mode == 0) devs = {1}; else if (mode == 1) devs = {0}; else devs = {0, 1};
        auto launch = [&](int d) {
          CK(cudaSetDevice(d));
          if (mode == 0) copy4<<<c, 512, 0, st[d]>>>(a[0], b[1], n16);   // on GPU 1: GPU 0 → GPU 1
          else copy4<<<c, 512, 0, st[d]>>>(a[d], b[1 - d], n16);         // on GPU d: d → 1-d
        };
        std::vector<float> t;
        for (int r = 0; r < 4; r++) {
          for (int d : devs) launch(d);  // warm-up (r == 0 is discarded)
          for (int d : devs) { CK(cudaSetDevice(d)); CK(cudaEventRecord(e0[d], st[d])); }
          for (int k = 0; k < reps; k++) for (int d : devs) launch(d);
          float worst = 0;
          for (int d : devs) {
            CK(cudaSetDevice(d)); CK(cudaEventRecord(e1[d], st[d])); CK(cudaEventSynchronize(e1[d]));
            float ms; CK(cudaEventElapsedTime(&ms, e0[d], e1[d])); worst = std::max(worst, ms);
          }
          if (r > 0) t.push_back(worst / reps);
        }
        printf("%s,%zu,%d,%.2f,GB/s\n", name, bytes, c, (double)bytes / (median(t) * 1e-3) / 1e9);
        fflush(stdout);
      }
    }
  }
  // flag round trips, the flag in GPU 1's memory, one CTA on each GPU
  for (int which = 0; which < 2; which++) {
    const int iters = 10000;
    unsigned long long* slot; int *data, *flag;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&slot, 8)); CK(cudaMalloc(&data, 4)); CK(cudaMalloc(&flag, 4));
    std::vector<float> t;
    for (int r = 0; r < 3; r++) {
      CK(cudaSetDevice(1)); CK(cudaMemset(slot, 0, 8)); CK(cudaMemset(data, 0, 4)); CK(cudaMemset(flag, 0, 4)); CK(cudaDeviceSynchronize());
      CK(cudaSetDevice(0)); CK(cudaEventRecord(e0[0], st[0]));
      for (int side = 1; side >= 0; side--) {  // the waiting side first
        CK(cudaSetDevice(side));
        if (which == 0) pingLL<<<1, 32, 0, st[side]>>>(slot, side, iters);
        else pingFence<<<1, 32, 0, st[side]>>>(data, flag, side, iters);
      }
      CK(cudaSetDevice(0)); CK(cudaEventRecord(e1[0], st[0])); CK(cudaEventSynchronize(e1[0]));
      CK(cudaSetDevice(1)); CK(cudaStreamSynchronize(st[1]));
      float ms; CK(cudaEventElapsedTime(&ms, e0[0], e1[0])); t.push_back(ms);
    }
    printf("flag,%s,0,%.4f,us\n", which == 0 ? "ll" : "fence", median(t) * 1e3 / iters);
    CK(cudaSetDevice(1)); CK(cudaFree(slot)); CK(cudaFree(data)); CK(cudaFree(flag));
  }
  fprintf(stderr, "# done\n");
  return 0;
}
