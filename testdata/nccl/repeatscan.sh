#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4): every collective, 8 B..1 GiB,
# with NCCL's own choices, three runs in each launch mode (one process for all GPUs, as nccl-tests
# -g N; one process per GPU, NPROCS), so that a simulated row can be held against the runs' median
# and spread rather than against one run (one-process rows below 1 MiB moved by up to 8 µs between
# runs on 2026-11-28: h200x2/small_repeat-2026-11-28.csv).
#   bash testdata/nccl/repeatscan.sh OUT  ->  OUT/repeatscan.csv, OUT/repeatscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/repeatscan.csv; LOG=$O/repeatscan.log; MAXEXP=30
export RUN_TIMEOUT=200
. "$(dirname "$0")/scan_common.sh"
log_gpus
for rep in 1 2 3; do
  run sp_r$rep
  run mp_r$rep NPROCS=$NP
done
echo "done $(date -u +%T)" >> "$LOG"
