#!/bin/bash
# NCCL 2.28 on a machine of 2 or 4 GPUs (kind nvidia-h200-x2, -x4): a small call's host and device
# costs apart, for the simulator's launch floors (simnet.HostEnqueue, simnet.KernelLaunch). Every
# collective 8 B..1 MiB with NCCL's choices, in both launch modes (one process for all GPUs, as
# nccl-tests -g N: sp_*; one process per GPU, NPROCS: mp_*), three ways each, twice:
#   *_default_rK          nccl-tests' loop as it runs (HOSTTIME: the loop's host time per call too);
#   *_default_spin_rK     the same loop enqueued behind a 50 ms spin on every stream: the _host row is
#                         NCCL's enqueue alone (no wait on the GPU), the timed row the calls' device
#                         time back to back with the host out of the way;
#   *_default_graph_rK    the loop captured in a CUDA graph and replayed (nccl-tests -G).
# bench/gpuprobe/probe.cu's bare-launch rows are taken on the same lease before and after.
#   [MAXEXP=22] bash testdata/nccl/enqueuescan.sh OUT  ->  OUT/enqueuescan.csv, OUT/enqueuescan.log, OUT/launch.csv
# (MAXEXP: the largest size is 2^MAXEXP bytes, 1 MiB by default)
set -u
O=$1; mkdir -p "$O"
CSV=$O/enqueuescan.csv; LOG=$O/enqueuescan.log; MAXEXP=${MAXEXP:-20}
. "$(dirname "$0")/scan_common.sh"
launch_probe
probe
for rep in 1 2; do
  for m in sp mp; do
    np=(); [ $m = mp ] && np=(NPROCS=$NP)
    run ${m}_default_r$rep HOSTTIME=1 "${np[@]}"
    run ${m}_default_spin_r$rep HOSTTIME=1 SPIN_US=50000 "${np[@]}"
    run ${m}_default_graph_r$rep GRAPH=1 "${np[@]}"
  done
done
probe
echo "done $(date -u +%T)" >> "$LOG"
