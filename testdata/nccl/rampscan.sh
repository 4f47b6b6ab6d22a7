#!/bin/bash
# 2 H200 (kind nvidia-h200-x2): what each further chunk of a short call costs. bench/gpuprobe/ramp.cu
# (a minimal Simple send/recv and 2-rank ring on 1–32 channels, 1–64 chunks of 512 KiB a channel,
# with every chunk's stamps at 16 and 24 channels), then NCCL 2.28's own send/recv and all_gather on
# the same lease, a process per GPU, graph replays and stream launches, 1 MiB–64 MiB, twice.
#   bash testdata/nccl/rampscan.sh OUT  ->  OUT/ramp.csv, OUT/ramp_ts.csv, OUT/rampscan.csv, OUT/rampscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/rampscan.csv; LOG=$O/rampscan.log; MAXEXP=26
. "$(dirname "$0")/scan_common.sh"
log_gpus
nvcc -O3 -arch=sm_90 -o /tmp/ramp "$D/../../bench/gpuprobe/ramp.cu" 2>&1 | tail -3
timeout 300 /tmp/ramp "$O" >> "$LOG" 2>&1 || echo "failed: ramp" >> "$LOG"
for rep in 1 2; do
  run ramp_mp_graph_r$rep NPROCS=$NP GRAPH=1 COLLS=sendrecv,all_gather
  run ramp_mp_r$rep NPROCS=$NP COLLS=sendrecv,all_gather
done
echo "done $(date -u +%T)" >> "$LOG"
