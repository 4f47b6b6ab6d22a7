#!/bin/bash
# NCCL's point-to-point channels per network peer (the remote-peer rule of paths.cc's p2p channel count)
# against the NIC's speed, the ranks and the p2p channel bounds, on one machine of kind nvidia-h200-x2:
# the image's NCCL 2.28 and Debian's 2.22.3 and 2.29.7 (RELS; release_bins in scan_common.sh: name
# .nccllibs in the device call's carry). Ranks that NCCL takes for separate hosts (FAKE_HOSTS=1: a
# NCCL_HOSTID each) reach each other through NET/Socket; a topology file declares that NIC at 100-800
# Gb/s (NCCL keeps the speed a file gives and lets the plugin fill it only where it is missing). NCCL's
# INFO line "N coll channels, …, P p2p channels, Q p2p channels per peer" is the rule's outcome, and its
# "Channel cc/1 : a[a] -> b[b] [send] via NET/…" lines say which channels a send/recv connected.
#   bash testdata/nccl/netpeerscan.sh OUT
# Writes OUT/netpeerscan.log (what ran), OUT/netpeerscan.csv (nccl_perf's rows, not the point here),
# OUT/dump.xml and OUT/dump2.xml (rank 0's topology with one and two NICs, from which the runs'
# topo_SPEED.xml are made: the NICs' speed replaced), OUT/logs.tgz (NCCL's INFO logs, REL_TAG.PID.log) and OUT/summary.txt (the INFO lines
# that matter, one block per run).
set -u
O=$1; mkdir -p "$O"
CSV=$O/netpeerscan.csv; LOG=$O/netpeerscan.log; MAXEXP=${MAXEXP:-20}
. "$(dirname "$0")/scan_common.sh"
IF=$(ip -o -4 route show to default 2>/dev/null | awk '{print $5; exit}')
export NCCL_SOCKET_IFNAME=${IF:-eth0}
log_gpus; nproc >> "$LOG"
release_bins "${RELS:-2.22.3 2.29.7}"
info() {  # info REL TAG NPROCS ENV...: run $C (default sendrecv) on release REL with NCCL's INFO log
  # into $O/REL_TAG.*.log, and its lines that matter into $O/summary.txt
  local r=$1 tag=$2 np=$3; shift 3
  runr "$r" "$tag" COLLS=${C:-sendrecv} NPROCS=$np FAKE_HOSTS=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,NET,P2P \
    NCCL_DEBUG_FILE="$O/${r}_$tag.%p.log" "$@"
  { echo "== ${r}_$tag NPROCS=$np $*"
    cat "$O/${r}_$tag".*.log 2>/dev/null | grep -hE 'p2p channels per peer|Chunksize|NET/Socket : Using|\+ NET\[' | sed 's/^[^ ]* //' | sort | uniq -c
    cat "$O/${r}_$tag".*.log 2>/dev/null | grep -hE 'Channel [0-9]+/1 .*\[send\]' | sed 's/^[^ ]* //' | sort | uniq -c | head -40
  } >> "$O/summary.txt"
}
# Rank 0's topology as NCCL builds it with two fake hosts: its GPU, its CPU and the socket NIC.
run dump COLLS=sendrecv NPROCS=2 FAKE_HOSTS=1 MAXEXP=3 NCCL_TOPO_DUMP_FILE="$O/dump.xml"
info img plugin 2
for sp in 100000 200000 400000 800000; do
  sed -E "s/(<net [^>]*)speed=\"[0-9]+\"/\1speed=\"$sp\"/" "$O/dump.xml" > "$O/topo_$sp.xml"
  info img np2_$sp 2 NCCL_TOPO_FILE="$O/topo_$sp.xml"
  for r in $rels; do info $r np2_${sp}_p2p32 2 NCCL_TOPO_FILE="$O/topo_$sp.xml" NCCL_MIN_P2P_NCHANNELS=32; done
done
# Two NICs a host (the socket plugin on the default interface and on loopback), each at 100 or 400
# Gb/s: whether the rule counts the NICs a GPU needs (every release).
I2=NCCL_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME,lo
run dump2 COLLS=sendrecv NPROCS=2 FAKE_HOSTS=1 MAXEXP=3 $I2 NCCL_TOPO_DUMP_FILE="$O/dump2.xml"
for sp in 100000 400000; do
  sed -E "s/(<net [^>]*)speed=\"[0-9]+\"/\1speed=\"$sp\"/g" "$O/dump2.xml" > "$O/topo2_$sp.xml"
  for r in $rels; do info $r np2_nic2_${sp}_p2p32 2 $I2 NCCL_TOPO_FILE="$O/topo2_$sp.xml" NCCL_MIN_P2P_NCHANNELS=32; done
done
# One host (no fake hosts): the NVLink peer's channels under NCCL_MIN_P2P_NCHANNELS=64, which
# lifts p2pnChannels above the search's 32 (is the per-peer count capped before or after?).
run nvl_p2p64 COLLS=sendrecv NPROCS=2 MAXEXP=3 NCCL_MIN_P2P_NCHANNELS=64 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
  NCCL_DEBUG_FILE="$O/img_nvl_p2p64.%p.log"
{ echo "== img_nvl_p2p64 NPROCS=2 NCCL_MIN_P2P_NCHANNELS=64 (one host)"
  cat "$O"/img_nvl_p2p64.*.log | grep -hE 'p2p channels per peer' | sed 's/^[^ ]* //' | sort | uniq -c; } >> "$O/summary.txt"
T=$O/topo_400000.xml
for r in $rels; do  # the scale rule and the variable on every release at hand
  info $r np2_400000_env8 2 NCCL_TOPO_FILE="$T" NCCL_MIN_P2P_NCHANNELS=32 NCCL_NCHANNELS_PER_NET_PEER=8
  C=sendrecv,alltoall info $r np4_400000_p2p32 4 NCCL_TOPO_FILE="$T" NCCL_MIN_P2P_NCHANNELS=32
  C=sendrecv,alltoall info $r np8_400000_p2p32 8 NCCL_TOPO_FILE="$T" NCCL_MIN_P2P_NCHANNELS=32
  C=sendrecv,alltoall info $r np8_400000_p2p2 8 NCCL_TOPO_FILE="$T" NCCL_MAX_P2P_NCHANNELS=2
  C=sendrecv,alltoall info $r np8_400000_p2p4 8 NCCL_TOPO_FILE="$T" NCCL_MIN_P2P_NCHANNELS=4 NCCL_MAX_P2P_NCHANNELS=4
done
echo "failed: $(grep -c '^failed:' "$LOG")" >> "$LOG"
(cd "$O" && tar czf logs.tgz $(ls | grep -E '\.[0-9]+\.log$') && rm -f $(ls | grep -E '\.[0-9]+\.log$') topo_*.xml topo2_*.xml)
