#!/bin/bash
# NCCL 2.28 on a machine of 2 GPUs (kind nvidia-h200-x2): the host's enqueue of a call against the
# channels it spans at a fixed size, a check of simnet.HostPerChannel (whose fit read the channels
# off the size). Ring/Simple forced on exactly k channels (NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS
# = k, k = 1, 2, 4, 8, 16, 24), all_reduce and all_gather 8 B..4 MiB, one process per GPU, the
# loop enqueued behind a 50 ms spin (the _host rows: NCCL's enqueue alone), the k in turn, twice.
# NCCL trims a small call's channels whatever the bounds say; from the size where a call fills k
# channels, only k differs between the runs.
#   bash testdata/nccl/hostchscan.sh OUT  ->  OUT/hostchscan.csv, OUT/hostchscan.log, OUT/launch.csv
set -u
O=$1; mkdir -p "$O"
CSV=$O/hostchscan.csv; LOG=$O/hostchscan.log; MAXEXP=22
. "$(dirname "$0")/scan_common.sh"
launch_probe
probe
for rep in 1 2; do
  for k in 1 2 4 8 16 24; do
    run mp_simple_ch${k}_spin_r$rep HOSTTIME=1 SPIN_US=50000 NPROCS=$NP COLLS=all_reduce,all_gather \
      NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=$k NCCL_MAX_NCHANNELS=$k
  done
done
probe
echo "done $(date -u +%T)" >> "$LOG"
