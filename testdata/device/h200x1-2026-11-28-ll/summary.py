# Summary of go.sh's results directory: the LL/Simple runccl table and the one-rank latency ratios.
import csv, json, os, statistics, sys
w = sys.argv[1]
print("runccl --backend cuda --share-gpus -g 2, out of place, us per call (proto the engine ran)")
rows = {}
for p in ("simple", "auto"):
    for g in ("0", "10"):
        f = os.path.join(w, "runccl_%s_G%s.json" % (p, g))
        try:
            res = json.load(open(f))
        except Exception as e:
            print("no", f, e)
            continue
        for r in res.get("rows", []):
            if r.get("in_place"):
                continue
            rows.setdefault((r["coll"], r["bytes"]), {})[(p, g)] = (r["time_us"], r.get("proto", "?"), r.get("wrong", r.get("nwrong", "?")))
print("%-10s %9s | %-22s %-22s | %-22s %-22s" % ("coll", "bytes", "Simple", "auto", "Simple -G10", "auto -G10"))
for (c, b), v in sorted(rows.items()):
    cells = []
    for k in (("simple", "0"), ("auto", "0"), ("simple", "10"), ("auto", "10")):
        x = v.get(k)
        cells.append("-" if x is None else "%8.1f %-6s w=%s" % x)
    print("%-10s %9d | %-22s %-22s | %-22s %-22s" % (c, b, cells[0], cells[1], cells[2], cells[3]))
print()
d = {}
try:
    for r in csv.reader(open(os.path.join(w, "lat.csv"))):
        if len(r) < 6:
            continue
        d.setdefault((r[0], r[1], r[2], int(r[3])), []).append(float(r[4]))
except Exception as e:
    print("no lat.csv", e)
print("one rank, us per call: median of 6 timed runs (3 rounds x 2 reps); ratio simccl/NCCL")
for tag in ("simccl", "simccl_kernel"):
    for mode in ("nogroup", "group"):
        for c in ("all_reduce", "all_gather", "reduce_scatter"):
            rs, worst, big = [], 0, None
            for (t, m, cc, b), v in d.items():
                if t != tag or m != mode or cc != c or ("nccl", m, cc, b) not in d:
                    continue
                ratio = statistics.median(v) / statistics.median(d[("nccl", m, cc, b)])
                if b <= 65536:
                    rs.append(ratio)
                else:
                    big = ratio
            if rs:
                print("%-14s %-8s %-15s 8B-64KiB median %.3f max %.3f min %.3f | 1GiB time ratio %s" % (tag, mode, c, statistics.median(rs), max(rs), min(rs), "-" if big is None else "%.4f" % big))
print()
print("per size (median us): nccl / simccl / simccl_kernel")
for mode in ("nogroup", "group"):
    for c in ("all_reduce", "all_gather", "reduce_scatter"):
        line = []
        for b in sorted({k[3] for k in d}):
            m = [statistics.median(d[(t, mode, c, b)]) if (t, mode, c, b) in d else float("nan") for t in ("nccl", "simccl", "simccl_kernel")]
            line.append("%d:%.2f/%.2f/%.2f" % (b, m[0], m[1], m[2]))
        print(mode, c, " ".join(line))
