#!/bin/bash
# Device call 2 (kind nvidia-h200): the adaptive unroll (LL/LL128 kernels unrolled only past 2
# lines or rounds per thread or warp), line kernels up to 8 blocks, and libnccl's C path for
# one-rank calls (fast.c):
#   go2.sh DIR        (DIR as for go.sh, plus fastcheck.cu)
# Steps: gen.sh -> kernels.ptx (to commit) and the -DLL_UNROLL=1 -DLL128_UNROLL=1 variant; the LL
# and LL128 kernel tests; the engine's LL128 and LL conformance, back-to-back and graph capture on
# that PTX; fastcheck (one-rank results through the C path, alone and grouped, with data); runccl
# ring 2 ranks sharing the GPU as graph replays: Simple, LL and LL128 as built, LL/LL128 with
# SIMCCL_LL_MAX_GRID=2, LL/LL128 with the unroll-1 PTX; lat.cu one rank: NCCL, simccl (C path),
# simccl with SIMCCL_NCCL_FAST=0 (every call through Go), alone and grouped, in and out of place.
set -u
D=$(cd "$1" && pwd)
B=$D/bin
W=/tmp/ll128run2
mkdir -p $W
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a $W/steps.log; }
step gpu
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader | tee $W/gpus.txt
inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))')
lib=${inc%/include}/lib
(nvcc -O2 -arch=sm_90 -o /tmp/lat "$D/lat.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" >$W/nvcc_lat.log 2>&1; echo "lat nvcc exit $?" >>$W/nvcc_lat.log;
 nvcc -O2 -arch=sm_90 -o /tmp/fastcheck "$D/fastcheck.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" >>$W/nvcc_lat.log 2>&1; echo "fastcheck nvcc exit $?" >>$W/nvcc_lat.log) &
(timeout 200 nvcc -ptx -arch=sm_90 -O3 -DLL_UNROLL=1 -DLL128_UNROLL=1 -o $W/unroll1.ptx "$D/kernels/kernels.cu" >$W/nvcc_u1.log 2>&1; echo "u1 exit $?" >>$W/nvcc_u1.log) &
step gen.sh
timeout 200 "$D/kernels/gen.sh" "$OUT/kernels.ptx" >$W/gen.log 2>&1
echo "gen exit $?" | tee -a $W/steps.log
tail -n 2 $W/gen.log
export SIMCCL_CUDA_PTX=$OUT/kernels.ptx
(timeout 100 ptxas -arch=sm_90 -v -o /dev/null $OUT/kernels.ptx >$W/ptxas.log 2>&1; echo "ptxas exit $?" >>$W/ptxas.log) &
step cuda tests
(cd "$W" && timeout 60 "$B/cuda.test" -test.v -test.run 'TestLLKernels|TestLL128Kernels|TestPTX' -test.timeout 55s >$W/cuda_test.log 2>&1)
echo "cuda.test exit $?" | tee -a $W/steps.log
grep -E '^(--- |PASS|FAIL|ok)' $W/cuda_test.log | head -20
step engine tests
(cd "$W" && timeout 150 "$B/engine.test" -test.v -test.run 'TestConformanceLL128|TestConformanceLL$|TestBackToBack|TestGraphCapture' -test.timeout 145s >$W/engine_test.log 2>&1)
echo "engine.test exit $?" | tee -a $W/steps.log
grep -E '^(--- |PASS|FAIL|ok)|conformance:|LL128? steps|panic' $W/engine_test.log | head -40
wait
tail -n 2 $W/nvcc_u1.log $W/nvcc_lat.log $W/ptxas.log
step fastcheck
LD_PRELOAD="$B/libnccl.so.2" timeout 60 /tmp/fastcheck 2>&1 | tee $W/fastcheck.txt
SIMCCL_NCCL_FAST=0 LD_PRELOAD="$B/libnccl.so.2" timeout 60 /tmp/fastcheck 2>&1 | sed 's/^/SIMCCL_NCCL_FAST=0: /' | tee -a $W/fastcheck.txt
timeout 60 /tmp/fastcheck 2>&1 | sed 's/^/NCCL: /' | tee -a $W/fastcheck.txt
step runccl ring 2 ranks sharing the GPU, graph replays
run() { # name proto ptx [env]
	env ${4:-X=} SIMCCL_CUDA_PTX=$3 timeout 40 "$B/runccl" --backend cuda --share-gpus -g 2 --algo ring --proto $2 --collective all_reduce,all_gather,reduce_scatter -b 8 -e 4M -f 8 -n 50 -w 5 -G 10 --check --json >$W/runccl_n2_$1.json 2>$W/runccl_n2_$1.err
	echo "runccl $1 exit $?" | tee -a $W/steps.log
}
run simple simple $OUT/kernels.ptx
run ll ll $OUT/kernels.ptx
run ll128 ll128 $OUT/kernels.ptx
run llg2 ll $OUT/kernels.ptx SIMCCL_LL_MAX_GRID=2
run ll128g2 ll128 $OUT/kernels.ptx SIMCCL_LL_MAX_GRID=2
run llu1 ll $W/unroll1.ptx
run ll128u1 ll128 $W/unroll1.ptx
step latency one rank against NCCL
for round in 1 2 3; do
	for ip in 0 1; do
		for g in 0 1; do
			TAG=nccl GROUP=$g INPLACE=$ip REPS=2 timeout 60 /tmp/lat >>$W/lat.csv 2>>$W/lat.err
			TAG=simccl GROUP=$g INPLACE=$ip REPS=2 LD_PRELOAD="$B/libnccl.so.2" timeout 60 /tmp/lat >>$W/lat.csv 2>>$W/lat.err
			TAG=simccl_go GROUP=$g INPLACE=$ip REPS=2 SIMCCL_NCCL_FAST=0 LD_PRELOAD="$B/libnccl.so.2" timeout 60 /tmp/lat >>$W/lat.csv 2>>$W/lat.err
		done
	done
done
echo "lat rows $(wc -l <$W/lat.csv)" | tee -a $W/steps.log
tail -n 3 $W/lat.err
step summary
python3 "$D/summary.py" $W | tee $W/summary.txt
cp $W/summary.txt $W/steps.log $W/fastcheck.txt $OUT/
(cd $W && tar czf $OUT/results.tar.gz --exclude='*.ptx' *)
step done
