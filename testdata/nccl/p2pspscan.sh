#!/bin/bash
# NCCL 2.28 on 2 GPUs (kind nvidia-h200-x2): whether one thread driving both GPUs pays the sum of the
# two GPUs' point-to-point enqueue work (simnet.LaunchPerNode's host floor since stop 49) or only the
# larger part. Send/recv and all-to-all of 8 B..4 KiB per operation, each timed call a group of K
# copies (GROUP=K), K = 1..32, enqueued behind a 200 ms spin (the _host rows are NCCL's enqueue
# alone), in both launch modes on the same lease, twice:
#   sp_groupK_rR   one process for both GPUs (one thread enqueues both ranks' operations);
#   mp_groupK_rR   a process per GPU (each thread its own rank's), the per-GPU line of this lease;
#   sp_coll_rR, mp_coll_rR   all_reduce behind the same spin: a collective's enqueue in each mode.
# The sum predicts sp(K) = sp_coll + 2 × (mp(K) − mp_coll) where mp(K) exceeds mp_coll; the larger
# part, max(sp_coll, mp(K), 2 × the per-operation cost × operations).
#   bash testdata/nccl/p2pspscan.sh OUT  ->  OUT/p2pspscan.csv, OUT/p2pspscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/p2pspscan.csv; LOG=$O/p2pspscan.log; MAXEXP=${MAXEXP:-12}
KS=${KS:-"1 2 4 8 16 32"}
export RUN_TIMEOUT=200
. "$(dirname "$0")/scan_common.sh"
log_gpus
for rep in 1 2; do
  run sp_coll_r$rep GROUP=1 HOSTTIME=1 SPIN_US=200000 COLLS=all_reduce
  run mp_coll_r$rep NPROCS=$NP GROUP=1 HOSTTIME=1 SPIN_US=200000 COLLS=all_reduce
  for k in $KS; do
    run sp_group${k}_r$rep GROUP=$k HOSTTIME=1 SPIN_US=200000 COLLS=sendrecv,alltoall
    run mp_group${k}_r$rep NPROCS=$NP GROUP=$k HOSTTIME=1 SPIN_US=200000 COLLS=sendrecv,alltoall
  done
done
echo "done $(date -u +%T)" >> "$LOG"
