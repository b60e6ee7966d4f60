"""The Profiler: ops, phases and iterations, recorded into a Profile.

Recording is kept off the hot path: while an iteration runs, ops only append to the
active *sink* (``_pyscope``'s docstring). Pairing enters with exits, nesting, phases and
graph matching happen once per iteration, after its one synchronisation, and are skipped
when an iteration repeats the previous one's op sequence; the arithmetic waits for the
end of the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar, overload

import numpy as np

from ..errors import OpprofError
from ..model.profile import (
    MAX_ACTIVITIES,
    MAX_FUNCTION_NAME,
    MAX_ITERATIONS,
    MAX_NAME_LENGTH,
    Activities,
    OpInfo,
    Profile,
    check_name,
)
from ..model.words import Unit, whole
from . import scope
from .scope import OpScope as OpScope
from .timers import Timer
from .timers.base import Times

if TYPE_CHECKING:
    from .timers.cupti import RawActivities

_impl: ModuleType = scope.impl
_F = TypeVar("_F", bound=Callable[..., Any])

#: How many op names get a cached, faster scope of their own (each costs a class, about
#: 2 kB); names beyond it get a plain scope per call, so a million names cost nothing kept.
MAX_CACHED_OPS = 2048


def _phase_event(name: str | None) -> None:
    if _impl.recording_here():
        sink = _impl.get_sink()
        sink[3].append((name, len(sink[0]), sink[2]()))


class PhaseScope:
    """A named phase (``forward``, ``backward``) grouping the ops inside it. Phases are
    rare, so they stay in Python: entering or leaving one appends (name or None, ops
    recorded so far, mark) to the sink's phase list, in the recording thread only."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> PhaseScope:
        _phase_event(self.name)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        _phase_event(None)

    def __repr__(self) -> str:
        return f"phase({self.name!r})"


#: The cached scope of each op name seen: they keep no state, so one serves every call.
_scopes: dict[str, OpScope] = {}


def _make_op(name: Any) -> Any:
    """op()'s slow path: a new name gets its scope (cached while there is room); a callable
    is a bare decorator, named after the function."""
    if callable(name) and not isinstance(name, str):
        return OpScope(check_name("op", getattr(name, "__name__", name)))(name)
    name = check_name("op", name)
    if type(name) is not str or len(_scopes) >= MAX_CACHED_OPS:
        return OpScope(name)  # op() looks up exact str only: a subclass is never found
    scope = _scopes[name] = _impl.new_scope(name)
    return scope


_impl.configure_op(_scopes, _make_op)
if TYPE_CHECKING:
    from ._cscope import op as op
else:
    #: ``op(name)``: time a block or a function as a named op (see ``_pyscope.op``).
    op = _impl.op


def is_recording() -> bool:
    return _impl.get_sink() is not None


