#!/usr/bin/env bash
# Captures NCCL 2.28's TUNING choices for package tuning's tests on the 2xH200 device machine:
#   bash tuning/testdata/capture.sh     (from the repository root; writes $OUT/*.log and $OUT/*.json)
# Each case: name, CAPTURE_MODE (single|groups), extra NCCL_* settings.
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
S=tuning/testdata/capture.py
run() {
  local name=$1 mode=$2; shift 2
  env "$@" CAPTURE_MODE=$mode CAPTURE_JSON=$OUT/$name.json NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING \
    NCCL_DEBUG_FILE=/tmp/$name.%p.log timeout 240 torchrun --nproc_per_node=2 --master_port=$((29500 + RANDOM % 1000)) $S > /tmp/$name.stdout 2>&1
  echo "$name rc=$?"; tail -3 /tmp/$name.stdout
  # keep rank 0's log (the one with the choice lines)
  for f in /tmp/$name.*.log; do if grep -q "Bytes -> Algo" $f; then cp $f $OUT/$name.log; fi; done
}
run groups groups
run dtypes single
run env single NCCL_PROTO='^LL' NCCL_ALGO='allreduce:tree;broadcast:ring' NCCL_MAX_NCHANNELS=4 NCCL_NTHREADS=256
python3 -c 'import torch; print("nccl", torch.cuda.nccl.version())'
ls -la $OUT
