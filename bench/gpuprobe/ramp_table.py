#!/usr/bin/env python3
"""ramp.cu's kernel times beside NCCL's send/recv on the same lease: what each further chunk costs.

    python3 bench/gpuprobe/ramp_table.py RAMP.csv RAMPSCAN.csv [CHANNELS]

RAMP.csv is ramp.cu's output (kernel,channels,chunk_bytes,chunks,us), RAMPSCAN.csv the nccl_perf rows
of testdata/nccl/rampscan.sh on the same lease (tag,coll,world,bytes,us,algbw,busbw,rank; the slower
rank of each row). For CHANNELS (default 16) it prints, per chunk count k (512 KiB chunks a channel),
each probe kernel's time and its increment over the previous k, and NCCL's send/recv of k × CHANNELS
× 512 KiB per rank (graph replays and stream launches, each run), which NCCL 2.28 runs on 16 p2p
channels from 1 to 64 MiB on 2 H200.
"""
import collections
import csv
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    ch = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    probe = collections.defaultdict(dict)
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            if int(r["channels"]) == ch:
                probe[r["kernel"]][int(r["chunks"])] = float(r["us"])
    nccl = collections.defaultdict(lambda: collections.defaultdict(float))
    with open(sys.argv[2]) as f:
        for r in csv.reader(f):
            if len(r) < 5 or r[1] != "sendrecv":
                continue
            nccl[r[0]][int(r[3])] = max(nccl[r[0]][int(r[3])], float(r[4]))
    cols = [k for k in ("p2p", "p2p_serial") if k in probe] + sorted(nccl)
    print("chunks " + " ".join("%24s" % c for c in cols))
    prev = {}
    for k in (1, 2, 3, 4, 6, 8, 12, 16, 32, 64):
        cells = []
        for c in cols:
            t = probe[c].get(k) if c in probe else nccl[c].get(k * ch * (512 << 10))
            if t is None:
                cells.append("%24s" % "")
                continue
            inc = ""
            if c in prev:
                pk, pt = prev[c]
                inc = "(+%.1f/chunk)" % ((t - pt) / (k - pk))
            cells.append("%9.1f %14s" % (t, inc))
            prev[c] = (k, t)
        print("%6d " % k + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
