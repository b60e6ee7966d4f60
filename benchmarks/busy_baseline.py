"""What a run taken beside a busy neighbour does to a baseline, and what taking it again
gives back: the detectable effect of each op with the busy run stored (what an update
stored before the agreement check) and with it taken again.

Six runs of the ResNet test, each a new process, the 2nd beside 2 busy loops
(benchmarks/busy_run.py), appended into one baseline::

    export PYTHONPATH=$PWD OMP_NUM_THREADS=1 OPPROF_BUSY_COUNTER=/tmp/s2blind/counter \\
        OPPROF_BUSY_RUNS=2
    for i in 1 2 3 4 5 6; do python -m pytest example_suite/test_resnet.py -q \\
        -p no:cacheprovider -p no:randomly -p benchmarks.busy_run \\
        --opprof-update-baseline=append --opprof-baseline-dir=/tmp/s2blind/b; done
    python benchmarks/busy_baseline.py /tmp/s2blind/b

Runs 1-5 are what the update stored before (run 2 the busy one); run 6 is the run the
check takes again in run 2's place.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pytest_opprof.judge import agreement, rule
from pytest_opprof.judge.gate import gate_config
from pytest_opprof.measure.measures import named
from pytest_opprof.store.baseline import load_file


def pooled(runs: list[dict]) -> dict:
    """Each op's samples, one array per run."""
    found: dict = {}
    for run in runs:
        for key, samples in run.items():
            found.setdefault(key, []).append(samples)
    return found


def main(folder: str) -> None:
    baseline = load_file(next(Path(folder).rglob("*.json")))
    config = gate_config(named("time").gate, 0.05, {})
    runs = [r.samples() for r in baseline.runs]
    busy, again = runs[:5], [runs[0], *runs[2:6]]
    found = agreement.check(busy, config)
    print("far off:", {j + 1: sorted({k[0] for k in keys}) for j, keys in found.outliers.items()})
    print("run 2 taken again, the runs agree:", agreement.check(again, config).agrees)
    before, after = rule.noise(pooled(busy), config), rule.noise(pooled(again), config)
    print(f"median detectable over ops: {np.median([v.detectable for v in before.values()]):+.0%}"
          f" with the busy run, {np.median([v.detectable for v in after.values()]):+.0%} taken "
          "again")
    for key in sorted({k for keys in found.outliers.values() for k in keys}):
        medians = [round(float(np.median(r[key])) / 1e3) for r in runs]
        print(f"{key[0]}[{key[1]}]: medians (us) {medians[:5]}, taken again {medians[5]}; "
              f"detectable {before[key].detectable:+.0%} with the busy run, "
              f"{after[key].detectable:+.0%} taken again")


if __name__ == "__main__":
    main(sys.argv[1])
