"""Kernel time in the reports: which measure an op's figures are, and the GPU activities
(kernels, memcpy, memset) grouped by name, per op or for the whole test.

Pure functions of a :class:`~pytest_opprof.model.profile.Profile`, over its counted
iterations only, like every other figure. The renderers (text, results JSON, HTML,
Markdown, trace) take their kernel figures from here, so each surface says the same.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..model.profile import ACTIVITY_KINDS, Profile
from . import display_name

#: How each measure is named in a report.
MEASURE_WORDS = {"kernel": "kernel time", "events": "event span"}
#: The widest kernel name the terminal report prints; longer ones end in ``...`` there
#: (the results JSON keeps them whole).
NAME_WIDTH = 72


def measure_word(measure: str) -> str:
    """``kernel`` -> ``kernel time``, ``events`` -> ``event span``."""
    return MEASURE_WORDS.get(measure, display_name(str(measure)))


def has_kernel_time(profile: Profile) -> bool:
    """Whether the op figures are kernel time (CUPTI) with the event span second (as the
    gate's ``Profile.gated_samples`` decides)."""
    return profile.kernel_samples is not None


def zero_instrumentation(profile: Profile) -> bool:
    """Whether the test named no op and got one op per kernel name (its ops are its
    kernels: no span of their own, no kernels under them)."""
    return bool(profile.meta.get("zero_instrumentation"))


def op_name(profile: Profile, name: str) -> str:
    """An op name for the terminal: kernel names (zero instrumentation) cut to a width."""
    return abbreviate(name) if zero_instrumentation(profile) else display_name(name)


def measured(profile: Profile, which: str) -> Profile:
    """``profile`` with ``samples`` holding ``which`` measure (``kernel`` or ``events``)
    and no kernel time beside it, so that every statistic of :mod:`pytest_opprof.stats.summary`
    reads that measure, whatever it reads by default."""
    samples = profile.samples
    if which == "kernel" and profile.kernel_samples is not None:
        samples = profile.kernel_samples
    return dataclasses.replace(profile, samples=samples, kernel_samples=None,
                               kernel_counts=None, measure="events")


def gated(profile: Profile) -> Profile:
    """``profile`` with ``samples`` holding the measure the gate uses."""
    return measured(profile, "kernel" if has_kernel_time(profile) else "events")


def spans(profile: Profile) -> Profile:
    """``profile`` with ``samples`` holding the op's event span."""
    return measured(profile, "events")


def abbreviate(name: str, width: int = NAME_WIDTH) -> str:
    """``name`` shown on one line (:func:`display_name`), cut to ``width`` with ``...``."""
    shown = display_name(name)
    return shown if len(shown) <= width else shown[:width - 3] + "..."


@dataclass(frozen=True)
class KernelStats:
    """The activities of one name and kind (inside one op, or in the whole test) over
    the counted iterations."""

    name: str
    #: ``kernel``, ``memcpy`` or ``memset``.
    kind: str
    count: int
    total: float
    mean: float
    min: float
    max: float
    #: The OP_ID that launched them (innermost op); -1 outside any op; None for a row
    #: of the whole test.
    op_id: int | None = None


def kernel_stats(profile: Profile, by_op: bool = False) -> list[KernelStats]:
    """The counted iterations' activities grouped by name and kind (and, with
    ``by_op``, by the innermost op that launched them), longest total first (ties by
    name). Empty when no activities were recorded."""
    acts = profile.activities
    if acts is None or len(acts) == 0 or not acts.names:
        return []
    names = acts.names
    keep = acts.iteration >= profile.skip
    op_id = acts.op_id[keep].astype(np.int64)
    name_id = acts.name_id[keep].astype(np.int64)
    kind = acts.kind[keep].astype(np.int64)
    dur = (acts.end_ns[keep] - acts.start_ns[keep]).astype(float)
    if dur.size == 0:
        return []
    n_kinds = len(ACTIVITY_KINDS)
    key = name_id * n_kinds + kind
    if by_op:
        key = (op_id + 1) * (len(names) * n_kinds) + key
    order = np.argsort(key, kind="stable")
    key, dur = key[order], dur[order]
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    counts = np.diff(np.r_[first, key.size])
    totals = np.add.reduceat(dur, first)
    lows, highs = np.minimum.reduceat(dur, first), np.maximum.reduceat(dur, first)
    rows = []
    for j, start in enumerate(first.tolist()):
        k = int(key[start])
        op = k // (len(names) * n_kinds) - 1 if by_op else None
        rest = k % (len(names) * n_kinds)
        n, total = int(counts[j]), float(totals[j])
        rows.append(KernelStats(names[rest // n_kinds], ACTIVITY_KINDS[rest % n_kinds], n,
                                total, total / n, float(lows[j]), float(highs[j]), op))
    rows.sort(key=lambda s: (-s.total, s.name, s.kind))
    return rows


def kernels_by_op(profile: Profile) -> dict[int, list[KernelStats]]:
    """Each OP_ID's own activities (those it launched outside any op nested in it),
    longest total first; -1 holds those launched outside any op."""
    out: dict[int, list[KernelStats]] = {}
    for row in kernel_stats(profile, by_op=True):
        assert row.op_id is not None
        out.setdefault(row.op_id, []).append(row)
    return out


def counts_per_iteration(profile: Profile) -> list[float | None]:
    """Each OP_ID's median number of activities per counted iteration it ran in
    (nested ops included); None where unknown."""
    counts = profile.kernel_counts
    if counts is None:
        return [None] * len(profile.ops)
    counted = counts[profile.skip:]
    out: list[float | None] = []
    for k in range(len(profile.ops)):
        column = counted[:, k] if counted.size else np.zeros(0)
        column = column[~np.isnan(column)]
        out.append(float(np.median(column)) if column.size else None)
    return out
