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
# Both binaries, as make build and make build-sim do: koala-emu with every
# backend, koala-sim with inproc and sim only (the one for many simulations).
(cd "$here/../.." && CGO_ENABLED=0 go build -o "$out/koala-emu" ./cmd/koala-emu &&
	CGO_ENABLED=0 go build -tags simonly -o "$out/koala-sim" ./cmd/koala-emu)
cd "$here"
"$out/koala-sim" run fcfs-256.yaml --backend sim --quiet --out "$out/run"
"$py" fcfs.py ctc-1000.swf 256 "$out/simgrid.csv" 2>/dev/null
"$py" compare.py "$out/run/jobs.csv" "$out/simgrid.csv"
# The engines alone, each run's own stamp: koala-emu's run from its actors'
# start to the last job's end (results.json wall_s: no process start, no
# scenario load, no results written), SimGrid's Engine.run (no interpreter
# start, no platform load, no actor creation). Medians of RUNS runs each.
ke=() sg=()
for i in $(seq "$runs"); do
	"$out/koala-sim" run fcfs-256.yaml --backend sim --quiet --out "$out/engine" >/dev/null
	ke+=("$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["wall_s"])' "$out/engine/results.json")")
	sg+=("$("$py" fcfs.py ctc-1000.swf 256 2>/dev/null | awk '{print $6}')")
done
"$py" - "${ke[*]}" "${sg[*]}" <<'PY'
import statistics, sys
ke, sg = [list(map(float, a.split())) for a in sys.argv[1:3]]
k, s = statistics.median(ke), statistics.median(sg)
print("engines alone, median of %d runs: koala-emu %.4f s (%.4f-%.4f), SimGrid Engine.run %.3f s (%.3f-%.3f): %.1f times faster"
      % (len(ke), k, min(ke), max(ke), s, min(sg), max(sg), s / k))
PY
# The whole processes, paired run by run: koala-sim, then koala-emu, each
# against SimGrid's script.
if command -v farm-bench >/dev/null; then
	for bin in koala-sim koala-emu; do
		echo "== $bin (A) against SimGrid (B)"
		farm-bench -n "$runs" --timeout 600 --vs "$py fcfs.py ctc-1000.swf 256" -- \
			"$out/$bin" run fcfs-256.yaml --backend sim --quiet --out "$out/bench-$bin"
	done
else
	echo "farm-bench not found: timing skipped" >&2
fi
