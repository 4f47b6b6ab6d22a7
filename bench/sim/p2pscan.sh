#!/bin/bash
# Every tag of testdata/nccl/h200x2/p2pscan-2026-11-28.csv against the simulation planned under the
# same NCCL settings and launch mode (read from the scan's log), one summary block per tag:
#   bash bench/sim/p2pscan.sh [COMPARE_BINARY]
# (default: go run ./bench/sim/compare). Prints per tag the median |error| >= 1 MiB and < 1 MiB of
# each collective and the 1, 4, 16 and 64 MiB rows.
set -eu
cd "$(dirname "$0")/../.."
CMP=${1:-}
if [ -z "$CMP" ]; then CMP=$(mktemp -d)/compare; go build -o "$CMP" ./bench/sim/compare; fi
CSV=testdata/nccl/h200x2/p2pscan-2026-11-28.csv
LOG=testdata/nccl/h200x2/p2pscan-2026-11-28.log
grep '^== ' "$LOG" | while read -r _ tag rest; do
  launch=per-node; env=""
  for kv in $rest; do
    case $kv in
      NPROCS=*) launch=per-gpu ;;
      NCCL_*=*) env="${env:+$env,}$kv" ;;
    esac
  done
  echo "== $tag (launch $launch${env:+, $env})"
  "$CMP" -csv "$CSV" -tag "$tag" -launch "$launch" ${env:+-env "$env"} |
    awk '/^#/ {next} $2 == 1048576 || $2 == 4194304 || $2 == 16777216 || $2 == 67108864 || /median/ || /% \(/'
done
