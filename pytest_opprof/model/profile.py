"""The Profile: what one profiled test measured, as plain data.

Figures are in the profile's :class:`~.words.Unit` (nanoseconds, or counts such as
instructions), as its measure took them. ``samples[i, k]`` is the inclusive figure of
OP_ID k in iteration i, NaN where that op did not run in that iteration. Every iteration
is kept, the skipped ones too (they are the first ``skip`` rows); statistics use
:attr:`Profile.counted` only. The fields named ``*_ns`` are in the profile's unit too,
except the host's and the GPU activities' (always nanoseconds).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from ..errors import OpprofError
from . import jsontext
from .words import Unit

#: Version 2: the measure by its name, the unit beside it, no backend (version 1's
#: backend and measure are one measure's name now: ``store.results`` reads it).
SCHEMA = "pytest-opprof/profile/2"

#: The most iterations a test may run (``iterations(n)``): beyond it a value is a typo.
MAX_ITERATIONS = 1_000_000
#: The longest op or phase name, in characters: a name is a label, not a payload.
MAX_NAME_LENGTH = 1024
#: The most GPU activities (kernels, copies, memsets) one profile keeps.
MAX_ACTIVITIES = 2**22
#: The longest function name kept (a C++ template instance can be longer: cut).
MAX_FUNCTION_NAME = 2048
#: Activity kinds: the ``kind`` column of :class:`Activities`.
KERNEL, MEMCPY, MEMSET = 0, 1, 2
ACTIVITY_KINDS = ("kernel", "memcpy", "memset")


@dataclass(frozen=True)
class OpInfo:
    """One node of the graph: the ``occurrence``-th op called ``name`` in an iteration."""

    op_id: int
    name: str
    occurrence: int
    #: Nesting depth when first seen (0: not inside another op).
    depth: int
    #: The innermost phase it ran in when first seen, if any.
    phase: str | None


_ACTIVITY_INT_COLUMNS = ("iteration", "op_id", "name_id", "kind", "stream")
_ACTIVITY_TIME_COLUMNS = ("start_ns", "end_ns")


@dataclass(frozen=True, eq=False)
class Activities:
    """Every GPU activity of a profile's iterations, skipped ones included, as columns in
    launch order within each iteration. ``op_id``: the innermost op that launched it (-1:
    none); ``start_ns``/``end_ns``: on the device timeline, from the start of their
    iteration (as :attr:`Profile.starts`)."""

    iteration: np.ndarray
    op_id: np.ndarray
    name_id: np.ndarray
    kind: np.ndarray
    stream: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    names: list[str]

    def __len__(self) -> int:
        return int(self.iteration.shape[0])

    @classmethod
    def empty(cls) -> Activities:
        ints = {key: np.zeros(0, dtype=np.int64) for key in _ACTIVITY_INT_COLUMNS}
        return cls(**ints, start_ns=np.zeros(0), end_ns=np.zeros(0), names=[])

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"names": list(self.names)}
        for key in _ACTIVITY_INT_COLUMNS:
            data[key] = [int(x) for x in getattr(self, key).tolist()]
        for key in _ACTIVITY_TIME_COLUMNS:
            data[key] = [round(x) for x in getattr(self, key).tolist()]
        return data

    @classmethod
    def from_dict(cls, data: Any, *, iterations: int, ops: int) -> Activities:
        """Checked as a profile is: columns of one length, indexes within what they index."""
        if not isinstance(data, dict):
            raise TypeError(f"activities is a {type(data).__name__}, not an object")
        _length(data["names"], "activities.names")
        names = [check_name("activity", n) for n in data["names"]]
        n = _length(data["iteration"], "activities.iteration")
        columns: dict[str, np.ndarray] = {}
        limits = {"iteration": (0, iterations - 1), "op_id": (-1, ops - 1),
                  "name_id": (0, len(names) - 1), "kind": (0, len(ACTIVITY_KINDS) - 1),
                  "stream": (-(2**63), 2**63 - 1)}
        for key in (*_ACTIVITY_INT_COLUMNS, *_ACTIVITY_TIME_COLUMNS):
            values = data[key]
            if _length(values, f"activities.{key}") != n:
                raise ValueError(f"activities.{key} has {len(values)} entries for {n} "
                                 "activities")
            if key in limits:
                lo, hi = limits[key]
                if any(isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi
                       for v in values):
                    raise ValueError(f"activities.{key} must hold whole numbers from {lo} "
                                     f"to {hi}")
                columns[key] = np.array(values, dtype=np.int64).reshape(n)
            else:
                if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
                    raise ValueError(f"activities.{key} must hold numbers")
                a = np.array(values, dtype=float).reshape(n)
                if not np.isfinite(a).all():
                    raise ValueError(f"activities.{key} holds a time that is not finite")
                columns[key] = a
        return cls(names=names, **columns)


@dataclass
class Profile:
    nodeid: str
    #: The name of the measure that took its figures (``--opprof-measure``): what they
    #: are is that measure's to say (:mod:`pytest_opprof.measure.measures`).
    measure: str
    device: str
    skip: int
    ops: list[OpInfo]
    #: (iterations, ops) inclusive op times, NaN where the op did not run.
    samples: np.ndarray
    #: (iterations, phases) phase times, NaN where the phase did not run.
    phase_samples: np.ndarray
    phases: list[str]
    #: (iterations,) from the iteration's first mark to its last.
    wall: np.ndarray
    #: (iterations,) time inside top-level ops (nested ops are not counted twice).
    op_time: np.ndarray
    #: CPU dispatch time of each op under CUDA events; None where the timeline is the host's.
    host_samples: np.ndarray | None = None
    #: Op exits with no open op and ops still open when their iteration ended.
    unbalanced: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    # For timelines (the trace); None where not known (a profile rebuilt from a baseline);
    # from the start of their iteration.
    #: (iterations, ops) when each op started, on the primary timeline (the device's on CUDA).
    starts: np.ndarray | None = None
    #: (iterations, ops) when each op was dispatched by the host (CUDA only).
    host_starts: np.ndarray | None = None
    #: (iterations, phases) when each phase was first entered.
    phase_starts: np.ndarray | None = None
    #: (iterations,) when each iteration started on the host, from the first one's start.
    iteration_starts: np.ndarray | None = None
    #: The CUDA stream each op ran on (CUDA only).
    op_streams: list[int] | None = None
    #: What the figures count (of ``samples`` and every figure below but the host's and
    #: the GPU activities', which are nanoseconds).
    unit: Unit = Unit.NANOSECONDS
    #: (iterations, ops) summed ns of the GPU activities launched inside each op, nested
    #: ops included; NaN where the op did not run, 0.0 where it launched nothing.
    kernel_samples: np.ndarray | None = None
    #: (iterations, ops) how many activities each op launched, nested ops included.
    kernel_counts: np.ndarray | None = None
    #: Every activity of every iteration (kernel time only).
    activities: Activities | None = None
    #: Per OP_ID, its costliest functions as (name, instructions) in the last iteration,
    #: nested ops included (instructions measure only).
    op_functions: list[list[tuple[str, int]]] | None = None

    @property
    def iterations(self) -> int:
        return int(self.wall.shape[0])

    @property
    def counted(self) -> int:
        """Iterations that count: all but the first ``skip``."""
        return max(self.iterations - self.skip, 0)

    def gated_samples(self) -> np.ndarray:
        """The op figures the gate and the reports use: kernel time where it was
        measured (the event span stays in ``samples``), else ``samples``."""
        return self.kernel_samples if self.kernel_samples is not None else self.samples

    def counted_matrix(self) -> np.ndarray:
        """The gated samples of the counted iterations, (iterations, ops), NaN where an op
        did not run: the one reader of the counted samples."""
        return np.asarray(self.gated_samples()[self.skip:], dtype=float)

    def counted_samples(self) -> list[np.ndarray]:
        """Each OP_ID's column of :meth:`counted_matrix` without its NaN: what every per-op
        figure, the gate and the baselines start from."""
        return [column[~np.isnan(column)] for column in self.counted_matrix().T]

    # -- JSON --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        m = _matrix_to_json
        return {
            "schema": SCHEMA, "nodeid": self.nodeid, "measure": self.measure,
            "unit": self.unit.value, "device": self.device, "skip": self.skip,
            "ops": [{"op_id": o.op_id, "name": o.name, "occurrence": o.occurrence,
                     "depth": o.depth, "phase": o.phase} for o in self.ops],
            "phases": list(self.phases), "samples_ns": m(self.samples),
            "phase_samples_ns": m(self.phase_samples), "host_samples_ns": m(self.host_samples),
            "wall_ns": m(self.wall), "op_time_ns": m(self.op_time),
            "unbalanced": self.unbalanced, "meta": self.meta, "starts_ns": m(self.starts),
            "host_starts_ns": m(self.host_starts), "phase_starts_ns": m(self.phase_starts),
            "iteration_starts_ns": m(self.iteration_starts), "op_streams": self.op_streams,
            "kernel_samples_ns": m(self.kernel_samples), "kernel_counts": m(self.kernel_counts),
            "activities": None if self.activities is None else self.activities.to_dict(),
            "op_functions": None if self.op_functions is None
            else [[[name, count] for name, count in op] for op in self.op_functions],
        }

    @classmethod
    def from_dict(cls, data: Any) -> Profile:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise OpprofError(f"not a profile of schema {SCHEMA!r}")
        return _Reader(data).profile(cls)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Profile:
        """:meth:`to_json`'s text read back through the one parse path."""
        return jsontext.Reader(cls.from_dict, "profile").parse(text, "profile")


