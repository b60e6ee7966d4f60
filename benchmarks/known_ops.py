"""Ops of known cost, for the accuracy checks (benchmarks/test_accuracy.py and
tests/test_accuracy.py): pure-Python busy loops calibrated to a duration here, and
NumPy matmuls of a few sizes."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np


def busy(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def calibrated_busy(target_ns: float) -> Callable[[], int]:
    """A busy loop that takes about target_ns here (median of a few timed tries)."""
    n = 1000
    for _ in range(3):
        times = []
        for _ in range(5):
            start = time.perf_counter_ns()
            busy(n)
            times.append(time.perf_counter_ns() - start)
        n = max(1, round(n * target_ns / statistics.median(times)))
    return lambda: busy(n)


def matmul(size: int) -> Callable[[], np.ndarray]:
    rng = np.random.default_rng(size)
    a, b = rng.standard_normal((size, size)), rng.standard_normal((size, size))
    return lambda: a @ b


def known_ops(busy_us: tuple[float, ...], matmul_sizes: tuple[int, ...]
              ) -> dict[str, Callable[[], object]]:
    ops: dict[str, Callable[[], object]] = {
        f"busy_{us:g}us": calibrated_busy(us * 1e3) for us in busy_us}
    ops.update({f"matmul_{n}": matmul(n) for n in matmul_sizes})
    return ops


def op_sequence(ops: dict[str, Callable[[], object]], per_iteration: int) -> list:
    """`per_iteration` (scope, op) pairs, each kind's ops in a row: an op's time depends
    on what ran before it (a 32x32 matmul right after a 5 ms Python loop takes 2.5x as
    long here, its data gone from the cache), which is the op's doing, not the
    profiler's."""
    from pytest_opprof import op

    kinds = list(ops.items())
    return [(op(name), fn) for name, fn in
            (kinds[k * len(kinds) // per_iteration] for k in range(per_iteration))]


def profile_sequence(sequence: list, iterations: int = 1, skip: int = 0):
    """Runs the (scope, op) pairs once per iteration and nothing else; the profile."""
    from pytest_opprof import Profiler
    from pytest_opprof.measure.timers import CpuTimer

    profiler = Profiler(CpuTimer(), skip=skip)
    for _ in profiler.iterations(iterations):
        for scope, fn in sequence:
            with scope:
                fn()
    return profiler.profile


def samples_by_name(profile) -> dict[str, np.ndarray]:
    """Each op name's samples over all its OP_IDs and counted iterations (ns)."""
    counted = profile.samples[profile.skip:]
    result = {}
    for name in dict.fromkeys(o.name for o in profile.ops):
        values = counted[:, [o.op_id for o in profile.ops if o.name == name]].ravel()
        result[name] = values[~np.isnan(values)]
    return result


def coverage(profile) -> float:
    """The counted iterations' op time over their wall time."""
    return float(profile.op_time[profile.skip:].sum() / profile.wall[profile.skip:].sum())
