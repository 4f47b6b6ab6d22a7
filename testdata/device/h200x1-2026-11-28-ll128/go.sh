#!/bin/bash
# Device call 1 (kind nvidia-h200) for LL128 and the unrolled LL kernels:
#   go.sh DIR        (DIR: the carried folder: bin/{cuda.test,engine.test,runccl,libnccl.so.2},
#                     kernels/{kernels.cu,gen.sh}, this script, lat.cu, summary.py; results under $OUT)
# Binaries built on a machine with Go (CGO_ENABLED=1 GOOS=linux GOARCH=amd64, -ldflags="-s -w"):
#   go test -c ./cuda, go test -c ./cuda/engine, go build ./cmd/runccl,
#   go build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libnccl.so.2 ./cuda/libnccl
# Steps: gen.sh -> kernels.ptx (the one to commit) and, for comparison, the same source with
# -DLL_UNROLL=1 -DLL128_UNROLL=1 (one line/round per thread/warp: the first LL kernels' loop);
# the kernel tests (LL and LL128 bit-exact); the engine's LL128, LL and small Simple conformance,
# back-to-back and graph capture with ranks sharing the GPU; runccl ring 2 ranks sharing the GPU as
# CUDA graph replays, Simple / LL / LL (unroll 1) / LL128 / LL128 (unroll 1), and 4 ranks LL128;
# lat.cu one rank against NCCL 2.28, alone and grouped, in and out of place (group.Recycle).
set -u
D=$(cd "$1" && pwd)
B=$D/bin
W=/tmp/ll128run
mkdir -p $W
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a $W/steps.log; }
step gpu
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader | tee $W/gpus.txt
inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))')
lib=${inc%/include}/lib
(nvcc -O2 -arch=sm_90 -o /tmp/lat "$D/lat.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" >$W/nvcc_lat.log 2>&1; echo "lat nvcc exit $?" >>$W/nvcc_lat.log) &
(timeout 200 nvcc -ptx -arch=sm_90 -O3 -DLL_UNROLL=1 -DLL128_UNROLL=1 -o $W/unroll1.ptx "$D/kernels/kernels.cu" >$W/nvcc_u1.log 2>&1; echo "u1 exit $?" >>$W/nvcc_u1.log) &
step gen.sh
timeout 200 "$D/kernels/gen.sh" "$OUT/kernels.ptx" >$W/gen.log 2>&1
echo "gen exit $?" | tee -a $W/steps.log
tail -n 5 $W/gen.log
export SIMCCL_CUDA_PTX=$OUT/kernels.ptx
(timeout 100 ptxas -arch=sm_90 -v -o /dev/null $OUT/kernels.ptx >$W/ptxas.log 2>&1; echo "ptxas exit $?" >>$W/ptxas.log) &
step cuda tests
(cd "$W" && timeout 90 "$B/cuda.test" -test.v -test.run 'TestLLKernels|TestLL128Kernels|TestReduceKernels|TestDevices|TestCopyKernel|TestPTX' -test.timeout 85s >$W/cuda_test.log 2>&1)
echo "cuda.test exit $?" | tee -a $W/steps.log
grep -E '^(--- |PASS|FAIL|ok)' $W/cuda_test.log | head -20
step engine tests
(cd "$W" && timeout 170 "$B/engine.test" -test.v -test.run 'TestConformanceLL128|TestConformanceLL$|TestConformanceSimpleSmall|TestBackToBack|TestGraphCapture' -test.timeout 165s >$W/engine_test.log 2>&1)
echo "engine.test exit $?" | tee -a $W/steps.log
grep -E '^(--- |PASS|FAIL|ok)|conformance:|LL128? steps|panic' $W/engine_test.log | head -40
wait
tail -n 1 $W/nvcc_u1.log $W/nvcc_lat.log $W/ptxas.log
grep -A1 -E "Compiling entry function 'simccl_(ll_copy|ll128_copy|ll_reduce_sum_f32|ll128_reduce_sum_f32|ll128_reduce_sum_f64|copy)'" $W/ptxas.log | head -30 >$W/ptxas_ll.txt
step runccl ring 2 ranks sharing the GPU, graph replays
run() { # name nranks proto ptx
	SIMCCL_CUDA_PTX=$4 timeout 40 "$B/runccl" --backend cuda --share-gpus -g $2 --algo ring --proto $3 --collective all_reduce,all_gather,reduce_scatter -b 8 -e 4M -f 8 -n 50 -w 5 -G 10 --check --json >$W/runccl_$1.json 2>$W/runccl_$1.err
	echo "runccl $1 exit $?" | tee -a $W/steps.log
}
for round in 1 2; do
	run n2_simple_r$round 2 simple $OUT/kernels.ptx
	run n2_ll_r$round 2 ll $OUT/kernels.ptx
	run n2_llu1_r$round 2 ll $W/unroll1.ptx
	run n2_ll128_r$round 2 ll128 $OUT/kernels.ptx
	run n2_ll128u1_r$round 2 ll128 $W/unroll1.ptx
done
run n4_ll128 4 ll128 $OUT/kernels.ptx
run n4_ll 4 ll $OUT/kernels.ptx
step latency one rank against NCCL
for round in 1 2 3; do
	for ip in 0 1; do
		for g in 0 1; do
			TAG=nccl GROUP=$g INPLACE=$ip REPS=2 timeout 60 /tmp/lat >>$W/lat.csv 2>>$W/lat.err
			TAG=simccl GROUP=$g INPLACE=$ip REPS=2 LD_PRELOAD="$B/libnccl.so.2" timeout 60 /tmp/lat >>$W/lat.csv 2>>$W/lat.err
		done
	done
done
echo "lat rows $(wc -l <$W/lat.csv)" | tee -a $W/steps.log
tail -n 3 $W/lat.err
step summary
python3 "$D/summary.py" $W | tee $W/summary.txt
cp $W/summary.txt $W/steps.log $OUT/
(cd $W && tar czf $OUT/results.tar.gz --exclude='*.ptx' *)
step done
