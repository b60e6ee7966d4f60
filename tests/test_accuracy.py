"""Profiled op times agree with the same ops timed alone (generous bounds: the tight
figures are benchmarks/test_accuracy.py's, in benchmarks/RESULTS.md)."""

from __future__ import annotations

import statistics
import time

import numpy as np

from benchmarks.known_ops import (
    coverage,
    known_ops,
    op_sequence,
    profile_sequence,
    samples_by_name,
)


def test_profiled_medians_agree_with_ops_timed_alone_and_cover_the_iteration():
    ops = known_ops(busy_us=(300,), matmul_sizes=(160,))
    sequence = op_sequence(ops, per_iteration=6)
    profiled: dict[str, list[np.ndarray]] = {name: [] for name in ops}
    alone: dict[str, list[int]] = {name: [] for name in ops}
    covered = []
    for _ in range(12):  # interleaved, so that both see the same machine
        profile = profile_sequence(sequence)
        covered.append(coverage(profile))
        for name, samples in samples_by_name(profile).items():
            profiled[name].append(samples)
        for name, fn in ops.items():
            for _ in range(3):
                start = time.perf_counter_ns()
                fn()
                alone[name].append(time.perf_counter_ns() - start)
    for name in ops:
        ratio = np.median(np.concatenate(profiled[name])) / statistics.median(alone[name])
        assert 0.75 < ratio < 1.25, (name, ratio)
    assert statistics.median(covered) > 0.75
