"""The paired model of ``opprof compare`` on simulated pairs: how many pairs it takes.

    python benchmarks/compare_simulation.py [--pairs 4,6,8,10,12] [--trials 200]
        [--ops 44] [--spread 0.015] [--factor 1.15]

Each trial draws a test of ``--ops`` ops (5 us to 5 ms); each process moves each op's
median by its own offset (log-normal: ``--spread`` typical, 0.55x to 1.8x of it over
ops for the middle two thirds) and every op by a machine drift of 4%. A/A: base and
head alike, any op flagged is a false failure. Detection: one op of the larger two
thirds slowed by ``--factor`` at head, caught exactly (that op regressed, no other
flagged). Prints a markdown table per pairs count.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the repository's packages come first
    sys.path.insert(0, str(ROOT))

from pytest_opprof.judge.paired import judge_pairs  # noqa: E402


def rates(pairs: int, trials: int, ops: int, spread: float, factor: float,
          rng: np.random.Generator) -> tuple[float, float]:
    """(false failures per A/A test, exact detection) over ``trials`` tests."""
    sizes = np.log(np.geomspace(5e3, 5e6, ops))
    false = caught = 0
    for _ in range(trials):
        tau = spread * np.exp(rng.normal(0, 0.6, ops))
        base, head = (np.exp(sizes + rng.standard_normal((pairs, ops)) * tau
                             + rng.normal(0, 0.04, (pairs, 1))) for _ in range(2))
        false += any(op.verdict != "ok" for op in judge_pairs(base, head).ops)
        slowed = int(rng.integers(ops // 3, ops))
        head[:, slowed] *= factor
        verdicts = [op.verdict for op in judge_pairs(base, head).ops]
        caught += verdicts[slowed] == "regressed" and verdicts.count("ok") == ops - 1
    return false / trials, caught / trials


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", default="4,6,8,10,12")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--ops", type=int, default=44)
    parser.add_argument("--spread", type=float, default=0.015)
    parser.add_argument("--factor", type=float, default=1.15)
    args = parser.parse_args()
    rng = np.random.default_rng(2)
    print(f"| pairs | false failures per A/A test | x{args.factor:g} caught exactly |")
    print("|---|---|---|")
    for pairs in (int(p) for p in args.pairs.split(",")):
        false, caught = rates(pairs, args.trials, args.ops, args.spread, args.factor, rng)
        print(f"| {pairs} | {false:.3f} | {caught:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
