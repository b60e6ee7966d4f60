from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import pytest_opprof
from pytest_opprof import OpprofError, Profile, is_recording
from pytest_opprof.measure import profiler as profiler_module

from .fakes import fake_profiler, train_profile


def names(profile):
    return [(o.op_id, o.name, o.occurrence) for o in profile.ops]


def test_graph_order_gives_op_ids_and_repeats_get_their_own():
    profiler, dev = fake_profiler(skip=0)
    for _ in profiler.iterations(2):
        for name, ns in [("matmul", 100), ("relu", 20), ("matmul", 300)]:
            with profiler.op(name):
                dev.kernel(ns)
    profile = profiler.profile
    assert names(profile) == [(0, "matmul", 0), (1, "relu", 0), (2, "matmul", 1)]
    assert profile.samples.tolist() == [[100, 20, 300], [100, 20, 300]]


def test_a_changed_sequence_matches_by_name_and_occurrence_and_drops_nothing():
    profiler, dev = fake_profiler(skip=0)
    sequences = [["a", "b"], ["a", "c", "b"], ["b"], ["a", "b", "a"]]
    for i in profiler.iterations(len(sequences)):
        for name in sequences[i]:
            with profiler.op(name):
                dev.kernel(10)
    profile = profiler.profile
    assert names(profile) == [(0, "a", 0), (1, "b", 0), (2, "c", 0), (3, "a", 1)]
    present = ~np.isnan(profile.samples)
    assert present.tolist() == [
        [True, True, False, False],
        [True, True, True, False],
        [False, True, False, False],
        [True, True, False, True],
    ]


def test_nested_ops_record_inclusive_time_and_op_time_counts_the_outer_only():
    profiler, dev = fake_profiler(skip=0)
    for _ in profiler.iterations(2):
        with profiler.op("block"):
            dev.kernel(100)
            with profiler.op("conv2d"):
                dev.kernel(400)
            dev.kernel(50)
    profile = profiler.profile
    assert [(o.name, o.depth) for o in profile.ops] == [("block", 0), ("conv2d", 1)]
    assert profile.samples[0].tolist() == [550, 400]
    assert profile.op_time.tolist() == [550, 550]


def test_phases_time_their_boundaries_and_label_their_ops():
    profile = train_profile()
    assert profile.phases == ["forward", "backward"]
    assert [o.phase for o in profile.ops] == ["forward", "forward", "backward", "backward"]
    assert profile.phase_samples.tolist() == [[3250, 2500], [1250, 2500], [1250, 2500],
                                              [1250, 2500]]
    assert profile.wall.tolist() == [7000, 5000, 5000, 5000]


def test_a_phase_entered_twice_in_an_iteration_adds_up():
    profiler, dev = fake_profiler(skip=0)
    for _ in profiler.iterations(2):
        for _ in range(2):
            with profiler.phase("forward"), profiler.op("x"):
                dev.kernel(10)
    assert profiler.profile.phase_samples.tolist() == [[20], [20]]


def test_skip_keeps_every_iteration_but_counts_only_the_rest():
    profile = train_profile(iterations=5, skip=2)
    assert (profile.iterations, profile.counted, profile.skip) == (5, 3, 2)


@pytest.mark.parametrize(("n", "skip", "message"), [
    (3, 3, r"iterations\(3\) with skip=3 leaves no iteration to count"),
    (0, 0, r"iterations\(0\): give a whole number"),
    (2.5, 0, r"iterations\(2.5\): give a whole number"),
    (True, 0, r"iterations\(True\): give a whole number"),
])
def test_iterations_refuses_loops_that_count_nothing(n, skip, message):
    profiler, _ = fake_profiler(skip=skip)
    with pytest.raises(OpprofError, match=message):
        profiler.iterations(n)


@pytest.mark.parametrize("kind", ["int64", "int32", "uint8"])
def test_numpys_integers_are_whole_numbers_where_a_count_is_meant(kind):
    """Issue 28: ``iterations(np.int64(5))`` (a count from a shape) was refused as no
    whole number; numpy's integers count, numpy's bool and float do not."""
    profiler, _ = fake_profiler(skip=0)
    assert len(list(profiler.iterations(np.dtype(kind).type(4), skip=np.int64(1)))) == 4
    assert profiler.profile.counted == 3
    for bad in (np.bool_(True), np.float64(4.0)):
        with pytest.raises(OpprofError, match=r"give a whole number"):
            fake_profiler(skip=0)[0].iterations(bad)


