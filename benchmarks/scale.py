"""How the profile's costs grow with the number of OP_IDs (100 counted iterations).

    python benchmarks/scale.py

For 100, 1,000 and 10,000 OP_IDs: recording, building the Profile, its memory
(tracemalloc), rendering verbosity 2 (statistics included) and comparing with a
baseline of 5 runs. Then a baseline store of 100 and 1,000 tests (65 ops each, the
example ResNet's count, 5 runs of 19 samples): loading every test's baseline, as a
session gating them all does, and listing the store (`opprof baseline show`).
Absolute seconds on a noisy machine: read the growth, not the digits.
"""

from __future__ import annotations

import tempfile
import time
import tracemalloc
from pathlib import Path

import pytest_opprof
from pytest_opprof import Profiler
from pytest_opprof.judge.gate import gate_config, judge
from pytest_opprof.measure.measures import named
from pytest_opprof.measure.timers import CpuTimer
from pytest_opprof.model.hints import Retake
from pytest_opprof.render.text import render
from pytest_opprof.store.baseline import Baseline, BaselineRun, BaselineStore


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
    judge(profile, baseline, machine="m",
          retake=Retake(), config=gate_config(named("time").gate, 0.05, {}),
          budgets={}, strict_ops=False)
    compared = time.perf_counter() - start
    return [f"{n_ops:,}", f"{recorded:.2f}", f"{built:.3f}", f"{memory / 1e6:.1f}",
            f"{rendered:.3f}", f"{compared:.3f}", f"{rendered + compared:.2f}"]


def one_run(n_ops: int) -> BaselineRun:
    scopes = [pytest_opprof.op(f"op{k}") for k in range(n_ops)]
    profiler = Profiler(CpuTimer(), skip=1)
    for _ in profiler.iterations(20):
        for scope in scopes:
            with scope:
                pass
    return BaselineRun.from_profile(profiler.profile, {"date": "2026-01-01T00:00:00+00:00"})


def store_load(n_tests: int) -> list[str]:
    run = one_run(65)
    with tempfile.TemporaryDirectory() as tmp:
        store = BaselineStore(Path(tmp), "m")
        nodeids = [f"tests/test_m{k // 50}.py::test_{k}[case-{k}]" for k in range(n_tests)]
        for nodeid in nodeids:
            for _ in range(5):
                store.record(nodeid, run, batch="b")
        size = sum(p.stat().st_size for p in store.folder.iterdir())
        start = time.perf_counter()
        for nodeid in nodeids:
            store.load(nodeid)
        loaded = time.perf_counter() - start
        start = time.perf_counter()
        listed = sum(1 for _ in store.entries())
        listing = time.perf_counter() - start
    assert listed == n_tests
    return [f"{n_tests:,}", f"{size / 1e6:.1f}", f"{loaded:.2f}", f"{listing:.2f}"]


def main() -> None:
    print("| OP_IDs | record (s) | build (s) | profile memory (MB) | render v2 (s) "
          "| compare (s) | render + compare (s) |")
    print("|---|---|---|---|---|---|---|")
    for n_ops in (100, 1_000, 10_000):
        print("| " + " | ".join(measure(n_ops)) + " |", flush=True)
    print()
    print("| tests in the store | store size (MB) | load each test's baseline (s) "
          "| list the store (s) |")
    print("|---|---|---|---|")
    for n_tests in (100, 1_000):
        print("| " + " | ".join(store_load(n_tests)) + " |", flush=True)


if __name__ == "__main__":
    main()
