#!/usr/bin/env python3
"""Where the GPU time of a send/recv outside NCCL's channel stamps lies: testdata/nccl/p2pmarker.cu's
markers against testdata/nccl/chprof.c's stamps of the same run (one process for both GPUs).

    python3 testdata/nccl/p2pmarker_sides.py testdata/nccl/h200x2/chprof-2026-11-30/p2pmarker

Per size and rank, medians over the timed calls: the marker before a call to its first channel
start, the stamped kernel (first start to last stop), the last stop to the marker after the call,
and the whole span between the markers (µs).
"""
import collections
import csv
import glob
import gzip
import os
import statistics as st
import sys


def main(d):
    ev = collections.defaultdict(list)
    for path in glob.glob(os.path.join(d, "chprof.*.csv*")):
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            for r in csv.DictReader(f):
                if r.get("stop_ns"):
                    ev[int(r["rank"])].append((int(r["start_ns"]), int(r["stop_ns"])))
    res = collections.defaultdict(list)
    with open(os.path.join(d, "markers.csv")) as f:
        for r in csv.DictReader(f):
            rank, before, after = int(r["rank"]), int(r["before_ns"]), int(r["after_ns"])
            inside = [e for e in ev[rank] if e[0] >= before and e[1] <= after]
            if not inside:
                continue
            s0, e1 = min(e[0] for e in inside), max(e[1] for e in inside)
            res[(int(r["bytes"]), rank)].append(((s0 - before) / 1e3, (e1 - s0) / 1e3, (after - e1) / 1e3,
                                                 (after - before) / 1e3))
    print("%12s %4s %5s %14s %14s %14s %10s" % ("bytes", "rank", "calls", "before->start", "stamped",
                                                 "stop->after", "span"))
    for (b, rank), L in sorted(res.items()):
        print("%12d %4d %5d %14.2f %14.2f %14.2f %10.2f" % (b, rank, len(L), *(st.median(x[i] for x in L)
                                                                              for i in range(4))))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
