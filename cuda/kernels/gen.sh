#!/bin/sh
# Regenerates kernels.ptx from kernels.cu (run on a machine with nvcc, CUDA 12 or later):
#   cuda/kernels/gen.sh [output.ptx]        (default: cuda/kernels/kernels.ptx)
# The header records the SHA-256 of kernels.cu; TestPTXCurrent (package cuda) fails when the
# committed PTX was not generated from the committed source.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
out=${1:-$dir/kernels.ptx}
NVCC=${NVCC:-nvcc}
ARCH=${ARCH:-sm_90}
sum=$(sha256sum "$dir/kernels.cu" | cut -d' ' -f1)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
"$NVCC" -ptx -arch="$ARCH" -O3 -o "$tmp" "$dir/kernels.cu"
ver=$("$NVCC" --version | grep -i release | head -n 1)
{
	echo "// simccl: generated from cuda/kernels/kernels.cu by cuda/kernels/gen.sh; do not edit."
	echo "// simccl: source-sha256 $sum"
	echo "// simccl: nvcc -ptx -arch=$ARCH -O3 ($ver)"
	cat "$tmp"
} >"$out"
echo "wrote $out (source sha256 $sum)"
