# Summary of go.sh's results: Simple / LL / LL128 (ring, graph replays) and the one-rank latency against NCCL.
import csv, json, os, statistics, sys
w = sys.argv[1]
print("runccl --backend cuda --share-gpus --algo ring -G 10 (CUDA graph replays), out of place, us per call (median of the rounds); wrong elements summed")
names = [(p, h) for p, h in [("simple", "Simple"), ("ll", "LL"), ("llg2", "LL grid 2"), ("llu1", "LL u1"), ("ll128", "LL128"), ("ll128g2", "LL128 grid 2"), ("ll128u1", "LL128 u1")] if any(f.startswith("runccl_n2_%s_" % p) or f == "runccl_n2_%s.json" % p for f in os.listdir(w))]
for n in (2, 4):
    rows = {}
    for p, _ in names:
        for f in sorted(os.listdir(w)):
            if not (f.startswith("runccl_n%d_%s_" % (n, p)) or f == "runccl_n%d_%s.json" % (n, p)) or not f.endswith(".json"):
                continue
            try:
                res = json.load(open(os.path.join(w, f)))
            except Exception as e:
                print("no", f, e)
                continue
            for r in res.get("rows", []):
                if r.get("in_place"):
                    continue
                v = rows.setdefault((r["coll"], r["bytes"]), {}).setdefault(p, [[], "?", 0, 0])
                v[0].append(r["time_us"])
                v[1], v[2] = r.get("proto", "?"), r.get("nchannels", 0)
                v[3] += r.get("wrong", 0) or 0
    if not rows:
        continue
    print("%d ranks: %-14s %8s | " % (n, "coll", "bytes") + " ".join("%-18s" % h for _, h in names))
    for (c, b), v in sorted(rows.items()):
        cells = []
        for p, _ in names:
            x = v.get(p)
            cells.append("-" if x is None else "%6.1f %-6s c%d w%d" % (statistics.median(x[0]), x[1], x[2], x[3]))
        print("          %-14s %8d | " % (c, b) + " ".join("%-18s" % x for x in cells))
print()
d, h = {}, {}
for r in csv.reader(open(os.path.join(w, "lat.csv"))):
    if len(r) < 7:
        continue
    k = (r[0], r[1], r[2], int(r[3]))
    d.setdefault(k, []).append(float(r[4]))
    h.setdefault(k, []).append(float(r[6]))
print("one rank: ratio ours/NCCL of the median us per call (6 runs each), 8 B-64 KiB: median, max, min; 1 GiB; host us per call medians")
modes = sorted({k[1] for k in d})
tags = sorted({k[0] for k in d} - {"nccl"})
for tag, mode in [(t, m) for t in tags for m in modes]:
    for c in ("all_reduce", "all_gather", "reduce_scatter"):
        rs, big, hs, hn = [], None, [], []
        for b in sorted({k[3] for k in d}):
            a, n = (tag, mode, c, b), ("nccl", mode, c, b)
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
            print("%-10s %-16s %-15s median %.3f max %.3f min %.3f | 1GiB %s | host us ours %.2f nccl %.2f" % (tag, mode, c, statistics.median(rs), max(rs), min(rs), "-" if big is None else "%.4f" % big, statistics.median(hs), statistics.median(hn)))
print()
print("per size, median us per call (event) nccl/ours")
for tag, mode in [(t, m) for t in tags for m in modes]:
    for c in ("all_reduce", "all_gather", "reduce_scatter"):
        out = []
        for b in sorted({k[3] for k in d}):
            a, n = (tag, mode, c, b), ("nccl", mode, c, b)
            if a in d and n in d:
                out.append("%d:%.2f/%.2f" % (b, statistics.median(d[n]), statistics.median(d[a])))
        print(tag, mode, c, " ".join(out))
