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
    with warnings.catch_warnings():  # an op that ran in no counted iteration
        warnings.simplefilter("ignore", RuntimeWarning)
        medians = np.nanmedian(counts[profile.skip:], axis=0)
    return [None if math.isnan(m) else float(m) for m in medians]
