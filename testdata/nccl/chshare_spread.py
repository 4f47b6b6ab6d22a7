#!/usr/bin/env python3
"""Per call size: the stamped kernel and how early the first (and the median) channel stops, as a
fraction of the kernel, from testdata/nccl/chprof.c's files (testdata/nccl/chshare.sh).

    python3 testdata/nccl/chshare_spread.py testdata/nccl/h200x2/chshare-2026-11-30/p2p_default/*.gz
"""
import collections
import csv
import gzip
import statistics as st
import sys


def kernels(path):
    ev = []
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        for r in csv.DictReader(f):
            if r.get("stop_ns"):
                ev.append((int(r["start_ns"]), int(r["stop_ns"]), int(r["count"]), int(r["channel"])))
    ev.sort()
    ks, cur = [], None
    for s, e, c, ch in ev:
        if cur is None or s > cur["e"]:
            cur = {"s": s, "e": e, "c": c, "stops": {}}
            ks.append(cur)
        cur["e"], cur["c"] = max(cur["e"], e), max(cur["c"], c)
        cur["stops"][ch] = max(cur["stops"].get(ch, 0), e)
    return ks


def main(paths):
    for path in paths:
        rows = collections.defaultdict(list)
        for k in kernels(path):
            span = max(k["e"] - k["s"], 1)
            fr = sorted((e - k["s"]) / span for e in k["stops"].values())
            rows[k["c"] * 4].append((span / 1e3, fr[0], st.median(fr), len(fr)))
        print("==", path)
        print("  %12s %4s %10s %10s %10s" % ("bytes", "ch", "kernel us", "first", "median"))
        for b, L in sorted(rows.items()):
            if len(L) >= 5:
                print("  %12d %4d %10.1f %10.3f %10.3f" % (b, L[0][3], st.median(x[0] for x in L),
                                                          st.median(x[1] for x in L), st.median(x[2] for x in L)))


if __name__ == "__main__":
    main(sys.argv[1:])
