#!/bin/sh
# One device-machine pass for package cuda (see cuda/doc.go): regenerate the PTX from kernels.cu,
# run the GPU tests against it, and report the kernels' registers/spills and vector accesses.
#   cuda/kernels/devcheck.sh TEST_BINARY OUTDIR
# TEST_BINARY: built elsewhere with  CGO_ENABLED=1 go test -c -o TEST_BINARY ./cuda
# OUTDIR receives kernels.ptx, gen.log, test.log, ptxas.log, sass.txt.
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out=$2
dir=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader
nvidia-smi topo -m 2>&1 | head -n 4
"$dir/gen.sh" "$out/kernels.ptx" >"$out/gen.log" 2>&1 || { echo "gen.sh failed:"; tail -n 40 "$out/gen.log"; }
(ptxas -arch=sm_90 -O3 -v "$out/kernels.ptx" -o /tmp/simccl_kernels.cubin >"$out/ptxas.log" 2>&1 &&
	cuobjdump -sass /tmp/simccl_kernels.cubin >"$out/sass.txt" 2>&1) &
cd "$dir/.." && SIMCCL_CUDA_PTX="$out/kernels.ptx" "$bin" -test.v -test.skip '^TestPTXCurrent$' -test.timeout 300s >"$out/test.log" 2>&1
echo "test exit $?"
wait
grep -E '^(=== RUN|--- |PASS|FAIL|ok)|GB/s|driver|cuda:[0-9]|error|Error' "$out/test.log" | grep -v '^=== RUN' | head -n 120
echo "--- ptxas (registers/spills of a few kernels)"
grep -A1 -E "Compiling entry function '(simccl_copy|simccl_reduce_sum_f32|simccl_reduce_sum_e4m3|simccl_reduce_premulsum_f16|simccl_reduce_sum_u64)'" "$out/ptxas.log" | grep -E 'entry|registers|spill' | head -n 20
echo "--- 128-bit loads in simccl_reduce_sum_f32:"
awk '/Function : simccl_reduce_sum_f32/{f=1} f&&/Function : /&&!/simccl_reduce_sum_f32/{f=0} f' "$out/sass.txt" | grep -cE 'LDG.E.128'
