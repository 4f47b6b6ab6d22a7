#!/usr/bin/env python3
"""How evenly a call's channels progress, from testdata/nccl/chprof.c's channel stamps.

    python3 testdata/nccl/chprof_shares.py FILE.csv.gz ...

Per file (one rank) and call size (from 8 MiB), each channel's rate relative to the mean of the
call's channels, 1/(its stop - the kernel's first start) over the mean of those, averaged over the
timed calls of that size: equal bytes per channel (NCCL splits a transfer evenly), so a channel
above 1 finished early. Sizes are count x 4 bytes (nccl_perf's float rows).
"""
import collections
import os
import statistics as st
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chshare_spread import kernels  # noqa: E402


def main(paths):
    for path in paths:
        by = collections.defaultdict(list)
        for k in kernels(path):
            b = k["c"] * 4
            if b < 8 << 20:
                continue
            rates = {ch: 1 / max(e - k["s"], 1) for ch, e in k["stops"].items()}
            m = st.mean(rates.values())
            by[(b, len(rates))].append({ch: r / m for ch, r in rates.items()})
        print("==", path)
        for (b, n), calls in sorted(by.items()):
            chs = sorted(calls[0])
            mean = [st.mean(c[ch] for c in calls if ch in c) for ch in chs]
            print("  %11d B %2d ch  %s" % (b, n, " ".join("%d:%.2f" % (c, m) for c, m in zip(chs, mean))))


if __name__ == "__main__":
    main(sys.argv[1:])
