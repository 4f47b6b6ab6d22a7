// probe.cu — what one GPU can copy, reduce and synchronise, as inputs to simccl's GPU cost model.
//
// Every number is measured on the GPU at hand; nothing here comes from a datasheet. Build and run
// on the device machine (see README.md):
//
//   nvcc -O3 -arch=sm_90 -o /tmp/probe bench/gpuprobe/probe.cu && /tmp/probe > probe.csv
//
// Output: CSV rows "kind,param1,param2,value,unit" (one header line), then a short table on stderr.
//   copy,ctas,threads,GBps,GB/s     a kernel of ctas×threads copies a buffer (bytes read + written)
//   reduce,ctas,threads,GBps,GB/s   c = a + b over float32 (bytes read + written)
//   reduce_bf16,ctas,threads,...    the same over bfloat16
//   copy_u4, reduce_u4              the same with 4 loads in flight per thread (NCCL's unroll)
//   ll_copy,ctas,threads,GBps,GB/s  data through NCCL's LL line format (8 B data + flags per 16 B):
//                                   data bytes read + written, the FIFO traffic not counted
//   memcpy,bytes,0,GBps,GB/s        cudaMemcpyAsync device to device (bytes copied per second)
//   copy_size,bytes,ctas,us,us      time of one copy of bytes with ctas CTAs (a chunk's cost)
//   launch,kind,0,us,us             host cost of one launch (plain back-to-back; graph replay)
//   flag,kind,0,us,us               round trip of a flag between two CTAs through global memory:
//                                   "ll" = data and flag in one 8-byte store (NCCL's LL line),
//                                   "fence" = data, __threadfence(), then a flag (NCCL's Simple)
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void copyKernel(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

// The same copy with U 16-byte loads in flight per thread before their stores, as NCCL's
// reduceCopy unrolls (COLL_UNROLL, 4 in NCCL 2.28 for most types): a warp moves U×512 bytes per
// iteration.
template <int U>
__global__ void copyUnrolled(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  size_t warps = (size_t)gridDim.x * blockDim.x / 32;
  for (size_t base = warp * 32 * U; base < n; base += warps * 32 * U) {
    int4 v[U];
    #pragma unroll
    for (int u = 0; u < U; u++) { size_t i = base + u * 32 + lane; if (i < n) v[u] = src[i]; }
    #pragma unroll
    for (int u = 0; u < U; u++) { size_t i = base + u * 32 + lane; if (i < n) dst[i] = v[u]; }
  }
}

template <int U>
__global__ void reduceUnrolled(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, size_t n) {
  size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  size_t warps = (size_t)gridDim.x * blockDim.x / 32;
  for (size_t base = warp * 32 * U; base < n; base += warps * 32 * U) {
    float4 x[U], y[U];
    #pragma unroll
    for (int u = 0; u < U; u++) { size_t i = base + u * 32 + lane; if (i < n) { x[u] = a[i]; y[u] = b[i]; } }
    #pragma unroll
    for (int u = 0; u < U; u++) {
      size_t i = base + u * 32 + lane;
      if (i < n) c[i] = make_float4(x[u].x + y[u].x, x[u].y + y[u].y, x[u].z + y[u].z, x[u].w + y[u].w);
    }
  }
}

// NCCL's LL line: 8 data bytes and two 4-byte flags in one 16-byte store; the reader polls the
// flags. Here one CTA writes lines (flag = step) and reads them back as a receiver would: the
// bytes of data per second through an LL FIFO in local memory.
__global__ void llCopy(const uint32_t* __restrict__ src, uint4* fifo, uint32_t* __restrict__ dst, size_t lines, uint32_t step) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < lines; i += stride) {
    uint4 l = make_uint4(src[2 * i], step, src[2 * i + 1], step);
    fifo[i] = l;
  }
  __syncthreads();
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < lines; i += stride) {
    uint4 l;
    do {  // one 16-byte volatile load, as NCCL's LL reader polls a line
      asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(l.x), "=r"(l.y), "=r"(l.z), "=r"(l.w) : "l"(fifo + i) : "memory");
    } while (l.y != step || l.w != step);
    dst[2 * i] = l.x;
    dst[2 * i + 1] = l.z;
  }
}

