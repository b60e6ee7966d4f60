"""The recording hot path's contract, on the C module and on its Python reference."""

from __future__ import annotations

import gc
import inspect
import itertools
import os
import weakref
from pathlib import Path

import numpy as np
import pytest

from pytest_opprof import OpprofError
from pytest_opprof.measure import _pyscope


class Sink:
    """A sink whose clock counts 1, 2, 3, ... so every mark is visible."""

    def __init__(self, impl) -> None:
        self.names, self.marks, self.phases = [], [], []
        self.mark = itertools.count(1).__next__
        self.tuple = (self.names, self.marks, self.mark, self.phases)
        self.impl = impl

    def __enter__(self):
        self.impl.set_sink(self.tuple)
        return self

    def __exit__(self, *exc):
        self.impl.set_sink(None)


def test_with_records_name_and_mark_on_enter_mark_and_none_on_exit(scope_impl):
    scope = scope_impl.OpScope("conv2d")
    with Sink(scope_impl) as sink:
        with scope as entered:
            with scope_impl.OpScope("relu"):
                pass
    assert entered is scope
    assert sink.names == ["conv2d", "relu", None, None]
    assert sink.marks == [1, 2, 3, 4]


def test_nothing_is_recorded_without_a_sink(scope_impl):
    names = []
    with scope_impl.OpScope("x"):
        pass
    assert scope_impl.get_sink() is None and names == []


def test_get_sink_returns_the_very_tuple_set(scope_impl):
    with Sink(scope_impl) as sink:
        assert scope_impl.get_sink() is sink.tuple
    assert scope_impl.get_sink() is None


@pytest.mark.parametrize("bad", [(), ([], []), ((), [], int), ([], [], 3), "names"])
def test_set_sink_refuses_anything_but_the_sink_tuple(scope_impl, bad):
    with pytest.raises(TypeError, match="set_sink takes None or"):
        scope_impl.set_sink(bad)
    assert scope_impl.get_sink() is None


def test_an_exception_in_the_block_closes_the_op_and_propagates(scope_impl):
    with Sink(scope_impl) as sink, pytest.raises(KeyError, match="boom"):
        with scope_impl.OpScope("x"):
            raise KeyError("boom")
    assert sink.names == ["x", None] and sink.marks == [1, 2]


def test_a_failing_clock_is_an_error_not_a_silent_gap(scope_impl):
    def broken():
        raise RuntimeError("clock")

    scope_impl.set_sink(([], [], broken, []))
    try:
        with pytest.raises(RuntimeError, match="clock"):
            with scope_impl.OpScope("x"):
                pass
    finally:
        scope_impl.set_sink(None)


def test_decorated_functions_record_each_call_and_keep_their_identity(scope_impl):
    def conv(x, *, scale=1):
        """Doc."""
        return x * scale

    timed = scope_impl.OpScope("conv2d")(conv)
    assert timed(3, scale=2) == 6  # no sink: a plain call
    assert (timed.__name__, timed.__doc__, timed.__wrapped__) == ("conv", "Doc.", conv)
    assert str(inspect.signature(timed)) == "(x, *, scale=1)"
    with Sink(scope_impl) as sink:
        assert timed(2, scale=5) == 10
    assert sink.names == ["conv2d", None] and sink.marks == [1, 2]


def test_a_decorated_method_binds_like_a_function(scope_impl):
    class Layer:
        factor = 3

        @scope_impl.OpScope("forward")
        def forward(self, x):
            return self.factor * x

    with Sink(scope_impl) as sink:
        assert Layer().forward(2) == 6
        assert Layer.forward(Layer(), 1) == 3
    assert sink.names == ["forward", None, "forward", None]


def test_an_exception_in_a_decorated_function_closes_the_op_and_propagates(scope_impl):
    @scope_impl.OpScope("boom")
    def boom():
        raise ValueError("x")

    with Sink(scope_impl) as sink, pytest.raises(ValueError, match="x"):
        boom()
    assert sink.names == ["boom", None]


def test_a_call_records_into_the_sink_active_when_it_started(scope_impl):
    other = Sink(scope_impl)

    @scope_impl.OpScope("switch")
    def switch():
        scope_impl.set_sink(other.tuple)

    with Sink(scope_impl) as first:
        switch()
    assert first.names == ["switch", None] and other.names == []


