// Command libnccl is NCCL's C API on simccl's GPU engine (cuda/engine), built as a shared library
// that a program loads instead of NCCL:
//
//	CGO_ENABLED=1 go build -buildmode=c-shared -o libnccl.so.2 ./cuda/libnccl
//	LD_PRELOAD=$PWD/libnccl.so.2 python3 train.py            # or put its folder first on LD_LIBRARY_PATH
//
// Why a package of its own: intercept/shim exports the same API to record calls and forward them
// to the real NCCL (or to move nothing); this library is the other thing, the engine behind the
// API, and it must not load or need a real NCCL. The two share the C ABI facts (NCCL 2.28.9's
// nccl.h: opaque communicator pointer, 128-byte unique id, enums as ints, ncclDataType_t and
// ncclRedOp_t numbered as coll's types) but nothing else, and a program loads one or the other.
//
// Usage modes (NCCL's three):
//   - one process per GPU: ncclGetUniqueId starts a realnet bootstrap root in the calling process;
//     every rank's ncclCommInitRank joins it (TCP, authenticated with the id's secret) and the
//     communicator is engine.InitRank's: launches meet in a /dev/shm segment, step events and
//     staging buffers cross processes through CUDA IPC;
//   - one process for all GPUs: ncclCommInitAll is engine.InitAll;
//   - several GPUs per process: threads calling ncclCommInitRank with one id, all of its ranks in
//     this process, meet in a process-local table and make one engine.InitAll clique. A clique
//     whose ranks are spread over several processes of several ranks each is refused
//     (ncclInvalidUsage).
//
// A rank's device is the caller's current CUDA device (cuCtxGetDevice, as NCCL takes
// cudaGetDevice); its calls are enqueued on the caller's stream and return once enqueued. Several
// ranks may share a GPU (the engine's ShareGPUs; NCCL refuses it), which is how the library is
// tested on one GPU. Plans: NCCL's rules (package planner) on planner.CPUMachine's description of
// the ranks (GPUs under one CPU), with NCCL_* tuning variables honoured as planner.SettingsFromEnv
// reads them.
//
// Groups nest per thread, as NCCL's do (fast.c). The collectives and group calls enter C first
// (fast.c): a call of a one-rank communicator whose result is its input (every collective but
// PreMulSum, all-to-all and send/recv) is enqueued there without entering Go, as the engine's
// one-rank path would (the copy kernel on the caller's stream, cuMemcpyDtoDAsync above 1 MiB,
// nothing in place); inside a group such calls are held on the thread and enqueued in order at
// the outermost ncclGroupEnd, and a group with any other call is handed to the engine's group
// (the held calls first). SIMCCL_NCCL_FAST=0 sends every call to Go.
//
// Not implemented: device-resident PreMulSum scalars (ncclScalarDevice: ncclInvalidUsage),
// non-blocking initialisation (a config's blocking=0 is accepted and the call blocks), window
// registration, ncclCommShrink and device communicators (exported as stubs that fail with
// ncclInvalidUsage, so that a program that imports them still loads and no call reaches another
// library with our communicator).
package main