__global__ void reduceF32(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float4 x = a[i], y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

__global__ void reduceBF16(const int4* __restrict__ a, const int4* __restrict__ b, int4* __restrict__ c, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    int4 x = a[i], y = b[i], z;
    const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&x);
    const __nv_bfloat162* yp = reinterpret_cast<const __nv_bfloat162*>(&y);
    __nv_bfloat162* zp = reinterpret_cast<__nv_bfloat162*>(&z);
    #pragma unroll
    for (int k = 0; k < 4; k++) zp[k] = __hadd2(xp[k], yp[k]);
    c[i] = z;
  }
}

__global__ void emptyKernel() {}

// Two CTAs bounce a value: CTA 0 writes round r, CTA 1 waits for it and answers r; iters rounds.
__global__ void pingLL(volatile unsigned long long* slot, int iters) {
  if (threadIdx.x != 0) return;
  int me = blockIdx.x;
  for (int r = 1; r <= iters; r++) {
    if (me == 0) {
      slot[0] = ((unsigned long long)r << 32) | 0xabcdu;  // data and flag in one store
      while ((slot[1] >> 32) != (unsigned long long)r) {}
    } else {
      while ((slot[0] >> 32) != (unsigned long long)r) {}
      slot[1] = ((unsigned long long)r << 32) | 0x1234u;
    }
  }
}

__global__ void pingFence(volatile int* data, volatile int* flag, int iters) {
  if (threadIdx.x != 0) return;
  int me = blockIdx.x;
  for (int r = 1; r <= iters; r++) {
    if (me == 0) {
      data[0] = r;
      __threadfence();
      flag[0] = r;
      while (flag[1] != r) {}
      (void)data[1];
    } else {
      while (flag[0] != r) {}
      (void)data[0];
      data[1] = r;
      __threadfence();
      flag[1] = r;
    }
  }
}

