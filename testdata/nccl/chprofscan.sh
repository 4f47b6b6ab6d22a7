#!/bin/bash
# NCCL 2.28 on 2 H200 (kind nvidia-h200-x2, one process per GPU): when each channel of each call's
# kernel starts and stops on the GPU, from NCCL's own kernel-channel timestamps (testdata/nccl/chprof.c,
# an NCCL profiler plugin), and so the GPU's idle time between back-to-back calls.
#   bash testdata/nccl/chprofscan.sh OUT  ->  OUT/chprofscan.{csv,log}, OUT/<run>/chprof.PID.csv.gz
# Runs (tag: what; CHPROF_MIN_BYTES is count × 4):
#   ring24_prof / ring24_noprof  Ring/Simple all_gather, reduce_scatter (and reduce: COLLS matches by
#                                substring) on 24 channels to 8 GiB, calls of >= 16 MiB; the same without the plugin
#   p2p_prof / p2p_noprof        send/recv to 2 GiB, calls of >= 16 MiB; the same without the plugin
#   p2p_all, a2a_all             send/recv and all-to-all to 128 MiB, every call
#   p2p_ck256, p2p_ck1m, p2p_ch8 send/recv to 64 MiB, calls of >= 256 KiB, with NCCL_P2P_NVL_CHUNKSIZE
#                                256 KiB and 1 MiB (NCCL's default 512 KiB), and NCCL_MAX_P2P_NCHANNELS=8
#   p2p_spin, a2a_spin           send/recv and all-to-all to 128 MiB, calls of >= 1 MiB, every timed call
#                                enqueued behind a 40 ms spin kernel (the host out of the way; HOSTTIME=1
#                                adds rows of the host's enqueue time per call); p2p_nospin the same unprofiled
#                                and without the spin
#   p2pmarker                    testdata/nccl/p2pmarker.cu with the plugin: a marker kernel before and
#                                after each send/recv group, one process for both GPUs, 1-128 MiB
set -u
O=$1; mkdir -p "$O"
CSV=$O/chprofscan.csv; LOG=$O/chprofscan.log; MAXEXP=33
. "$(dirname "$0")/scan_common.sh"
log_gpus
chprof_build
P="NCCL_PROFILER_PLUGIN=/tmp/libchprof.so"
RING="NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=24 NCCL_MAX_NCHANNELS=24"
MAXEXP=26 run chprof_info NPROCS=$NP COLLS=all_gather $RING $P CHPROF_DIR=/tmp NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_DEBUG_FILE=/tmp/chprof.%p.log
grep -ih "profiler" /tmp/chprof.*.log 2>/dev/null | sort | uniq -c | head -5 >> "$LOG"
prof ring24_prof 16777216 COLLS=all_gather,reduce_scatter $RING
run ring24_noprof NPROCS=$NP COLLS=all_gather,reduce_scatter $RING
MAXEXP=31 prof p2p_prof 16777216 COLLS=sendrecv
MAXEXP=31 run p2p_noprof NPROCS=$NP COLLS=sendrecv
MAXEXP=27 prof p2p_all 0 COLLS=sendrecv
MAXEXP=27 prof a2a_all 0 COLLS=alltoall
MAXEXP=26 prof p2p_ck256 262144 COLLS=sendrecv NCCL_P2P_NVL_CHUNKSIZE=262144
MAXEXP=26 prof p2p_ck1m 262144 COLLS=sendrecv NCCL_P2P_NVL_CHUNKSIZE=1048576
MAXEXP=26 prof p2p_ch8 262144 COLLS=sendrecv NCCL_MAX_P2P_NCHANNELS=8
MAXEXP=27 prof p2p_spin 1048576 COLLS=sendrecv SPIN_US=40000 HOSTTIME=1
MAXEXP=27 prof a2a_spin 1048576 COLLS=alltoall SPIN_US=40000 HOSTTIME=1
MAXEXP=27 run p2p_nospin NPROCS=$NP COLLS=sendrecv HOSTTIME=1
mkdir -p "$O/p2pmarker"
nvcc -O2 -o /tmp/p2pmarker "$D/p2pmarker.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" 2>&1 | tail -3
NCCL_PROFILER_PLUGIN=/tmp/libchprof.so CHPROF_DIR="$O/p2pmarker" CHPROF_MIN_BYTES=1048576 timeout 120 /tmp/p2pmarker \
  > "$O/p2pmarker/markers.csv" 2>> "$LOG" || echo "failed: p2pmarker" >> "$LOG"
gzip -9f "$O/p2pmarker"/chprof.*.csv 2>/dev/null
echo "done $(date -u +%T)" >> "$LOG"
