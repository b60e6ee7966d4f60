"""How far the reference probe strays, each reading in a fresh process as a session
takes it: the old probe (one burst of 21 passes, a 96x96 matmul) against the current
one (pytest_opprof.measure.probe: 5 rounds 10 ms apart, a 48x48 matmul on one BLAS thread).

    python benchmarks/probe_stability.py [PROCESSES]

Prints, per probe, the median reading, the widest ratio of one reading to the median
(the drift a probe alone would make between two identical runs) and how many readings
are beyond 3x of the median (what the gate now refuses to judge).
"""

from __future__ import annotations

import statistics
import subprocess
import sys

OLD = """
import time, numpy as np
a = np.arange(1 << 16, dtype=np.float32); m = np.ones((96, 96), dtype=np.float32)
times = []
for _ in range(23):
    start = time.perf_counter_ns(); b = a * 1.0001 + 1.0; b.sum(); m @ m
    times.append(time.perf_counter_ns() - start)
print(float(np.median(times[2:])))
"""
NEW = "import numpy; from pytest_opprof.measure.probe import reference_probe; " \
      "print(reference_probe(numpy))"


def readings(code: str, processes: int) -> list[float]:
    return [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout) for _ in range(processes)]


def main(processes: int) -> None:
    print("| probe | processes | median | widest ratio to the median | beyond 3x |")
    print("|---|---|---|---|---|")
    for name, code in (("old: one burst, 96x96", OLD), ("new: 5 rounds, 48x48", NEW)):
        values = readings(code, processes)
        median = statistics.median(values)
        ratios = [max(v / median, median / v) for v in values]
        print(f"| {name} | {processes} | {median / 1e3:.1f} us | {max(ratios):.2f}x | "
              f"{sum(r > 3 for r in ratios)} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
