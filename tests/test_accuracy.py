"""The accuracy helpers profile what they say they do. The accuracy figures themselves
(profiled medians against the same ops timed alone) are wall-clock ratios that a slow or
busy machine can push past any bound: they are benchmarks/test_accuracy.py's, reported in
benchmarks/RESULTS.md, not checks of this test run."""

from __future__ import annotations

import numpy as np

from benchmarks.known_ops import coverage, op_sequence, profile_sequence, samples_by_name


def test_a_profiled_sequence_has_one_sample_per_op_per_iteration_and_bounded_coverage():
    calls: list[str] = []
    ops = {"first": lambda: calls.append("first"), "second": lambda: calls.append("second")}
    sequence = op_sequence(ops, per_iteration=4)
    profile = profile_sequence(sequence, iterations=3, skip=1)
    assert calls == ["first", "first", "second", "second"] * 3
    assert [(o.name, o.occurrence) for o in profile.ops] == [
        ("first", 0), ("first", 1), ("second", 0), ("second", 1)]
    by_name = samples_by_name(profile)
    assert {name: len(s) for name, s in by_name.items()} == {"first": 4, "second": 4}
    assert all((s >= 0).all() for s in by_name.values())
    assert not np.isnan(profile.samples).any()
    assert 0 <= coverage(profile) <= 1  # top-level ops lie inside their iteration