def test_decorating_a_non_callable_is_a_type_error(scope_impl):
    with pytest.raises(TypeError, match="decorates a callable"):
        scope_impl.OpScope("x")(3)


def test_recursion_and_reentry_use_one_stateless_scope(scope_impl):
    scope = scope_impl.OpScope("fib")

    @scope
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    with Sink(scope_impl) as sink:
        assert fib(4) == 3
    assert sink.names.count("fib") == 9 and sink.names.count(None) == 9


def test_wrappers_do_not_leak(scope_impl):
    def fn():
        return None

    timed = scope_impl.OpScope("x")(fn)
    ref = weakref.ref(timed)
    timed.cycle = timed  # a reference cycle through the wrapper's __dict__
    del timed
    gc.collect()
    assert ref() is None


def test_the_c_wrapper_answers_the_wrapped_objects_attributes():
    from .conftest import load_cscope

    cscope = load_cscope()
    timed_add = cscope.OpScope("add")(np.add)
    assert timed_add.reduce(np.arange(4)) == 6 and timed_add.nin == 2
    with pytest.raises(AttributeError):
        timed_add.no_such_attribute  # noqa: B018


def test_op_returns_the_cached_scope_and_leaves_the_rest_to_make(scope_impl):
    cache = {"relu": scope_impl.OpScope("relu")}
    made = []

    def make(name):
        made.append(name)
        return "made"

    scope_impl.configure_op(cache, make)
    try:
        assert scope_impl.op("relu") is cache["relu"]
        assert [scope_impl.op(x) for x in ("new", 3, [1])] == ["made"] * 3
        assert made == ["new", 3, [1]]
    finally:
        from pytest_opprof.measure import profiler

        scope_impl.configure_op(profiler._scopes, profiler._make_op)


def test_the_profiler_records_through_the_c_module_where_it_was_built():
    from pytest_opprof.measure import profiler

    from .conftest import load_cscope

    expected = _pyscope if os.environ.get("OPPROF_PURE_PYTHON") == "1" else load_cscope()
    assert profiler._impl is expected and profiler.op is expected.op


@pytest.mark.e2e
def test_the_profiler_tests_pass_on_the_pure_python_reference(pytester, monkeypatch):
    """OPPROF_PURE_PYTHON=1 (also the fallback where the C module cannot be built)."""
    pytester.makepyfile(check="""
        from pytest_opprof.measure import _pyscope, profiler

        def test_reference_in_use():
            assert profiler._impl is _pyscope and profiler.op is _pyscope.op
    """)
    tests = Path(__file__).parent
    monkeypatch.setenv("OPPROF_PURE_PYTHON", "1")
    result = pytester.runpytest_subprocess(
        "check.py", str(tests / "test_profiler.py"), "-p", "no:cacheprovider", "-q",
        "--opprof-measure=fake")  # no GPU assumed: auto would build a CUDA timer where one is
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.stdout.str()
    assert outcomes["passed"] > 30


def test_only_the_thread_that_set_the_sink_records(scope_impl):
    import threading

    scope = scope_impl.OpScope("x")
    timed = scope_impl.OpScope("f")(lambda: None)
    seen = []

    def other_thread():
        seen.append(scope_impl.recording_here())
        with scope:
            timed()

    with Sink(scope_impl) as sink:
        assert scope_impl.recording_here()
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        with scope:
            pass
    assert seen == [False] and sink.names == ["x", None]
    assert not scope_impl.recording_here()


# -- ops nest: an op ending while one opened inside it is still open is refused --------

INTERLEAVED = (r"op 'outer' ended while op 'inner', opened inside it, is still open: "
               r"ops of concurrent tasks interleave; profile one task at a time")


def test_an_op_ending_before_one_opened_inside_it_is_refused_naming_both(scope_impl):
    outer, inner = scope_impl.OpScope("outer"), scope_impl.OpScope("inner")
    with Sink(scope_impl) as sink:
        outer.__enter__()
        inner.__enter__()
        with pytest.raises(OpprofError, match=INTERLEAVED):
            outer.__exit__(None, None, None)
        inner.__exit__(None, None, None)  # the innermost may still end, then the outer
        outer.__exit__(None, None, None)
    assert sink.names == ["outer", "inner", None, None] and sink.marks == [1, 2, 3, 4]


