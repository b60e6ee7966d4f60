"""The Profile: what one profiled test measured, as plain data.

Times are nanoseconds. ``samples[i, k]`` is the inclusive time of OP_ID k in
iteration i, NaN where that op did not run in that iteration. Every iteration
is kept, the skipped ones too (they are the first ``skip`` rows); statistics
use :attr:`Profile.counted` only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import OpprofError

SCHEMA = "pytest-opprof/profile/1"


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


@dataclass
class Profile:
    nodeid: str
    backend: str
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
    #: CPU dispatch time of each op on the CUDA backend; None where the timeline is the host's.
    host_samples: np.ndarray | None = None
    #: Op exits with no open op and ops still open when their iteration ended.
    unbalanced: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    # Where things happened, for timelines (the trace); None where not known (a profile
    # rebuilt from a baseline). All ns; starts are from the start of their iteration.
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

    @property
    def iterations(self) -> int:
        return int(self.wall.shape[0])

    @property
    def counted(self) -> int:
        """Iterations that count: all but the first ``skip``."""
        return max(self.iterations - self.skip, 0)

    # -- JSON --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "nodeid": self.nodeid,
            "backend": self.backend,
            "device": self.device,
            "skip": self.skip,
            "ops": [
                {"op_id": o.op_id, "name": o.name, "occurrence": o.occurrence,
                 "depth": o.depth, "phase": o.phase}
                for o in self.ops
            ],
            "phases": list(self.phases),
            "samples_ns": _matrix_to_json(self.samples),
            "phase_samples_ns": _matrix_to_json(self.phase_samples),
            "host_samples_ns": None if self.host_samples is None
            else _matrix_to_json(self.host_samples),
            "wall_ns": _matrix_to_json(self.wall),
            "op_time_ns": _matrix_to_json(self.op_time),
            "unbalanced": self.unbalanced,
            "meta": self.meta,
            **{key: None if value is None else _matrix_to_json(value)
               for key, value in (("starts_ns", self.starts),
                                  ("host_starts_ns", self.host_starts),
                                  ("phase_starts_ns", self.phase_starts),
                                  ("iteration_starts_ns", self.iteration_starts))},
            "op_streams": self.op_streams,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Profile:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise OpprofError(f"not a profile of schema {SCHEMA!r}")
        try:
            ops = [OpInfo(int(o["op_id"]), str(o["name"]), int(o["occurrence"]),
                          int(o["depth"]), o["phase"]) for o in data["ops"]]
            host = data.get("host_samples_ns")

            def optional(key: str, ndim: int) -> np.ndarray | None:
                value = data.get(key)
                return None if value is None else _matrix_from_json(value, ndim)

            streams = data.get("op_streams")
            return cls(
                nodeid=str(data["nodeid"]), backend=str(data["backend"]),
                device=str(data["device"]), skip=int(data["skip"]), ops=ops,
                samples=_matrix_from_json(data["samples_ns"], 2),
                phase_samples=_matrix_from_json(data["phase_samples_ns"], 2),
                phases=[str(p) for p in data["phases"]],
                wall=_matrix_from_json(data["wall_ns"], 1),
                op_time=_matrix_from_json(data["op_time_ns"], 1),
                host_samples=None if host is None else _matrix_from_json(host, 2),
                unbalanced=int(data.get("unbalanced", 0)),
                meta=dict(data.get("meta") or {}),
                starts=optional("starts_ns", 2), host_starts=optional("host_starts_ns", 2),
                phase_starts=optional("phase_starts_ns", 2),
                iteration_starts=optional("iteration_starts_ns", 1),
                op_streams=None if streams is None else [int(x) for x in streams],
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise OpprofError(f"malformed profile: {type(exc).__name__}: {exc}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Profile:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OpprofError(f"profile is not JSON: {exc}") from None
        except RecursionError:
            raise OpprofError("profile is not JSON: nested too deeply") from None
        return cls.from_dict(data)


def _matrix_to_json(a: np.ndarray) -> list:
    """Whole nanoseconds, ``null`` for NaN."""
    if a.ndim == 1:
        return [None if math.isnan(x) else round(x) for x in a.tolist()]
    return [_matrix_to_json(row) for row in a]


def _matrix_from_json(rows: Any, ndim: int) -> np.ndarray:
    a = np.array(rows, dtype=float)  # None becomes NaN
    if a.size == 0:
        return a.reshape((0,) * ndim)
    if a.ndim != ndim:
        raise ValueError(f"expected {ndim} dimensions, found {a.ndim}")
    return a
