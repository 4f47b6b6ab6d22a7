#!/bin/bash
# Second device call (kind nvidia-h200): the one-rank latency against NCCL 2.28 with the build
# after run 1 (one-rank copy by the copy kernel up to 1 MiB), out of place and in place (no GPU
# work: the host cost of a call), each call alone and in a group, 3 rounds interleaved; then LL
# against Simple on the same algorithm (ring), 2 and 4 ranks sharing the GPU, plain launches and
# CUDA graph replays.
#   go2.sh BINDIR            (BINDIR: runccl, libnccl.so.2 as for go.sh; PTX: the committed one)
set -u
B=$(cd "$1" && pwd)
D=$(cd "$(dirname "$0")" && pwd)
W=/tmp/llrun2
mkdir -p $W
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a $W/steps.log; }
step gpu
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader | tee $W/gpus.txt
inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))')
lib=${inc%/include}/lib
nvcc -O2 -arch=sm_90 -o /tmp/lat "$D/lat.cu" -I"$inc" -L"$lib" -lnccl -Xlinker -rpath="$lib" >$W/nvcc_lat.log 2>&1 || cat $W/nvcc_lat.log
step runccl ring, Simple against LL
for n in 2 4; do
	for p in simple ll; do
		for g in 0 10; do
			timeout 40 "$B/runccl" --backend cuda --share-gpus -g $n --algo ring --proto $p --collective all_reduce,all_gather,reduce_scatter -b 8 -e 1M -f 8 -n 50 -w 5 -G $g --json \
				>$W/runccl_n${n}_${p}_G$g.json 2>$W/runccl_n${n}_${p}_G$g.err
			echo "runccl -g $n $p -G $g exit $?" | tee -a $W/steps.log
		done
	done
done
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
python3 "$D/summary2.py" $W | tee $W/summary.txt
cp $W/summary.txt $OUT/
(cd $W && tar czf $OUT/results.tar.gz *)
step done
