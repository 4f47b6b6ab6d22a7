#!/bin/bash
# The shim's newer calls against the real NCCL 2.28 on one GPU: prototypes from nccl.h, then the
# driver through the shim in record mode (1 rank).
set -u
B=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))')
lib=${inc%/include}/lib
echo "== nccl.h prototypes"
for f in ncclCommInitRankScalable ncclRedOpCreatePreMulSum ncclRedOpDestroy ncclMemAlloc ncclMemFree ncclCommRegister ncclCommDeregister ncclBcast ncclAlltoAll ncclAllToAll; do
  grep -E "ncclResult_t +$f *\(" "$inc/nccl.h" | head -1 || true
done | tee "$OUT/prototypes.txt"
grep -c 'NCCL_VERSION_CODE\|define NCCL_MINOR' "$inc/nccl.h" > /dev/null; grep -E 'define NCCL_(MAJOR|MINOR|PATCH) ' "$inc/nccl.h" | tee -a "$OUT/prototypes.txt"
echo "== driver_newer through the shim, record mode, real NCCL"
gcc -O2 -o /tmp/dn "$ROOT/testdata/intercept/c/driver_newer.c" -L"$B" -lsimccl_nccl -Wl,-rpath,"$B" 2>&1 | tail -3
SIMCCL_REAL_NCCL="$lib/libnccl.so.2" SIMCCL_TRACE_DIR="$OUT/trace" RANK=0 timeout 60 /tmp/dn 1 0 1 2>&1 | tee "$OUT/driver_newer.txt"
echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/driver_newer.txt"
cat "$OUT"/trace/*.jsonl
