#!/bin/bash
# Every tag of a scan of testdata/nccl/p2pscan.sh, ringscan.sh or slicescan.sh (default: the 2×H200 p2pscan)
# against the simulation planned under the same NCCL settings and launch mode (read from the scan's
# log) on the machine's topology (real_topo.xml beside it), one summary block per tag:
#   bash bench/sim/p2pscan.sh [COMPARE_BINARY [SCAN_CSV]]
# (COMPARE_BINARY "" or absent: built from ./bench/sim/compare; e.g. SCAN_CSV
# testdata/nccl/h200x4/p2pscan-2026-11-28.csv). Prints per tag the median |error| >= 1 MiB and < 1 MiB of
# each collective and the 1, 4, 16 and 64 MiB rows.
set -eu
cd "$(dirname "$0")/../.."
CMP=${1:-}
if [ -z "$CMP" ]; then CMP=$(mktemp -d)/compare; go build -o "$CMP" ./bench/sim/compare; fi
CSV=${2:-testdata/nccl/h200x2/p2pscan-2026-11-28.csv}
LOG=${CSV%.csv}.log
TOPO=$(dirname "$CSV")/real_topo.xml
grep '^== ' "$LOG" | while read -r _ tag rest; do
  launch=per-node; env=""
  for kv in $rest; do
    case $kv in
      NPROCS=*) launch=per-gpu ;;
      NCCL_*=*) env="${env:+$env,}$kv" ;;
    esac
  done
  # rows that carry a rank (an 8th field) come from one process per GPU, whatever the log line says
  # (the first ring scans' log lines left NPROCS out)
  if grep -q "^$tag,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[0-9]" "$CSV"; then launch=per-gpu; fi
  echo "== $tag (launch $launch${env:+, $env})"
  "$CMP" -csv "$CSV" -topo "$TOPO" -tag "$tag" -launch "$launch" ${env:+-env "$env"} |
    awk '/^#/ {next} $2 == 1048576 || $2 == 4194304 || $2 == 16777216 || $2 == 67108864 || /median/ || /% \(/'
done
