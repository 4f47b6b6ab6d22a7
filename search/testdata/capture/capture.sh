#!/usr/bin/env bash
# Captures NCCL 2.28's own graph search (INFO GRAPH log lines and NCCL_GRAPH_DUMP_FILE) on the lent 2xH200
# machine for topology variants the search goldens need (variants.py) and for NCCL_P2P_DISABLE=1.
# Run from the repository root on the device machine:  bash search/testdata/capture/capture.sh
# Writes $OUT/search-capture.tgz.
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
H=search/testdata/capture
W=$OUT/w; mkdir -p $W
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' > $W/versions.txt 2>&1
one() { # name, extra env...
  local name=$1; shift
  env "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH NCCL_DEBUG_FILE=$W/$name.%p.log \
    NCCL_TOPO_DUMP_FILE=$W/${name}_topo.xml NCCL_GRAPH_DUMP_FILE=$W/${name}_graph.xml \
    timeout 120 torchrun --nproc_per_node=2 --master_port=$((29500 + RANDOM % 1000)) $H/init.py > $W/$name.stdout 2>&1
  echo "$name rc=$?"
}
one real
python3 $H/variants.py $W/real_topo.xml $W/variants
for v in pix sys amd_phb amd_sys; do one $v NCCL_TOPO_FILE=$W/variants/$v.xml; done
one p2pdisable NCCL_P2P_DISABLE=1
one crossnic0_fakehosts FAKE_HOSTS=1 NCCL_CROSS_NIC=0
tar czf $OUT/search-capture.tgz -C $W .
grep -h "Pattern" $W/*.log | sort | uniq -c | head -40
