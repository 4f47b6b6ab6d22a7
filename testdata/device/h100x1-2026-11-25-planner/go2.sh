#!/bin/bash
set -u
B=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=/tmp/res; mkdir -p $R
nvcc -O3 -arch=sm_90 -o /tmp/probe "$B/probe.cu" > "$R/probe_nvcc.log" 2>&1 && timeout 200 /tmp/probe > "$R/probe.csv" 2> "$R/probe.txt"
echo "probe exit $?"; cat "$R/probe_nvcc.log" | head -5; tail -n 5 "$R/probe.txt"
(cd cuda && timeout 60 "$B/cuda.test" -test.v -test.timeout 55s > "$R/cuda_test.log" 2>&1; echo "cuda.test exit $?")
grep -E '^(--- FAIL|FAIL|ok|PASS)' "$R/cuda_test.log"
timeout 60 "$B/runccl" --backend cuda -g 1 -c allreduce,allgather,broadcast -b 8 -e 1G -f 4 -n 20 -w 5 --check --json > "$R/runccl_g1.json" 2> "$R/runccl_g1.err"; echo "g1 $?"
timeout 60 "$B/runccl" --backend cuda -g 1 -c allreduce,allgather,broadcast -b 8 -e 1G -f 4 -n 20 -w 5 -G 10 --json > "$R/runccl_g1_graph.json" 2> "$R/runccl_g1_graph.err"; echo "g1 graph $?"
python3 - <<'PY'
import json
for f in ("/tmp/res/runccl_g1.json","/tmp/res/runccl_g1_graph.json"):
    try:
        d=json.load(open(f))
    except Exception as e:
        print(f, e); continue
    for r in d["rows"]:
        if not r["in_place"] and r["bytes"] in (8, 32768, 1048576, 67108864, 1073741824):
            print(f.split("/")[-1], r["coll"], r["bytes"], r["time_us"], r.get("wrong"))
PY
tar czf "$OUT/res.tgz" -C /tmp res
