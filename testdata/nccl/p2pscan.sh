#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4; NP: processes, default one per GPU): how point-to-point and all_gather time moves with the
# channels NCCL may use, the P2P chunk and the launch mode, for the simulator's GPU-side and p2p model.
#   bash testdata/nccl/p2pscan.sh OUT
# Writes OUT/p2pscan.csv: tag,coll,world,bytes,us,algbw,busbw[,rank] rows of tools/nccl_perf.cu
# (NPROCS=2 rows carry the rank; take the larger time of the two ranks), and OUT/p2pscan.log.
set -u
O=$1; mkdir -p "$O"
CSV=$O/p2pscan.csv; LOG=$O/p2pscan.log; MAXEXP=${MAXEXP:-26}
. "$(dirname "$0")/scan_common.sh"
P2P=sendrecv,alltoall
# launch modes, NCCL's own choices
run p2p_default COLLS=$P2P
run p2p_default_np2 COLLS=$P2P NPROCS=$NP
# channels a peer may use (NCCL_MAX_P2P_NCHANNELS caps p2pnChannels; per-peer channels follow)
for c in 1 2 4 8; do run p2p_maxch$c COLLS=$P2P NPROCS=$NP NCCL_MAX_P2P_NCHANNELS=$c; done
# the NVLink P2P chunk (NCCL_P2P_NVL_CHUNKSIZE, default 512 KiB)
for k in 131072 2097152; do run p2p_chunk$k COLLS=$P2P NPROCS=$NP NCCL_P2P_NVL_CHUNKSIZE=$k; done
# P2P over LL forced off / on for small sizes
run p2p_simple COLLS=$P2P NPROCS=$NP NCCL_PROTO=Simple
# all_gather and reduce_scatter (Ring) with forced channel counts, Simple
for c in 1 2 4 8 16; do
  run ring_simple_ch$c COLLS=all_gather,reduce_scatter NPROCS=$NP NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=$c NCCL_MAX_NCHANNELS=$c
done
run ag_default_np2 COLLS=all_gather,reduce_scatter,all_reduce NPROCS=$NP
echo "done $(date -u +%T)" >> "$LOG"
