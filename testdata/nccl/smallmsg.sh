#!/usr/bin/env bash
# What NCCL 2.28 costs at small sizes on the GPUs at hand, as inputs (not validation) for simccl's
# per-channel and launch-mode costs: nccl-tests-style timings (tools/nccl_perf.cu) of every collective
# with one process per GPU (NPROCS) and with one process driving every GPU, and all_reduce / all_gather
# with the channel count pinned (NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS) for each protocol.
# Run from the repository root on the device machine after capture.sh (it reuses /tmp/nccl_perf):
#   bash testdata/nccl/smallmsg.sh     (writes $OUT/smallmsg.csv: tag,coll,world,bytes,us,algbw,busbw[,rank])
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
N=$(nvidia-smi -L | wc -l)
P=$OUT/smallmsg.csv
[ -x /tmp/nccl_perf ] || { echo "build /tmp/nccl_perf first (capture.sh)"; exit 1; }
perf() { # tag, timeout, env...
  local tag=$1 t=$2; shift 2
  env "$@" TAG=$tag timeout "$t" /tmp/nccl_perf >> $P; echo "$tag rc=$?"
}
perf mp_default 240 NPROCS=$N MAXEXP=30 COLLS=all_reduce,all_gather,reduce_scatter,broadcast,reduce
for c in 1 2 4 8 16 32; do
  perf mp_ring_LL_ch$c 60 NPROCS=$N MAXEXP=20 COLLS=all_reduce NCCL_ALGO=Ring NCCL_PROTO=LL NCCL_MIN_NCHANNELS=$c NCCL_MAX_NCHANNELS=$c
done
for pr in LL128 Simple; do for c in 1 4 16; do
  perf mp_ring_${pr}_ch$c 60 NPROCS=$N MAXEXP=22 COLLS=all_reduce NCCL_ALGO=Ring NCCL_PROTO=$pr NCCL_MIN_NCHANNELS=$c NCCL_MAX_NCHANNELS=$c
done; done
for c in 1 16; do
  perf mp_ag_LL_ch$c 60 NPROCS=$N MAXEXP=20 COLLS=all_gather NCCL_ALGO=Ring NCCL_PROTO=LL NCCL_MIN_NCHANNELS=$c NCCL_MAX_NCHANNELS=$c
  perf sp_ring_LL_ch$c 60 MAXEXP=20 COLLS=all_reduce NCCL_ALGO=Ring NCCL_PROTO=LL NCCL_MIN_NCHANNELS=$c NCCL_MAX_NCHANNELS=$c
done
wc -l $P
