#!/bin/bash
# One device call on one H200 (kind nvidia-h200) for the LL protocol and the one-rank latency:
#   testdata/device/h200x1-2026-11-28-ll/go.sh BINDIR [KERNELDIR]    (results under $OUT)
# KERNELDIR holds kernels.cu and gen.sh (default: cuda/kernels of this checkout); the device
# machine gets the session's checkout, so a helper working in another worktree carries this
# folder, the kernels and the binaries in one ignored folder.
# BINDIR, built on a machine with Go (CGO_ENABLED=1 GOOS=linux GOARCH=amd64):
#   cuda.test   go test -c -o BINDIR/cuda.test ./cuda
#   engine.test go test -c -o BINDIR/engine.test ./cuda/engine
#   runccl      go build -o BINDIR/runccl ./cmd/runccl
#   libnccl.so.2  go build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libnccl.so.2 -o BINDIR/libnccl.so.2 ./cuda/libnccl
# Steps: regenerate kernels.ptx (gen.sh) and use it (SIMCCL_CUDA_PTX); the cuda kernel tests (LL
# bit-exact); the engine's LL and Simple conformance, back-to-back, graph capture and together
# tests with ranks sharing the GPU; runccl all_reduce/all_gather with 2 ranks sharing the GPU,
# NCCL_PROTO=Simple against NCCL's choice (LL when small), plain and as CUDA graph replays; lat.cu
# with NCCL 2.28 and with simccl's libnccl.so.2 (one-rank copy by cuMemcpyDtoDAsync, and by the
# copy kernel), each call alone and inside a group, 3 rounds interleaved.
set -u
B=$(cd "$1" && pwd)
D=$(cd "$(dirname "$0")" && pwd)
K=$(cd "${2:-$D/../../../cuda/kernels}" && pwd)
W=/tmp/llrun
mkdir -p $W
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a $W/steps.log; }
step gpu
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader | tee $W/gpus.txt
inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))')
lib=${inc%/include}/lib
(nvcc -O2 -arch=sm_90 -o /tmp/lat "$D/lat.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" >$W/nvcc_lat.log 2>&1; echo "lat nvcc exit $?" >>$W/nvcc_lat.log) &
step gen.sh
timeout 200 "$K/gen.sh" "$OUT/kernels.ptx" >$W/gen.log 2>&1
echo "gen exit $?" | tee -a $W/steps.log
tail -n 3 $W/gen.log
export SIMCCL_CUDA_PTX=$OUT/kernels.ptx
step cuda tests
(cd "$W" && timeout 90 "$B/cuda.test" -test.v -test.run 'TestLLKernels|TestReduceKernels|TestDevices|TestCopyKernel' -test.timeout 85s >$W/cuda_test.log 2>&1)
echo "cuda.test exit $?" | tee -a $W/steps.log
grep -E '^(--- |PASS|FAIL|ok)' $W/cuda_test.log | head -20
step engine tests
(cd "$W" && timeout 170 "$B/engine.test" -test.v -test.run 'TestConformanceLL|TestConformanceSimpleSmall|TestBackToBack|TestGraphCapture|TestTogether' -test.timeout 165s >$W/engine_test.log 2>&1)
echo "engine.test exit $?" | tee -a $W/steps.log
grep -E '^(--- |PASS|FAIL|ok)|conformance:|LL steps|panic' $W/engine_test.log | head -40
step runccl 2 ranks sharing the GPU, Simple against LL
for p in simple auto; do
	for g in 0 10; do
		extra=""
		[ $p = simple ] && extra="--proto simple"
		timeout 60 "$B/runccl" --backend cuda --share-gpus -g 2 --collective all_reduce,all_gather -b 8 -e 4M -f 4 -n 50 -w 5 -G $g $extra --json \
			>$W/runccl_${p}_G$g.json 2>$W/runccl_${p}_G$g.err
		echo "runccl $p -G $g exit $?" | tee -a $W/steps.log
	done
done
step latency one rank against NCCL
wait
tail -n 2 $W/nvcc_lat.log
for round in 1 2 3; do
	for g in 0 1; do
		TAG=nccl GROUP=$g REPS=2 timeout 60 /tmp/lat >>$W/lat.csv 2>>$W/lat.err
		TAG=simccl GROUP=$g REPS=2 LD_PRELOAD="$B/libnccl.so.2" timeout 60 /tmp/lat >>$W/lat.csv 2>>$W/lat.err
		TAG=simccl_kernel GROUP=$g REPS=2 SIMCCL_ONE_RANK_COPY=kernel LD_PRELOAD="$B/libnccl.so.2" timeout 60 /tmp/lat >>$W/lat.csv 2>>$W/lat.err
	done
done
echo "lat rows $(wc -l <$W/lat.csv)" | tee -a $W/steps.log
step summary
python3 "$D/summary.py" $W | tee $W/summary.txt
cp $W/summary.txt $OUT/
(cd $W && tar czf $OUT/results.tar.gz *)
step done
