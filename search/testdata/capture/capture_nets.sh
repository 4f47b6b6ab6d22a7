#!/usr/bin/env bash
# Two NETs on the 2xH200 machine (the socket plugin on eth0 and lo), two fake hosts with one GPU each:
# NCCL 2.28's NET selection, crossNic and the guid+port bandwidth sharing (both report guid 0, port 0).
# Run from the repository root on the device machine:  bash search/testdata/capture/capture_nets.sh
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 NCCL_SOCKET_IFNAME=eth0,lo NCCL_IB_DISABLE=1
H=search/testdata/capture
W=$OUT/w; mkdir -p $W
one() { # name, extra env...
  local name=$1; shift
  env "$@" FAKE_HOSTS=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,NET NCCL_DEBUG_FILE=$W/$name.%p.log \
    NCCL_TOPO_DUMP_FILE=$W/${name}_topo.xml NCCL_GRAPH_DUMP_FILE=$W/${name}_graph.xml \
    timeout 100 torchrun --nproc_per_node=2 --master_port=$((29500 + RANDOM % 1000)) $H/init.py > $W/$name.stdout 2>&1
  echo "$name rc=$?"
}
one twonets
one twonets_crossnic1 NCCL_CROSS_NIC=1
one twonets_crossnic0 NCCL_CROSS_NIC=0
tar czf $OUT/search-nets.tgz -C $W .
grep -h "Pattern\| : NET\|NET/Socket : Using" $W/*.log | sort | uniq -c | head -40
