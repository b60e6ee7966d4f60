"""How far the reference probe strays, each reading in a fresh process as a session
takes it (pytest_opprof.measure.probe: 5 rounds 10 ms apart, a 48x48 matmul on one
BLAS thread).

    python benchmarks/probe_stability.py [PROCESSES]

A session reads the probe once, when it writes a baseline run (stored as the run's
``probe_ns``) or when it judges a test that has fewer than ``min_ops_for_drift`` (5) ops
in common with its baseline: the gate then takes the run's drift from the probe (now
against the baseline's) instead of from the test's own ops, and leaves the test
unjudged when that drift is beyond ``ABSURD_DRIFT`` (3x) either way
(pytest_opprof/judge/gate.py). Prints the median reading, the widest ratio of one
reading to the median (the drift the probe alone would make between two identical
runs) and how many readings are beyond ``ABSURD_DRIFT`` of the median (what the gate
would refuse to judge).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the repository's packages come first
    sys.path.insert(0, str(ROOT))

from pytest_opprof.judge.gate import ABSURD_DRIFT  # noqa: E402

PROBE = "import numpy; from pytest_opprof.measure.probe import reference_probe; " \
        "print(reference_probe(numpy))"


def readings(code: str, processes: int) -> list[float]:
    """One reading per fresh process, run in the repository root (this checkout's probe)."""
    return [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True, cwd=ROOT).stdout) for _ in range(processes)]


def main(processes: int) -> None:
    print(f"| probe | processes | median | widest ratio to the median "
          f"| beyond {ABSURD_DRIFT:g}x |")
    print("|---|---|---|---|---|")
    values = readings(PROBE, processes)
    median = statistics.median(values)
    ratios = [max(v / median, median / v) for v in values]
    print(f"| 5 rounds 10 ms apart, 48x48 | {processes} | {median / 1e3:.1f} us "
          f"| {max(ratios):.2f}x | {sum(r > ABSURD_DRIFT for r in ratios)} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
