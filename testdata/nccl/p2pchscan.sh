#!/bin/bash
# NCCL 2.28 on 2 H200 (kind nvidia-h200-x2, one process per GPU): send/recv both ways and one way
# against the channels a peer may use (NCCL_MAX_P2P_NCHANNELS 8, 16, 32 and NCCL's default), to 1 GiB,
# twice: where the 16-channel mid-size cost (send/recv chunks of 28–30 µs at 2–8 chunks a channel
# against 26 from 16 on) starts. The INIT log of each setting says the p2p channels per peer.
#   bash testdata/nccl/p2pchscan.sh OUT  ->  OUT/p2pchscan.csv, OUT/p2pchscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/p2pchscan.csv; LOG=$O/p2pchscan.log; MAXEXP=30
. "$(dirname "$0")/scan_common.sh"
log_gpus
for c in 8 16 32 default; do
  cap=""; [ "$c" != default ] && cap="NCCL_MAX_P2P_NCHANNELS=$c"
  MAXEXP=10 run p2pch_${c}_info NPROCS=$NP COLLS=sendrecv $cap NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE=/tmp/p2pch.$c.%p.log
  grep -h "p2p channels per peer" /tmp/p2pch.$c.*.log 2>/dev/null | head -1 | sed "s/^/[$c] /" >> "$LOG"
  for rep in 1 2; do
    run p2pch_${c}_r$rep NPROCS=$NP COLLS=sendrecv,oneway $cap
  done
done
echo "done $(date -u +%T)" >> "$LOG"