def test_a_decorated_call_ending_inside_an_open_op_is_refused(scope_impl):
    inner = scope_impl.OpScope("inner")

    @scope_impl.OpScope("outer")
    def leaves_inner_open():
        inner.__enter__()
        return "result"

    with Sink(scope_impl) as sink, pytest.raises(OpprofError, match=INTERLEAVED):
        leaves_inner_open()
    assert sink.names == ["outer", "inner"]


def test_the_same_name_ending_is_the_innermost_whatever_the_scope_object(scope_impl):
    with Sink(scope_impl) as sink:
        with scope_impl.OpScope("x"):
            with scope_impl.OpScope("".join(["x"])):  # an equal name, another object
                pass
    assert sink.names == ["x", "x", None, None]


def test_an_op_that_failed_to_open_leaves_no_open_op_behind(scope_impl):
    calls = itertools.count()

    def clock_failing_second():
        if next(calls) == 1:
            raise RuntimeError("clock")
        return 7

    scope_impl.set_sink(([], [], clock_failing_second, []))
    try:
        with scope_impl.OpScope("outer"):
            with pytest.raises(RuntimeError, match="clock"):
                with scope_impl.OpScope("inner"):
                    pass
        # the outer op ended without a complaint about "inner"
    finally:
        scope_impl.set_sink(None)


def test_a_new_sink_starts_with_no_open_op(scope_impl):
    with Sink(scope_impl):
        scope_impl.OpScope("left open").__enter__()
    with Sink(scope_impl) as sink:
        scope_impl.OpScope("closed late").__exit__(None, None, None)
    assert sink.names == [None]  # counted as unbalanced by the profiler, not refused


def test_overlapping_asyncio_tasks_are_refused_and_one_task_at_a_time_records(scope_impl):
    import asyncio

    async def task(name):
        with scope_impl.OpScope(name):
            await asyncio.sleep(0)  # the other task runs here: its op opens inside this one
            await asyncio.sleep(0)

    async def overlapping():
        await asyncio.gather(task("a"), task("b"))

    async def one_at_a_time():
        await task("a")
        await task("b")

    with Sink(scope_impl), pytest.raises(OpprofError, match="concurrent tasks interleave"):
        asyncio.run(overlapping())
    with Sink(scope_impl) as sink:
        asyncio.run(one_at_a_time())
    assert sink.names == ["a", None, "b", None]


# -- a runaway recursion through a decorated function is a RecursionError, not a crash --

RUNAWAY = """
import sys
from pytest_opprof.measure import _pyscope, profiler, scope
sys.setrecursionlimit(20000)
assert scope.impl.__name__.endswith({impl!r}), scope.impl

@profiler.op
def down(n):
    return down(n + 1)

def run():
    try:
        down(0)
    except RecursionError:
        return "RecursionError"
    return "returned"

print("idle", run())
names, marks = [], []
scope.impl.set_sink((names, marks, iter(range(10**9)).__next__, []))
print("recording", run())
scope.impl.set_sink(None)
# every op closed (the deepest may have failed to open: the profiler counts it unbalanced)
print("balanced", names.count("down") - names.count(None) in (0, 1), len(names) > 1000)
"""


