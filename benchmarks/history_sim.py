"""How often does ``opprof history`` report a step that is not there, and how often
does it find one that is, at the right run?

    python benchmarks/history_sim.py            # the figures in notes (a few minutes)
    python benchmarks/history_sim.py --quick    # fewer histories

Simulates what ``pytest --opprof-update-baseline=append`` stores on a shared CPU runner: per
run (a separate process, on another day), each op's median carries
- machine drift: lognormal sigma 3%, shared by every op of the run;
- a per-op offset between processes: normal in log with the op's own spread tau,
  lognormal across ops with median 2.2% and log-sd 0.55 (../shared/GATE.md);
- in 10% of runs a contention episode that slows a third of the ops by |N(0, 10%)|.
Instruction counts carry 0.005% of noise and nothing shared. Each history goes through
``judge.changepoints.history_of`` as ``opprof history`` reads a stored baseline. "Found"
means exactly one step is reported for the op, at the run where it happened.

Scenarios: flat histories of 20 runs (false steps); one op's step; the newcomer's seven
commits (softmax +140% at commit 4, a two-run excursion of fc1 +183% at commits 3-4, a
comment-only commit 5); every op +30% at once (time); every op +3% at once (counts).
"""

from __future__ import annotations

import argparse

import numpy as np

from pytest_opprof.judge.changepoints import CONFIRM, MIN_SEGMENT, history_of
from pytest_opprof.model.baseline import Baseline, BaselineRun
from pytest_opprof.model.history import History

RUNS = 20
OPS = 40
#: The newcomer's one test: seven commits, eight ops.
NEWCOMER = ("fc1", "fc1_grad", "relu", "softmax", "loss", "fc2", "fc2_grad", "sgd")


def histories(rng: np.random.Generator, n: int, runs: int = RUNS, ops: int = OPS) -> np.ndarray:
    """``n`` flat histories: log medians, shape (n, runs, ops), on a shared runner."""
    tau = 0.022 * np.exp(rng.normal(0, 0.55, (n, 1, ops)))
    logs = rng.normal(0, 0.03, (n, runs, 1)) + rng.normal(0, 1, (n, runs, ops)) * tau
    contended = rng.random((n, runs, 1)) < 0.10
    hit = rng.random((n, 1, ops)) < 1 / 3
    return logs + contended * hit * np.abs(rng.normal(0, 0.10, (n, runs, 1)))


def stored(logs: np.ndarray, names: list[str] | tuple[str, ...] | None = None,
           measure: str = "time") -> Baseline:
    """One test's history (log medians, shape (runs, ops)) as stored runs, commit ``ck``
    on day k, ops around 100 us (or 1M instructions)."""
    names = names or [f"op{k}" for k in range(logs.shape[1])]
    unit = "count" if measure == "instructions" else "ns"
    runs = []
    for k, row in enumerate(logs):
        medians = (1e5 * np.exp(row)).tolist() if unit == "ns" else (1e6 * np.exp(row)).tolist()
        ops = {"op_id": list(range(len(names))), "name": list(names),
               "occurrence": [0] * len(names), "depth": [0] * len(names),
               "phase": [None] * len(names), "n": [3] * len(names), "median": medians,
               "samples": [[m] * 3 for m in medians]}
        runs.append(BaselineRun(ops=ops, wall=[], op_time=[], phases=[], meta={
            "measure": measure, "unit": unit, "date": f"2026-11-01T00:{k:02d}:00+00:00",
            "commit": {"id": f"c{k + 1}" + "0" * 38}}))
    return Baseline(nodeid="test_sim", machine="sim", runs=runs)


def steps_by_op(history: History) -> dict[str, list[int]]:
    return {op.name: [step.run for step in op.steps] for op in history.ops}


def flat(rng: np.random.Generator, n: int) -> str:
    logs = histories(rng, n)
    false = sum(len(s) for h in range(n) for s in steps_by_op(history_of(stored(logs[h]))).values())
    return (f"flat histories of {RUNS} runs: {false / (n * OPS):.4f} false steps per op, "
            f"{false / n:.2f} per test of {OPS} ops ({n} tests)")


def one_op(rng: np.random.Generator, n: int, size: float) -> str:
    logs = histories(rng, n)
    found = near = 0
    for h in range(n):
        at = int(rng.integers(MIN_SEGMENT, RUNS - CONFIRM))  # CONFIRM runs after it
        logs[h, at:, 0] += np.log1p(size)
        steps = steps_by_op(history_of(stored(logs[h])))["op0"]
        found += steps == [at]
        near += len(steps) == 1 and abs(steps[0] - at) <= 1
    return (f"+{size:.0%} step of one op: found at its run in {found / n:.2f} of histories, "
            f"within one run in {near / n:.2f}")


def newcomer(rng: np.random.Generator, n: int) -> str:
    """Seven commits (runs 0-6): softmax x2.40 from commit 4, fc1 x2.83 at commits 3-4
    only, commit 5 changes a comment."""
    logs = histories(rng, n, runs=7, ops=len(NEWCOMER))
    logs[:, 3:, NEWCOMER.index("softmax")] += np.log(2.403)
    logs[:, 2:4, NEWCOMER.index("fc1")] += np.log(2.834)
    exact = false = at_comment = 0
    for h in range(n):
        found = steps_by_op(history_of(stored(logs[h], NEWCOMER)))
        named = [(name, run) for name, runs in found.items() for run in runs]
        exact += named == [("softmax", 3)]
        false += sum(1 for step in named if step != ("softmax", 3))
        at_comment += sum(1 for _, run in named if run == 4)
    return (f"newcomer's 7 commits: exactly the one step in {exact / n:.2f} of histories; "
            f"{false / n:.2f} false steps a history, {at_comment / n:.2f} at the comment-only "
            f"commit ({n} histories)")


def shared(rng: np.random.Generator, n: int, measure: str, size: float) -> str:
    """Every op moves by ``size`` at run 10 of 20: each op should step there."""
    if measure == "time":
        logs = histories(rng, n, ops=8)
    else:
        logs = rng.normal(0, 5e-5, (n, RUNS, 8))
    logs[:, 10:, :] += np.log1p(size)
    stepped = lines = 0
    for h in range(n):
        history = history_of(stored(logs[h], measure=measure))
        stepped += sum(runs == [10] for runs in steps_by_op(history).values())
        lines += any(step.run == 10 for step in history.shared_steps)
    return (f"every op {size:+.0%} at once ({measure}): {stepped / (n * 8):.2f} of ops stepped "
            f"at its run, said as moved together in {lines / n:.2f} of histories")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer histories")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    n = 10 if args.quick else 60
    print(flat(rng, n))
    for size in (0.10, 0.15, 0.20, 0.30):
        print(one_op(rng, 2 * n, size))
    print(newcomer(rng, 4 * n))
    print(shared(rng, n, "time", 0.30))
    print(shared(rng, n, "instructions", 0.03))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