class Profiler:
    """Times every named op of every iteration of a workload.

    Use :meth:`iterations` for the loop, :meth:`op` and :meth:`phase` inside
    it, :meth:`instrument` to time every call of a module, and :attr:`profile`
    for what was measured.
    """

    def __init__(self, timer: Timer, *, skip: int = 1, iterations: int = 20,
                 nodeid: str = "", measure: str = "", unit: Unit = Unit.NANOSECONDS,
                 cap: int | None = None) -> None:
        self.timer = timer
        #: The session's measure; its profile is of the timer's where the timer names one
        #: (the native timer of a measure a child process takes).
        self._measure = measure or timer.measure
        self._label = (timer.measure, timer.unit) if timer.measure else (measure, unit)
        #: The most iterations a loop runs, whatever it asks (the instructions measure
        #: counts a few: the counts repeat, valgrind's cost does not).
        self.cap = cap
        self.skip = skip
        self.default_iterations = iterations
        self.nodeid = nodeid
        self._graph = _GraphBuilder()
        #: Whether :meth:`iterations` was called.
        self.started = False
        self._profile: Profile | None = None
        self._sink: tuple[Any, ...] | None = None
        #: The scope module's count of untimed ops: at the start, and outside the loop.
        self._untimed_start = _impl.untimed_calls()
        self._untimed_outside = 0
        self._loop_ended: int | None = None
        #: (iterations run, asked) when the loop was left before its end (a break).
        self.left_early: tuple[int, int] | None = None

    @property
    def xp(self) -> ModuleType:
        return self.timer.xp

    @property
    def measure(self) -> str:
        """The measure the session gates on, so that a test can size its workload for it
        (counts scale with work: a smaller shape shows a change at a fraction of
        valgrind's cost)."""
        return self._measure

    if TYPE_CHECKING:  # staticmethod() would keep only the first overload of op
        @overload
        @staticmethod
        def op(name: str) -> OpScope: ...
        @overload
        @staticmethod
        def op(name: _F) -> _F: ...
        @staticmethod
        def op(name: Any) -> Any:
            return op(name)
    else:
        #: A named op, as a context manager or a decorator; ops may nest (the same object
        #: as :func:`pytest_opprof.op`: no second call on the hot path).
        op = staticmethod(op)

    def phase(self, name: str) -> PhaseScope:
        """A named phase grouping the ops run inside it (``forward``, ``backward``)."""
        return PhaseScope(check_name("phase", name))

    def instrument(self, obj: Any, names: Iterable[str] | None = None) -> Any:
        """A proxy of ``obj`` whose callables are timed as ops named after the
        attribute (``instrument(numpy).matmul(a, b)`` is the op ``matmul``).
        ``names`` limits it to those attributes. ``obj`` itself is not changed."""
        from .instrument import InstrumentedProxy

        return InstrumentedProxy(obj, None if names is None else frozenset(names))

    def iterations(self, n: int | None = None, skip: int | None = None) -> Iterator[int]:
        """Yield ``n`` times; each pass is one iteration of the graph.

        Without ``n``: the marker's ``iterations``, else the ini
        ``opprof_iterations``, else 20. The first ``skip`` iterations are
        recorded but left out of every figure; without ``skip``: the marker's, else
        ``--opprof-skip`` (ini ``opprof_skip``), else 1.
        """
        n = _checked(self.default_iterations if n is None else n, 1, "{!r}", "")
        given = skip is not None
        skip = _checked(self.skip if skip is None else skip, 0, "skip={!r}", " to skip")
        if n <= skip:
            where = "its skip=" if given else "--opprof-skip"
            raise OpprofError(
                f"iterations({n}) with skip={skip} leaves no iteration to count: "
                f"run more than {skip} iterations or lower {where}"
            )
        if self.started:
            raise OpprofError("iterations() was already run in this test: profile one loop "
                              "per test (split the test or parametrize it)")
        if _impl.get_sink() is not None:
            raise OpprofError("another profiler is recording: iterations() loops cannot nest")
        if given:
            self._skip_from(skip)
        self.started = True
        return self._run(n if self.cap is None else min(n, max(self.cap, self.skip + 1)))

    def _skip_from(self, skip: int) -> None:
        """``skip`` set in the test's code: the cap (counted past the skipped iterations)
        and the callgrind timer's ``skip`` move with it."""
        if self.cap is not None:
            self.cap += skip - self.skip
        if hasattr(self.timer, "skip"):
            self.timer.skip = skip
        self.skip = skip

    def _run(self, n: int) -> Iterator[int]:
        timer, mark, set_sink = self.timer, self.timer.mark, _impl.set_sink
        self._untimed_outside = _impl.untimed_calls() - self._untimed_start
        try:
            for i in range(n):
                names: list[str | None] = []
                phases: list[PhaseEvent] = []
                timer.begin_iteration()
                marks = [mark()]
                sink = self._sink = (names, marks, mark, phases, timer.enter_hook,
                                     timer.exit_hook)
                set_sink(sink)
                try:
                    yield i
                except GeneratorExit:
                    # the loop was left in this iteration (a break, or an exception out of
                    # its body): its ops ran, so it counts, unless this profiler already
                    # stopped (a loop garbage-collected after its test)
                    if _impl.get_sink() is sink:
                        self.left_early = (i + 1, n)
                        self._end_iteration(names, marks, phases)
                    raise
                self._end_iteration(names, marks, phases)
        finally:
            self._loop_ended = _impl.untimed_calls()
            self.close()

    def _end_iteration(self, names: list[str | None], marks: list[Any],
                       phases: list[PhaseEvent]) -> None:
        marks.append(self.timer.mark())
        _impl.set_sink(None)
        self.timer.end_iteration()
        self._graph.add(names, marks, phases, self.timer)

    def drop_left(self) -> None:
        """Drop the iteration the loop was left in: the test failed, so it was left by
        an exception (a break's iteration ran its ops, and counts)."""
        if self.left_early is None or not self._graph.rows:
            return
        row = self._graph.rows.pop()
        self._graph.unbalanced -= row.layout.unbalanced
        self._profile = None
        self.left_early = None

    def untimed_outside(self) -> int:
        """How many ops were entered, before this profiler's loop and after it (other
        threads' ops in that window too), that it did not record."""
        after = 0 if self._loop_ended is None else _impl.untimed_calls() - self._loop_ended
        before = (self._untimed_outside if self.started
                  else _impl.untimed_calls() - self._untimed_start)
        return before + after

    def close(self) -> None:
        """Stop recording. Only this profiler's own sink is cleared: a loop abandoned by
        an earlier test and garbage-collected later must not stop a later test's."""
        if self._sink is not None and _impl.get_sink() is self._sink:
            _impl.set_sink(None)
        self.timer.close()

    @property
    def profile(self) -> Profile | None:
        """What was measured, as plain data; None before the first iteration ends."""
        if not self._graph.rows:
            return None
        if self._profile is None or self._profile.iterations != len(self._graph.rows):
            self._profile = self._graph.build(self.nodeid, self.timer, self.skip, self._label)
        return self._profile