static float timeIt(cudaEvent_t a, cudaEvent_t b) { float ms; CK(cudaEventElapsedTime(&ms, a, b)); return ms; }

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int sms = prop.multiProcessorCount;
  fprintf(stderr, "# %s, %d SMs, L2 %d MiB\n", prop.name, sms, prop.l2CacheSize >> 20);
  printf("kind,param1,param2,value,unit\n");
  printf("device,%s,%d,%d,sms\n", prop.name, sms, sms);
  const size_t bytes = (size_t)1 << 30;  // far beyond L2: the copy measures HBM
  int4 *a, *b, *c;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMalloc(&c, bytes));
  // Random-ish contents (never time zeros).
  {
    std::vector<uint32_t> h(bytes / 4 / 256);
    uint32_t s = 12345;
    for (auto& x : h) { s = s * 1664525u + 1013904223u; x = (s >> 9) | 0x3f800000u; }
    for (size_t off = 0; off < bytes; off += h.size() * 4) {
      CK(cudaMemcpy((char*)a + off, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy((char*)b + off, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  size_t n16 = bytes / 16;
  std::vector<int> ctaList = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128};
  if (std::find(ctaList.begin(), ctaList.end(), sms) == ctaList.end()) ctaList.push_back(sms);
  std::vector<int> threadList = {256, 512, 640};
  for (int kind = 0; kind < 6; kind++) {
    const char* names[] = {"copy", "reduce", "reduce_bf16", "copy_u4", "reduce_u4", "ll_copy"};
    const char* name = names[kind];
    for (int th : threadList) {
      for (int ctas : ctaList) {
        // Few CTAs move little per second: shrink the buffer so that each run takes ~10-50 ms.
        size_t n = std::min(n16, (size_t)ctas * th * 4096);
        std::vector<float> t;
        for (int rep = 0; rep < 6; rep++) {
          CK(cudaEventRecord(e0));
          if (kind == 0) copyKernel<<<ctas, th>>>(a, c, n);
          else if (kind == 1) reduceF32<<<ctas, th>>>((float4*)a, (float4*)b, (float4*)c, n);
          else if (kind == 2) reduceBF16<<<ctas, th>>>(a, b, c, n);
          else if (kind == 3) copyUnrolled<4><<<ctas, th>>>(a, c, n);
          else if (kind == 4) reduceUnrolled<4><<<ctas, th>>>((float4*)a, (float4*)b, (float4*)c, n);
          else llCopy<<<ctas, th>>>((const uint32_t*)a, (uint4*)b, (uint32_t*)c, n / 2, (uint32_t)rep + 1);
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          CK(cudaGetLastError());
          if (rep > 0) t.push_back(timeIt(e0, e1));
        }
        // Bytes read + written: copy 2×, reduce 3× the buffer; the LL copy carries n/2 lines of
        // 8 data bytes (4n bytes) read from the source and written to the destination: 8n.
        double moved = kind == 5 ? (double)n * 8 : (double)n * 16 * ((kind == 0 || kind == 3) ? 2 : 3);
        printf("%s,%d,%d,%.2f,GB/s\n", name, ctas, th, moved / (median(t) * 1e-3) / 1e9);
      }
    }
  }
  // cudaMemcpyAsync device to device: what NCCL's one-rank collectives (a plain copy) reach.
  {
    std::vector<float> t;
    for (int rep = 0; rep < 6; rep++) {
      CK(cudaEventRecord(e0));
      CK(cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      if (rep > 0) t.push_back(timeIt(e0, e1));
    }
    printf("memcpy,%zu,0,%.2f,GB/s\n", bytes, (double)bytes / (median(t) * 1e-3) / 1e9);
  }
  // A chunk's cost: one copy of `sz` bytes with a few CTA counts (launch included, event-timed).
  for (int ctas : {1, 8, 32}) {
    for (size_t sz = 4096; sz <= ((size_t)64 << 20); sz *= 4) {
      std::vector<float> t;
      for (int rep = 0; rep < 21; rep++) {
        CK(cudaEventRecord(e0));
        copyKernel<<<ctas, 512>>>(a, c, sz / 16);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        if (rep > 0) t.push_back(timeIt(e0, e1));
      }
      printf("copy_size,%zu,%d,%.3f,us\n", sz, ctas, median(t) * 1e3);
    }
  }
  // Launch costs: back-to-back empty kernels (host enqueue + gap), and the same as a CUDA graph.
  {
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    const int N = 2000;
    for (int i = 0; i < 100; i++) emptyKernel<<<1, 32, 0, s>>>();
    CK(cudaStreamSynchronize(s));
    std::vector<float> t;
    for (int rep = 0; rep < 5; rep++) {
      CK(cudaEventRecord(e0, s));
      for (int i = 0; i < N; i++) emptyKernel<<<1, 32, 0, s>>>();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      t.push_back(timeIt(e0, e1));
    }
    printf("launch,stream,0,%.3f,us\n", median(t) * 1e3 / N);
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < N; i++) emptyKernel<<<1, 32, 0, s>>>();
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    t.clear();
    for (int rep = 0; rep < 5; rep++) {
      CK(cudaEventRecord(e0, s));
      CK(cudaGraphLaunch(ge, s));
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      t.push_back(timeIt(e0, e1));
    }
    printf("launch,graph,0,%.3f,us\n", median(t) * 1e3 / N);
  }
  // Step synchronisation: flag round trips between two CTAs (on two SMs) through global memory.
  {
    unsigned long long* slot;
    int *data, *flag;
    CK(cudaMalloc(&slot, 256));
    CK(cudaMalloc(&data, 256));
    CK(cudaMalloc(&flag, 256));
    const int iters = 20000;
    for (int which = 0; which < 2; which++) {
      std::vector<float> t;
      for (int rep = 0; rep < 5; rep++) {
        CK(cudaMemset(slot, 0, 256));
        CK(cudaMemset(data, 0, 256));
        CK(cudaMemset(flag, 0, 256));
        CK(cudaEventRecord(e0));
        if (which == 0) pingLL<<<2, 32>>>((volatile unsigned long long*)slot, iters);
        else pingFence<<<2, 32>>>(data, flag, iters);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        t.push_back(timeIt(e0, e1));
      }
      printf("flag,%s,0,%.4f,us\n", which == 0 ? "ll" : "fence", median(t) * 1e3 / iters);
    }
  }
  fprintf(stderr, "# done\n");
  return 0;
}
