"""The Profiler: ops, phases and iterations, recorded into a Profile.

Recording is kept off the hot path. While an iteration runs, the active
*sink* is a tuple ``(names, marks, mark, phases, hooks...)``: entering an op appends its
name and a mark, leaving it appends a mark and ``None`` (``_cscope.c`` does
that in C, ``_pyscope.py`` is its pure-Python reference). Pairing enters with
exits, nesting, phases and graph matching happen once per iteration, after the
iteration's one synchronisation, and are skipped when an iteration repeats the
previous one's op sequence; the arithmetic waits for the end of the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import Any

import numpy as np

from . import _pyscope
from .errors import OpprofError
from .profile import OpInfo, Profile
from .timers import Timer


def _load_impl() -> ModuleType:
    """The C hot path when it was built, unless OPPROF_PURE_PYTHON=1 asks for the reference."""
    if os.environ.get("OPPROF_PURE_PYTHON", "") not in ("", "0"):
        return _pyscope
    try:
        from . import _cscope
    except ImportError:
        return _pyscope
    return _cscope


#: The module recording ops: ``_cscope`` (C) or ``_pyscope`` (its pure-Python reference).
_impl: ModuleType = _load_impl()
OpScope = _impl.OpScope


class PhaseScope:
    """A named phase (``forward``, ``backward``, ...) grouping the ops inside it.

    Phases are rare (a few per iteration), so they stay in Python: entering or
    leaving one appends (name or None, ops recorded so far, mark) to the sink's
    phase list. Like ops, only in the thread that runs the iterations.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> PhaseScope:
        if _impl.recording_here():
            sink = _impl.get_sink()
            sink[3].append((self.name, len(sink[0]), sink[2]()))
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if _impl.recording_here():
            sink = _impl.get_sink()
            sink[3].append((None, len(sink[0]), sink[2]()))

    def __repr__(self) -> str:
        return f"phase({self.name!r})"


#: One OpScope per name: they keep no state, so one serves every call.
_scopes: dict[str, Any] = {}


