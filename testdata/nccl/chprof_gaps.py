#!/usr/bin/env python3
"""Tables from testdata/nccl/chprof.c's files (testdata/nccl/chprofscan.sh): per call size, the median
kernel time (first channel start to last channel stop), how early the first channel finishes against
the last, and the GPU's idle time between one kernel's last stop and the next kernel's first start.

    python3 testdata/nccl/chprof_gaps.py testdata/nccl/h200x2/chprof-2026-11-30/p2p_all/*.csv.gz

A kernel is a run of channel events that overlap in time (the kernels of one stream do not); two
kernels in a row of the same function and count are one gap. Send and receive events are one kind
(P2P). Sizes are NCCL's count × 4 (nccl_perf's floats), as the profiler reports the count.
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
            if not r.get("stop_ns"):
                continue  # a line cut short
            fn = "P2P" if r["func"] in ("Send", "Recv") else r["func"]
            ev.append((int(r["start_ns"]), int(r["stop_ns"]), fn, int(r["count"]), int(r["channel"])))
    ev.sort()
    ks, cur = [], None
    for s, e, fn, c, ch in ev:
        if cur is None or s > cur["e"]:
            cur = {"s": s, "e": e, "fn": fn, "c": c, "stops": {}}
            ks.append(cur)
        cur["e"] = max(cur["e"], e)
        cur["c"] = max(cur["c"], c)
        cur["stops"][ch] = max(cur["stops"].get(ch, 0), e)
    return ks


def main(paths):
    for path in paths:
        ks = kernels(path)
        rows = collections.defaultdict(list)
        for a, b in zip(ks, ks[1:]):
            if a["fn"] == b["fn"] and a["c"] == b["c"]:
                first = min(a["stops"].values())
                rows[(a["fn"], a["c"])].append(((b["s"] - a["e"]) / 1e3, (a["e"] - a["s"]) / 1e3,
                                                (first - a["s"]) / max(a["e"] - a["s"], 1), len(a["stops"])))
        print("==", path)
        print("  %-14s %12s %6s %4s %10s %12s %8s %8s %8s" % ("func", "bytes", "pairs", "ch", "kernel us",
                                                               "first/last", "gap us", "p10", "p90"))
        for (fn, c), L in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            if len(L) < 3:
                continue
            g = sorted(x[0] for x in L)
            print("  %-14s %12d %6d %4d %10.2f %12.3f %8.2f %8.2f %8.2f" % (
                fn, c * 4, len(L), L[0][3], st.median(x[1] for x in L), st.median(x[2] for x in L),
                st.median(g), g[len(g) // 10], g[9 * len(g) // 10]))


if __name__ == "__main__":
    main(sys.argv[1:])
