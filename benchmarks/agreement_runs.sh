#!/usr/bin/env bash
# opprof baseline update's agreement check on real runs of the example suite: UPDATES
# updates of --runs 5 on a quiet machine (A/A: how often a run is taken again, and how
# often a test is still reported), then UPDATES with the 2nd process of each run beside
# 2 busy-loop processes (benchmarks/busy_run.py), as a neighbour's job would.
#
#     bash benchmarks/agreement_runs.sh [UPDATES=5]
set -euo pipefail
cd "$(dirname "$0")/.."
updates="${1:-5}"; out="${OUT_DIR:-/tmp/opprof-agreement}"
rm -rf "$out"; mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
for busy in "" "2"; do
    for i in $(seq 1 "$updates"); do
        log="$out/update-busy${busy:-none}-$i.log"
        rm -f "$out/counter"
        OPPROF_BUSY_COUNTER="$out/counter" OPPROF_BUSY_RUNS="$busy" \
            opprof baseline update --runs 5 example_suite -q -p no:cacheprovider \
            -p no:randomly -p benchmarks.busy_run --opprof-baseline-dir="$out/b$busy-$i" \
            > "$log" 2>&1 || echo "update failed: $log"
        echo "busy run: ${busy:-none}, update $i: $(grep -c "sit far from their other runs" "$log") re-take(s), $(grep -c " between runs (spread" "$log") test(s) reported"
        grep -E "sit far from their other runs| between runs \(spread" "$log" || true
    done
done
