#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4): what a small call costs the host
# (HOSTTIME: the launch loop's wall time per call, beside the event-timed time), one process for all
# GPUs (nccl-tests -g N) and one per GPU (NP), with NCCL's choices and with Ring/LL on 1 and 24
# channels, 8 B..1 MiB, for the simulator's launch-mode floor (simnet.HostEnqueue).
#   bash testdata/nccl/hostscan.sh OUT  ->  OUT/hostscan.csv, OUT/hostscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/hostscan.csv; LOG=$O/hostscan.log; MAXEXP=20
. "$(dirname "$0")/scan_common.sh"
for rep in 1 2; do
  run host_default_r$rep HOSTTIME=1
  run host_default_np_r$rep HOSTTIME=1 NPROCS=$NP
  for c in 1 24; do
    run host_ll_ch${c}_r$rep HOSTTIME=1 COLLS=all_reduce,all_gather,broadcast NCCL_ALGO=Ring NCCL_PROTO=LL NCCL_MIN_NCHANNELS=$c NCCL_MAX_NCHANNELS=$c
  done
done
echo "done $(date -u +%T)" >> "$LOG"
