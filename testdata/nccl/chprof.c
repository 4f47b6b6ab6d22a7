// chprof.c — an NCCL profiler plugin (interface version 4, which NCCL 2.25–2.28 load) that records
// when each channel of each collective's kernel started and stopped on the GPU, from the GPU
// timestamps NCCL hands its profiler (the kernel-channel events' %globaltimer values). A
// measurement tool for the question of testdata/nccl/chprofscan.sh: do NCCL's channels of one
// call run at one rate, as simccl's replay has them, or part (bench/gpuprobe/drift.cu found a
// probe's 24 CTAs sharing NVLink unfairly)?
//
//   gcc -O2 -shared -fPIC -o /tmp/libchprof.so testdata/nccl/chprof.c -lpthread
//   NCCL_PROFILER_PLUGIN=/tmp/libchprof.so CHPROF_DIR=OUT CHPROF_MIN_BYTES=1048576 <program>
//
// Output: CHPROF_DIR/chprof.PID.csv, one line per kernel channel of a collective, send or receive
// of at least CHPROF_MIN_BYTES (count × 4: the element size of nccl_perf's float calls):
// "rank,seq,func,count,algo,proto,nchannels,channel,start_ns,stop_ns" (seq, algo and proto empty
// or 0 for a send or receive, whose events carry none).
//
// The structures below are NCCL's profiler interface v4 as NCCL documents it (its
// plugin/profiler headers): the plugin exports ncclProfiler_v4, a table of five functions; an
// event descriptor carries the event type, its parent's handle, the rank and a union whose
// members this file lays out in NCCL's order so that the offsets agree.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

typedef int ncclResult_t;  // ncclSuccess is 0
enum { kSuccess = 0 };
enum { kProfileColl = 1 << 1, kProfileP2p = 1 << 2, kProfileKernelCh = 1 << 6 };  // event type bits
enum { kKernelChStop = 22 };                                 // the kernel channel's stop state

typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} descr_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} stateArgs_t;

typedef struct {
  int kind;  // kProfileColl, kProfileP2p or kProfileKernelCh
  int rank;
  // a collective
  uint64_t seq;
  char func[32], algo[16], proto[16];
  size_t count;
  int nChannels;
  // a kernel channel
  void* parent;
  int channel;
  uint64_t start, stop;
  int written;
} event_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static FILE* out;
static size_t minBytes;

static void copyName(char* dst, size_t n, const char* src) {
  snprintf(dst, n, "%s", src ? src : "");
}

static ncclResult_t chInit(void** context, int* mask, const char* commName, uint64_t commHash, int nNodes,
                           int nranks, int rank, void* logfn) {
  (void)commName, (void)commHash, (void)nNodes, (void)nranks, (void)logfn;
  pthread_mutex_lock(&mu);
  if (!out) {
    const char* dir = getenv("CHPROF_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/chprof.%d.csv", dir ? dir : ".", (int)getpid());
    out = fopen(path, "w");
    if (out) fprintf(out, "rank,seq,func,count,algo,proto,nchannels,channel,start_ns,stop_ns\n");
    const char* mb = getenv("CHPROF_MIN_BYTES");
    minBytes = mb ? strtoull(mb, NULL, 10) : 0;
  }
  pthread_mutex_unlock(&mu);
  *mask = kProfileColl | kProfileP2p | kProfileKernelCh;
  *context = (void*)(intptr_t)(rank + 1);
  return kSuccess;
}

static ncclResult_t chStart(void* context, void** handle, descr_t* d) {
  (void)context;
  *handle = NULL;
  if (d->type == kProfileColl) {
    if (d->coll.count * 4 < minBytes) return kSuccess;
    event_t* e = calloc(1, sizeof *e);
    if (!e) return kSuccess;
    e->kind = kProfileColl;
    e->rank = d->rank;
    e->seq = d->coll.seqNumber;
    copyName(e->func, sizeof e->func, d->coll.func);
    copyName(e->algo, sizeof e->algo, d->coll.algo);
    copyName(e->proto, sizeof e->proto, d->coll.proto);
    e->count = d->coll.count;
    e->nChannels = d->coll.nChannels;
    *handle = e;
  } else if (d->type == kProfileP2p) {
    if (d->p2p.count * 4 < minBytes) return kSuccess;
    event_t* e = calloc(1, sizeof *e);
    if (!e) return kSuccess;
    e->kind = kProfileP2p;
    e->rank = d->rank;
    copyName(e->func, sizeof e->func, d->p2p.func);
    e->count = d->p2p.count;
    e->nChannels = d->p2p.nChannels;
    *handle = e;
  } else if (d->type == kProfileKernelCh && d->parentObj) {
    event_t* e = calloc(1, sizeof *e);
    if (!e) return kSuccess;
    e->kind = kProfileKernelCh;
    e->parent = d->parentObj;
    e->channel = d->kernelCh.channelId;
    e->start = d->kernelCh.pTimer;
    *handle = e;
  }
  return kSuccess;
}

static ncclResult_t chState(void* handle, int state, stateArgs_t* args) {
  event_t* e = handle;
  if (e && e->kind == kProfileKernelCh && state == kKernelChStop && args) e->stop = args->kernelCh.pTimer;
  return kSuccess;
}

// A kernel channel's line is written at its first stop, from its parent's handle. No handle is
// ever freed: NCCL 2.28 stopped some kernel-channel events of small sends and receives twice (a
// version of this file that freed them at their stop died of a double free), and whether it stops
// a collective before its channels is not relied on. About 150 bytes an event: a measurement run's
// few hundred thousand events hold tens of megabytes.
static ncclResult_t chStop(void* handle) {
  event_t* e = handle;
  if (!e || e->kind != kProfileKernelCh || e->written) return kSuccess;
  e->written = 1;
  {
    const event_t* c = e->parent;
    pthread_mutex_lock(&mu);
    if (out && (c->kind == kProfileColl || c->kind == kProfileP2p))
      fprintf(out, "%d,%llu,%s,%zu,%s,%s,%d,%d,%llu,%llu\n", c->rank, (unsigned long long)c->seq, c->func,
              c->count, c->algo, c->proto, c->nChannels, e->channel, (unsigned long long)e->start,
              (unsigned long long)e->stop);
    pthread_mutex_unlock(&mu);
  }
  return kSuccess;
}

static ncclResult_t chFinalize(void* context) {
  (void)context;
  pthread_mutex_lock(&mu);
  if (out) fflush(out);
  pthread_mutex_unlock(&mu);
  return kSuccess;
}

typedef struct {
  const char* name;
  ncclResult_t (*init)(void**, int*, const char*, uint64_t, int, int, int, void*);
  ncclResult_t (*startEvent)(void*, void**, descr_t*);
  ncclResult_t (*stopEvent)(void*);
  ncclResult_t (*recordEventState)(void*, int, stateArgs_t*);
  ncclResult_t (*finalize)(void*);
} profiler_v4_t;

__attribute__((visibility("default"))) profiler_v4_t ncclProfiler_v4 = {
    "simccl-chprof", chInit, chStart, chStop, chState, chFinalize,
};
