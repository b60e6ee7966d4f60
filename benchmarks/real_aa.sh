#!/usr/bin/env bash
# Real A/A runs: the example suite's baselines from --runs N separate processes, then
# M more runs, each in a new process, gated against them. Prints one line per run and
# leaves the JSON results in $OUT_DIR (default /tmp/opprof-aa).
#
#     bash benchmarks/real_aa.sh [RUNS=5] [CHECKS=20]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"; checks="${2:-20}"; out="${OUT_DIR:-/tmp/opprof-aa}"
rm -rf "$out"; mkdir -p "$out"
opprof baseline update --runs "$runs" example_suite -q -p no:cacheprovider \
    --opprof-baseline-dir="$out/baselines" > "$out/update.log"
failed=0
for i in $(seq 1 "$checks"); do
    if python -m pytest example_suite -q -p no:cacheprovider --opprof-baseline-dir="$out/baselines" \
            --opprof-json="$out/run$i.json" > "$out/run$i.log" 2>&1; then
        echo "run $i: passed"
    else
        failed=$((failed + 1)); echo "run $i: FAILED"; grep -E "^(FAILED|  OP_ID)" "$out/run$i.log" || true
    fi
done
python benchmarks/aa_summary.py "$out" "$checks"
echo "$failed of $checks runs failed"
