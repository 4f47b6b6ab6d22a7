#!/bin/bash
# NCCL 2.28's socket transport (NET/Socket) between two processes that NCCL takes for two hosts
# (FAKE_HOSTS=1: a NCCL_HOSTID each) on one machine of kind nvidia-h200-x2, for the simulator's
# network model: what a message costs NCCL's socket transport beside the NCCL model's NET latency.
#   bash testdata/nccl/socketscan.sh OUT
# The two "hosts" share the machine's kernel: their TCP connections go through its loopback path,
# not through the NIC, so the large sizes measure the host's TCP stack and NCCL's proxy, not a wire.
# Writes OUT/socketscan.csv (tools/nccl_perf.cu rows with the rank: take the larger time of the two
# ranks), OUT/socketscan.log, OUT/tcp.csv (tcp_probe.py: a bare TCP ping-pong and one stream over
# the same address, the kernel's share) and OUT/sock.*.log (NCCL's INFO log of the first run).
set -u
O=$1; mkdir -p "$O"
CSV=$O/socketscan.csv; LOG=$O/socketscan.log; MAXEXP=${MAXEXP:-27}
. "$(dirname "$0")/scan_common.sh"
IF=$(ip -o -4 route show to default 2>/dev/null | awk '{print $5; exit}')
IF=${IF:-eth0}
ADDR=$(ip -o -4 addr show dev "$IF" 2>/dev/null | awk '{print $4; exit}' | cut -d/ -f1)
[ -n "$ADDR" ] || ADDR=$(hostname -I 2>/dev/null | awk '{print $1}')
echo "interface $IF address $ADDR" >> "$LOG"
log_gpus; nproc >> "$LOG"; uname -r >> "$LOG"
export NCCL_SOCKET_IFNAME=$IF
S=sendrecv,all_reduce
run sock_r1 COLLS=$S NPROCS=2 FAKE_HOSTS=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,TUNING NCCL_DEBUG_FILE=$O/sock.%p.log
run sock_r2 COLLS=$S NPROCS=2 FAKE_HOSTS=1
# one channel, one socket: the transport's own per-message cost and one connection's rate
run sock_ch1 COLLS=$S NPROCS=2 FAKE_HOSTS=1 NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1 NCCL_MAX_P2P_NCHANNELS=1
# more helper threads and sockets per connection (NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD)
run sock_t4s4 COLLS=$S NPROCS=2 FAKE_HOSTS=1 NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4
# Simple only (the LL rows of a socket connection go through host memory too)
run sock_simple COLLS=$S NPROCS=2 FAKE_HOSTS=1 NCCL_PROTO=Simple
# one direction only (rank 0 sends, rank 1 receives): a message's latency and a direction's rate
# without the reverse flow
run sock_oneway COLLS=oneway NPROCS=2 FAKE_HOSTS=1
# NCCL's algorithm and protocol pinned, one channel: the per-step cost of each over the socket
for a in Ring Tree; do for p in LL Simple; do
  MAXEXP=20 run sock_${a}_${p} COLLS=all_reduce NPROCS=2 FAKE_HOSTS=1 NCCL_ALGO=$a NCCL_PROTO=$p NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1
done; done
# four "hosts" (two processes a GPU): a ring of four network hops, for checking a model taken
# from the two-rank rows
run sock4_r1 COLLS=all_reduce,all_gather,reduce_scatter,broadcast,sendrecv NPROCS=4 FAKE_HOSTS=1
run sock4_r2 COLLS=all_reduce,all_gather,reduce_scatter,broadcast,sendrecv NPROCS=4 FAKE_HOSTS=1
python3 "$D/tcp_probe.py" "${ADDR:-127.0.0.1}" > "$O/tcp.csv" 2>> "$LOG" || echo "failed: tcp_probe" >> "$LOG"
echo "done $(date -u +%T)" >> "$LOG"
