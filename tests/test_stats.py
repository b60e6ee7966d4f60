from __future__ import annotations

import math

from pytest_opprof.stats.summary import op_stats, op_type_stats, phase_times, wall_summary

from .fakes import fake_profiler, train_profile


def test_op_stats_cover_counted_iterations_only():
    stats = op_stats(train_profile(iterations=4, skip=1))
    conv = stats[0]
    assert (conv.name, conv.count, conv.total, conv.mean) == ("conv2d", 3, 3000, 1000)
    assert (conv.min, conv.median, conv.max) == (1000, 1000, 1000)


def test_op_stats_divide_by_the_iterations_counted_not_all_of_them():
    # SINGA divides by every iteration, skipped ones included; we do not
    stats = op_stats(train_profile(iterations=4, skip=0))
    assert stats[0].mean == (3000 + 3 * 1000) / 4
    assert op_stats(train_profile(iterations=4, skip=1))[0].mean == 1000


def test_an_op_seen_only_in_skipped_iterations_has_count_zero():
    def body(profiler, dev, i):
        with profiler.op("warmup" if i == 0 else "step"):
            dev.kernel(10)

    stats = op_stats(train_profile(iterations=3, skip=1, body=body))
    assert [(s.name, s.count) for s in stats] == [("warmup", 0), ("step", 2)]
    assert math.isnan(stats[0].mean)


def test_op_type_stats_group_by_name_longest_total_first():
    profiler, dev = fake_profiler(skip=0)
    for _ in profiler.iterations(2):
        for name, ns in [("conv2d", 100), ("relu", 5), ("conv2d", 300)]:
            with profiler.op(name):
                dev.kernel(ns)
    stats = op_type_stats(profiler.profile)
    assert [(s.name, s.count, s.total, s.mean, s.min, s.max) for s in stats] == [
        ("conv2d", 4, 800, 200, 100, 300), ("relu", 2, 10, 5, 5, 5)]


def test_phase_times_per_counted_iteration_in_first_seen_order():
    assert phase_times(train_profile()) == [("forward", 1250), ("backward", 2500)]


def test_without_phases_the_split_is_at_the_first_grad_op():
    def body(profiler, dev, i):
        for name, ns in [("fc", 10), ("loss", 1), ("loss_grad", 2), ("fc_backward", 20),
                         ("sgd", 4)]:
            with profiler.op(name):
                dev.kernel(ns)

    assert phase_times(train_profile(iterations=3, skip=1, body=body)) == [("forward", 11),
                                                                ("backward", 26)]


def test_wall_summary_and_the_share_outside_ops():
    w = wall_summary(train_profile())
    assert (w.op_time, w.wall) == (3750, 5000)
    assert w.outside_share == 0.25