def test_the_whole_number_flags_take_numpys_integers_and_refuse_bools():
    import argparse

    from pytest_opprof.run.options import whole_number

    runs = whole_number("--runs", 1, 20)
    assert runs("5") == 5 and runs(np.int64(5)) == 5 and type(runs(np.int64(5))) is int
    for bad in (True, 2.5, "2.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="a whole number from 1 to 20"):
            runs(bad)


def test_iterations_runs_once_per_test():
    profiler, _ = fake_profiler(skip=0)
    for _ in profiler.iterations(2):
        pass
    with pytest.raises(OpprofError, match="already run in this test"):
        profiler.iterations(2)


def test_iterations_loops_cannot_nest():
    outer, _ = fake_profiler(skip=0)
    inner, _ = fake_profiler(skip=0)
    for _ in outer.iterations(2):
        with pytest.raises(OpprofError, match="another profiler is recording"):
            inner.iterations(2)
    assert outer.profile.iterations == 2


def test_iterations_without_n_uses_the_default():
    profiler, _ = fake_profiler(skip=0)
    profiler.default_iterations = 7
    assert list(profiler.iterations()) == list(range(7))


def test_an_exception_in_an_op_keeps_finished_iterations_and_stops_recording():
    """The iteration an exception left ran its ops up to it: it is kept, as a break's
    is (the loop cannot tell the two apart; a failed test is not gated)."""
    profiler, dev = fake_profiler(skip=0)
    with pytest.raises(ZeroDivisionError):
        for i in profiler.iterations(5):
            with profiler.op("step"):
                dev.kernel(10)
                if i == 2:
                    1 / 0  # noqa: B018
    assert not is_recording()
    assert profiler.profile.iterations == 3 and profiler.left_early == (3, 5)
    profiler.drop_left()  # what the session does when the test failed
    assert profiler.profile.iterations == 2 and profiler.left_early is None
    profiler.drop_left()  # once
    assert profiler.profile.iterations == 2


def test_breaking_out_of_the_loop_stops_recording_and_counts_the_iteration_left():
    """A break in the 4th of 5 iterations: its ops ran, so it counts (it was dropped:
    "3 of 4 counted" after 5 ran, with skip 1)."""
    profiler, dev = fake_profiler(skip=1)
    for i in profiler.iterations(6):
        with profiler.op("step"):
            dev.kernel(10)
        if i == 4:
            break
    assert not is_recording()
    assert profiler.profile.iterations == 5 and profiler.profile.counted == 4
    assert profiler.profile.samples[:, 0].tolist() == [10.0] * 5
    assert profiler.left_early == (5, 6)


def test_a_loop_run_to_its_end_was_not_left_early():
    profiler, _ = fake_profiler(skip=0)
    for _ in profiler.iterations(3):
        pass
    assert profiler.left_early is None and profiler.profile.iterations == 3


def test_ops_before_and_after_the_loop_are_counted_as_untimed():
    profiler, dev = fake_profiler(skip=0)
    assert profiler.untimed_outside() == 0
    with profiler.op("warmup"):
        dev.kernel(1)
    for _ in profiler.iterations(2):
        with profiler.op("step"):
            dev.kernel(1)
    assert profiler.untimed_outside() == 1
    with profiler.op("after"), profiler.op("nested"):
        pass
    assert profiler.untimed_outside() == 3


def test_ops_outside_an_iteration_run_untimed():
    profiler, dev = fake_profiler(skip=0)
    with profiler.op("setup"):
        dev.kernel(1)
    for _ in profiler.iterations(2):
        with profiler.op("step"):
            dev.kernel(1)
    assert [o.name for o in profiler.profile.ops] == ["step"]


def test_an_op_left_open_across_the_iteration_boundary_is_counted_as_unbalanced():
    profiler, dev = fake_profiler(skip=0)
    scope = profiler.op("straddle")
    for i in profiler.iterations(2):
        if i == 0:
            scope.__enter__()
        else:
            scope.__exit__(None, None, None)
        with profiler.op("step"):
            dev.kernel(1)
    profile = profiler.profile
    assert [o.name for o in profile.ops] == ["step"]
    assert profile.unbalanced == 2


def test_library_op_decorator_records_into_the_active_profiler():
    @pytest_opprof.op("conv2d")
    def conv(x):
        return x * 2

    @pytest_opprof.op
    def relu(x):
        return max(x, 0)

    assert conv(3) == 6 and relu(-1) == 0  # no profiler: a plain call
    assert conv.__name__ == "conv"
    profiler, _ = fake_profiler(skip=0)
    for _ in profiler.iterations(2):
        relu(conv(1))
        with pytest_opprof.op("sum"):
            pass
    assert [o.name for o in profiler.profile.ops] == ["conv2d", "relu", "sum"]


def test_an_exception_inside_a_decorated_op_still_closes_it():
    @pytest_opprof.op("boom")
    def boom():
        raise ValueError("x")

    profiler, _ = fake_profiler(skip=0)
    for _ in profiler.iterations(2):
        with pytest.raises(ValueError):
            boom()
    assert profiler.profile.unbalanced == 0
    assert [o.name for o in profiler.profile.ops] == ["boom"]


@pytest.mark.parametrize(("bad", "got"), [
    ("", "an empty string"), (None, "None of type NoneType"), (3, "3 of type int"),
    (b"relu", "b'relu' of type bytes"), ("x" * 1025, "1025 characters: 'xxxxx"),
    ("y" * 10**6, "1000000 characters: 'yyy"),
])
def test_op_and_phase_names_are_non_empty_strings_of_bounded_length(bad, got):
    profiler, _ = fake_profiler()
    message = "name must be a non-empty string of at most 1024 characters, got " + got
    with pytest.raises(OpprofError, match=message) as phase_error:
        profiler.phase(bad)
    with pytest.raises(OpprofError, match=message):
        pytest_opprof.op(bad)
    with pytest.raises(OpprofError, match=message):
        profiler.op(bad)
    assert len(str(phase_error.value)) < 200  # the line names the input, it does not dump it


def test_a_bare_decorator_on_a_callable_without_a_name_is_one_error():
    import functools

    with pytest.raises(OpprofError, match=r"op name must be .*of type partial"):
        pytest_opprof.op(functools.partial(print, "x"))


@pytest.mark.parametrize("name", ["\x1b[31mred\x1b[0m", "two\nlines", "\ud800", "z" * 1024,
                                  "tab\there", "\u202eevil"])
def test_any_non_empty_string_is_a_name_and_is_recorded_as_it_is(name):
    profiler, dev = fake_profiler(skip=0)
    for _ in profiler.iterations(2):
        with profiler.op(name), profiler.phase(name):
            dev.kernel(10)
    assert [o.name for o in profiler.profile.ops] == [name]
    assert profiler.profile.phases == [name]
    assert Profile.from_json(profiler.profile.to_json()).ops[0].name == name


def test_iterations_are_bounded():
    profiler, _ = fake_profiler(skip=0)
    with pytest.raises(OpprofError, match=r"iterations\(1000001\): give a whole number of "
                                          r"iterations from 1 to 1000000"):
        profiler.iterations(10**6 + 1)


def test_the_same_op_object_serves_every_call():
    assert pytest_opprof.op("relu") is pytest_opprof.op("relu")


def test_profile_is_none_before_an_iteration_ends():
    profiler, _ = fake_profiler()
    assert profiler.profile is None


def test_profile_is_plain_numpy_data():
    profile = train_profile()
    assert profile.samples.dtype == np.float64 and profile.samples.shape == (4, 4)
    assert math.isclose(profile.samples[1, 0], 1000)


class TestInstrument:
    def test_times_calls_named_after_the_attribute_and_leaves_the_module_alone(self):
        profiler, _ = fake_profiler(skip=0)
        xp = profiler.instrument(np)
        assert np.matmul.__class__.__name__ != "function"  # numpy itself is not patched
        for _ in profiler.iterations(2):
            a = xp.ones(4)
            xp.linalg.norm(xp.add(a, a))
            xp.add.reduce(a)  # attributes of a timed ufunc still work (untimed)
        assert [o.name for o in profiler.profile.ops] == ["ones", "add", "linalg.norm"]
        assert not hasattr(np.ones, "_opprof_call")

    def test_classes_and_values_pass_through(self):
        profiler, _ = fake_profiler()
        xp = profiler.instrument(np)
        assert xp.ndarray is np.ndarray and xp.float32 is np.float32 and xp.pi == np.pi
        assert isinstance(xp.ones(2), xp.ndarray)

    def test_names_limits_what_is_timed(self):
        profiler, _ = fake_profiler(skip=0)
        xp = profiler.instrument(np, names=["fft"])
        for _ in profiler.iterations(2):
            xp.fft.irfft(xp.fft.rfft(xp.ones(8)))
        assert [o.name for o in profiler.profile.ops] == ["fft.rfft", "fft.irfft"]

    def test_objects_methods_become_ops(self):
        class Model:
            def forward(self, x):
                return x + 1

        profiler, _ = fake_profiler(skip=0)
        model = profiler.instrument(Model())
        for _ in profiler.iterations(2):
            assert model.forward(1) == 2
        assert [o.name for o in profiler.profile.ops] == ["forward"]

    def test_the_proxy_is_read_only(self):
        profiler, _ = fake_profiler()
        xp = profiler.instrument(np)
        with pytest.raises(AttributeError, match="set it on the original object"):
            xp.matmul = None


def test_an_abandoned_loop_collected_later_does_not_stop_another_profiler():
    first, _ = fake_profiler(skip=0)
    abandoned = first.iterations(3)
    next(abandoned)
    first.close()  # the fixture's teardown
    assert not is_recording()
    second, dev = fake_profiler(skip=0)
    for i in second.iterations(2):
        if i == 0:
            abandoned.close()  # the garbage collector gets to the first loop now
        with second.op("x"):
            dev.kernel(5)
    assert second.profile.samples.tolist() == [[5.0], [5.0]]


def test_ops_called_from_other_threads_run_untimed_and_leave_the_profile_whole():
    import threading

    stop = threading.Event()

    def busy_thread():
        while not stop.is_set():
            with pytest_opprof.op("thread_op"), pytest_opprof.op("nested"):
                pass

    threads = [threading.Thread(target=busy_thread) for _ in range(3)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, inside ops and between them
    for t in threads:
        t.start()
    try:
        profiler, dev = fake_profiler(skip=0)
        for _ in profiler.iterations(50):
            with profiler.phase("forward"), profiler.op("main"):
                dev.kernel(10)
    finally:
        stop.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(interval)
    profile = profiler.profile
    assert [o.name for o in profile.ops] == ["main"] and profile.unbalanced == 0
    assert profile.samples.ravel().tolist() == [10.0] * 50
    assert profile.phases == ["forward"]


def test_overlapping_asyncio_tasks_fail_the_loop_with_one_line_and_record_nothing_wrong():
    import asyncio

    profiler, dev = fake_profiler(skip=0)

    async def task(name):
        with profiler.op(name):
            dev.kernel(10)
            await asyncio.sleep(0)

    async def both():
        await asyncio.gather(task("a"), task("b"))

    with pytest.raises(OpprofError, match="op 'a' ended while op 'b', opened inside it, is "
                                          "still open: ops of concurrent tasks interleave"):
        for _ in profiler.iterations(2):
            asyncio.run(both())
    assert not is_recording()


def test_a_million_distinct_op_names_keep_a_bounded_number_of_scopes():
    """Each cached name costs a class (about 2 kB): the cache stops at MAX_CACHED_OPS, and
    names beyond it still record."""
    import gc
    import tracemalloc

    cache = profiler_module._scopes
    before = set(cache)
    names = 20 * profiler_module.MAX_CACHED_OPS
    profiler, dev = fake_profiler(skip=0)
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for i in range(names):
            with pytest_opprof.op(f"distinct {i}"):
                pass
        for _ in profiler.iterations(1):
            with pytest_opprof.op(f"distinct {names - 1}"):
                dev.kernel(5)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
        for name in set(cache) - before:
            del cache[name]
    assert len(cache) <= profiler_module.MAX_CACHED_OPS + len(before)
    # unbounded, 40,960 names cost about 80 MB; the bound is the cache's (about 4 MB)
    assert grown < 16 * 2**20, grown
    assert [o.name for o in profiler.profile.ops] == [f"distinct {names - 1}"]
