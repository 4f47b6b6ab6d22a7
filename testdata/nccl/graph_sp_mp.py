#!/usr/bin/env python3
"""What one process replaying both GPUs' CUDA graphs costs a call beyond a process per GPU.

    python3 testdata/nccl/graph_sp_mp.py [CSV ...]

For each capture (default: the enqueuescan leases b, c and d, from which simnet.GraphPerNodeCall
was taken, and graphscan, kept apart to check it) it pairs the rows of `sp_default_graph_rK` (one
process, nccl_perf.cu GRAPH=1) with those of `mp_default_graph_rK` (a process per GPU) of the same
run K, collective and size (the slower rank's time where a row is per rank), and prints the median
and quartiles of sp - mp in microseconds, below and from 1 MiB; then the same over the first three.
"""
import collections
import csv
import os
import statistics as st
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "h200x2")
DEFAULT = ["enqueuescan-2026-11-29b.csv", "enqueuescan-2026-11-29c.csv", "enqueuescan-2026-11-30d.csv",
           "graphscan-2026-11-29.csv"]


def load(path):
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    with open(path) as f:
        for r in csv.reader(f):
            if len(r) < 5 or r[0] == "tag":
                continue
            rows[r[0]][(r[1], int(r[3]))].append(float(r[4]))
    return rows


def diffs(path):
    rows, out = load(path), []
    for k in (1, 2):
        sp, mp = rows.get("sp_default_graph_r%d" % k), rows.get("mp_default_graph_r%d" % k)
        if not sp or not mp:
            continue
        for key, v in sp.items():
            if key in mp:
                out.append((key[1], max(v) - max(mp[key])))
    return out


def show(name, d):
    v = [x for _, x in d]
    q = st.quantiles(v, n=4)
    small = [x for b, x in d if b < 1 << 20]
    big = [x for b, x in d if b >= 1 << 20]
    print("%-30s pairs %4d  median %5.2f us  quartiles %5.2f..%5.2f  <1MiB %5.2f (%d)  >=1MiB %s (%d)" % (
        name, len(v), st.median(v), q[0], q[2], st.median(small) if small else float("nan"), len(small),
        "%5.2f" % st.median(big) if big else "  n/a", len(big)))


def main():
    paths = sys.argv[1:] or [os.path.join(HERE, f) for f in DEFAULT]
    pooled = []
    for i, p in enumerate(paths):
        d = diffs(p)
        if len(d) < 2:
            print("%-30s no sp/mp graph pairs" % os.path.basename(p))
            continue
        show(os.path.basename(p), d)
        if not sys.argv[1:] and i < 3:
            pooled += d
    if pooled:
        show("enqueuescan b-d pooled", pooled)


if __name__ == "__main__":
    main()
