#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4; NP: processes, default one per
# GPU): all_gather, reduce_scatter and all_reduce up to 8 GiB, with NCCL's own choices and on
# exactly 24 Ring/Simple channels: whether the rates that rise from 256 MiB to 1 GiB on 16–24
# channels (chscan.sh) keep rising, and where they settle.
#   bash testdata/nccl/bigscan.sh OUT  ->  OUT/bigscan.csv, OUT/bigscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/bigscan.csv; LOG=$O/bigscan.log; MAXEXP=33
. "$(dirname "$0")/scan_common.sh"
for rep in 1 2; do
  run default_to8g_r$rep NPROCS=$NP COLLS=all_gather,reduce_scatter,all_reduce
  run ring_simple_ch24_to8g_r$rep NPROCS=$NP COLLS=all_gather,reduce_scatter,all_reduce NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=24 NCCL_MAX_NCHANNELS=24
done
echo "done $(date -u +%T)" >> "$LOG"
