"""Per-op overhead on the CPU backend, against the floor and against cProfile.

A tiny op (numpy add on 16 floats) run OPS times per round in every variant; the
figure is ns per op above the bare loop, and its ratio to the floor's (two
perf_counter_ns calls appending to a preallocated buffer), all in one run.
``OPPROF_PURE_PYTHON=1`` measures the pure-Python reference instead of the C module.
"""

from __future__ import annotations

import cProfile
import time

import numpy as np
import pytest

import pytest_opprof
from pytest_opprof import Profiler
from pytest_opprof.measure import profiler
from pytest_opprof.measure.timers import CpuTimer

from .conftest import record

ITERATIONS, PER_ITERATION = 100, 100
OPS = ITERATIONS * PER_ITERATION
A = np.ones(16)
add = np.add
clock = time.perf_counter_ns


def bare() -> None:
    for _ in range(OPS):
        add(A, A)


def floor() -> None:
    buf = [0] * (2 * OPS)
    j = 0
    for _ in range(OPS):
        t0 = clock()
        add(A, A)
        t1 = clock()
        buf[j] = t0
        buf[j + 1] = t1
        j += 2


def context_manager() -> None:
    profiler = Profiler(CpuTimer(), skip=0)
    for _ in profiler.iterations(ITERATIONS):
        for _ in range(PER_ITERATION):
            with profiler.op("add"):
                add(A, A)


@pytest_opprof.op("add")
def timed_add(x, y):
    return add(x, y)


def plain_add(x, y):
    return add(x, y)


def decorator() -> None:
    profiler = Profiler(CpuTimer(), skip=0)
    for _ in profiler.iterations(ITERATIONS):
        for _ in range(PER_ITERATION):
            timed_add(A, A)


def decorator_no_profiler() -> None:
    for _ in range(OPS):
        timed_add(A, A)


def plain_call() -> None:
    for _ in range(OPS):
        plain_add(A, A)


def instrumented() -> None:
    profiler = Profiler(CpuTimer(), skip=0)
    xp = profiler.instrument(np)
    for _ in profiler.iterations(ITERATIONS):
        for _ in range(PER_ITERATION):
            xp.add(A, A)


def cprofile() -> None:
    # cProfile sees Python calls only (not the ufunc itself): profile the op as a function
    cProfile.Profile().runcall(plain_call)


VARIANTS = {
    "bare loop": bare,
    "floor: 2 perf_counter_ns + buffer": floor,
    "gpu_profiler.op(name) as a context manager": context_manager,
    "@pytest_opprof.op, profiler recording": decorator,
    "instrument(numpy).add": instrumented,
    "cProfile on the same loop (op as a function)": cprofile,
    "plain function call (no decorator)": plain_call,
    "@pytest_opprof.op, no profiler active": decorator_no_profiler,
}
MEDIAN_NS: dict[str, float] = {}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_overhead(benchmark, variant):
    benchmark.pedantic(VARIANTS[variant], rounds=30, warmup_rounds=3)
    MEDIAN_NS[variant] = benchmark.stats.stats.median * 1e9 / OPS


def test_report():
    """Runs last: the table, each figure against the bare loop and the floor."""
    table = f"per-op overhead (CPU, recording in {profiler._impl.__name__})"
    bare_ns = MEDIAN_NS["bare loop"]
    floor_over = MEDIAN_NS["floor: 2 perf_counter_ns + buffer"] - bare_ns
    header = ["variant", "ns per op", "over the bare loop (ns)", "over / floor's"]
    for name, ns in MEDIAN_NS.items():
        if name in ("@pytest_opprof.op, no profiler active",
                    "cProfile on the same loop (op as a function)"):
            base = MEDIAN_NS["plain function call (no decorator)"]
            record(table, header,
                   [name, f"{ns:.0f}", f"{ns - base:.0f} over a plain call",
                    f"{(ns - base) / floor_over:.2f}"])
            continue
        record(table, header,
               [name, f"{ns:.0f}", f"{ns - bare_ns:.0f}", f"{(ns - bare_ns) / floor_over:.2f}"])
