#!/usr/bin/env bash
# koala-emu's sim backend against SimGrid on the same FCFS workload (README.md):
# checks that both produce the same schedule, then times both whole processes
# with farm-bench, paired. Installs Debian's python3-simgrid when it is missing
# (as root). Usage: bench/simgrid/run.sh [RUNS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
runs="${1:-10}"
py=/usr/bin/python3 # Debian's own Python: the one that imports Debian's packages
if ! "$py" -c 'import simgrid' 2>/dev/null; then
	if [ "$(id -u)" != 0 ]; then
		echo "python3-simgrid is missing: apt-get install python3-simgrid (as root)" >&2
		exit 1
	fi
	apt-get install -y -q python3-simgrid >&2
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
(cd "$here/../.." && go build -o "$out/koala-emu" ./cmd/koala-emu)
cd "$here"
"$out/koala-emu" run fcfs-256.yaml --backend sim --quiet --out "$out/run"
"$py" fcfs.py ctc-1000.swf 256 "$out/simgrid.csv" 2>/dev/null
"$py" compare.py "$out/run/jobs.csv" "$out/simgrid.csv"
if command -v farm-bench >/dev/null; then
	farm-bench -n "$runs" --timeout 600 --vs "$py fcfs.py ctc-1000.swf 256" -- \
		"$out/koala-emu" run fcfs-256.yaml --backend sim --quiet --out "$out/bench"
else
	echo "farm-bench not found: timing skipped" >&2
fi
