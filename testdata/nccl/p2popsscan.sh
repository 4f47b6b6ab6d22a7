#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4): what NCCL's host and the GPU pay
# per point-to-point operation of a group, for the simulator's host floor of send/recv and
# all-to-all calls (simnet.HostEnqueue, per operation). One process per GPU (NPROCS), send/recv and
# all-to-all of 8 B..4 KiB per operation, each timed call a group of K copies (GROUP=K: send/recv
# has 2K operations a rank, all-to-all 2K × ranks), K = 1..256, enqueued behind a spin (SPIN_US: the
# _host rows are NCCL's enqueue alone, the timed rows the device's time), twice.
# KS (the K values), MAXEXP (the largest size, 2^MAXEXP bytes) and TAGP (the tag's stem) may be set:
# KS="1 8 32 64" MAXEXP=22 TAGP=mp_groupbig for the larger sizes, whose transfers span channels.
#   bash testdata/nccl/p2popsscan.sh OUT  ->  OUT/p2popsscan.csv, OUT/p2popsscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/p2popsscan.csv; LOG=$O/p2popsscan.log; MAXEXP=${MAXEXP:-12}
KS=${KS:-"1 2 4 8 16 32 64 128 256"}; TAGP=${TAGP:-mp_group}
export RUN_TIMEOUT=200
. "$(dirname "$0")/scan_common.sh"
log_gpus
for rep in 1 2; do
  for k in $KS; do
    run ${TAGP}${k}_r$rep NPROCS=$NP GROUP=$k HOSTTIME=1 SPIN_US=200000 COLLS=sendrecv,alltoall
  done
done
echo "done $(date -u +%T)" >> "$LOG"
