#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4; NP: processes, default one per
# GPU): Ring/Simple all_gather, reduce_scatter and all_reduce on exactly 2, 4, 8, 16 and 24
# channels up to 1 GiB, for where the simulation's channels, which run in step, part from NCCL's,
# which drift apart.
#   bash testdata/nccl/chscan.sh OUT  ->  OUT/chscan.csv, OUT/chscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/chscan.csv; LOG=$O/chscan.log; MAXEXP=30
. "$(dirname "$0")/scan_common.sh"
for rep in 1 2; do
  for c in 2 4 8 16 24; do
    run ring_simple_ch${c}_to1g_r$rep NPROCS=$NP COLLS=all_gather,reduce_scatter,all_reduce NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=$c NCCL_MAX_NCHANNELS=$c
  done
done
echo "done $(date -u +%T)" >> "$LOG"
