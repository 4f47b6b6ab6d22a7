#!/bin/bash
# One batched device pass: GPU probe, engine conformance on the GPU, runccl checks, NCCL 1-GPU timings.
set -u
B=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$OUT/steps.log"; }
step gpus
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/gpus.txt"
step probe
nvcc -O3 -arch=sm_90 -o /tmp/probe "$B/probe.cu" > "$OUT/probe_nvcc.log" 2>&1 && timeout 150 /tmp/probe > "$OUT/probe.csv" 2> "$OUT/probe.txt"
echo "probe exit $?" | tee -a "$OUT/steps.log"; tail -n 30 "$OUT/probe.txt"
step engine conformance
timeout 170 "$B/engine.test" -test.v -test.timeout 160s > "$OUT/engine_test.log" 2>&1
echo "engine.test exit $?" | tee -a "$OUT/steps.log"
grep -E '^(--- |PASS|FAIL|ok)|cases|wrong|panic' "$OUT/engine_test.log" | head -n 40
step cuda package tests
timeout 60 "$B/cuda.test" -test.v -test.timeout 55s > "$OUT/cuda_test.log" 2>&1
echo "cuda.test exit $?" | tee -a "$OUT/steps.log"
grep -E '^(--- |PASS|FAIL|ok)' "$OUT/cuda_test.log" | head -n 40
step runccl check 2 ranks sharing the GPU
timeout 90 "$B/runccl" --backend cuda --share-gpus -g 2 -c all -b 8 -e 16M -f 16 -n 5 -w 1 --check > "$OUT/runccl_check_g2.txt" 2>&1
echo "runccl g2 exit $?" | tee -a "$OUT/steps.log"; tail -n 25 "$OUT/runccl_check_g2.txt"
step runccl 1 rank
timeout 60 "$B/runccl" --backend cuda -g 1 -c allreduce,allgather,broadcast -b 8 -e 1G -f 4 -n 20 -w 5 --check --json > "$OUT/runccl_g1.json" 2> "$OUT/runccl_g1.err"
echo "runccl g1 exit $?" | tee -a "$OUT/steps.log"
timeout 60 "$B/runccl" --backend cuda -g 1 -c allreduce,allgather,broadcast -b 8 -e 1G -f 4 -n 20 -w 5 -G 10 --json > "$OUT/runccl_g1_graph.json" 2> "$OUT/runccl_g1_graph.err"
echo "runccl g1 graph exit $?" | tee -a "$OUT/steps.log"
step nccl 1 GPU
inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))')
lib=${inc%/include}/lib
nvcc -O2 -o /tmp/nccl_perf "$B/tools/nccl_perf.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" > "$OUT/nvcc.log" 2>&1
TAG=nccl1 MAXEXP=30 timeout 90 /tmp/nccl_perf > "$OUT/nccl_perf_1gpu.csv" 2> "$OUT/nccl_perf_1gpu.err"
echo "nccl_perf exit $?" | tee -a "$OUT/steps.log"
grep -E "all_reduce|all_gather" "$OUT/nccl_perf_1gpu.csv" | awk -F, '$4==8||$4==1048576||$4==67108864||$4==1073741824'
step done
