#!/bin/bash
# NCCL 2.28 on 2 H200 (kind nvidia-h200-x2; NP: processes, default one per GPU): Ring/Simple
# all_reduce, all_gather and reduce_scatter with NCCL's P2P read mode forced on (NCCL_P2P_READ_ENABLE=1,
# the mode NCCL picks by itself for Simple over NVLink on A100s: the receiver loads the sender's buffer
# over NVLink) beside the default write mode (the sender stores into the receiver's buffer), on 24
# channels to 1 GiB and on one channel to 256 MiB, twice each: what reading costs a ring where writing
# is what the simulator's traffic model was measured on.
#   bash testdata/nccl/readscan.sh OUT  ->  OUT/readscan.csv, OUT/readscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/readscan.csv; LOG=$O/readscan.log
. "$(dirname "$0")/scan_common.sh"
log_gpus
for rep in 1 2; do
  for rd in 0 1; do
    MAXEXP=30 run ring_simple_ch24_read${rd}_r$rep NPROCS=$NP COLLS=all_reduce,all_gather,reduce_scatter NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=24 NCCL_MAX_NCHANNELS=24 NCCL_P2P_READ_ENABLE=$rd
    MAXEXP=28 run ring_simple_ch1_read${rd}_r$rep NPROCS=$NP COLLS=all_reduce,all_gather,reduce_scatter NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1 NCCL_P2P_READ_ENABLE=$rd
  done
done
# NCCL's own word on the mode it used: the INFO line of a connection ("via P2P/CUMEM/read" or without /read).
MAXEXP=20 run ring_simple_ch1_read1_info NPROCS=$NP COLLS=all_reduce NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1 NCCL_P2P_READ_ENABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P NCCL_DEBUG_FILE=/tmp/read.%p.log
cat /tmp/read.*.log 2>/dev/null | grep -i "via P2P" | head -8 >> "$LOG"
echo "done $(date -u +%T)" >> "$LOG"
