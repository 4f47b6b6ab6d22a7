// Host cost of in-place one-rank calls (no driver work) through libnccl.so.2, on the emulator.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef struct ncclComm* ncclComm_t;
typedef int ncclResult_t;
ncclResult_t ncclCommInitAll(ncclComm_t*, int, const int*);
ncclResult_t ncclAllReduce(const void*, void*, size_t, int, int, ncclComm_t, void*);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclMemAlloc(void**, size_t);
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){
  ncclComm_t c; int dev=0;
  if (ncclCommInitAll(&c,1,&dev)) { printf("init failed\n"); return 1; }
  void* buf; if (ncclMemAlloc(&buf, 4096)) { printf("alloc failed\n"); return 1; }
  int n = 1000000;
  for (int mode = 0; mode < 2; mode++) {
    for (int rep = 0; rep < 3; rep++) {
      double t0 = now();
      for (int i = 0; i < n; i++) {
        if (mode) ncclGroupStart();
        if (ncclAllReduce(buf, buf, 2, 7, 0, c, 0)) { printf("call failed\n"); return 1; }
        if (mode) ncclGroupEnd();
      }
      printf("%s %.1f ns/call\n", mode ? "group  " : "nogroup", (now() - t0) / n);
    }
  }
  return 0;
}
