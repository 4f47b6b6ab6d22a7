#!/bin/bash
# One rank on one GPU: NCCL 2.28 against simccl's libnccl.so.2 (LD_PRELOAD) in the same call, nccl-tests'
# timing (nccl_perf.cu: events around back-to-back out-of-place float-sum calls), each call inside
# ncclGroupStart/End (group) and, as nccl-tests does with one GPU per process, without (nogroup).
set -u
B=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > "$OUT/gpus.txt"
inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))')
lib=${inc%/include}/lib
mkdir -p /tmp/r
for v in nccl_perf nccl_perf_nogroup; do
  nvcc -O2 -o /tmp/$v "$B/$v.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" > /tmp/r/nvcc_$v.log 2>&1 || { cat /tmp/r/nvcc_$v.log; exit 1; }
done
for rep in 1 2 3; do
  for v in nccl_perf nccl_perf_nogroup; do
    g=group; [ $v = nccl_perf_nogroup ] && g=nogroup
    TAG=nccl,$g COLLS=all_reduce,all_gather,reduce_scatter MAXEXP=30 timeout 100 /tmp/$v >> /tmp/r/all.csv 2>> /tmp/r/err.txt
    TAG=simccl,$g COLLS=all_reduce,all_gather,reduce_scatter MAXEXP=30 LD_PRELOAD="$B/libnccl.so.2" timeout 100 /tmp/$v >> /tmp/r/all.csv 2>> /tmp/r/err.txt
  done
done
cp /tmp/r/all.csv "$OUT/nccl_perf_1rank.csv"; tail -5 /tmp/r/err.txt > "$OUT/err_tail.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import csv, sys, os
o = sys.argv[1]
d = {}
for r in csv.reader(open(os.path.join(o, "nccl_perf_1rank.csv"))):
    if len(r) < 8 or not r[4].isdigit(): continue
    k = (r[0], r[1], r[2], int(r[4])); t = float(r[5])
    d[k] = min(d.get(k, 1e18), t)   # best of 3 runs
print("mode coll bytes nccl_us simccl_us ratio")
for (lib, mode, c, b) in sorted(d):
    if lib != "nccl" or ("simccl", mode, c, b) not in d: continue
    n, s = d[(lib, mode, c, b)], d[("simccl", mode, c, b)]
    print(mode, c, b, "%.2f" % n, "%.2f" % s, "%.3f" % (s / n))
PY
