#!/bin/sh
# Runs the report's browser tests in a real headless Chromium (Debian's package), installing it
# first when absent, and refreshes docs/report.png (the screenshot of the report for the embedded
# default topology) and opens the 128-node × 8-GPU page (SIMCCL_LONG=1; its render time is in the log,
# the budget is bench/report's). Meant for `make test-browser`; needs root (or sudo) for apt-get.
set -eu
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO="sudo"
	$SUDO apt-get update
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y chromium
fi
SIMCCL_LONG=1 SIMCCL_REPORT_SCREENSHOT="$(pwd)/docs/report.png" go test -count=1 -v -run 'Browser' ./report/
