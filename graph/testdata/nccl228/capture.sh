#!/usr/bin/env bash
# Runs NCCL 2.28.9 (the torch wheel's) on the 2xH200 device machine with the topology variants of
# variants.py and env knobs, keeping NCCL's INFO/GRAPH log and topology dump of each run.
#   bash graph/testdata/nccl228/capture.sh      (from the repository root; writes $OUT/nccl228.tgz)
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
D=graph/testdata/nccl228; W=$OUT/w; mkdir -p $W/variants
python3 $D/variants.py $W/variants
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' > $W/versions.txt 2>&1
run() { # name, topo variant, extra env...
  local name=$1 topo=$2; shift 2
  env "$@" NCCL_TOPO_FILE=$W/variants/$topo.xml NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV \
    NCCL_DEBUG_FILE=$W/$name.%p.log NCCL_TOPO_DUMP_FILE=$W/${name}_topo.xml \
    timeout 120 torchrun --nproc_per_node=2 --master_port=$((29500 + RANDOM % 1000)) $D/init.py > $W/$name.stdout 2>&1
  echo "$name rc=$?"
}
run pxn pxn
run pxn_nogdr pxn_nogdr
run pxb pxb
run pxb_gdrpix pxb NCCL_NET_GDR_LEVEL=PIX
run sys sys
run bcm bcm
run pxn_pxnoff pxn NCCL_PXN_DISABLE=1
run pxn_p2poff pxn NCCL_P2P_DISABLE=1
tar czf $OUT/nccl228.tgz -C $W .
grep -h "=== System\|GPU/0-60 :" $W/*.log | sort | uniq -c | head -40
