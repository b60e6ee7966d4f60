"""The GPU activities (kernels, memcpy, memset) of a Profile grouped by name, per op or
for the whole test, over its counted iterations only. Pure functions.

Every surface (text, results JSON, HTML, Markdown, the failure text) takes its kernel
figures from here, so each says the same.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..model.profile import ACTIVITY_KINDS, Profile
from ..model.reports import KernelStats


def kernel_stats(profile: Profile, by_op: bool = False) -> list[KernelStats]:
    """The counted iterations' activities grouped by name and kind (and, with
    ``by_op``, by the innermost op that launched them), longest total first (ties by
    name). Empty when no activities were recorded."""
    acts = profile.activities
    if acts is None or len(acts) == 0 or not acts.names:
        return []
    keep = acts.iteration >= profile.skip
    dur = (acts.end_ns[keep] - acts.start_ns[keep]).astype(float)
    if dur.size == 0:
        return []
    op_id = acts.op_id[keep] if by_op else np.zeros(dur.size)
    keys = np.column_stack([op_id, acts.name_id[keep], acts.kind[keep]]).astype(np.int64)
    groups, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    dur = dur[np.argsort(inverse.ravel(), kind="stable")]
    first = np.r_[0, np.cumsum(counts)[:-1]]
    totals = np.add.reduceat(dur, first).tolist()
    lows, highs = np.minimum.reduceat(dur, first).tolist(), np.maximum.reduceat(dur, first).tolist()
    rows = [KernelStats(acts.names[name], ACTIVITY_KINDS[kind], n, total, total / n, low, high,
                        op if by_op else None)
            for (op, name, kind), n, total, low, high
            in zip(groups.tolist(), counts.tolist(), totals, lows, highs, strict=True)]
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
    with warnings.catch_warnings():  # an op that ran in no counted iteration
        warnings.simplefilter("ignore", RuntimeWarning)
        medians = np.nanmedian(counts[profile.skip:], axis=0)
    return [None if math.isnan(m) else float(m) for m in medians]
