#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4; NP: processes, default one per GPU): one Ring/Simple channel's all_gather and reduce_scatter
# against NCCL_NTHREADS and the buffer size, one process per GPU, 8 B..16 MiB, for the simulator's
# per-step GPU cost.  [SCAN_COLLS=all_reduce,…] bash testdata/nccl/ringscan.sh OUT  ->  OUT/ringscan.csv, OUT/ringscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/ringscan.csv; LOG=$O/ringscan.log; MAXEXP=24
. "$(dirname "$0")/scan_common.sh"
R="NPROCS=$NP COLLS=${SCAN_COLLS:-all_gather,reduce_scatter} NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1"
for rep in 1 2; do
  for t in 64 128 256 512; do run ring_simple_ch1_nt${t}_r$rep $R NCCL_NTHREADS=$t; done
  run ring_simple_ch1_r$rep $R
  for b in 1048576 16777216; do run ring_simple_ch1_buf${b}_r$rep $R NCCL_BUFFSIZE=$b; done
  run ring_LL128_ch1_r$rep NPROCS=$NP COLLS=${SCAN_COLLS:-all_gather,reduce_scatter} NCCL_ALGO=Ring NCCL_PROTO=LL128 NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1
done
echo "done $(date -u +%T)" >> "$LOG"