def _checked(value: object, least: int, shown: str, what: str) -> int:
    number = whole(value)  # numpy's integers too, not a bool
    if number is None or not least <= number <= MAX_ITERATIONS:
        raise OpprofError(f"iterations({shown.format(value)}): give a whole number of "
                          f"iterations{what} from {least} to {MAX_ITERATIONS}")
    return number


#: A phase boundary as recorded: (name on entry or None on exit, ops so far, mark).
PhaseEvent = tuple[str | None, int, Any]
#: The same without the mark: what decides an iteration's layout.
PhaseKey = tuple[str | None, int]
IntArray = np.ndarray


@dataclass(slots=True, eq=False)
class _Iteration:
    """One iteration: its layout and its marks resolved to times (durations are taken
    for all iterations at once in build())."""

    layout: _Layout
    times: Times
    host: Times | None
    phase_times: Times
    streams: Sequence[int] | None
    kernel: _Kernels | None


class _Kernels:
    """One iteration's GPU activities linked to its ops (kernel measure): per kept op of
    the layout, the inclusive sum of durations and the count; per activity, its op."""

    __slots__ = ("counts", "op_ids", "raw", "sums")

    def __init__(self, raw: RawActivities, layout: _Layout) -> None:
        self.raw = raw
        entry = raw.entry
        n_entries = len(layout.entry_ops)
        valid = (entry >= 0) & (entry < n_entries)
        self.op_ids = np.full(len(raw), -1, dtype=np.int64)
        self.op_ids[valid] = layout.entry_ops[entry[valid]]
        durations = raw.end_ns - raw.start_ns
        # exclusive sums per op entry, then inclusive ones: an op's descendants are the
        # entries right after it, up to its last one (entries are in pre-order)
        per_entry = np.bincount(entry[valid], weights=durations[valid], minlength=n_entries)
        count = np.bincount(entry[valid], minlength=n_entries)
        sums = np.concatenate(([0.0], np.cumsum(per_entry)))
        counts = np.concatenate(([0], np.cumsum(count)))
        first, last = layout.first, layout.last
        self.sums = sums[last + 1] - sums[first]
        self.counts = counts[last + 1] - counts[first]


