#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4; NP: processes, default one per GPU): one Ring/Simple channel's all_gather and reduce_scatter
# against NCCL_NTHREADS and the buffer size, one process per GPU, 8 B..16 MiB, for the simulator's
# per-step GPU cost.  bash testdata/nccl/ringscan.sh OUT  ->  OUT/ringscan.csv, OUT/ringscan.log
set -u
O=$1; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
D=$(cd "$(dirname "$0")" && pwd)
NP=${NP:-$(nvidia-smi -L | wc -l)}  # one process per GPU in the NPROCS runs
inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))')
lib=${inc%/include}/lib
nvcc -O2 -o /tmp/nccl_perf "$D/tools/nccl_perf.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" 2>&1 | tail -3
CSV=$O/ringscan.csv; LOG=$O/ringscan.log
run() {  # run TAG ENV...
  local tag=$1; shift
  echo "== $tag $* ($(date -u +%T))" >> "$LOG"
  env "$@" TAG="$tag" MAXEXP=24 NPROCS=$NP timeout 120 /tmp/nccl_perf >> "$CSV" 2>> "$LOG" || echo "failed: $tag" >> "$LOG"
}
R="COLLS=all_gather,reduce_scatter NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1"
for rep in 1 2; do
  for t in 64 128 256 512; do run ring_simple_ch1_nt${t}_r$rep $R NCCL_NTHREADS=$t; done
  run ring_simple_ch1_r$rep $R
  for b in 1048576 16777216; do run ring_simple_ch1_buf${b}_r$rep $R NCCL_BUFFSIZE=$b; done
  run ring_LL128_ch1_r$rep COLLS=all_gather,reduce_scatter NCCL_ALGO=Ring NCCL_PROTO=LL128 NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1
done
echo "done $(date -u +%T)" >> "$LOG"
