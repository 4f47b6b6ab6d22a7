// ctastart: when the CTAs of one kernel start, relative to one another — the skew with which a
// collective's channels (one CTA each in NCCL) begin, which breaks their lockstep in the
// simulation (simnet.GPUModel.ChannelSkew).
//
// For each CTA count B in {8, 16, 24, 32} (512 threads per CTA, as NCCL's Simple channels), the
// kernel is launched REPS times back to back on one stream; thread 0 of each CTA reads
// %globaltimer on entry and stores it. Per launch, the offsets from the earliest CTA are taken;
// the output gives per CTA index the median offset, and per launch the spread (latest − earliest)
// and the mean gap between consecutive starts in start order. It also measures the timer's
// resolution: the smallest non-zero step seen by one thread reading it 100,000 times.
//
// Output (CSV): kind,ctas,index_or_stat,value_ns
//   res,1,min_step,NS               the timer's smallest non-zero step
//   offset,B,i,NS                   median over launches of CTA i's start − the launch's earliest
//   spread,B,p50|p90|max,NS         quantiles over launches of latest − earliest start
//   gap,B,mean,NS                   spread / (B − 1), median over launches
// Build and run: nvcc -O3 -arch=sm_90 -o /tmp/ctastart bench/gpuprobe/ctastart.cu && /tmp/ctastart
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void starts(unsigned long long* out, int launch, int spin) {
  if (threadIdx.x == 0) out[launch * gridDim.x + blockIdx.x] = gtimer();
  // some work so that the kernel lasts a few microseconds, as a collective's loop does
  unsigned long long t0 = gtimer();
  while (gtimer() - t0 < (unsigned long long)spin) {}
}

__global__ void resolution(unsigned long long* minstep) {
  unsigned long long prev = gtimer(), best = ~0ull;
  for (int i = 0; i < 100000; i++) {
    unsigned long long t = gtimer();
    if (t != prev && t - prev < best) best = t - prev;
    prev = t;
  }
  *minstep = best;
}

int main() {
  const int REPS = 2000;
  unsigned long long* d;
  CK(cudaMalloc(&d, sizeof(unsigned long long) * REPS * 64));
  resolution<<<1, 1>>>(d);
  CK(cudaDeviceSynchronize());
  unsigned long long ms;
  CK(cudaMemcpy(&ms, d, sizeof ms, cudaMemcpyDeviceToHost));
  printf("kind,ctas,index_or_stat,value_ns\nres,1,min_step,%llu\n", ms);
  for (int B : {8, 16, 24, 32}) {
    starts<<<B, 512>>>(d, 0, 2000);  // warm-up
    CK(cudaDeviceSynchronize());
    for (int r = 0; r < REPS; r++) starts<<<B, 512>>>(d, r, 5000);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned long long> h((size_t)REPS * B);
    CK(cudaMemcpy(h.data(), d, sizeof(unsigned long long) * h.size(), cudaMemcpyDeviceToHost));
    std::vector<std::vector<double>> off(B);
    std::vector<double> spread, gap;
    for (int r = 0; r < REPS; r++) {
      unsigned long long lo = ~0ull, hi = 0;
      for (int i = 0; i < B; i++) { lo = std::min(lo, h[(size_t)r * B + i]); hi = std::max(hi, h[(size_t)r * B + i]); }
      for (int i = 0; i < B; i++) off[i].push_back((double)(h[(size_t)r * B + i] - lo));
      spread.push_back((double)(hi - lo));
      gap.push_back((double)(hi - lo) / (B - 1));
    }
    auto q = [](std::vector<double> v, double p) { std::sort(v.begin(), v.end()); return v[(size_t)(p * (v.size() - 1))]; };
    for (int i = 0; i < B; i++) printf("offset,%d,%d,%.0f\n", B, i, q(off[i], 0.5));
    printf("spread,%d,p50,%.0f\nspread,%d,p90,%.0f\nspread,%d,max,%.0f\n", B, q(spread, 0.5), B, q(spread, 0.9), B, q(spread, 1.0));
    printf("gap,%d,mean,%.1f\n", B, q(gap, 0.5));
  }
  return 0;
}
