#!/usr/bin/env python3
"""Each channel's share of NVLink among a point-to-point call's channels, from ramp.cu's stamps.

    python3 bench/gpuprobe/ramp_shares.py [TS.csv.gz ...]

For every run of ramp.cu's `p2p` kernel (send/recv, the CTA's halves at once) whose stamps were kept,
the first chunk's send on channel c (CTA c of GPU 0) takes d_c: all channels start together and push
512 KiB each into the peer's FIFO over the same NVLink, so 1/d_c is channel c's rate while they
share it. A run's shares are those rates over their mean; the shares of a channel count are the
mean over its runs (every lease given). Prints them per channel count, with the runs' spread, as the
Go literal of simnet's hopperP2PShares (default files: bench/gpuprobe/results/h200x2-ramp-ts-*.csv.gz).
"""
import collections
import csv
import glob
import gzip
import os
import statistics as st
import sys


def runs(path):
    out = collections.defaultdict(dict)
    with gzip.open(path, "rt") as f:
        for r in csv.DictReader(f):
            if r["kernel"] != "p2p" or r["chunk"] != "0" or r["what"] not in ("send_start", "send_end"):
                continue
            out[(int(r["channels"]), int(r["chunks"]))][(int(r["channel"]), r["what"])] = int(r["ns"])
    for (ch, chunks), v in sorted(out.items()):
        d = [v[(c, "send_end")] - v[(c, "send_start")] for c in range(ch)]
        yield ch, [1 / x for x in d]


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    paths = sys.argv[1:] or sorted(glob.glob(os.path.join(here, "h200x2-ramp-ts-*.csv.gz")))
    by = collections.defaultdict(list)
    for p in paths:
        for ch, rates in runs(p):
            m = st.mean(rates)
            by[ch].append([r / m for r in rates])
    for ch in sorted(by):
        rs = by[ch]
        mean = [st.mean(col) for col in zip(*rs)]
        spread = max(max(col) - min(col) for col in zip(*rs))
        print("// %d channels: %d runs, largest spread of a channel's share between runs %.3f" % (ch, len(rs), spread))
        print("%d: {%s}," % (ch, ", ".join("%.3f" % s for s in mean)))


if __name__ == "__main__":
    main()
