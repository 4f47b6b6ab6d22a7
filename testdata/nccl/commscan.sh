#!/bin/bash
# NCCL 2.28 on a machine of 2 GPUs or more (kind nvidia-h200-x2): NCCL's host time per call as a
# function of how many communicator-ranks one thread enqueues, for the simulator's floor of one
# thread driving every GPU of a node (simnet.LaunchPerNode; nccl-tests -g 8 drives 8). With only 2
# GPUs, one thread reaches 2K communicator-ranks through K communicators over the same GPUs
# (tools/nccl_perf.cu COMMS=K: each timed call is the collective on each communicator, in one group):
#   sp_commsK_spin_rR   one process for both GPUs, K communicators: 2K kernels a call from one thread;
#   mp_commsK_spin_rR   a process per GPU, K communicators: K kernels a call per thread;
#   sp_commsK_rR        the one-process loop as nccl-tests runs it (not behind a spin).
# The _spin runs enqueue the loop behind a 60 ms spin kernel (SPIN_US), so their _host rows are
# NCCL's enqueue alone. K = 1..4, the 7 collectives, 8 B..64 KiB, twice; bench/gpuprobe's bare
# launch before and after.
#   bash testdata/nccl/commscan.sh OUT  ->  OUT/commscan.csv, OUT/commscan.log, OUT/launch.csv
set -u
O=$1; mkdir -p "$O"
CSV=$O/commscan.csv; LOG=$O/commscan.log; MAXEXP=${MAXEXP:-16}
KS=${KS:-"1 2 3 4"}
. "$(dirname "$0")/scan_common.sh"
launch_probe
probe
for rep in 1 2; do
  for k in $KS; do
    run sp_comms${k}_spin_r$rep COMMS=$k HOSTTIME=1 SPIN_US=60000
    run mp_comms${k}_spin_r$rep COMMS=$k HOSTTIME=1 SPIN_US=60000 NPROCS=$NP
    run sp_comms${k}_r$rep COMMS=$k HOSTTIME=1
  done
done
probe
echo "done $(date -u +%T)" >> "$LOG"