@dataclass(slots=True, eq=False)
class _Layout:
    """How an iteration's event sequence maps to OP_IDs; reused while it repeats."""

    enters: IntArray
    exits: IntArray
    ids: IntArray
    top: np.ndarray
    phase_enters: IntArray
    phase_exits: IntArray
    phase_ids: IntArray
    unbalanced: int
    #: Per op entry of the iteration (in order of entry): its OP_ID, -1 if untimed.
    entry_ops: IntArray
    #: Per kept op (as ``ids``): its entry index and that of its last descendant.
    first: IntArray
    last: IntArray


class _GraphBuilder:
    """Matches each iteration's ops to OP_IDs by (name, occurrence) and keeps the rows."""

    def __init__(self) -> None:
        self.ops: list[OpInfo] = []
        self.op_keys: dict[tuple[str, int], int] = {}
        self.phases: dict[str, int] = {}
        self.rows: list[_Iteration] = []
        self.unbalanced = 0
        self._last: tuple[list[str | None], list[PhaseKey]] | None = None
        self._layout: _Layout | None = None

    def add(self, names: list[str | None], marks: list[Any], phase_events: list[PhaseEvent],
            timer: Timer) -> None:
        """Called once per iteration, after its sync: kept cheap, the arithmetic waits."""
        phase_key = [(p[0], p[1]) for p in phase_events]
        layout = self._layout
        if layout is None or self._last != (names, phase_key):
            layout = self._layout = self._match(names, phase_key)
            self._last = (names, phase_key)
        times, host = timer.resolve(marks)
        phase_times = timer.resolve([p[2] for p in phase_events])[0] if phase_events else ()
        self.unbalanced += layout.unbalanced
        raw = timer.activities()
        kernel = None if raw is None else _Kernels(raw, layout)
        self.rows.append(_Iteration(layout, times, host, phase_times, timer.streams(marks),
                                    kernel))

    def _match(self, names: list[str | None], phase_key: list[PhaseKey]) -> _Layout:
        enters, exits, depths, unbalanced = _pair_ops(names)
        op_phases = self._phase_of_each(enters, phase_key)
        seen: dict[str, int] = {}
        ids: list[int] = []
        keep: list[int] = []
        for j, k in enumerate(enters):
            name = names[k]
            if exits[j] < 0 or name is None:
                continue
            occurrence = seen.get(name, 0)
            seen[name] = occurrence + 1
            op_id = self.op_keys.get((name, occurrence))
            if op_id is None:
                op_id = self.op_keys[(name, occurrence)] = len(self.ops)
                self.ops.append(OpInfo(op_id, name, occurrence, depths[j], op_phases[j]))
            ids.append(op_id)
            keep.append(j)

        p_enters, p_exits, p_ids, p_unbalanced = self._pair_phases(phase_key)
        entry_ops = np.full(len(enters), -1, dtype=np.intp)
        entry_ops[keep] = ids
        all_enters, kept = np.array(enters, dtype=np.intp), np.array(keep, dtype=np.intp)
        kept_exits = np.array(exits, dtype=np.intp)[kept]
        return _Layout(
            entry_ops=entry_ops, first=kept, last=np.searchsorted(all_enters, kept_exits) - 1,
            enters=all_enters[kept], exits=kept_exits, ids=np.array(ids, dtype=np.intp),
            top=np.array(depths, dtype=np.intp)[kept] == 0,
            phase_enters=p_enters, phase_exits=p_exits, phase_ids=p_ids,
            unbalanced=unbalanced + p_unbalanced,
        )

    @staticmethod
    def _phase_of_each(enters: list[int], phase_key: list[PhaseKey]) -> list[str | None]:
        """The innermost phase open when each op started."""
        result: list[str | None] = []
        open_phases: list[str] = []
        i = 0
        for k in enters:
            while i < len(phase_key) and phase_key[i][1] <= k:
                name = phase_key[i][0]
                if name is not None:
                    open_phases.append(name)
                elif open_phases:
                    open_phases.pop()
                i += 1
            result.append(open_phases[-1] if open_phases else None)
        return result

    def _pair_phases(self, phase_key: list[PhaseKey]
                     ) -> tuple[IntArray, IntArray, IntArray, int]:
        enters: list[int] = []
        exits: list[int] = []
        ids: list[int] = []
        stack: list[tuple[int, str]] = []
        unbalanced = 0
        for i, (name, _) in enumerate(phase_key):
            if name is not None:
                stack.append((i, name))
            elif stack:
                start, opened = stack.pop()
                enters.append(start)
                exits.append(i)
                ids.append(self.phases.setdefault(opened, len(self.phases)))
            else:
                unbalanced += 1
        return (np.array(enters, dtype=np.intp), np.array(exits, dtype=np.intp),
                np.array(ids, dtype=np.intp), unbalanced + len(stack))

    def build(self, nodeid: str, timer: Timer, skip: int, label: tuple[str, Unit]) -> Profile:
        """Every iteration's durations at once, one NumPy step per distinct layout."""
        m = _Matrices(len(self.rows), len(self.ops), len(self.phases),
                      has_host=self.rows[0].host is not None,
                      has_streams=self.rows[-1].streams is not None, final=timer.final)
        groups: dict[int, list[int]] = {}
        for i, row in enumerate(self.rows):
            groups.setdefault(id(row.layout), []).append(i)
        for members in groups.values():
            m.fill(self.rows, members)
        profile = Profile(
            nodeid=nodeid, measure=label[0], unit=label[1], device=timer.device, skip=skip,
            ops=list(self.ops), samples=m.samples, phase_samples=m.phase_samples,
            phases=list(self.phases), host_samples=m.host, wall=m.wall, op_time=m.op_time,
            unbalanced=self.unbalanced, starts=m.starts, host_starts=m.host_starts,
            phase_starts=m.phase_starts,
            iteration_starts=m.iteration_starts - m.iteration_starts[0],
            op_streams=m.op_streams,
        )
        if timer.traces_kernels:
            if self.ops:
                _add_kernels(profile, self.rows)
            else:
                _zero_instrumentation(profile, self.rows)
        elif timer.names_functions:
            _add_functions(profile, self.rows[-1], timer)
        return profile


