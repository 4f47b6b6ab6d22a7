#!/bin/bash
# NCCL 2.28 on 2 H200 (kind nvidia-h200-x2, one process per GPU): how unequally the channels of one
# call progress, against the channel count, from NCCL's own channel timestamps (testdata/nccl/chprof.c):
# send/recv capped at 2, 4 and 8 p2p channels a peer (NCCL_MAX_P2P_NCHANNELS) and uncapped, and
# Ring/Simple all_gather pinned to 8, 16 and 24 channels, calls of 1 MiB (all_gather 16 MiB) to
# 128 MiB (all_gather 2 GiB), every timed call enqueued behind a spin (the host out of the way).
#   bash testdata/nccl/chshare.sh OUT  ->  OUT/chshare.{csv,log}, OUT/<tag>/chprof.PID.csv.gz
set -u
O=$1; mkdir -p "$O"
CSV=$O/chshare.csv; LOG=$O/chshare.log; MAXEXP=27
. "$(dirname "$0")/scan_common.sh"
log_gpus
chprof_build
for c in 2 4 8; do prof p2p_cap$c 1048576 SPIN_US=40000 COLLS=sendrecv NCCL_MAX_P2P_NCHANNELS=$c; done
prof p2p_default 1048576 SPIN_US=40000 COLLS=sendrecv
for c in 8 16 24; do
  MAXEXP=31 prof ag_ch$c 16777216 SPIN_US=40000 COLLS=all_gather NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=$c NCCL_MAX_NCHANNELS=$c
done
echo "done $(date -u +%T)" >> "$LOG"
