#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4; NP: processes, default one per
# GPU): one Ring/Simple channel's broadcast and reduce (all_gather beside them) under the P2P
# transport's modes — NCCL's defaults, P2P read instead of write, no direct pointers, one process for
# all GPUs — for why one broadcast channel moves about 24 GB/s where the simulation's traffic model
# gives 40.  bash testdata/nccl/bcscan.sh OUT  ->  OUT/bcscan.csv, OUT/bcscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/bcscan.csv; LOG=$O/bcscan.log; MAXEXP=26
. "$(dirname "$0")/scan_common.sh"
R="COLLS=broadcast,reduce,all_gather NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1"
for rep in 1 2; do
  run ring_simple_ch1_bc_default_r$rep NPROCS=$NP $R
  run ring_simple_ch1_bc_p2pread_r$rep NPROCS=$NP $R NCCL_P2P_READ_ENABLE=1
  run ring_simple_ch1_bc_nodirect_r$rep NPROCS=$NP $R NCCL_P2P_DIRECT_DISABLE=1
  run ring_simple_ch1_bc_oneproc_r$rep $R
done
echo "done $(date -u +%T)" >> "$LOG"
