#!/usr/bin/env bash
# Issue 11's real-run tables (benchmarks/RESULTS.md, "Real runs tonight"), one folder
# per baseline under $1 (default /tmp/opprof-gate-runs). Run on a quiet machine: nothing
# else should be running. Resumable: run again after an interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/opprof-gate-runs}"
runs="${AA_RUNS:-30}"
g() { python benchmarks/gate_runs.py "$@"; }
mkdir -p "$out"
uptime | tee "$out/load-start.txt"
# the many-op test: a 5-run baseline (serial), A/A, then one op slowed at a time
g baseline --dir "$out/mo5" --runs 5
g aa --dir "$out/mo5" --runs "$runs"
g inject --dir "$out/mo5" --ops 10 --factors 1.25,1.5
# the README's quick path: one baseline run
g baseline --dir "$out/mo1" --plain
g aa --dir "$out/mo1" --runs "$runs"
g inject --dir "$out/mo1" --ops 10 --factors 1.5
# -n 2 against a baseline taken with -n 2, and against the serial one (refused)
g baseline --dir "$out/mo5n2" --runs 5 --xdist 2
g aa --dir "$out/mo5n2" --runs "$runs" --xdist 2
g aa --dir "$out/mo5" --runs 3 --xdist 2
# the example suite, serial and -n 2
g baseline --dir "$out/ex5" --runs 5 --suite example
g aa --dir "$out/ex5" --runs "$runs"
g baseline --dir "$out/ex5n2" --runs 5 --suite example --xdist 2
g aa --dir "$out/ex5n2" --runs "$runs" --xdist 2
g fit --dir "$out/mo5" --out "$out/mo5/noise.json"
uptime | tee "$out/load-end.txt"
for d in mo5 mo1 mo5n2 ex5 ex5n2; do g tables --dir "$out/$d"; done
