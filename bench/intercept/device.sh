#!/bin/bash
# One device call (kind nvidia-h200-x2): the torchrun program of torch_mixed.py without the shim
# (NCCL_DEBUG_SUBSYS=COLL logs) and under the shim in record mode; symbol checks; results in
# $OUT/intercept.tgz. Needs .devbin/intercept/libsimccl_nccl.so (carry .devbin/intercept).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
R=/tmp/intercept; rm -rf $R; mkdir -p $R/trace $R/coll
SHIM=$PWD/.devbin/intercept/libsimccl_nccl.so
TL=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))')
NCCLLIB=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))')
{
  echo "nccl lib: $NCCLLIB"; ls -la "$NCCLLIB"
  ldd $TL/libtorch_cuda.so | grep -i nccl
  echo "== nccl symbols torch's libraries import (U):"
  for f in $TL/*.so; do nm -D "$f" 2>/dev/null | awk '$1=="U" && $2 ~ /^nccl/ {print $2}'; done | sort -u
  echo "== exported by the shim:"; nm -D --defined-only $SHIM | awk '$3 ~ /^nccl/ {print $3}' | sort
  nvidia-smi -L
} > $R/symbols.txt 2>&1
cd bench/intercept
echo "== baseline (no shim, COLL log)"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL NCCL_DEBUG_FILE=$R/coll/coll.%h.%p.log \
  timeout 100 torchrun --nproc_per_node=2 torch_mixed.py --profile --out $R/base 2>&1 | grep -v Warning | tail -5
echo "== record mode (shim preloaded)"
LD_PRELOAD=$SHIM SIMCCL_REAL_NCCL=$NCCLLIB SIMCCL_TRACE_DIR=$R/trace \
  timeout 100 torchrun --nproc_per_node=2 torch_mixed.py --profile --out $R/shim 2>&1 | grep -v Warning | tail -5
echo "== shim overhead on this machine (fake libnccl, C driver)"
gcc -O2 -shared -fPIC -o $R/libfakenccl.so ../../testdata/intercept/c/fake_nccl.c && \
gcc -O2 -o $R/drv_shim ../../testdata/intercept/c/driver.c -L$(dirname $SHIM) -lsimccl_nccl -Wl,-rpath,$(dirname $SHIM) && \
gcc -O2 -o $R/drv_fake ../../testdata/intercept/c/driver.c -L$R -lfakenccl -Wl,-rpath,$R && \
{ $R/drv_fake 2 0 1000000; SIMCCL_REAL_NCCL=$R/libfakenccl.so SIMCCL_TRACE_DIR=$R/bench $R/drv_shim 2 0 1000000; } > $R/overhead.txt 2>&1
rm -rf $R/bench $R/drv_* $R/libfakenccl.so
cat $R/overhead.txt
ls -la $R $R/trace $R/coll; wc -l $R/trace/* $R/coll/*
tar czf $OUT/intercept.tgz -C $R .