@pytest.mark.pytester
@pytest.mark.parametrize("impl", ["c", "python"])
def test_runaway_recursion_through_an_op_raises_recursion_error_not_a_signal(impl):
    """sys.setrecursionlimit(20000) and a decorated function calling itself without end:
    the C wrapper's vectorcall did not count against the limit, and the C stack ran out
    first (a segmentation fault, with or without a profiler recording)."""
    import subprocess
    import sys

    from .conftest import load_cscope

    env = {**os.environ, "OPPROF_PURE_PYTHON": "1" if impl == "python" else "0"}
    if impl == "c":
        load_cscope()
    expected = "_pyscope" if impl == "python" else "_cscope"
    done = subprocess.run([sys.executable, "-c", RUNAWAY.format(impl=expected)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split("\n")[:3] == ["idle RecursionError", "recording RecursionError",
                                           "balanced True True"], done.stdout


# -- coroutine functions are timed over their await; generators are refused -----------

def test_an_async_def_is_timed_over_its_await_not_its_creation(scope_impl):
    """@op on an async def timed the creation of the coroutine (0.5 us), not its body
    (3 ms): the op now opens when the coroutine is first awaited and closes when it
    returns, with the body's own ops inside it."""
    import asyncio

    inner = scope_impl.OpScope("inner")

    @scope_impl.OpScope("body")
    async def body(x):
        with inner:
            await asyncio.sleep(0)
        return x * 2

    assert inspect.iscoroutinefunction(body) and body.__name__ == "body"
    with Sink(scope_impl) as sink:
        coroutine = body(21)
        assert sink.names == []  # creating the coroutine runs none of its body
        assert asyncio.run(coroutine) == 42
    assert sink.names == ["body", "inner", None, None] and sink.marks == [1, 2, 3, 4]


def test_an_object_with_async_call_is_timed_over_its_await(scope_impl):
    """Issue 28: an object whose class has ``async def __call__`` was timed over the
    coroutine's creation (2 us, not 5 ms). Calling it always gives a coroutine: its
    op spans the await, as an async def's."""
    import asyncio

    class Step:
        async def __call__(self, x):
            await asyncio.sleep(0)
            return x + 1

    step = scope_impl.OpScope("step")(Step())
    with Sink(scope_impl) as sink:
        coroutine = step(1)
        assert sink.names == []  # created, not run: not timed yet
        assert asyncio.run(coroutine) == 2
    assert sink.names == ["step", None] and sink.marks == [1, 2]


@pytest.mark.parametrize("kind", ["lambda", "functools.wraps wrapper"])
def test_a_callable_that_returns_a_coroutine_is_refused_at_its_call(scope_impl, kind):
    """A lambda or a wraps-wrapper returning an async def's coroutine can only be told
    when called (the same wrapper may as well run the coroutine itself, synchronously):
    that call is refused in one line naming the op and what to do, and the coroutine
    is closed (no 'never awaited' warning)."""
    import functools
    import warnings

    async def work():
        return 1

    if kind == "lambda":
        fn = lambda: work()  # noqa: E731
    else:
        @functools.wraps(work)
        def fn():
            return work()
    timed = scope_impl.OpScope("work")(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine never awaited would warn
        with Sink(scope_impl), pytest.raises(
                TypeError, match=r"^op\('work'\) timed only the creation of a coroutine: .* "
                                 r"returned one unawaited .*; decorate the async def itself, "
                                 r"or time the await \(with op\('work'\): await \.\.\.\)$"):
            timed()

    @functools.wraps(work)
    def run_it():  # a synchronous adapter around the same async def: timed as it is
        import asyncio
        return asyncio.run(work())

    with Sink(scope_impl) as sink:
        assert scope_impl.OpScope("run")(run_it)() == 1
    assert sink.names == ["run", None]


def test_an_async_def_raising_closes_its_op_and_propagates(scope_impl):
    import asyncio

    class Model:
        @scope_impl.OpScope("step")
        async def step(self):
            raise KeyError("boom")

    with Sink(scope_impl) as sink, pytest.raises(KeyError, match="boom"):
        asyncio.run(Model().step())
    assert sink.names == ["step", None]


def test_overlapping_decorated_coroutines_are_refused(scope_impl):
    import asyncio

    @scope_impl.OpScope("load")
    async def load():
        await asyncio.sleep(0)  # parse opens here, and is still open when load ends

    @scope_impl.OpScope("parse")
    async def parse():
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    async def overlapping():
        await asyncio.gather(load(), parse())

    with Sink(scope_impl), pytest.raises(OpprofError, match="concurrent tasks interleave"):
        asyncio.run(overlapping())


@pytest.mark.parametrize("kind", ["generator", "async generator"])
def test_a_generator_function_is_refused_when_decorated(scope_impl, kind):
    """Its body runs on each next(), in the consumer's loop: no one op to time."""
    if kind == "generator":
        def produce():
            yield 1
    else:
        async def produce():
            yield 1
    with pytest.raises(TypeError, match=rf"^op\('produce'\) cannot time an? {kind} function "
                                        r"\(.*produce\): its body runs on each next\(\)"):
        scope_impl.OpScope("produce")(produce)


def test_ops_entered_with_no_sink_are_counted_as_untimed(scope_impl):
    timed = scope_impl.OpScope("f")(lambda: None)
    before = scope_impl.untimed_calls()
    with scope_impl.OpScope("x"):
        timed()
    assert scope_impl.untimed_calls() == before + 2
    with Sink(scope_impl):
        with scope_impl.OpScope("x"):
            timed()
    assert scope_impl.untimed_calls() == before + 2
