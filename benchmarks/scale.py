"""How the profile's costs grow with the number of OP_IDs (100 counted iterations).

    python benchmarks/scale.py

For 100, 1,000 and 10,000 OP_IDs: recording, building the Profile, its memory
(tracemalloc), rendering verbosity 2 (statistics included) and comparing with a
baseline of 5 runs. Absolute seconds on a noisy machine: read the growth, not the digits.
"""

from __future__ import annotations

import time
import tracemalloc

import pytest_opprof
from pytest_opprof import Profiler
from pytest_opprof.baseline import Baseline, BaselineRun
from pytest_opprof.gate import gate_config, judge
from pytest_opprof.render.text import render
from pytest_opprof.timers import CpuTimer


def measure(n_ops: int) -> list[str]:
    scopes = [pytest_opprof.op(f"op{k}") for k in range(n_ops)]
    profiler = Profiler(CpuTimer(), skip=1)
    start = time.perf_counter()
    for _ in profiler.iterations(101):
        for scope in scopes:
            with scope:
                pass
    recorded = time.perf_counter() - start
    tracemalloc.start()
    start = time.perf_counter()
    profile = profiler.profile
    built = time.perf_counter() - start
    memory = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    run = BaselineRun.from_profile(profile, {"date": "2026-01-01T00:00:00+00:00"})
    baseline = Baseline("t.py::t", "m", [run] * 5)
    start = time.perf_counter()
    render(profile, 2)
    rendered = time.perf_counter() - start
    start = time.perf_counter()
    judge(profile, baseline, machine="m", config=gate_config("cpu", 0.05, {}), budgets={},
          strict_ops=False)
    compared = time.perf_counter() - start
    return [f"{n_ops:,}", f"{recorded:.2f}", f"{built:.3f}", f"{memory / 1e6:.1f}",
            f"{rendered:.3f}", f"{compared:.3f}", f"{rendered + compared:.2f}"]


def main() -> None:
    print("| OP_IDs | record (s) | build (s) | profile memory (MB) | render v2 (s) "
          "| compare (s) | render + compare (s) |")
    print("|---|---|---|---|---|---|---|")
    for n_ops in (100, 1_000, 10_000):
        print("| " + " | ".join(measure(n_ops)) + " |", flush=True)


if __name__ == "__main__":
    main()
