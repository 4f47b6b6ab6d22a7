#!/bin/bash
# NCCL 2.28 on a machine of 2 GPUs (kind nvidia-h200-x2): the host's fast and slow modes of NCCL's
# enqueue (simnet.HostEnqueue, HostPerRank), run after run, with what the CPUs report beside each
# run: eight runs of all_reduce at 8 B..4 KiB, one process for both GPUs (sp) and a process per GPU
# (mp), nccl-tests' loop with HOSTTIME; while each runs, /proc/cpuinfo's MHz of every CPU is sampled
# every 0.2 s (median and largest over the CPUs).
#   bash testdata/nccl/hostmodes.sh OUT  ->  OUT/hostmodes.csv, OUT/hostmodes.log, OUT/cpu.csv
set -u
O=$1; mkdir -p "$O"
CSV=$O/hostmodes.csv; LOG=$O/hostmodes.log; MAXEXP=12
. "$(dirname "$0")/scan_common.sh"
{ nvidia-smi --query-gpu=name,driver_version --format=csv; nproc; lscpu | grep -E 'Model name|Thread|Core|Socket|NUMA|MHz'
  cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null || echo "no cpufreq"; } >> "$LOG"
echo "tag,t,cpu_mhz_median,cpu_mhz_max" > "$O/cpu.csv"
sample() {  # sample TAG: every 0.2 s until killed
  while true; do
    grep MHz /proc/cpuinfo | awk '{print $4}' | sort -n | awk -v t="$(date +%s.%N)" -v tag="$1" '{v[n++]=$1} END{printf "%s,%s,%.0f,%.0f\n", tag, t, v[int(n/2)], v[n-1]}' >> "$O/cpu.csv"
    sleep 0.2
  done
}
for i in 1 2 3 4 5 6 7 8; do
  for m in sp mp; do
    np=(); [ $m = mp ] && np=(NPROCS=$NP)
    tag=${m}_run$i
    sample "$tag" & sp=$!
    run "$tag" HOSTTIME=1 COLLS=all_reduce "${np[@]}"
    kill $sp 2>/dev/null; wait $sp 2>/dev/null
  done
done
echo "done $(date -u +%T)" >> "$LOG"
