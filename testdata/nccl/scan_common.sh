# Sourced by p2pscan.sh and ringscan.sh: NVLS off, nccl_perf built against the image's NCCL, and
# run TAG ENV... appending nccl_perf's rows to $CSV and what ran to $LOG (MAXEXP from the caller).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
D=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NP=${NP:-$(nvidia-smi -L | wc -l)}  # processes of the NPROCS runs: one per GPU
inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))')
lib=${inc%/include}/lib
nvcc -O2 -o /tmp/nccl_perf "$D/tools/nccl_perf.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" 2>&1 | tail -3
run() {  # run TAG ENV...
  local tag=$1; shift
  echo "== $tag $* ($(date -u +%T))" >> "$LOG"
  env "$@" TAG="$tag" MAXEXP=$MAXEXP timeout ${RUN_TIMEOUT:-120} /tmp/nccl_perf >> "$CSV" 2>> "$LOG" || echo "failed: $tag" >> "$LOG"
}