@overload
def _matrix_to_json(a: np.ndarray) -> list[Any]: ...
@overload
def _matrix_to_json(a: None) -> None: ...
def _matrix_to_json(a: np.ndarray | None) -> list[Any] | None:
    """Whole numbers (of the unit), ``null`` for NaN."""
    if a is None:
        return None
    if a.ndim == 1:
        return [None if math.isnan(x) else round(x) for x in a.tolist()]
    return [_matrix_to_json(row) for row in a]


class _Reader:
    """Builds a Profile from its dict, checking each field's type, range and shape: the
    shapes follow from iterations (``wall_ns``), ops and phases, so no renderer meets an
    array of another shape."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        for key in ("wall_ns", "ops", "phases"):
            if not isinstance(data[key], (list, tuple)):
                raise TypeError(f"{key} is a {type(data[key]).__name__}, not a list")
        self.n_iter, self.n_ops, self.n_phases = (
            len(data["wall_ns"]), len(data["ops"]), len(data["phases"]))

    def matrix(self, key: str, cols: int | None) -> np.ndarray:
        shape = (self.n_iter,) if cols is None else (self.n_iter, cols)
        return _matrix_from_json(self.data[key], shape, key)

    def optional(self, key: str, cols: int | None) -> np.ndarray | None:
        return None if self.data.get(key) is None else self.matrix(key, cols)

    def counts(self) -> np.ndarray | None:
        counts = self.optional("kernel_counts", self.n_ops)
        if counts is not None and (counts[~np.isnan(counts)] < 0).any():
            raise ValueError("kernel_counts holds a negative count")
        return counts

    def ops(self) -> list[OpInfo]:
        ops = []
        for k, o in enumerate(self.data["ops"]):
            op_id = _whole(o["op_id"], "op_id")
            if op_id != k:
                raise ValueError(f"op {k} has op_id {op_id}: ops are listed by OP_ID")
            phase = o["phase"]
            if phase is not None:
                phase = check_name("phase", phase)
            ops.append(OpInfo(op_id, check_name("op", o["name"]),
                              _whole(o["occurrence"], "occurrence"),
                              _whole(o["depth"], "depth"), phase))
        return ops

    def per_op(self, key: str) -> Any:
        value = self.data.get(key)
        if value is not None and _length(value, key) != self.n_ops:
            raise ValueError(f"{key} has {len(value)} entries for {self.n_ops} ops")
        return value

    def profile(self, cls: type[Profile]) -> Profile:
        data = self.data
        return cls(
            nodeid=str(data["nodeid"]), measure=check_name("measure", data["measure"]),
            unit=Unit(data["unit"]), device=str(data["device"]),
            skip=_whole(data["skip"], "skip"),
            ops=self.ops(), samples=self.matrix("samples_ns", self.n_ops),
            phase_samples=self.matrix("phase_samples_ns", self.n_phases),
            phases=[check_name("phase", p) for p in data["phases"]],
            wall=self.matrix("wall_ns", None), op_time=self.matrix("op_time_ns", None),
            host_samples=self.optional("host_samples_ns", self.n_ops),
            unbalanced=_whole(data.get("unbalanced", 0), "unbalanced"),
            meta=dict(data.get("meta") or {}),
            starts=self.optional("starts_ns", self.n_ops),
            host_starts=self.optional("host_starts_ns", self.n_ops),
            phase_starts=self.optional("phase_starts_ns", self.n_phases),
            iteration_starts=self.optional("iteration_starts_ns", None),
            op_streams=None if (streams := self.per_op("op_streams")) is None
            else [int(x) for x in streams],
            kernel_samples=self.optional("kernel_samples_ns", self.n_ops),
            kernel_counts=self.counts(),
            activities=None if data.get("activities") is None else Activities.from_dict(
                data["activities"], iterations=self.n_iter, ops=self.n_ops),
            op_functions=None if (functions := self.per_op("op_functions")) is None
            else [read_functions(op, "op_functions") for op in functions],
        )


def read_functions(value: Any, key: str) -> list[tuple[str, int]]:
    """One op's functions as stored: [name, count] pairs."""
    _length(value, key)
    found = []
    for pair in value:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(f"{key}: each function is a [name, count] pair")
        name, count = pair
        if not isinstance(name, str) or not name:
            raise ValueError(f"{key}: a function name must be a non-empty string")
        found.append((name, _whole(count, key)))
    return found


