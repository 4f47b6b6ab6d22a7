#!/bin/bash
# NCCL 2.28 on one GPU (kind nvidia-h200): a one-rank communicator. Every collective, out of place,
# 8 B..1 GiB, twice (onerank_rR), the first with NCCL_DEBUG=INFO (INIT) so that the log says the
# communicator's channels and p2p channels; then bench/gpuprobe/memcpy.cu, the device-to-device
# cudaMemcpyAsync timed in the same loop, twice (memcpy_rR.csv); then every collective at 8 B..1 MiB
# enqueued behind a 50 ms spin (onerank_spin_rR, HOSTTIME=1 SPIN_US=50000, twice): the _host rows
# are NCCL's enqueue of a one-rank call alone, as testdata/nccl/enqueuescan.sh measures it on 2 GPUs.
#   bash testdata/nccl/onerank.sh OUT  ->  OUT/onerank.csv, OUT/onerank.log, OUT/memcpy.csv, OUT/init.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/onerank.csv; LOG=$O/onerank.log; MAXEXP=30
. "$(dirname "$0")/scan_common.sh"
log_gpus
run onerank_r1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P NCCL_DEBUG_FILE=/tmp/init.%p.log
cat /tmp/init.*.log > "$O/init.log" 2>/dev/null
run onerank_r2
nvcc -O3 -arch=sm_90 -o /tmp/memcpy "$D/../../bench/gpuprobe/memcpy.cu" 2>&1 | tail -3
for rep in 1 2; do
  MAXEXP=$MAXEXP /tmp/memcpy | sed "s/^memcpy_loop/memcpy_loop_r$rep/" | grep -v '^kind' >> "$O/memcpy.csv" || echo "failed: memcpy $rep" >> "$LOG"
done
for rep in 1 2; do
  MAXEXP=20 run onerank_spin_r$rep HOSTTIME=1 SPIN_US=50000
done
echo "done $(date -u +%T)" >> "$LOG"
