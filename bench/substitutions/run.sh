#!/bin/bash
# Every substituted row of the embedded topologies × 1, 2, 16 nodes × collectives × 8 B–8 GiB
# (README.md): one line per row, then a count per (topology, nodes, collective) and the same as JSON.
# NODES and TOPOS (space-separated) replace the node counts and the topologies.
set -u -o pipefail
S=${1:-bin/simccl}
NODES=${NODES:-1 2 16}
TOPOS=${TOPOS:-dgx-a100 dgx-b200 dgx-h100 dgx-h200 dgx1-v100 gb200-nvl4-tray gb200-nvl72 gh200-c2c h200x2-nvlink hgx-h100-16nic pcie-8gpu-2socket}
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for t in $TOPOS; do
	for n in $NODES; do
		for c in allreduce allgather reducescatter broadcast reduce alltoall sendrecv; do
			if ! "$S" run --topo "$t" --nodes "$n" -c "$c" -b 8 -e 8G -f 2 --dry-run --json --progress off 2>/dev/null |
				python3 -c '
import json, sys
for r in json.load(sys.stdin)["rows"]:
    if r.get("nccl"):
        print(sys.argv[1], sys.argv[2], sys.argv[3], r["bytes"], r["algo"] + "/" + r["proto"] + "/" + str(r["nchannels"]), r["nccl"])
' "$t" "$n" "$c" >>"$rows"; then
				echo "FAIL $t $n $c" >>"$rows"
			fi
		done
	done
done
cat "$rows"
python3 - "$rows" <<'PY'
import collections, json, sys
lines = [l.split() for l in open(sys.argv[1]) if l.strip()]
fails = [l for l in lines if l[0] == "FAIL"]
subs = [l for l in lines if l[0] != "FAIL"]
count = collections.Counter((l[0], int(l[1]), l[2]) for l in subs)
print("\n%-20s %5s %-14s %5s" % ("topology", "nodes", "collective", "rows"))
for (t, n, c), k in sorted(count.items()):
    print("%-20s %5d %-14s %5d" % (t, n, c, k))
print("%d substituted rows, %d failed calls" % (len(subs), len(fails)))
print(json.dumps({"substituted": len(subs), "failed": len(fails),
                  "rows": [{"topology": l[0], "nodes": int(l[1]), "collective": l[2], "bytes": int(l[3]),
                            "simulated": l[4], "nccl": l[5]} for l in subs]}))
PY
