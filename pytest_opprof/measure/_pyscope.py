"""The recording hot path in pure Python: the reference for ``_cscope.c``, which offers
the same API (``_cscope.pyi``) and is used where it was built.

- ``op(name)`` returns ``cache[name]`` (``configure_op(cache, make)``) and leaves the rest
  (new names, checks, bare decorators) to ``make``; ``new_scope(name)`` is the scope to
  cache for a new name (in C, one whose ``with`` costs less).
- ``set_sink((names, marks, mark, phases[, enter_hook, exit_hook]))`` starts recording,
  ``set_sink(None)`` stops. Only the thread that set it records; ops called from other
  threads run untimed.
- ``OpScope(name)``: entering appends ``name`` to ``names``, calls ``enter_hook(name)``
  and appends ``mark()`` to ``marks``; leaving appends ``mark()`` and None, then calls
  ``exit_hook()`` (the hooks, NVTX ranges on CUDA, stay out of the op's time). An
  exception inside the block closes the op and is never swallowed.
- ``OpScope(name)(fn)`` times every call of ``fn`` into the sink active when it started,
  binds as a method, and carries ``fn``'s name and docstring. On a coroutine function, or
  an object with ``async def __call__``, the op spans the *await* (timing the call would
  time only the coroutine's creation); a generator function is refused (its body runs on
  each ``next()``, in its consumer's loop: no one op). Both paths decide this here
  (:func:`special_wrap`). A callable that only turns out to return a coroutine when
  called (a lambda or a ``functools.wraps`` wrapper around an async def: it may as well
  be a synchronous adapter that runs one) is refused at that call, in one line
  (:func:`late_coroutine`): its op would have timed the creation.
- ``untimed_calls()``: ops entered where no sink recorded them, so that the profiler can
  say that ops ran outside ``iterations()``.
- Ops nest: an op that ends must be the innermost one open. One that is not (two asyncio
  tasks overlapping in the recording thread) raises OpprofError and records nothing:
  pairing its exit with the other's enter would swap the tasks' times.

``FORWARDS_ATTRIBUTES``: whether a timed callable answers the wrapped object's other
attributes (the C one does; here ``instrument`` adds a proxy).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import types
from collections.abc import Callable
from typing import Any, TypeVar, cast

from ..errors import OpprofError

F = TypeVar("F", bound=Callable[..., Any])

FORWARDS_ATTRIBUTES = False

#: The sink as the recording thread appends to it: (names.append, marks.append, mark,
#: enter_hook, exit_hook, open op names).
Fast = tuple[Callable[[str | None], None], Callable[[Any], None], Callable[[], Any],
             Callable[[str], Any] | None, Callable[[], Any] | None, list[str]]

_sink: tuple[Any, ...] | None = None
#: ``fast``: the active sink's Fast, in the recording thread only (a new object per sink)
_local = threading.local()
_untimed = 0

_op_cache: dict[str, Any] = {}
_op_make: Callable[[Any], Any] | None = None


def configure_op(cache: dict[str, Any], make: Callable[[Any], Any]) -> None:
    """op() looks names up in ``cache`` and calls ``make(name)`` for the rest."""
    global _op_cache, _op_make
    _op_cache, _op_make = cache, make


def op(name: Any) -> Any:
    """Time a block or a function as a named op of the active profiler.

    ``with pytest_opprof.op("conv2d"): ...``, ``@pytest_opprof.op("conv2d")``, or bare
    ``@pytest_opprof.op`` (named after the function). With no profiler recording it does
    nothing."""
    if type(name) is str:
        scope = _op_cache.get(name)
        if scope is not None:
            return scope
    if _op_make is None:
        raise RuntimeError("op() is used before configure_op()")
    return _op_make(name)


def new_scope(name: str) -> OpScope:
    return OpScope(name)


def set_sink(sink: tuple[Any, ...] | None) -> None:
    global _sink, _local
    if sink is not None and not (
            type(sink) is tuple and len(sink) >= 3 and type(sink[0]) is list
            and type(sink[1]) is list and callable(sink[2])):
        raise TypeError("set_sink takes None or (names, marks, mark, ...)")
    local = threading.local()
    if sink is not None:
        hooks = (*sink[4:6], None, None)[:2]
        local.fast = (sink[0].append, sink[1].append, sink[2], *hooks, [])
    _sink, _local = sink, local


def recording_here() -> bool:
    return getattr(_local, "fast", None) is not None


def get_sink() -> tuple[Any, ...] | None:
    return _sink


def untimed_calls() -> int:
    return _untimed


def special_wrap(scope: Any, fn: Callable[..., Any]) -> Any:
    """``scope(fn)`` for both paths where ``fn`` is a coroutine function (timed over its
    await) or a generator function (TypeError, one line); else None."""
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        kind = "an async generator" if inspect.isasyncgenfunction(fn) else "a generator"
        raise TypeError(
            f"op({scope.name!r}) cannot time {kind} function ({_qualname(fn)}): its body runs "
            "on each next(), inside the loop that consumes it, not in the call; time that "
            f"loop (with op({scope.name!r}): for item in ...) or the work inside the "
            "generator")
    if not (inspect.iscoroutinefunction(fn)
            or inspect.iscoroutinefunction(type(fn).__call__)):  # async def __call__
        return None

    @functools.wraps(fn)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        with scope:  # entered when the coroutine is first awaited, left when it returns
            return await fn(*args, **kwargs)

    return timed


def _qualname(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)


def late_coroutine(name: object, fn: object, coroutine: Any) -> TypeError:
    """The error for a timed call that returned a coroutine: the op timed its creation
    (microseconds), not its work. The coroutine is closed (it never ran: no warning)."""
    coroutine.close()
    return TypeError(
        f"op({name!r}) timed only the creation of a coroutine: {_qualname(fn)} returned one "
        "unawaited (a lambda or wrapper around an async def?); decorate the async def "
        f"itself, or time the await (with op({name!r}): await ...)")


def interleaved(name: object, top: object) -> OpprofError:
    """The error for an op ending while one opened inside it is still open."""
    return OpprofError(f"op {name!r} ended while op {top!r}, opened inside it, is still "
                       "open: ops of concurrent tasks interleave; profile one task at a time")


def _begin(fast: Fast, name: str) -> None:
    fast[0](name)
    fast[5].append(name)
    try:
        if fast[3] is not None:
            fast[3](name)
        fast[1](fast[2]())
    except BaseException:
        fast[5].pop()  # the op never opened: its block will not run, nor end
        raise


def _end(fast: Fast, name: str) -> None:
    open_ops = fast[5]
    if open_ops:  # else it opened before this iteration: counted as unbalanced later
        top = open_ops[-1]
        if top is not name and top != name:
            raise interleaved(name, top)
        open_ops.pop()
    fast[1](fast[2]())
    fast[0](None)
    if fast[4] is not None:
        fast[4]()


class OpScope:
    """A named op: ``with op("conv2d"): ...`` or ``@op("conv2d")``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> OpScope:
        fast = getattr(_local, "fast", None)
        if fast is not None:
            _begin(fast, self.name)
        else:
            global _untimed
            _untimed += 1
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        fast = getattr(_local, "fast", None)
        if fast is not None:
            _end(fast, self.name)

    def __call__(self, fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"op({self.name!r}) decorates a callable, got {fn!r}")
        special = special_wrap(self, fn)
        if special is not None:
            return cast(F, special)
        name = self.name

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            fast = getattr(_local, "fast", None)
            if fast is None:
                global _untimed
                _untimed += 1
                return fn(*args, **kwargs)
            _begin(fast, name)
            try:
                result = fn(*args, **kwargs)
            except BaseException:
                with contextlib.suppress(Exception):  # fn's own exception is the one to see
                    _end(fast, name)
                raise
            _end(fast, name)
            if type(result) is types.CoroutineType:
                raise late_coroutine(name, fn, result)
            return result

        return cast(F, timed)

    def __repr__(self) -> str:
        return f"op({self.name!r})"
