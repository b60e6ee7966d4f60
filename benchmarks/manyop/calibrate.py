"""How much slower OPPROF_MANYOP_SLOW really makes each op, measured in one process,
the plain and the slowed workloads taking turns iteration by iteration (so that the
machine's drift and the process's layout cancel out):

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/manyop/calibrate.py
    python benchmarks/manyop/calibrate.py --factors 1.05,1.125,1.25 --rounds 60

Prints a markdown table: each op's plain median and, per factor, the ratio of medians.
On the CPU (the timer of ``pytest --opprof-measure=time``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: the repository's packages come first
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.gate_runs import MIN_INJECT_NS
from benchmarks.manyop.ops import NAMES, ManyOp
from pytest_opprof import Profiler
from pytest_opprof.measure.timers import CpuTimer
from pytest_opprof.render import duration


def achieved(factors: list[float], rounds: int) -> dict[str, list[float]]:
    """Per op: its plain median (ns), then its slowed/plain ratio for each factor."""
    workloads = [ManyOp(np, extra={})] + [
        ManyOp(np, extra=dict.fromkeys(NAMES, f - 1)) for f in factors]
    profiler = Profiler(CpuTimer(), skip=len(workloads))
    for i in profiler.iterations(len(workloads) * (rounds + 1)):
        workloads[i % len(workloads)].step()
    profile = profiler.profile
    assert profile is not None
    result: dict[str, list[float]] = {}
    for info in profile.ops:
        column = profile.samples[:, info.op_id]
        medians = [float(np.nanmedian(column[len(workloads) + k::len(workloads)]))
                   for k in range(len(workloads))]
        result[info.name] = [medians[0], *(m / medians[0] for m in medians[1:])]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factors", default="1.25,1.5", help="comma-separated (default "
                                                              "1.25,1.5)")
    parser.add_argument("--rounds", type=int, default=40,
                        help="iterations of each workload (default 40)")
    args = parser.parse_args()
    try:
        factors = [float(x) for x in args.factors.split(",")]
    except ValueError:
        factors = []
    if not factors or any(not 1 < f <= 10 for f in factors) or args.rounds < 5:
        parser.error("--factors takes factors above 1 and at most 10 (e.g. 1.25,1.5); "
                     "--rounds 5 or more")
    result = achieved(factors, args.rounds)
    print("| op | plain median | " + " | ".join(f"x{f:g} measured" for f in factors) + " |")
    print("|---|---|" + "---|" * len(factors))
    for name, (plain, *ratios) in result.items():
        print(f"| {name} | {duration(plain)} | " + " | ".join(f"{r:.3f}" for r in ratios) + " |")
    eligible = [r[1:] for r in result.values() if r[0] >= MIN_INJECT_NS]
    for k, f in enumerate(factors):
        measured = np.array([r[k] for r in eligible])
        print(f"\nx{f:g}, {len(measured)} ops of {duration(MIN_INJECT_NS)} or more: measured "
              f"median {np.median(measured):.3f}, from {measured.min():.3f} to "
              f"{measured.max():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
