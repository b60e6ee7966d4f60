"""Statistics of a Profile over its counted iterations only: per-op figures divide by
the counted iterations the op ran in, per-iteration figures by the counted iterations
(never by all iterations, skipped ones included, as SINGA does)."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import numpy as np

from ..model.profile import Profile

_BACKWARD_OP = re.compile(r"backward|_grad$")


@dataclass(frozen=True)
class OpStats:
    """One OP_ID over the counted iterations in which it ran."""

    op_id: int
    name: str
    count: int
    total: float
    mean: float
    median: float
    min: float
    max: float


@dataclass(frozen=True)
class OpTypeStats:
    """Every call of ops sharing a name (PaddlePaddle's ``Stat=`` line)."""

    name: str
    count: int
    total: float
    mean: float
    min: float
    max: float


@dataclass(frozen=True)
class WallSummary:
    """Mean time per counted iteration inside top-level ops, and in all."""

    op_time: float
    wall: float

    @property
    def outside_share(self) -> float:
        return max(self.wall - self.op_time, 0.0) / self.wall if self.wall > 0 else 0.0


def op_stats(profile: Profile, samples: np.ndarray | None = None) -> list[OpStats]:
    """Per OP_ID, in graph order (count 0: it ran only in skipped iterations), of the
    gated times or of ``samples``, another (iterations, ops) measure of the profile (its
    event spans beside kernel time)."""
    counted = (profile.counted_matrix() if samples is None
               else np.asarray(samples[profile.skip:], dtype=float))
    count = (~np.isnan(counted)).sum(axis=0)
    if not counted.size:  # no counted iteration: every op as one seen in skipped ones only
        counted = np.full((1, len(profile.ops)), np.nan)
    with warnings.catch_warnings():  # all-NaN columns: ops seen only in skipped iterations
        warnings.simplefilter("ignore", RuntimeWarning)
        figures = np.vstack([f(counted, axis=0) for f in (
            np.nansum, np.nanmean, np.nanmedian, np.nanmin, np.nanmax)])
    return [OpStats(o.op_id, o.name, int(count[o.op_id]), *map(float, figures[:, o.op_id]))
            for o in profile.ops]


def op_type_stats(profile: Profile) -> list[OpTypeStats]:
    """Per op name, by total time, longest first (ties by name)."""
    samples = profile.counted_samples()
    columns: dict[str, list[np.ndarray]] = {}
    for info in profile.ops:
        columns.setdefault(info.name, []).append(samples[info.op_id])
    result = []
    for name, cols in columns.items():
        values = np.concatenate(cols)
        if values.size:
            total = float(values.sum())
            result.append(OpTypeStats(name, int(values.size), total, total / values.size,
                                      float(values.min()), float(values.max())))
    result.sort(key=lambda s: (-s.total, s.name))
    return result


def phase_times(profile: Profile) -> list[tuple[str, float]]:
    """Mean time per counted iteration of each phase, in first-seen order.

    A test that names no phases gets SINGA's split: ``forward`` is every top-level op
    before the first op whose name contains "backward" or ends in "_grad", ``backward``
    the rest; a half with no op in it is left out, not shown as 0.
    """
    n = profile.counted
    if n == 0:
        return []
    if profile.phases:
        sums = np.nansum(profile.phase_samples[profile.skip:], axis=0)
        return [(name, float(sums[j]) / n) for j, name in enumerate(profile.phases)]
    first_backward = next((o.op_id for o in profile.ops if _BACKWARD_OP.search(o.name)),
                          len(profile.ops))
    per_op = np.nansum(profile.counted_matrix(), axis=0)
    top = np.array([o.depth == 0 for o in profile.ops], dtype=bool)
    ids = np.arange(len(profile.ops))
    halves = [("forward", top & (ids < first_backward)),
              ("backward", top & (ids >= first_backward))]
    return [(name, float(per_op[members].sum()) / n) for name, members in halves
            if members.any()]


def wall_summary(profile: Profile) -> WallSummary:
    """Top-level op time and wall time, each a mean over counted iterations."""
    if profile.counted == 0:
        return WallSummary(0.0, 0.0)
    return WallSummary(float(profile.op_time[profile.skip:].mean()),
                       float(profile.wall[profile.skip:].mean()))