def check_name(kind: str, name: object) -> str:
    """Any non-empty str up to MAX_NAME_LENGTH characters is an op or phase name; control
    characters and lone surrogates are kept (renderers show them escaped)."""
    if isinstance(name, str) and 0 < len(name) <= MAX_NAME_LENGTH:
        return name
    if not isinstance(name, str):
        got = f"{_short_repr(name)} of type {type(name).__name__}"
    else:
        got = f"{len(name)} characters: {_short_repr(name)}" if name else "an empty string"
    raise OpprofError(f"{kind} name must be a non-empty string of at most "
                      f"{MAX_NAME_LENGTH} characters, got {got}")


def _short_repr(value: object) -> str:
    """An error line names the input, it does not dump it."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _length(value: Any, key: str) -> int:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{key} is a {type(value).__name__}, not a list")
    return len(value)


def _whole(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} must be a whole number, got {_short_repr(value)}")
    return value


def _matrix_from_json(rows: Any, shape: tuple[int, ...], key: str) -> np.ndarray:
    """``rows`` as a float array of exactly ``shape`` (``null`` becomes NaN); the shape is
    checked on the lists, before NumPy builds anything."""
    if _length(rows, key) != shape[0]:
        raise ValueError(f"{key} has {len(rows)} rows for {shape[0]} iterations")
    if len(shape) == 2 and any(
            not isinstance(row, (list, tuple)) or len(row) != shape[1] for row in rows):
        raise ValueError(f"{key}: every row must hold {shape[1]} values")
    a = np.array(rows, dtype=float).reshape(shape)
    if np.isinf(a).any():
        raise ValueError(f"{key} holds an infinite time")
    return a
