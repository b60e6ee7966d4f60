"""A reference probe: a fixed small workload whose time tracks the machine's speed.

A test with too few ops to estimate the run's drift from itself compares the
probe's time now with its time when the baseline was taken.

The probe measures the speed of one core: its matmul is small enough that BLAS runs it
on one thread. A 96x96 matmul handed to unpinned OpenBLAS threads on a busy 2-core
runner took 16 ms instead of 100 us in whole rounds of passes (scheduler quanta, not
machine speed); 48x48 stays under OpenBLAS's threading threshold (64^3 multiply-adds).
"""

from __future__ import annotations

import time
from types import ModuleType

import numpy as np

#: Rounds of the probe, and the pause between two: one round can meet a busy moment (a
#: neighbour's burst, BLAS threads spinning up: one call took 16 ms instead of 30 us and
#: made a drift of +76,918%); the median of rounds spread over time does not.
ROUNDS = 5
GAP_S = 0.01
REPEATS = 21


def reference_probe(xp: ModuleType) -> float:
    """The time in ns of one pass of a fixed mix of elementwise, reduction and matmul
    work on ``xp`` (numpy or cupy): the median of the rounds' median passes."""
    medians = []
    for round_ in range(ROUNDS):
        if round_:
            time.sleep(GAP_S)
        medians.append(_round(xp))
    return float(np.median(medians))


def _round(xp: ModuleType) -> float:
    cuda = getattr(xp, "cuda", None)
    sync = (lambda: None) if cuda is None else (lambda: cuda.get_current_stream().synchronize())
    a = xp.arange(1 << 16, dtype=xp.float32)
    m = xp.ones((48, 48), dtype=xp.float32)  # one BLAS thread (see the module's doc)
    times = []
    for _ in range(REPEATS + 2):
        sync()
        start = time.perf_counter_ns()
        b = a * 1.0001 + 1.0
        b.sum()
        m @ m
        sync()
        times.append(time.perf_counter_ns() - start)
    return float(np.median(times[2:]))  # the first passes warm caches and allocators
