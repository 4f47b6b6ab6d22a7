#!/bin/bash
# NCCL 2.28 on 2 H200 (kind nvidia-h200-x2, one process per GPU): what an all-to-all's copy to self
# costs beside its transfer to the other GPU. All-to-all of S, send/recv of S/2 (the same transfer to
# the other GPU, without the copy) and selfcopy of S/2 (the copy alone, through NCCL's send/recv to
# self), 8 B–1 GiB, twice, with NCCL's default p2p channels and NCCL_MAX_P2P_NCHANNELS 16 and 8 (which
# changes the channels the two transfers share); then the all-to-all and send/recv from 64 MiB with
# testdata/nccl/chprof.c's channel stamps (which channels run, and when each stops).
#   bash testdata/nccl/a2aselfscan.sh OUT  ->  OUT/a2aselfscan.csv, OUT/a2aselfscan.log, OUT/a2aself_prof*/
set -u
O=$1; mkdir -p "$O"
CSV=$O/a2aselfscan.csv; LOG=$O/a2aselfscan.log; MAXEXP=30
. "$(dirname "$0")/scan_common.sh"
log_gpus
for rep in 1 2; do
  for c in default 16 8; do
    cap=""; [ "$c" != default ] && cap="NCCL_MAX_P2P_NCHANNELS=$c"
    run a2aself_${c}_r$rep NPROCS=$NP COLLS=alltoall,sendrecv,selfcopy $cap
  done
done
chprof_build
prof a2aself_prof_a2a 67108864 COLLS=alltoall
prof a2aself_prof_sr 33554432 COLLS=sendrecv
prof a2aself_prof_self 33554432 COLLS=selfcopy
echo "done $(date -u +%T)" >> "$LOG"
