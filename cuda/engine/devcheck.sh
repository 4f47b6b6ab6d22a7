#!/bin/sh
# One device-machine pass for cuda/engine (see cuda/engine/README.md): the engine's conformance
# tests on the real GPUs, then runccl --backend cuda beside NCCL (nccl_perf.cu) for all-reduce,
# all-gather and reduce-scatter from 8 B to 1 GiB, and a side-by-side table.
#   cuda/engine/devcheck.sh BINDIR OUTDIR
# BINDIR holds what was built on a machine with Go (the device machine has none):
#   engine.test  CGO_ENABLED=1 go test -c -o BINDIR/engine.test ./cuda/engine
#   runccl       CGO_ENABLED=1 go build -o BINDIR/runccl ./cmd/runccl
#   tools/       a copy of testdata/nccl/tools (nccl_perf.cu)
#   cuda.test    (optional) CGO_ENABLED=1 go test -c -o BINDIR/cuda.test ./cuda — runs the cuda
#                package's GPU tests not yet run on a GPU (graph capture fix, two-GPU all-reduce sketch)
# OUTDIR receives: engine_test.log, runccl_check.txt (8 B–64 MiB, every element checked),
# runccl_cuda.json and .csv (timing sweep), runccl_cuda_ch16.json and .csv (16 channels),
# nccl_perf.csv, compare.csv and compare.json (busbw of each beside NCCL's), cuda_test.log, steps.log.
set -u
bin=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$out/steps.log"; }

step gpus
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader
nvidia-smi topo -m 2>&1 | head -n 4
ngpu=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
[ "$ngpu" -gt 4 ] && ngpu=4

step "engine conformance on the GPUs"
timeout 150 "$bin/engine.test" -test.v -test.timeout 140s >"$out/engine_test.log" 2>&1
echo "engine.test exit $?" | tee -a "$out/steps.log"
grep -E '^(--- |PASS|FAIL|ok)|cases,|wrong elements|panic|Error' "$out/engine_test.log" | head -n 60

if [ -x "$bin/cuda.test" ]; then
	step "cuda package GPU tests (graph capture, two-GPU all-reduce sketch, peer)"
	(cd "$(dirname "$0")/.." && timeout 60 "$bin/cuda.test" -test.v -test.run 'TestGraphCapture|TestAllReduce2Sketch|TestPeer|TestDevices' \
		-test.timeout 55s >"$out/cuda_test.log" 2>&1)
	echo "cuda.test exit $?" | tee -a "$out/steps.log"
	grep -E '^(--- |PASS|FAIL|ok)|GB/s|busbw' "$out/cuda_test.log" | head -n 20
fi

step "runccl --backend cuda --check, 8 B - 64 MiB"
timeout 60 "$bin/runccl" --backend cuda -g "$ngpu" --collective allreduce,allgather,reducescatter -b 8 -e 64M -f 8 --check -n 5 \
	>"$out/runccl_check.txt" 2>&1
echo "runccl check exit $?" | tee -a "$out/steps.log"
grep -E 'Out of bounds|Avg bus|runccl:' "$out/runccl_check.txt"

step "runccl --backend cuda timing, 8 B - 1 GiB"
timeout 120 "$bin/runccl" --backend cuda -g "$ngpu" --collective allreduce,allgather,reducescatter -b 8 -e 1G -f 2 -n 20 -w 5 --json \
	>"$out/runccl_cuda.json" 2>"$out/runccl_cuda.err"
echo "runccl timing exit $?" | tee -a "$out/steps.log"
timeout 50 "$bin/runccl" --backend cuda -g "$ngpu" --min-nchannels 16 --max-nchannels 16 --collective allreduce,allgather,reducescatter -b 1M -e 1G -f 4 -n 20 -w 5 --json \
	>"$out/runccl_cuda_ch16.json" 2>"$out/runccl_cuda_ch16.err"
echo "runccl 16 channels exit $?" | tee -a "$out/steps.log"

step "nccl_perf (NCCL 2.28 through ncclCommInitAll)"
inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))')
lib=${inc%/include}/lib
nvcc -O2 -o /tmp/nccl_perf "$bin/tools/nccl_perf.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" >"$out/nvcc.log" 2>&1 ||
	{ echo "nvcc failed:"; tail -n 20 "$out/nvcc.log"; }
TAG=nccl MAXEXP=30 COLLS=all_reduce,all_gather,reduce_scatter timeout 90 /tmp/nccl_perf >"$out/nccl_perf.csv" 2>"$out/nccl_perf.err"
echo "nccl_perf exit $?" | tee -a "$out/steps.log"

step compare
python3 - "$out" <<'EOF'
import csv, json, os, sys
out = sys.argv[1]
names = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter"}
rows = {}
for tag, f in (("simccl", "runccl_cuda.json"), ("simccl_ch16", "runccl_cuda_ch16.json")):
    p = os.path.join(out, f)
    try:
        res = json.load(open(p))
    except Exception as e:
        print("no", f, e)
        continue
    with open(p[:-5] + ".csv", "w") as w:
        w.write("tag,coll,world,bytes,us,algbw,busbw\n")
        for r in res["rows"]:
            if r["in_place"]:
                continue
            c = names.get(r["coll"], r["coll"])
            w.write("%s,%s,%d,%d,%.2f,%.3f,%.3f\n" % (tag, c, res["nranks"], r["bytes"], r["time_us"], r["algbw"], r["busbw"]))
            rows.setdefault((c, r["bytes"]), {})[tag] = r["busbw"]
try:
    for r in csv.reader(open(os.path.join(out, "nccl_perf.csv"))):
        if len(r) < 7 or not r[3].isdigit():
            continue
        rows.setdefault((r[1], int(r[3])), {})["nccl"] = float(r[6])
except Exception as e:
    print("no nccl_perf.csv", e)
table = []
for (c, b), v in sorted(rows.items()):
    e = {"coll": c, "bytes": b, "simccl_busbw": v.get("simccl"), "simccl_ch16_busbw": v.get("simccl_ch16"), "nccl_busbw": v.get("nccl")}
    if v.get("simccl") and v.get("nccl"):
        e["ratio"] = v["simccl"] / v["nccl"]
    table.append(e)
json.dump(table, open(os.path.join(out, "compare.json"), "w"), indent=1)
with open(os.path.join(out, "compare.csv"), "w") as w:
    w.write("coll,bytes,simccl_busbw,simccl_ch16_busbw,nccl_busbw,ratio\n")
    for e in table:
        w.write("%s,%d,%s,%s,%s,%s\n" % (e["coll"], e["bytes"], e["simccl_busbw"], e["simccl_ch16_busbw"], e["nccl_busbw"], e.get("ratio")))
print("%-15s %12s %10s %10s %10s" % ("coll", "bytes", "simccl", "ch16", "nccl"))
for e in table:
    if e["bytes"] in (8, 1024, 65536, 1 << 20, 16 << 20, 256 << 20, 1 << 30):
        f = lambda x: "-" if x is None else "%.2f" % x
        print("%-15s %12d %10s %10s %10s" % (e["coll"], e["bytes"], f(e["simccl_busbw"]), f(e["simccl_ch16_busbw"]), f(e["nccl_busbw"])))
EOF
step done
