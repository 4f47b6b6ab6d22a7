#!/usr/bin/env bash
# Captures what NCCL 2.28 itself says and measures on a lent device machine (2xH200 first, any GPU count), as test data for
# simccl: topology and graph dumps, INFO logs (INIT,GRAPH,TUNING: the System tree, paths, graphs, the tuning
# table and per-size choices) for the real topology, for NCCL_TOPO_FILE variants and for two processes that
# NCCL takes for two hosts; a COLL log; nccl-tests-style timings (all collectives, 8 B to 1 GiB).
# Run from the repository root on the device machine (the tools are in testdata/nccl/tools):
#   bash testdata/nccl/capture.sh        (writes $OUT/oracle.tgz)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T=testdata/nccl/tools; H=testdata/nccl
W=$OUT/w; mkdir -p $W
N=$(nvidia-smi -L | wc -l)   # GPUs: one torchrun process each
# VARIANTS=0 skips the NCCL_TOPO_FILE variants and the fake-hosts run (they are written for 2 GPUs).
VARIANTS=${VARIANTS:-1}
nvidia-smi > $W/nvidia-smi.txt 2>&1; nvidia-smi topo -m > $W/nvidia-smi-topo.txt 2>&1
nvidia-smi nvlink -s > $W/nvidia-smi-nvlink.txt 2>&1
python3 $H/sysfs_snapshot.py > $W/sysfs.json 2>&1
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())' | tee $W/versions.txt
inc=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"include"))'); lib=${inc%/include}/lib
ls $lib >> $W/versions.txt
nvcc -O2 -o /tmp/nccl_perf $T/nccl_perf.cu -I$inc -L$lib -lnccl -Xlinker -rpath=$lib || echo "nvcc failed"
choices() { # name, extra env...
  local name=$1; shift
  env "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING NCCL_DEBUG_FILE=$W/$name.%p.log \
    NCCL_TOPO_DUMP_FILE=$W/${name}_topo.xml NCCL_GRAPH_DUMP_FILE=$W/${name}_graph.xml \
    timeout 150 torchrun --nproc_per_node=$N --master_port=$((29500 + RANDOM % 1000)) $T/nccl_choices.py > $W/$name.stdout 2>&1
  echo "$name rc=$?"
}
choices real
if [ "$VARIANTS" = 1 ]; then
python3 $H/variants.py $W/real_topo.xml $W/variants
for v in nvl4 nvl0 nvswitch; do choices $v NCCL_TOPO_FILE=$W/variants/$v.xml; done
choices fakehosts FAKE_HOSTS=1
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL NCCL_DEBUG_FILE=$W/coll.%p.log timeout 120 torchrun --nproc_per_node=$N $T/nccl_choices.py > $W/coll.stdout 2>&1; echo "coll rc=$?"
fi
P=$W/nccl_perf.csv
echo "tag,coll,world,bytes,us,algbw,busbw" > $P
TAG=default MAXEXP=30 timeout 200 /tmp/nccl_perf >> $P; echo "perf default rc=$?"
[ "$VARIANTS" = 1 ] && for pr in LL LL128 Simple; do TAG=ring_$pr NCCL_ALGO=Ring NCCL_PROTO=$pr COLLS=all_reduce,all_gather,reduce_scatter MAXEXP=30 timeout 100 /tmp/nccl_perf >> $P; echo "perf ring_$pr rc=$?"; done
[ "$VARIANTS" = 1 ] && TAG=tree_simple NCCL_ALGO=Tree NCCL_PROTO=Simple COLLS=all_reduce MAXEXP=30 timeout 60 /tmp/nccl_perf >> $P; echo "perf tree rc=$?"
tar czf $OUT/oracle.tgz -C $W .
grep -h "Pattern\|=== System\|AllReduce: 1048576" $W/real.*.log | head -20
tail -5 $P
