# Summary of go2.sh's results: LL against Simple (ring) and the one-rank latency against NCCL.
import csv, json, os, statistics, sys
w = sys.argv[1]
print("runccl --backend cuda --share-gpus --algo ring, out of place, us per call; wrong elements summed")
for n in (2, 4):
    rows = {}
    for p in ("simple", "ll"):
        for g in ("0", "10"):
            f = os.path.join(w, "runccl_n%d_%s_G%s.json" % (n, p, g))
            try:
                res = json.load(open(f))
            except Exception as e:
                print("no", f, e)
                continue
            for r in res.get("rows", []):
                if r.get("in_place"):
                    continue
                rows.setdefault((r["coll"], r["bytes"]), {})[(p, g)] = (r["time_us"], r.get("proto", "?"), r.get("nchannels", 0), r.get("wrong", "?"))
    print("%d ranks: %-14s %8s | %-20s %-20s | %-20s %-20s" % (n, "coll", "bytes", "Simple", "LL", "Simple -G10", "LL -G10"))
    for (c, b), v in sorted(rows.items()):
        cells = []
        for k in (("simple", "0"), ("ll", "0"), ("simple", "10"), ("ll", "10")):
            x = v.get(k)
            cells.append("-" if x is None else "%7.1f %-6s c%d w%s" % x)
        print("          %-14s %8d | %-20s %-20s | %-20s %-20s" % (c, b, cells[0], cells[1], cells[2], cells[3]))
print()
d, h = {}, {}
for r in csv.reader(open(os.path.join(w, "lat.csv"))):
    if len(r) < 7:
        continue
    k = (r[0], r[1], r[2], int(r[3]))
    d.setdefault(k, []).append(float(r[4]))
    h.setdefault(k, []).append(float(r[6]))
print("one rank: ratio simccl/NCCL of the median us per call (6 runs each), 8 B-64 KiB: median, max, min; 1 GiB; host us per call medians")
modes = sorted({k[1] for k in d})
for mode in modes:
    for c in ("all_reduce", "all_gather", "reduce_scatter"):
        rs, big, hs, hn = [], None, [], []
        for b in sorted({k[3] for k in d}):
            a, n = ("simccl", mode, c, b), ("nccl", mode, c, b)
            if a not in d or n not in d:
                continue
            ratio = statistics.median(d[a]) / statistics.median(d[n])
            if b <= 65536:
                rs.append(ratio)
                hs.append(statistics.median(h[a]))
                hn.append(statistics.median(h[n]))
            else:
                big = ratio
        if rs:
            print("%-16s %-15s median %.3f max %.3f min %.3f | 1GiB %s | host us simccl %.2f nccl %.2f" % (mode, c, statistics.median(rs), max(rs), min(rs), "-" if big is None else "%.4f" % big, statistics.median(hs), statistics.median(hn)))
print()
print("per size, median us per call (event) nccl/simccl")
for mode in modes:
    for c in ("all_reduce", "all_gather", "reduce_scatter"):
        out = []
        for b in sorted({k[3] for k in d}):
            a, n = ("simccl", mode, c, b), ("nccl", mode, c, b)
            if a in d and n in d:
                out.append("%d:%.2f/%.2f" % (b, statistics.median(d[n]), statistics.median(d[a])))
        print(mode, c, " ".join(out))