def _check_name(kind: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise OpprofError(f"{kind} name must be a non-empty string, got {name!r}")
    return name


def _make_op(name: Any) -> Any:
    """op()'s slow path: a new name gets its one OpScope; a callable is a bare decorator."""
    if callable(name) and not isinstance(name, str):
        return OpScope(name.__name__)(name)
    scope = _scopes[_check_name("op", name)] = _impl.new_scope(name)
    return scope


_impl.configure_op(_scopes, _make_op)
#: ``op(name)``: time a block or a function as a named op (see ``_pyscope.op``).
op = _impl.op


def is_recording() -> bool:
    """Whether a profiler is recording an iteration in this process."""
    return _impl.get_sink() is not None


class Profiler:
    """Times every named op of every iteration of a workload.

    Use :meth:`iterations` for the loop, :meth:`op` and :meth:`phase` inside
    it, :meth:`instrument` to time every call of a module, and :attr:`profile`
    for what was measured.
    """

    def __init__(self, timer: Timer, *, skip: int = 1, iterations: int = 20,
                 nodeid: str = "") -> None:
        self.timer = timer
        self.skip = skip
        self.default_iterations = iterations
        self.nodeid = nodeid
        self._graph = _GraphBuilder()
        self._started = False
        self._profile: Profile | None = None
        self._sink: tuple | None = None

    @property
    def xp(self) -> ModuleType:
        """The array module of the active backend: cupy on CUDA, else numpy."""
        return self.timer.xp

    #: A named op, as a context manager or a decorator; ops may nest (the same object
    #: as :func:`pytest_opprof.op`: no second call on the hot path).
    op = staticmethod(op)

    def phase(self, name: str) -> PhaseScope:
        """A named phase grouping the ops run inside it (``forward``, ``backward``)."""
        return PhaseScope(_check_name("phase", name))

    def instrument(self, obj: Any, names: Iterable[str] | None = None) -> Any:
        """A proxy of ``obj`` whose callables are timed as ops named after the
        attribute (``instrument(numpy).matmul(a, b)`` is the op ``matmul``).
        ``names`` limits it to those attributes. ``obj`` itself is not changed."""
        from .instrument import InstrumentedProxy

        return InstrumentedProxy(obj, None if names is None else frozenset(names))

    def iterations(self, n: int | None = None) -> Iterator[int]:
        """Yield ``n`` times; each pass is one iteration of the graph.

        Without ``n``: the marker's ``iterations``, else the ini
        ``opprof_iterations``, else 20. The first ``skip`` iterations are
        recorded but left out of every figure.
        """
        if n is None:
            n = self.default_iterations
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise OpprofError(f"iterations({n!r}): give a whole number of iterations >= 1")
        if n <= self.skip:
            raise OpprofError(
                f"iterations({n}) with skip={self.skip} leaves no iteration to count: "
                f"run more than {self.skip} iterations or lower --opprof-skip"
            )
        if self._started:
            raise OpprofError("iterations() was already run in this test: profile one loop "
                              "per test (split the test or parametrize it)")
        if _impl.get_sink() is not None:
            raise OpprofError("another profiler is recording: iterations() loops cannot nest")
        self._started = True
        return self._run(n)

    def _run(self, n: int) -> Iterator[int]:
        timer, mark, set_sink = self.timer, self.timer.mark, _impl.set_sink
        try:
            for i in range(n):
                names: list[str | None] = []
                phases: list[tuple] = []
                timer.begin_iteration()
                marks = [mark()]
                self._sink = (names, marks, mark, phases, timer.enter_hook, timer.exit_hook)
                set_sink(self._sink)
                yield i
                marks.append(mark())
                set_sink(None)
                timer.end_iteration()
                self._graph.add(names, marks, phases, timer)
        finally:
            self.close()

    def close(self) -> None:
        """Stop recording (an abandoned loop ends here at the latest).

        Only this profiler's own sink is cleared: a loop abandoned by an earlier
        test and garbage-collected later must not stop a later test's recording.
        """
        if self._sink is not None and _impl.get_sink() is self._sink:
            _impl.set_sink(None)

    @property
    def profile(self) -> Profile | None:
        """What was measured, as plain data; None before the first iteration ends."""
        if not self._graph.rows:
            return None
        if self._profile is None or self._profile.iterations != len(self._graph.rows):
            self._profile = self._graph.build(self.nodeid, self.timer, self.skip)
        return self._profile


class _Iteration:
    """One iteration as recorded: its layout and its marks, resolved to times but not
    yet turned into durations (that happens for all iterations at once in build())."""

    __slots__ = ("host", "layout", "phase_times", "streams", "times")

    def __init__(self, layout, times, host, phase_times, streams) -> None:
        self.layout, self.times, self.host, self.phase_times = layout, times, host, phase_times
        self.streams = streams


class _Layout:
    """How an iteration's event sequence maps to OP_IDs; reused while it repeats."""

    __slots__ = ("enters", "exits", "ids", "phase_enters", "phase_exits", "phase_ids", "top",
                 "unbalanced")

    def __init__(self, enters, exits, ids, top, phase_enters, phase_exits, phase_ids,
                 unbalanced) -> None:
        self.enters, self.exits, self.ids, self.top = enters, exits, ids, top
        self.phase_enters, self.phase_exits = phase_enters, phase_exits
        self.phase_ids, self.unbalanced = phase_ids, unbalanced


class _GraphBuilder:
    """Matches each iteration's ops to OP_IDs by (name, occurrence) and keeps the rows."""

    def __init__(self) -> None:
        self.ops: list[OpInfo] = []
        self.op_keys: dict[tuple[str, int], int] = {}
        self.phases: dict[str, int] = {}
        self.rows: list[_Iteration] = []
        self.unbalanced = 0
        self._last_names: list | None = None
        self._last_phase_key: list | None = None
        self._layout: _Layout | None = None

    def add(self, names: list, marks: list, phase_events: list, timer: Timer) -> None:
        """Called once per iteration, after its sync: kept cheap, the arithmetic waits."""
        phase_key = [(p[0], p[1]) for p in phase_events] if phase_events else []
        if names == self._last_names and phase_key == self._last_phase_key:
            layout = self._layout
        else:
            layout = self._layout = self._match(names, phase_key)
            self._last_names, self._last_phase_key = names, phase_key
        times, host = timer.resolve(marks)
        phase_times = timer.resolve([p[2] for p in phase_events])[0] if phase_events else ()
        self.unbalanced += layout.unbalanced
        self.rows.append(_Iteration(layout, times, host, phase_times, timer.streams(marks)))

    def _match(self, names: list, phase_key: list) -> _Layout:
        # Pair enters with exits; an exit with nothing open, or an op still open at
        # the end of the iteration, cannot be timed and is counted as unbalanced.
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
        unbalanced += len(stack)

        op_phases = self._phase_of_each(enters, phase_key)
        seen: dict[str, int] = {}
        ids: list[int] = []
        keep: list[int] = []
        for j, k in enumerate(enters):
            if exits[j] < 0:
                continue
            name = names[k]
            occurrence = seen.get(name, 0)
            seen[name] = occurrence + 1
            op_id = self.op_keys.get((name, occurrence))
            if op_id is None:
                op_id = self.op_keys[(name, occurrence)] = len(self.ops)
                self.ops.append(OpInfo(op_id, name, occurrence, depths[j], op_phases[j]))
            ids.append(op_id)
            keep.append(j)

        p_enters, p_exits, p_ids, p_unbalanced = self._pair_phases(phase_key)
        return _Layout(
            enters=np.array([enters[j] for j in keep], dtype=np.intp),
            exits=np.array([exits[j] for j in keep], dtype=np.intp),
            ids=np.array(ids, dtype=np.intp),
            top=np.array([depths[j] == 0 for j in keep], dtype=bool),
            phase_enters=p_enters, phase_exits=p_exits, phase_ids=p_ids,
            unbalanced=unbalanced + p_unbalanced,
        )

    @staticmethod
    def _phase_of_each(enters: list[int], phase_key: list) -> list[str | None]:
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

    def _pair_phases(self, phase_key: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
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

    def build(self, nodeid: str, timer: Timer, skip: int) -> Profile:
        n_iter, n_ops, n_phases = len(self.rows), len(self.ops), len(self.phases)
        samples = np.full((n_iter, n_ops), np.nan)
        phase_samples = np.full((n_iter, n_phases), np.nan)
        has_host = self.rows[0].host is not None
        host = np.full((n_iter, n_ops), np.nan) if has_host else None
        wall = np.zeros(n_iter)
        op_time = np.zeros(n_iter)
        starts = np.full((n_iter, n_ops), np.nan)
        host_starts = np.full((n_iter, n_ops), np.nan) if has_host else None
        phase_starts = np.full((n_iter, n_phases), np.nan)
        iteration_starts = np.zeros(n_iter)
        op_streams = [0] * n_ops if self.rows[-1].streams is not None else None
        groups: dict[int, list[int]] = {}
        for i, row in enumerate(self.rows):
            groups.setdefault(id(row.layout), []).append(i)
        for members in groups.values():
            layout = self.rows[members[0]].layout
            rows = np.array(members)[:, None]
            # marks[0] opens the iteration, so event k of `names` is mark k + 1
            times = np.array([self.rows[i].times for i in members], dtype=np.int64)
            durations = times[:, layout.exits + 1] - times[:, layout.enters + 1]
            samples[rows, layout.ids] = durations
            starts[rows, layout.ids] = times[:, layout.enters + 1] - times[:, :1]
            wall[members] = times[:, -1] - times[:, 0]
            op_time[members] = durations[:, layout.top].sum(axis=1)
            iteration_starts[members] = times[:, 0]
            if host is not None:
                h = np.array([self.rows[i].host for i in members], dtype=np.int64)
                host[rows, layout.ids] = h[:, layout.exits + 1] - h[:, layout.enters + 1]
                host_starts[rows, layout.ids] = h[:, layout.enters + 1] - h[:, :1]
                iteration_starts[members] = h[:, 0]  # iterations are placed by the host clock
            if op_streams is not None:
                last = self.rows[members[-1]].streams
                for op_id, k in zip(layout.ids.tolist(), layout.enters.tolist(), strict=True):
                    op_streams[op_id] = int(last[k + 1])
            if len(layout.phase_ids):
                p = np.array([self.rows[i].phase_times for i in members], dtype=np.int64)
                spans = p[:, layout.phase_exits] - p[:, layout.phase_enters]
                # a phase entered several times in one iteration adds up
                sums = np.zeros((len(members), n_phases))
                np.add.at(sums, (slice(None), layout.phase_ids), spans)
                present = np.zeros(n_phases, dtype=bool)
                present[layout.phase_ids] = True
                phase_samples[rows, np.flatnonzero(present)] = sums[:, present]
                # each phase's first entry (reversed, so the first one is written last)
                entered = p[:, layout.phase_enters] - times[:, :1]
                order = np.arange(len(layout.phase_ids))[::-1]
                phase_starts[rows, layout.phase_ids[order]] = entered[:, order]
        return Profile(
            nodeid=nodeid, backend=timer.kind, device=timer.device, skip=skip,
            ops=list(self.ops), samples=samples, phase_samples=phase_samples,
            phases=list(self.phases), host_samples=host, wall=wall, op_time=op_time,
            unbalanced=self.unbalanced, starts=starts, host_starts=host_starts,
            phase_starts=phase_starts, iteration_starts=iteration_starts - iteration_starts[0],
            op_streams=op_streams,
        )