def _cut(name: str, longest: int) -> str:
    """A C++ template instance's name can be longer than a profile keeps: cut its end."""
    return name if len(name) <= longest else name[:longest - 3] + "..."


def function_name(name: str) -> str:
    return _cut(name or "?", MAX_FUNCTION_NAME)


def activity_name(name: str) -> str:
    return _cut(name or "[kernel]", MAX_NAME_LENGTH)


#: The costliest functions kept per op (instructions measure), to name those that grew.
TOP_FUNCTIONS = 20


def _add_functions(profile: Profile, row: _Iteration, timer: Timer) -> None:
    """Each op's costliest functions in the last iteration (counts repeat: one stands for
    all): those of the marks after its entry up to its exit, as its count is."""
    per_mark = timer.mark_functions()
    layout, marks = row.layout, row.times
    functions: list[list[tuple[str, int]]] = [[] for _ in profile.ops]
    for op_id, enter, exit_ in zip(layout.ids.tolist(), layout.enters.tolist(),
                                   layout.exits.tolist(), strict=True):
        total: dict[str, int] = {}
        for k in range(int(marks[enter + 1]) + 1, int(marks[exit_ + 1]) + 1):
            for name, count in per_mark.get(k, ()):
                name = function_name(name)
                total[name] = total.get(name, 0) + count
        functions[op_id] = sorted(total.items(), key=lambda kv: -kv[1])[:TOP_FUNCTIONS]
    profile.op_functions = functions


