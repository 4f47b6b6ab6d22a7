#!/bin/bash
# Device pass after the p2p batches (more lanes per channel): GPU engine conformance, cuda tests, runccl checks.
set -u
B=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$OUT/steps.log"; }
step gpus
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv | tee "$OUT/gpus.txt"
step engine conformance
timeout 200 "$B/engine.test" -test.v -test.timeout 190s > "$OUT/engine_test.log" 2>&1
echo "engine.test exit $?" | tee -a "$OUT/steps.log"
grep -E '^(--- |PASS|FAIL|ok)|cases|wrong|panic' "$OUT/engine_test.log" | head -n 40
step cuda package tests
(cd "$ROOT/cuda" && timeout 60 "$B/cuda.test" -test.v -test.timeout 55s > "$OUT/cuda_test.log" 2>&1)
echo "cuda.test exit $?" | tee -a "$OUT/steps.log"
grep -E '^(--- |PASS|FAIL|ok)' "$OUT/cuda_test.log" | tail -n 5
step runccl p2p check 4 ranks sharing the GPU
timeout 120 "$B/runccl" --backend cuda --share-gpus -g 4 --collective alltoall,sendrecv -b 8 -e 64M -f 8 -n 5 -w 1 --check > "$OUT/runccl_p2p_g4.txt" 2>&1
echo "runccl p2p g4 exit $?" | tee -a "$OUT/steps.log"; tail -n 16 "$OUT/runccl_p2p_g4.txt"
step runccl all 2 ranks
timeout 100 "$B/runccl" --backend cuda --share-gpus -g 2 --collective all -b 8 -e 16M -f 16 -n 5 -w 1 --check > "$OUT/runccl_check_g2.txt" 2>&1
echo "runccl g2 exit $?" | tee -a "$OUT/steps.log"; tail -n 25 "$OUT/runccl_check_g2.txt"
step done
