#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4; NP: processes, default one per
# GPU): one Ring/Simple channel against NCCL_BUFFSIZE from 64 KiB to 8 MiB (a slice is a quarter of
# the buffer: two of NCCL_STEPS' eight steps), 8 B..16 MiB, and 8 channels at 1 and 4 MiB, for the
# simulator's per-slice cost of Simple primitives (simnet.SimpleSlice).
#   [SCAN_COLLS=…] bash testdata/nccl/slicescan.sh OUT  ->  OUT/slicescan.csv, OUT/slicescan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/slicescan.csv; LOG=$O/slicescan.log; MAXEXP=24
. "$(dirname "$0")/scan_common.sh"
C=${SCAN_COLLS:-all_gather,reduce_scatter,all_reduce,broadcast,reduce}
R="NPROCS=$NP COLLS=$C NCCL_ALGO=Ring NCCL_PROTO=Simple"
for rep in 1 2; do
  for b in 65536 131072 262144 524288 1048576 2097152 4194304 8388608; do
    run slice_ch1_buf${b}_r$rep $R NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1 NCCL_BUFFSIZE=$b
  done
  for b in 1048576 4194304; do
    run slice_ch8_buf${b}_r$rep $R NCCL_MIN_NCHANNELS=8 NCCL_MAX_NCHANNELS=8 NCCL_BUFFSIZE=$b
  done
done
echo "done $(date -u +%T)" >> "$LOG"
