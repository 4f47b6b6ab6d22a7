// Single-process timing of NCCL collectives over all visible GPUs, in the manner of nccl-tests:
// events around a loop of back-to-back launches, out-of-place, float32 sum. Prints CSV rows.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
#define NK(x) do { ncclResult_t r = (x); if (r != ncclSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r)); exit(1);} } while (0)
int main(int argc, char** argv) {
  const char* tag = getenv("TAG") ? getenv("TAG") : "default";
  int maxexp = getenv("MAXEXP") ? atoi(getenv("MAXEXP")) : 30;
  const char* only = getenv("COLLS");
  int n; CK(cudaGetDeviceCount(&n));
  std::vector<ncclComm_t> comms(n); std::vector<int> devs(n);
  for (int i = 0; i < n; i++) devs[i] = i;
  NK(ncclCommInitAll(comms.data(), n, devs.data()));
  size_t maxb = (size_t)1 << maxexp;
  std::vector<float*> sb(n), rb(n); std::vector<cudaStream_t> st(n);
  for (int i = 0; i < n; i++) { CK(cudaSetDevice(i)); CK(cudaMalloc(&sb[i], maxb)); CK(cudaMalloc(&rb[i], maxb)); CK(cudaMemset(sb[i], 1, maxb)); CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking)); }
  const char* names[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"};
  for (int c = 0; c < 7; c++) {
    if (only && !strstr(only, names[c])) continue;
    for (int e = 3; e <= maxexp; e++) {
      size_t bytes = (size_t)1 << e; size_t cnt = bytes / 4; if (cnt == 0) cnt = 1;
      if (c == 1 || c == 2 || c == 5) { cnt = (cnt / n) * n; if (cnt == 0) continue; }
      auto launch = [&]() {
        if (n > 1) NK(ncclGroupStart());
        for (int i = 0; i < n; i++) {
          switch (c) {
            case 0: NK(ncclAllReduce(sb[i], rb[i], cnt, ncclFloat, ncclSum, comms[i], st[i])); break;
            case 1: NK(ncclAllGather(sb[i], rb[i], cnt / n, ncclFloat, comms[i], st[i])); break;
            case 2: NK(ncclReduceScatter(sb[i], rb[i], cnt / n, ncclFloat, ncclSum, comms[i], st[i])); break;
            case 3: NK(ncclBroadcast(sb[i], rb[i], cnt, ncclFloat, 0, comms[i], st[i])); break;
            case 4: NK(ncclReduce(sb[i], rb[i], cnt, ncclFloat, ncclSum, 0, comms[i], st[i])); break;
            case 5: for (int p = 0; p < n; p++) { NK(ncclSend(sb[i] + p * (cnt / n), cnt / n, ncclFloat, p, comms[i], st[i])); NK(ncclRecv(rb[i] + p * (cnt / n), cnt / n, ncclFloat, p, comms[i], st[i])); } break;
            case 6: { int to = (i + 1) % n, from = (i + n - 1) % n; NK(ncclSend(sb[i], cnt, ncclFloat, to, comms[i], st[i])); NK(ncclRecv(rb[i], cnt, ncclFloat, from, comms[i], st[i])); } break;
          }
        }
        if (n > 1) NK(ncclGroupEnd());
      };
      int iters = bytes < (1 << 24) ? 200 : (bytes < (1 << 28) ? 40 : 10);
      for (int w = 0; w < 5; w++) launch();
      for (int i = 0; i < n; i++) { CK(cudaSetDevice(i)); CK(cudaStreamSynchronize(st[i])); }
      std::vector<cudaEvent_t> ev0(n), ev1(n);
      for (int i = 0; i < n; i++) { CK(cudaSetDevice(i)); CK(cudaEventCreate(&ev0[i])); CK(cudaEventCreate(&ev1[i])); CK(cudaEventRecord(ev0[i], st[i])); }
      for (int it = 0; it < iters; it++) launch();
      float worst = 0;
      for (int i = 0; i < n; i++) { CK(cudaSetDevice(i)); CK(cudaEventRecord(ev1[i], st[i])); CK(cudaEventSynchronize(ev1[i])); float ms; CK(cudaEventElapsedTime(&ms, ev0[i], ev1[i])); if (ms > worst) worst = ms; CK(cudaEventDestroy(ev0[i])); CK(cudaEventDestroy(ev1[i])); }
      double us = worst * 1000.0 / iters; size_t size = cnt * 4;
      double algbw = size / us / 1e3;
      double f = (c == 0) ? 2.0 * (n - 1) / n : (c == 1 || c == 2 || c == 5) ? (double)(n - 1) / n : 1.0;
      printf("%s,%s,%d,%zu,%.3f,%.3f,%.3f\n", tag, names[c], n, size, us, algbw, algbw * f);
      fflush(stdout);
    }
  }
  for (int i = 0; i < n; i++) ncclCommDestroy(comms[i]);
  return 0;
}
