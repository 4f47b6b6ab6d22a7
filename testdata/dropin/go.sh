#!/bin/bash
# The drop-in NCCL on one GPU or several (kinds nvidia-h100-x1, nvidia-h100-x2, …), carried as .devbin/dropin:
#   libnccl.so.2 (soname libnccl.so.2), libsimccl_nccl_preload.so (no soname), api_check.c
# Usage: testdata/dropin/go.sh .devbin/dropin $OUT [steps...]
set -u
B=$(cd "$1" && pwd); O=$2; shift 2
mkdir -p "$O"
STEPS=${*:-"info capi conf graph lat fault ddp"}
# also: mps (lat and conformance of 2 and 4 processes under MPS); torch (torch_check.py under torchrun,
# TORCH_N processes sharing GPU 0, TORCH_S seconds each); torchgpus (the same, one GPU per process,
# where nvidia-smi lists enough GPUs)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
D=$(cd "$(dirname "$0")" && pwd)
REAL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
TL=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))')
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has info; then
  { nvidia-smi -L; python3 -c 'import torch;print("torch",torch.__version__,"cuda",torch.version.cuda,"nccl",torch.cuda.nccl.version())'
    echo "real NCCL: $REAL"; echo "== ldd libtorch_cuda.so | grep nccl"; ldd "$TL/libtorch_cuda.so" | grep -i nccl
    echo "== NCCL symbols libtorch_cuda.so imports"; nm -D --undefined-only "$TL/libtorch_cuda.so" | grep -o 'nccl[A-Za-z0-9_]*' | sort -u | tr '\n' ' '; echo
    echo "== defined in libtorch_cuda.so (static NCCL?)"; nm -D --defined-only "$TL/libtorch_cuda.so" | grep -c ' T nccl'
    echo "== NCCL symbols our library lacks"; for s in $(nm -D --undefined-only "$TL/libtorch_cuda.so" | grep -o 'nccl[A-Za-z0-9_]*' | sort -u); do nm -D --defined-only "$B/libnccl.so.2" | grep -q " $s\$" || echo -n "$s "; done; echo
    readelf -d "$TL/libtorch_cuda.so" | grep -Ei 'rpath|runpath|flags'
  } 2>&1 | tee "$O/info.txt"
fi
if has capi; then
  echo "== api_check (C, one rank, InitAll of 2 ranks on GPU 0, 2 ranks as threads, split)"
  gcc -O1 -o /tmp/api_check "$B/api_check.c" -L"$B" -l:libnccl.so.2 -Wl,-rpath,"$B" -lpthread && timeout 120 /tmp/api_check 0 2>&1 | tail -5 | tee "$O/capi.txt"
fi
if has graph; then
  for n in ${GRAPH_N:-1 2}; do timeout 120 python3 "$D/nccl_check.py" --lib "$B/libnccl.so.2" --nprocs $n --graph --tag graph$n --out "$O" 2>&1 | tail -4; done
  timeout 120 python3 "$D/nccl_check.py" --lib "$REAL" --nprocs 1 --graph --tag realgraph1 --out "$O" 2>&1 | tail -3
fi
if has lat; then
  for n in ${LAT_N:-1 2 4}; do timeout 120 python3 "$D/nccl_check.py" --lib "$B/libnccl.so.2" --nprocs $n --latency --tag lat$n --out "$O" 2>&1 | tail -5; done
  timeout 120 python3 "$D/nccl_check.py" --lib "$REAL" --nprocs 1 --latency --tag reallat1 --out "$O" 2>&1 | tail -3
fi
if has fault; then
  for n in 2 4; do timeout 120 python3 "$D/nccl_check.py" --lib "$B/libnccl.so.2" --nprocs $n --fault --tag fault$n --out "$O" 2>&1 | tail -5; done
fi
if has ddp; then
  for n in ${DDP_N:-2}; do
    timeout 200 python3 "$D/ddp.py" --backend gloo --nprocs $n --steps ${DDP_STEPS:-300} --out "$O/ddp_gloo$n.json" --port 29531 2>&1 | tail -3
    echo "== ddp, $n processes, our libnccl.so.2 preloaded (replaces libnccl.so.2)"
    LD_PRELOAD="$B/libnccl.so.2" SIMCCL_NCCL_DEBUG=1 timeout 200 python3 "$D/ddp.py" --backend nccl --nprocs $n --steps ${DDP_STEPS:-300} --out "$O/ddp_simccl$n.json" --port 29532 2>&1 | tail -12
    if [ ! -s "$O/ddp_simccl$n.json" ]; then
      echo "== ddp, our library preloaded beside the real NCCL (no soname)"
      LD_PRELOAD="$B/libsimccl_nccl_preload.so" SIMCCL_NCCL_DEBUG=1 timeout 200 python3 "$D/ddp.py" --backend nccl --nprocs $n --steps ${DDP_STEPS:-300} --out "$O/ddp_simccl$n.json" --port 29534 2>&1 | tail -12
    fi
    python3 - "$O" $n <<'PY'
