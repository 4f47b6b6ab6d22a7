#!/bin/bash
# NCCL 2.28 on 2 GPUs (kind nvidia-h200-x2): what an all-to-all's transfer to self costs beside its
# transfer to the peer. One process per GPU, NCCL's choices, 8 B..1 GiB, twice:
#   mp_a2a_rR    all-to-all and send/recv (send/recv at S/2 is the all-to-all of S without its
#                transfer to self);
#   mp_self_rR   the transfer to self alone (tools/nccl_perf.cu COLLS=selfcopy: S/2 sent to and
#                received from the rank itself).
#   bash testdata/nccl/selfscan.sh OUT  ->  OUT/selfscan.csv, OUT/selfscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/selfscan.csv; LOG=$O/selfscan.log; MAXEXP=30
. "$(dirname "$0")/scan_common.sh"
log_gpus
for rep in 1 2; do
  run mp_a2a_r$rep NPROCS=$NP COLLS=alltoall,sendrecv
  run mp_self_r$rep NPROCS=$NP COLLS=selfcopy
done
echo "done $(date -u +%T)" >> "$LOG"
