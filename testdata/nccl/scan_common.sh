# Sourced by the scan scripts: NVLS off, nccl_perf built against the image's NCCL, run TAG ENV...
# appending nccl_perf's rows to $CSV and what ran to $LOG (MAXEXP from the caller), prof TAG MINBYTES
# ENV... (run with the channel-stamp profiler plugin, testdata/nccl/chprof.c, built by chprof_build), and launch_probe
# (bench/gpuprobe's bare launch, `probe` appending its rows to $O/launch.csv).
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
chprof_build() {  # build /tmp/libchprof.so from the current chprof.c (before prof; chprofscan.sh, chshare.sh)
  gcc -O2 -shared -fPIC -o /tmp/libchprof.so "$D/chprof.c" -lpthread 2>&1 | tail -3
}
prof() {  # prof TAG MINBYTES ENV...: run TAG with testdata/nccl/chprof.c loaded, its files into $O/TAG (gzipped);
  # chprof_build first
  local tag=$1 min=$2; shift 2
  mkdir -p "$O/$tag"
  run "$tag" NPROCS=$NP NCCL_PROFILER_PLUGIN=/tmp/libchprof.so CHPROF_MIN_BYTES=$min CHPROF_DIR="$O/$tag" "$@"
  gzip -9f "$O/$tag"/*.csv 2>/dev/null
}
launch_probe() {  # launch_probe: build bench/gpuprobe/probe.cu once; then `probe` appends its bare-launch and flag rows to $O/launch.csv
  nvcc -O3 -arch=sm_90 -o /tmp/probe "$D/../../bench/gpuprobe/probe.cu" 2>&1 | tail -3
  probe() { /tmp/probe 2>/dev/null | grep -E '^(launch|flag),' >> "$O/launch.csv"; }
  log_gpus
  nproc >> "$LOG"
}
log_gpus() {  # the GPUs, driver and clocks of the lease, into $LOG
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$LOG"
}
release_bins() {  # release_bins "2.22.3 2.29.7": nccl_perf built against each of Debian's NCCL builds in
  # .nccllibs/libnccl.so.V.xz (git-ignored; name it in the device call's carry; releasescan.sh says how
  # they were made) beside the image's; sets $rels ("img" and each release found), `perf REL` (its
  # binary) and `runr REL TAG ENV...` (run() with that release's binary), and logs which library each
  # binary loads with NCCL's own version line.
  local R v f
  R=$(cd "$D/../.." && pwd)
  rels="img"
  for v in $1; do
    f=$R/.nccllibs/libnccl.so.$v.xz
    [ -f "$f" ] || { echo "missing $f" >> "$LOG"; continue; }
    mkdir -p /tmp/nccl-$v && xz -dc "$f" > /tmp/nccl-$v/libnccl.so.$v
    ln -sf libnccl.so.$v /tmp/nccl-$v/libnccl.so.2 && ln -sf libnccl.so.$v /tmp/nccl-$v/libnccl.so
    nvcc -O2 -o /tmp/nccl_perf_$v "$D/tools/nccl_perf.cu" -I"$inc" -L/tmp/nccl-$v -lnccl -Xlinker -rpath=/tmp/nccl-$v 2>&1 | tail -3
    rels="$rels $v"
  done
  cp /tmp/nccl_perf /tmp/nccl_perf_img
  for v in $rels; do
    echo "== $v: $(ldd "$(perf $v)" | grep nccl)" >> "$LOG"
    NCCL_DEBUG=VERSION COLLS=all_reduce MAXEXP=3 TAG=v "$(perf $v)" 2>&1 | grep -i "version" | head -2 >> "$LOG"
  done
}
perf() { [ "$1" = img ] && echo /tmp/nccl_perf_img || echo /tmp/nccl_perf_$1; }
runr() {  # runr REL TAG ENV...: run() with that release's binary (release_bins first)
  local r=$1 tag=$2; shift 2
  cp "$(perf $r)" /tmp/nccl_perf
  run "${r}_$tag" "$@"
}
