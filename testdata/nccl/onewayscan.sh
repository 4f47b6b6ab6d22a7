#!/bin/bash
# NCCL 2.28 on 2 GPUs (kind nvidia-h200-x2): point-to-point in one direction against both at once.
# One process per GPU, NCCL's choices, 8 B..1 GiB, twice:
#   mp_dir_rR      send/recv (both GPUs send and receive) and oneway (GPU 0 sends, GPU 1 receives:
#                  tools/nccl_perf.cu COLLS=oneway);
#   mp_dir1_rR     the same with NCCL_MAX_P2P_NCHANNELS=1 (one channel).
# On 16 channels NCCL's send/recv costs its second chunk a channel 31.9 us where its later chunks
# take 26.3 and one channel shows no such shape (p2pscan); this asks whether the two directions'
# meeting in one CTA (a send and a receive lane) is where it comes from.
#   bash testdata/nccl/onewayscan.sh OUT  ->  OUT/onewayscan.csv, OUT/onewayscan.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/onewayscan.csv; LOG=$O/onewayscan.log; MAXEXP=30
. "$(dirname "$0")/scan_common.sh"
log_gpus
for rep in 1 2; do
  run mp_dir_r$rep NPROCS=$NP COLLS=sendrecv,oneway
  run mp_dir1_r$rep NPROCS=$NP COLLS=sendrecv,oneway NCCL_MAX_P2P_NCHANNELS=1
done
echo "done $(date -u +%T)" >> "$LOG"