import json, sys, os
o, n = sys.argv[1], sys.argv[2]
try:
    g = json.load(open(os.path.join(o, f"ddp_gloo{n}.json"))); s = json.load(open(os.path.join(o, f"ddp_simccl{n}.json")))
    d = [abs(x - y) for x, y in zip(g["losses"], s["losses"])]
    print(f"ddp {n} processes: {len(s['losses'])} steps, loss {g['losses'][0]:.5f} -> {g['losses'][-1]:.5f} (gloo), "
          f"max |loss(simccl) - loss(gloo)| = {max(d):.3g} (first step with a difference: {next((i for i, v in enumerate(d) if v), None)}); "
          f"gloo {g['seconds']:.2f} s, simccl {s['seconds']:.2f} s")
except Exception as e:
    print("ddp comparison:", e)
PY
  done
fi
if has conf; then
  for n in ${CONF_N:-2 4 1}; do
    timeout 170 python3 "$D/nccl_check.py" --lib "$B/libnccl.so.2" --nprocs $n --conformance --tag conf$n --out "$O" 2>&1 | grep -v Warning | tail -8
  done
  echo "== the harness itself against the real NCCL, 1 rank"
  timeout 100 python3 "$D/nccl_check.py" --lib "$REAL" --nprocs 1 --conformance --quick --skip-unsupported --tag realconf1 --out "$O" 2>&1 | tail -4
fi
if has mps; then
  # The ranks of several processes on one GPU run in separate contexts, which the GPU time-slices:
  # every cross-process dependency waits for a context switch. Under MPS the processes share
  # the GPU's context; the daemon is started here, for this step only, and stopped after it.
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/simccl-mps CUDA_MPS_LOG_DIRECTORY=/tmp/simccl-mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  if nvidia-cuda-mps-control -d; then
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
    for n in ${MPS_LAT_N:-2 4}; do timeout 100 python3 "$D/nccl_check.py" --lib "$B/libnccl.so.2" --nprocs $n --latency --tag mpslat$n --out "$O" 2>&1 | tail -5; done
    for n in ${MPS_CONF_N:-4 2}; do SIMCCL_CHECK_DEADLINE=${MPS_CONF_S:-150} timeout $((${MPS_CONF_S:-150} + 20)) python3 "$D/nccl_check.py" --lib "$B/libnccl.so.2" --nprocs $n --conformance ${MPS_CONF_ARGS:-} --tag mpsconf$n --out "$O" 2>&1 | grep --line-buffered "rank 0\|exit"; done
    echo quit | nvidia-cuda-mps-control; trap - EXIT
  else
    echo "no MPS daemon"
  fi
fi
# torch_check.py: PyTorch's torch.distributed API under torchrun, backend nccl, our library preloaded.
torch_run() {  # torch_run N TAG SECONDS [env...]
  local n=$1 tag=$2 sec=$3; shift 3
  echo "== torch_check.py, $n processes ($tag, ${*:-all GPUs visible}), ${sec} s"
  env "$@" LD_PRELOAD="$B/libnccl.so.2" SIMCCL_NCCL_DEBUG=1 SIMCCL_TIMEOUT=${SIMCCL_TIMEOUT:-30s} OMP_NUM_THREADS=2 \
    timeout -k 10 $((sec + 40)) python3 -m torch.distributed.run --standalone --nproc_per_node $n \
    "$D/torch_check.py" --out "$O" --tag "$tag" --seconds "$sec" 2>&1 | tee "$O/$tag.log" | grep -a "^\[$tag\|^simccl libnccl" | tail -${TORCH_TAIL:-30}
  echo "exit ${PIPESTATUS[0]}"
}
if has torch; then
  for n in ${TORCH_N:-1 2 4}; do
    s=${TORCH_S:-100}; [ $n = 1 ] && s=$((s < 30 ? s : 30))
    torch_run $n torch_shared$n $s CUDA_VISIBLE_DEVICES=0
  done
fi
if has torchgpus; then
  G=$(nvidia-smi -L | grep -c '^GPU')
  for n in ${TORCH_GPUS_N:-2 4}; do
    if [ "$G" -ge "$n" ]; then torch_run $n torch_gpus$n ${TORCH_GPUS_S:-${TORCH_S:-100}}; else echo "== torch_check.py on $n GPUs: only $G GPUs"; fi
  done
fi
