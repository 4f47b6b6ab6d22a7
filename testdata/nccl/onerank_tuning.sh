#!/bin/bash
# NCCL 2.28 on one GPU (kind nvidia-h200): does a one-rank communicator choose an algorithm per call?
# Every collective, 8 B..4 MiB, once, with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,TUNING: the log
# holds NCCL's tuning table and, for communicators of more than one rank, one "Bytes -> Algo" line per
# call; OUT/tuning.log is what a one-rank communicator prints.
#   bash testdata/nccl/onerank_tuning.sh OUT  ->  OUT/onerank_tuning.csv, OUT/onerank_tuning.log, OUT/tuning.log
set -u
O=$1; mkdir -p "$O"
CSV=$O/onerank_tuning.csv; LOG=$O/onerank_tuning.log; MAXEXP=22
. "$(dirname "$0")/scan_common.sh"
log_gpus
run onerank_tuning NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_DEBUG_FILE=/tmp/tuning.%p.log
cat /tmp/tuning.*.log > "$O/tuning.log" 2>/dev/null
echo "lines: $(wc -l < "$O/tuning.log"), Algo lines: $(grep -c 'Algo' "$O/tuning.log")" >> "$LOG"
echo "done $(date -u +%T)" >> "$LOG"
