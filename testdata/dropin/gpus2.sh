#!/bin/bash
# The drop-in NCCL with one process per GPU on a machine of 2 GPUs (kind nvidia-h200-x2), beside
# NCCL 2.28 in the same call. Carry a folder B holding libnccl.so.2 (soname libnccl.so.2) built as
# in cuda/libnccl/README.md.
#   testdata/dropin/gpus2.sh B OUT [steps...]   (steps: check graph lat ll128 flags torch ddp perf enginetest)
# Every rank r runs on GPU r (SIMCCL_CHECK_GPUS=1). Each step has its own timeout, so the call ends
# inside the device tool's 600 s. Results: OUT/*.json (nccl_check.py, torch_check.py, ddp.py),
# OUT/perf_{nccl,simccl}.csv (nccl_perf.cu, NPROCS=2), OUT/steps.log.
set -u
B=$(cd "$1" && pwd); O=$2; shift 2
mkdir -p "$O"
STEPS=${*:-"graph lat check ll128 torch perf flags ddp"}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export SIMCCL_CHECK_GPUS=1
D=$(cd "$(dirname "$0")" && pwd)
REAL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))')
has() { [[ " $STEPS " == *" $1 "* ]]; }
step() { echo "== $* ($(date -u +%T))" | tee -a "$O/steps.log"; }
chk() {  # chk TAG LIB SECONDS ARGS...: nccl_check.py, 2 processes, rank r on GPU r
  local tag=$1 lib=$2 sec=$3; shift 3
  SIMCCL_CHECK_DEADLINE=$sec timeout -k 5 $((sec + 15)) python3 "$D/nccl_check.py" --lib "$lib" --nprocs 2 --tag "$tag" --out "$O" "$@" 2>&1 |
    grep -av Warning | tail -6
}
step gpus
nvidia-smi -L; nvidia-smi topo -m 2>&1 | head -4
python3 -c 'import torch;print("torch",torch.__version__,"cuda",torch.version.cuda,"nccl",torch.cuda.nccl.version())'
if has check; then
  step "conformance, 2 processes on 2 GPUs, interprocess events (the first kernel load JIT-compiles the PTX)"
  chk conf2gpu "$B/libnccl.so.2" 150 --conformance
fi
if has graph; then
  step "CUDA graphs across processes: 4 calls captured, 20 checked replays; replay time of a 4 KiB all-reduce"
  chk graph2gpu "$B/libnccl.so.2" 60 --graph
  chk realgraph2gpu "$REAL" 60 --graph
fi
if has lat; then
  step "latency, 2 processes on 2 GPUs (host µs per call, µs per op)"
  chk lat2gpu "$B/libnccl.so.2" 60 --latency
  chk reallat2gpu "$REAL" 60 --latency
fi
if has ll128; then
  step "LL128 between the GPUs over NVLink (NCCL_PROTO=LL128), quick conformance"
  NCCL_PROTO=LL128 chk ll128conf2gpu "$B/libnccl.so.2" 90 --conformance --quick
fi
if has flags; then
  step "every launch ordered by device flags (SIMCCL_DEVICE_FLAGS=1), quick conformance and latency"
  SIMCCL_DEVICE_FLAGS=1 chk flagsconf2gpu "$B/libnccl.so.2" 90 --conformance --quick
  SIMCCL_DEVICE_FLAGS=1 chk flagslat2gpu "$B/libnccl.so.2" 40 --latency
fi
if has torch; then
  step "torch_check.py under torchrun, 2 processes on 2 GPUs"
  LD_PRELOAD="$B/libnccl.so.2" SIMCCL_NCCL_DEBUG=1 SIMCCL_TIMEOUT=30s OMP_NUM_THREADS=2 \
    timeout -k 10 100 python3 -m torch.distributed.run --standalone --nproc_per_node 2 \
    "$D/torch_check.py" --out "$O" --tag torch_gpus2 --seconds 50 2>&1 | tee "$O/torch_gpus2.log" | grep -a "^\[torch_gpus2\|^simccl libnccl" | tail -20
fi
if has ddp; then
  step "DDP, 300 steps, 2 processes on 2 GPUs: gloo against our library"
  timeout 120 python3 "$D/ddp.py" --backend gloo --nprocs 2 --steps 300 --out "$O/ddp_gloo2.json" --port 29531 2>&1 | tail -2
  LD_PRELOAD="$B/libnccl.so.2" timeout 120 python3 "$D/ddp.py" --backend nccl --nprocs 2 --steps 300 --out "$O/ddp_simccl2.json" --port 29532 2>&1 | tail -3
  python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