def _activities(rows: list[_Iteration], op_ids: list[np.ndarray]) -> tuple[Activities, int]:
    """Every iteration's activities as one table (at most MAX_ACTIVITIES rows, later
    ones dropped) and how many were dropped."""
    names: dict[str, int] = {}
    columns: dict[str, list[np.ndarray]] = {key: [] for key in (
        "iteration", "op_id", "name_id", "kind", "stream", "start_ns", "end_ns")}
    room = MAX_ACTIVITIES
    dropped = 0
    for i, row in enumerate(rows):
        raw = None if row.kernel is None else row.kernel.raw
        n = 0 if raw is None else min(len(raw), room)
        dropped += 0 if raw is None else len(raw) - n
        room -= n
        if raw is None or not n:
            continue
        for key, values in (
                ("iteration", np.full(n, i)), ("op_id", op_ids[i][:n]),
                ("name_id", [names.setdefault(activity_name(x), len(names))
                             for x in raw.names[:n]]),
                ("kind", raw.kind[:n]), ("stream", raw.stream[:n]),
                ("start_ns", raw.start_ns[:n]), ("end_ns", raw.end_ns[:n])):
            columns[key].append(np.asarray(values, dtype=float if key.endswith("_ns")
                                           else np.int64))
    if not columns["iteration"]:
        return Activities.empty(), dropped
    return Activities(**{key: np.concatenate(parts) for key, parts in columns.items()},
                      names=list(names)), dropped


def _add_kernels(profile: Profile, rows: list[_Iteration]) -> None:
    """Named ops: each op's inclusive kernel time and count, NaN where it did not run."""
    shape = profile.samples.shape
    sums, counts = np.full(shape, np.nan), np.full(shape, np.nan)
    for i, row in enumerate(rows):
        if row.kernel is not None:
            sums[i, row.layout.ids] = row.kernel.sums
            counts[i, row.layout.ids] = row.kernel.counts
    profile.kernel_samples, profile.kernel_counts = sums, counts
    op_ids = [np.zeros(0, np.int64) if r.kernel is None else r.kernel.op_ids for r in rows]
    profile.activities, dropped = _activities(rows, op_ids)
    if dropped:
        profile.meta["activities_dropped"] = dropped


#: The most ops zero-instrumentation mode makes (activities beyond are left unnamed).
MAX_OPS_ZERO = 10_000


def _zero_instrumentation(profile: Profile, rows: list[_Iteration]) -> None:
    """A test that named no op: one op per activity name, in launch order, matched across
    iterations by (name, occurrence) as named ops are; its time is the activity's."""
    keys: dict[tuple[str, int], int] = {}  # (name, occurrence) -> OP_ID
    per_row: list[np.ndarray] = []
    for row in rows:
        seen: dict[str, int] = {}
        row_ids: list[int] = []
        for name in map(activity_name, [] if row.kernel is None else row.kernel.raw.names):
            key = (name, seen.get(name, 0))
            seen[name] = key[1] + 1
            if key not in keys and len(keys) < MAX_OPS_ZERO:
                keys[key] = len(keys)
            row_ids.append(keys.get(key, -1))
        per_row.append(np.array(row_ids, dtype=np.int64))
    if not keys:
        return
    shape = (len(rows), len(keys))
    sums, counts, starts = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    streams = [0] * len(keys)
    for i, (row, op_ids) in enumerate(zip(rows, per_row, strict=True)):
        if row.kernel is None or not len(op_ids):
            continue
        raw, ok = row.kernel.raw, op_ids >= 0
        ids = op_ids[ok]
        n = np.bincount(ids, minlength=len(keys))
        ran = n > 0
        durations = (raw.end_ns - raw.start_ns)[ok]
        sums[i, ran] = np.bincount(ids, weights=durations, minlength=len(keys))[ran]
        counts[i, ran] = n[ran]
        order = np.flatnonzero(ok)[::-1]  # first occurrence written last
        starts[i, op_ids[order]] = raw.start_ns[order]
        for op_id, stream in zip(ids.tolist(), raw.stream[ok].tolist(), strict=True):
            streams[op_id] = int(stream)
    profile.ops = [OpInfo(op_id, name, occurrence, 0, None)
                   for (name, occurrence), op_id in keys.items()]
    profile.samples = sums.copy()
    profile.kernel_samples, profile.kernel_counts = sums, counts
    profile.starts = starts
    profile.host_samples = profile.host_starts = None
    profile.op_streams = streams
    profile.op_time = np.nan_to_num(sums).sum(axis=1)
    profile.activities, dropped = _activities(rows, per_row)
    profile.meta["zero_instrumentation"] = True
    if dropped:
        profile.meta["activities_dropped"] = dropped


