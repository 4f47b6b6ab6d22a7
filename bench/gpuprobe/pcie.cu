// pcie.cu — what the GPU's PCIe link carries: the copy engines' host-to-device and
// device-to-host rates (one direction, and both at once on two streams) with pinned host memory,
// and the SMs' own loads and stores of mapped pinned host memory (zero-copy). An input to
// simccl's link model: NCCL's topology gives a PCIe link 0.75 of its raw rate (Gen5 x16: 48 GB/s),
// the figure its search plans with, and the simulator took that figure as the link's capacity;
// this says what the link moves.
//
//   nvcc -O3 -arch=sm_90 -o /tmp/pcie bench/gpuprobe/pcie.cu && /tmp/pcie > pcie.csv
//
// Output: CSV "what,bytes,us,GBps" — the median of REPS (default 9) timed repetitions after 2
// warm-up ones, each one transfer of `bytes` (for "bidir", `bytes` each way at once; GBps counts
// both directions); then "#" lines with the device's PCI id and the link the driver reports.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

// zread sums n float4 of mapped host memory (loads cross PCIe); the sum goes to out so that the
// loads cannot be dropped.
__global__ void zread(const float4* __restrict__ h, size_t n, float* out) {
  float acc = 0.f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float4 v = h[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1234.5f) *out = acc;  // practically never: keeps the loads
}

// zwrite stores n float4 into mapped host memory (stores cross PCIe).
__global__ void zwrite(float4* __restrict__ h, size_t n, float v) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    h[i] = make_float4(v, v, v, v);
}

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  int reps = getenv("REPS") ? atoi(getenv("REPS")) : 9;
  if (reps < 1 || reps > 1000) {
    fprintf(stderr, "pcie: REPS in 1..1000\n");
    return 2;
  }
  const size_t maxBytes = (size_t)1 << 30;
  void *hA, *hB, *dA, *dB;
  CK(cudaHostAlloc(&hA, maxBytes, cudaHostAllocMapped));
  CK(cudaHostAlloc(&hB, maxBytes, cudaHostAllocMapped));
  CK(cudaMalloc(&dA, maxBytes));
  CK(cudaMalloc(&dB, maxBytes));
  // Fill with non-zero data (the method's rule: never time on zeros).
  for (size_t i = 0; i < maxBytes / 4; i++) {
    ((float*)hA)[i] = (float)(i % 1021) * 0.5f + 1.f;
    ((float*)hB)[i] = (float)(i % 997) * 0.25f + 2.f;
  }
  CK(cudaMemcpy(dA, hA, maxBytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, hB, maxBytes, cudaMemcpyHostToDevice));
  float* dOut;
  CK(cudaMalloc(&dOut, sizeof(float)));
  cudaStream_t s1, s2;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t e0, e1, e2;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float4 *zA, *zB;
  CK(cudaHostGetDevicePointer((void**)&zA, hA, 0));
  CK(cudaHostGetDevicePointer((void**)&zB, hB, 0));

  printf("what,bytes,us,GBps\n");
  const size_t sizes[] = {(size_t)1 << 22, (size_t)1 << 24, (size_t)1 << 26, (size_t)1 << 28, (size_t)1 << 30};
  for (size_t bytes : sizes) {
    for (int mode = 0; mode < 5; mode++) {
      const char* what = mode == 0 ? "h2d" : mode == 1 ? "d2h" : mode == 2 ? "bidir" : mode == 3 ? "zread" : "zwrite";
      std::vector<float> t;
      for (int r = 0; r < reps + 2; r++) {
        CK(cudaEventRecord(e0, s1));
        switch (mode) {
          case 0: CK(cudaMemcpyAsync(dA, hA, bytes, cudaMemcpyHostToDevice, s1)); break;
          case 1: CK(cudaMemcpyAsync(hB, dB, bytes, cudaMemcpyDeviceToHost, s1)); break;
          case 2:
            CK(cudaStreamWaitEvent(s2, e0, 0));
            CK(cudaMemcpyAsync(dA, hA, bytes, cudaMemcpyHostToDevice, s1));
            CK(cudaMemcpyAsync(hB, dB, bytes, cudaMemcpyDeviceToHost, s2));
            CK(cudaEventRecord(e2, s2));
            CK(cudaStreamWaitEvent(s1, e2, 0));
            break;
          case 3: zread<<<sms * 4, 512, 0, s1>>>(zA, bytes / 16, dOut); CK(cudaGetLastError()); break;
          case 4: zwrite<<<sms * 4, 512, 0, s1>>>(zB, bytes / 16, 3.f); CK(cudaGetLastError()); break;
        }
        CK(cudaEventRecord(e1, s1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 2) t.push_back(ms);
      }
      float ms = median(t);
      double moved = (double)bytes * (mode == 2 ? 2 : 1);
      printf("%s,%zu,%.3f,%.3f\n", what, bytes, ms * 1000.0, moved / (ms * 1e-3) / 1e9);
    }
  }
  // The data path must have moved what it was given: one word of the last h2d and d2h checked.
  float x = 0, y = 0;
  CK(cudaMemcpy(&x, (char*)dA + 4096, 4, cudaMemcpyDeviceToHost));
  y = ((float*)hA)[1024];
  if (x != y) {
    fprintf(stderr, "pcie: h2d data mismatch (%g != %g)\n", x, y);
    return 1;
  }
  char bus[64] = {0};
  CK(cudaDeviceGetPCIBusId(bus, sizeof bus, 0));
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("# device %s, PCI %s\n", p.name, bus);
  return 0;
}