try:
    g = json.load(open(os.path.join(o, "ddp_gloo2.json"))); s = json.load(open(os.path.join(o, "ddp_simccl2.json")))
    d = [abs(x - y) for x, y in zip(g["losses"], s["losses"])]
    print(f"ddp 2 GPUs: {len(s['losses'])} steps, loss {g['losses'][0]:.5f} -> {g['losses'][-1]:.5f}, max |simccl - gloo| = {max(d):.3g}")
except Exception as e:
    print("ddp comparison:", e)
PY
fi
if has perf; then
  step "nccl_perf.cu, one process per GPU (NPROCS=2): NCCL 2.28, then our library preloaded"
  inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))')
  lib=${inc%/include}/lib
  nvcc -O2 -o /tmp/nccl_perf "$D/../nccl/tools/nccl_perf.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" >"$O/nvcc.log" 2>&1 ||
    { echo "nvcc failed"; tail -5 "$O/nvcc.log"; }
  C=${PERF_COLLS:-all_reduce,all_gather,reduce_scatter,broadcast,reduce}
  NPROCS=2 TAG=nccl MAXEXP=30 COLLS=$C timeout 120 /tmp/nccl_perf >"$O/perf_nccl.csv" 2>"$O/perf_nccl.err"; echo "nccl exit $?"
  LD_PRELOAD="$B/libnccl.so.2" NPROCS=2 TAG=simccl MAXEXP=30 COLLS=$C timeout 170 /tmp/nccl_perf >"$O/perf_simccl.csv" 2>"$O/perf_simccl.err"; echo "simccl exit $?"
  SIMCCL_DEVICE_FLAGS=1 LD_PRELOAD="$B/libnccl.so.2" NPROCS=2 TAG=simccl_flags MAXEXP=24 COLLS=$C timeout 100 /tmp/nccl_perf >"$O/perf_simccl_flags.csv" 2>"$O/perf_simccl_flags.err"; echo "simccl flags exit $?"
  # one process for both GPUs (ncclCommInitAll)
  TAG=nccl MAXEXP=30 COLLS=$C timeout 90 /tmp/nccl_perf >"$O/perf1_nccl.csv" 2>"$O/perf1_nccl.err"; echo "nccl one process exit $?"
  LD_PRELOAD="$B/libnccl.so.2" TAG=simccl MAXEXP=30 COLLS=$C timeout 150 /tmp/nccl_perf >"$O/perf1_simccl.csv" 2>"$O/perf1_simccl.err"; echo "simccl one process exit $?"
  python3 - "$O" <<'PY'
import csv, json, os, sys
o = sys.argv[1]
t = {}
for tag in ("nccl", "simccl", "simccl_flags", "1_nccl", "1_simccl"):
    try:
        for r in csv.reader(open(os.path.join(o, f"perf{tag}.csv" if tag.startswith("1") else f"perf_{tag}.csv"))):
            if len(r) >= 7 and r[3].isdigit():
                k = (r[1], int(r[3]))
                t.setdefault(k, {})[tag] = max(t.get(k, {}).get(tag, 0.0), float(r[4]))  # slowest rank
    except Exception as e:
        print("perf", tag, e)
rows = []
for (c, b), v in sorted(t.items()):
    r = {"coll": c, "bytes": b}
    r.update({k + "_us": x for k, x in v.items()})
    if "nccl" in v and "simccl" in v:
        r["time_ratio"] = v["simccl"] / v["nccl"]
    if "1_nccl" in v and "1_simccl" in v:
        r["time_ratio_1proc"] = v["1_simccl"] / v["1_nccl"]
    rows.append(r)
json.dump(rows, open(os.path.join(o, "perf_compare.json"), "w"), indent=1)
print("one process per GPU: NCCL µs, simccl µs (events), simccl µs (device flags) | one process: NCCL µs, simccl µs")
for r in rows:
    if r["bytes"] in (8, 4096, 65536, 1 << 20, 16 << 20, 256 << 20, 1 << 30):
        f = lambda k: "%10.1f" % r[k] if k in r else "%10s" % "-"
        print(f'{r["coll"]:15s} {r["bytes"]:>11d} {f("nccl_us")} {f("simccl_us")} {f("simccl_flags_us")} | {f("1_nccl_us")} {f("1_simccl_us")}')
PY
fi
if has enginetest && [ -x "$B/engine.test" ]; then
  step "cuda/engine tests on the 2 GPUs, one process (LL128 and Simple between the GPUs, graphs, back to back)"
  (cd "$D/../../cuda/engine" && timeout 170 "$B/engine.test" -test.v -test.timeout 160s \
    -test.run 'TestConformanceRing|TestConformanceLL128|TestConformanceLL$|TestBackToBack|TestCapture|TestGraph|TestPlannerPicksLL128|TestInitRankCapture' >"$O/engine_test.log" 2>&1)
  echo "engine.test exit $?"
  grep -aE '^(--- |PASS|FAIL|ok)|cases,|panic' "$O/engine_test.log" | head -40
fi
step done
