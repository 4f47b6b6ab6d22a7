#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4): every collective, 8 B..1 GiB,
# NCCL's own choices, the loop replayed from a CUDA graph (nccl_perf.cu GRAPH=1, as nccl-tests -G),
# twice with one process per GPU (mp_default_graph_rK) and twice with one process for all GPUs
# (sp_default_graph_rK), for the simulator's --launch graph (no host floor; simnet.GraphLaunch a kernel).
#   bash testdata/nccl/graphscan.sh OUT  ->  OUT/graphscan.csv, OUT/graphscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/graphscan.csv; LOG=$O/graphscan.log; MAXEXP=30
export RUN_TIMEOUT=200
. "$(dirname "$0")/scan_common.sh"
log_gpus
for rep in 1 2; do
  run mp_default_graph_r$rep GRAPH=1 NPROCS=$NP
  run sp_default_graph_r$rep GRAPH=1
done
echo "done $(date -u +%T)" >> "$LOG"
