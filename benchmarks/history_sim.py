"""How often does ``opprof history`` report a step that is not there, and how often
does it find one that is, at the right run?

    python benchmarks/history_sim.py            # the figures in notes (about a minute)
    python benchmarks/history_sim.py --quick    # fewer histories

Simulates what ``pytest --opprof-update-baseline=append`` stores on a shared CPU runner: per
run (a separate process, on another day), each op's median carries
- machine drift: lognormal sigma 3%, shared by every op of the run;
- a per-op offset between processes: normal in log with the op's own spread tau,
  lognormal across ops with median 2.2% and log-sd 0.55 (../shared/GATE.md);
- in 10% of runs a contention episode that slows a third of the ops by |N(0, 10%)|.
A history holds 20 runs (what a baseline keeps). "Found" means exactly one step is
reported for the op, at the run where it happened.
"""

from __future__ import annotations

import argparse

import numpy as np

from pytest_opprof.judge.changepoints import op_history, run_drift
from pytest_opprof.judge.config import TOLERANCE

RUNS = 20
OPS = 40


def histories(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` flat histories of OPS ops: log medians, shape (n, RUNS, OPS)."""
    tau = 0.022 * np.exp(rng.normal(0, 0.55, (n, 1, OPS)))
    logs = rng.normal(0, 0.03, (n, RUNS, 1)) + rng.normal(0, 1, (n, RUNS, OPS)) * tau
    contended = rng.random((n, RUNS, 1)) < 0.10
    hit = rng.random((n, 1, OPS)) < 1 / 3
    return logs + contended * hit * np.abs(rng.normal(0, 0.10, (n, RUNS, 1)))


def steps_found(logs: np.ndarray) -> list[list[int]]:
    """The runs at which each op of one history (log medians, shape (RUNS, OPS)) stepped,
    found as ``opprof history`` finds them (machine drift taken out first)."""
    series = {(f"op{k}", 0): (list(range(RUNS)), np.exp(logs[:, k]).tolist())
              for k in range(OPS)}
    drift = run_drift(series, RUNS)
    return [[step.run for step in op_history(key, 0, runs, values, drift, TOLERANCE).steps]
            for key, (runs, values) in series.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer histories")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    n = 20 if args.quick else 100
    flat = histories(rng, n)
    false_steps = sum(len(steps) for h in range(n) for steps in steps_found(flat[h]))
    print(f"flat histories of {RUNS} runs: {false_steps / (n * OPS):.4f} false steps per op, "
          f"{false_steps / n:.2f} per test of {OPS} ops ({n} tests)")
    for size in (0.10, 0.15, 0.20, 0.30):
        logs = histories(rng, n)
        found = near = 0
        for h in range(n):
            at = int(rng.integers(MIN_AT, RUNS - 1))
            logs[h, at:, 0] += np.log1p(size)
            steps = steps_found(logs[h])[0]
            found += steps == [at]
            near += len(steps) == 1 and abs(steps[0] - at) <= 1
        print(f"+{size:.0%} step of one op: found at its run in {found / n:.2f} of histories, "
              f"within one run in {near / n:.2f}")
    return 0


#: The earliest run a simulated step happens at: two runs before it, as after it.
MIN_AT = 2

if __name__ == "__main__":
    raise SystemExit(main())