def _pair_ops(names: list[str | None]) -> tuple[list[int], list[int], list[int], int]:
    """Pairs enters with exits: each op's event index of entry and exit (-1: never
    exited) and its depth, and the count of unbalanced events. An exit with nothing
    open, or an op still open at the end of the iteration, cannot be timed."""
    enters: list[int] = []
    exits: list[int] = []
    depths: list[int] = []
    stack: list[int] = []
    unbalanced = 0
    for k, name in enumerate(names):
        if name is None:
            if stack:
                exits[stack.pop()] = k
            else:
                unbalanced += 1
        else:
            stack.append(len(enters))
            enters.append(k)
            exits.append(-1)
            depths.append(len(stack) - 1)
    return enters, exits, depths, unbalanced + len(stack)


class _Matrices:

    def __init__(self, n_iter: int, n_ops: int, n_phases: int, *, has_host: bool,
                 has_streams: bool, final: Callable[[Times], Times]) -> None:
        self.final = final
        self.samples = np.full((n_iter, n_ops), np.nan)
        self.starts = np.full((n_iter, n_ops), np.nan)
        self.host = np.full((n_iter, n_ops), np.nan) if has_host else None
        self.host_starts = np.full((n_iter, n_ops), np.nan) if has_host else None
        self.phase_samples = np.full((n_iter, n_phases), np.nan)
        self.phase_starts = np.full((n_iter, n_phases), np.nan)
        self.wall = np.zeros(n_iter)
        self.op_time = np.zeros(n_iter)
        self.iteration_starts = np.zeros(n_iter)
        self.op_streams: list[int] | None = [0] * n_ops if has_streams else None

    def fill(self, all_rows: list[_Iteration], members: list[int]) -> None:
        layout = all_rows[members[0]].layout
        rows = np.array(members)[:, None]
        # marks[0] opens the iteration, so event k of `names` is mark k + 1
        times = np.array([self.final(all_rows[i].times) for i in members], dtype=np.int64)
        durations = times[:, layout.exits + 1] - times[:, layout.enters + 1]
        self.samples[rows, layout.ids] = durations
        self.starts[rows, layout.ids] = times[:, layout.enters + 1] - times[:, :1]
        self.wall[members] = times[:, -1] - times[:, 0]
        self.op_time[members] = durations[:, layout.top].sum(axis=1)
        self.iteration_starts[members] = times[:, 0]
        if self.host is not None and self.host_starts is not None:
            h = np.array([all_rows[i].host for i in members], dtype=np.int64)
            self.host[rows, layout.ids] = h[:, layout.exits + 1] - h[:, layout.enters + 1]
            self.host_starts[rows, layout.ids] = h[:, layout.enters + 1] - h[:, :1]
            self.iteration_starts[members] = h[:, 0]  # iterations are placed by the host clock
        last = all_rows[members[-1]].streams
        if self.op_streams is not None and last is not None:
            for op_id, k in zip(layout.ids.tolist(), layout.enters.tolist(), strict=True):
                self.op_streams[op_id] = int(last[k + 1])
        if len(layout.phase_ids):
            self._fill_phases(all_rows, members, layout, rows, times)

    def _fill_phases(self, all_rows: list[_Iteration], members: list[int], layout: _Layout,
                     rows: IntArray, times: IntArray) -> None:
        p = np.array([self.final(all_rows[i].phase_times) for i in members], dtype=np.int64)
        spans = p[:, layout.phase_exits] - p[:, layout.phase_enters]
        # a phase entered several times in one iteration adds up
        n_phases = self.phase_samples.shape[1]
        sums = np.zeros((len(members), n_phases))
        np.add.at(sums, (slice(None), layout.phase_ids), spans)  # type: ignore[arg-type]
        present = np.zeros(n_phases, dtype=bool)
        present[layout.phase_ids] = True
        self.phase_samples[rows, np.flatnonzero(present)] = sums[:, present]
        # each phase's first entry (reversed, so the first one is written last)
        entered = p[:, layout.phase_enters] - times[:, :1]
        order = np.arange(len(layout.phase_ids))[::-1]
        self.phase_starts[rows, layout.phase_ids[order]] = entered[:, order]
