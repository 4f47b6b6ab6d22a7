#!/bin/bash
# NCCL 2.22.3, 2.28 (the image's) and 2.29.7 side by side on a machine of 2 GPUs (kind
# nvidia-h200-x2): whether NCCL's host cost per call, which simnet.HostEnqueue and simnet.HostPerRank
# take from 2.28 alone, depends on the release, and how each release's small calls and sweep compare.
# The other releases are Debian's libnccl2 builds (contrib: 2.22.3-1-1 from trixie, 2.29.7-1-1 from
# sid), reduced to their sm_90 cubins by tools/fatbin_keep.py and xz-compressed into .nccllibs/
# (git-ignored; name it in the device call's carry). nccl_perf is built against each library in turn
# (the image's 2.28 header: the calls it makes have one ABI in all three). Per release, twice, the
# releases interleaved:
#   R_sp_commsK_spin_rN  one process for both GPUs, K = 1, 2, 4 communicators (2K communicator-ranks a
#                        call from one thread) behind a 60 ms spin: the _host rows are NCCL's enqueue;
#   R_mp_spin_rN         a process per GPU behind the spin: one communicator-rank a thread;
#   R_sp_rN, R_mp_rN     nccl-tests' loop as it runs, one process / a process per GPU;
# (RELS="2.22.3" limits the other releases to those named: one device call carries at most 64 MiB, so
# each call carries one library and runs the image's release beside it as that lease's control)
# then once per release a sweep of the 7 collectives to 256 MiB (R_sweep, a process per GPU) and a
# TUNING/GRAPH log of all_reduce (R_tuning.*.log). bench/gpuprobe's bare launch before and after.
#   bash testdata/nccl/releasescan.sh OUT  ->  OUT/releasescan.csv, OUT/releasescan.log, OUT/launch.csv
set -u
O=$1; mkdir -p "$O"
CSV=$O/releasescan.csv; LOG=$O/releasescan.log; MAXEXP=14
. "$(dirname "$0")/scan_common.sh"
release_bins "${RELS:-2.22.3 2.29.7}"
launch_probe
probe
for rep in 1 2; do
  for r in $rels; do
    for k in 1 2 4; do runr $r sp_comms${k}_spin_r$rep COMMS=$k HOSTTIME=1 SPIN_US=60000; done
    runr $r mp_spin_r$rep HOSTTIME=1 SPIN_US=60000 NPROCS=$NP
    runr $r sp_r$rep HOSTTIME=1
    runr $r mp_r$rep HOSTTIME=1 NPROCS=$NP
  done
done
for r in $rels; do
  MAXEXP=28 runr $r sweep NPROCS=$NP
  mkdir -p "$O/tuning"
  MAXEXP=28 runr $r tuning COLLS=all_reduce NPROCS=$NP NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING \
    NCCL_DEBUG_FILE="$O/tuning/${r}_tuning.%p.log"
done
probe
echo "done $(date -u +%T)" >> "$LOG"
