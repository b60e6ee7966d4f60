"""The figures of the reports, computed once: a record's :class:`TestReport`, and the
medians the HTML charts draw. Pure functions of typed data (numpy only).

Every surface renders from what these return; none computes a statistic itself.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from ..model.profile import Profile
from ..model.records import TestRecord
from ..model.reports import OVER_BUDGET, Figures, KernelFigures, OpReport, TestReport
from ..model.verdict import OpStatus, TestResult, Verdict
from ..model.words import word
from .kernels import counts_per_iteration, kernels_by_op
from .summary import OpStats, op_stats

__all__ = ["phase_medians", "report_of", "segment_levels"]


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _figures(s: OpStats) -> Figures:
    return Figures(median=_num(s.median), mean=_num(s.mean), min=_num(s.min),
                   max=_num(s.max), count=s.count)


def report_of(record: TestRecord) -> TestReport:
    """The record as every report shows it: each op of its profile in graph order with
    its figures (the gated measure), its verdict, its budget and its kernels, then the
    ops of the baseline only."""
    profile = record.profile
    result = record.result or TestResult(profile.nodeid, Verdict.NOT_GATED, "", profile)
    compared = {}
    if result.comparison is not None:
        compared = {(v.name, v.occurrence): v for v in result.comparison.ops}
    # a test refused before any comparison (its run conditions) has no op judged
    default = OpStatus.UNJUDGED.value if result.verdict == Verdict.UNJUDGED else OpStatus.OK.value
    budgets = {b.op_id: b for b in result.over_budget}
    kernel = profile.kernel_samples is not None
    spans = op_stats(profile, profile.samples) if kernel else []
    counts = counts_per_iteration(profile)
    by_op = kernels_by_op(profile) if profile.activities is not None else None
    ops = []
    for s, info in zip(op_stats(profile), profile.ops, strict=True):
        v = compared.pop((info.name, info.occurrence), None)
        status = word(v.verdict) if v is not None else default
        if info.op_id in budgets:
            status = OVER_BUDGET
        ops.append(OpReport(
            op_id=info.op_id, name=info.name, occurrence=info.occurrence, phase=info.phase,
            status=status, current=_figures(s), verdict=v,
            budget_ns=_num(budgets[info.op_id].budget_ns) if info.op_id in budgets else None,
            kernel=KernelFigures(counts[info.op_id], _num(spans[info.op_id].median))
            if kernel else None,
            kernels=None if by_op is None else tuple(by_op.get(info.op_id, []))))
    for v in compared.values():  # missing: in the baseline only
        ops.append(OpReport(op_id=v.op_id, name=v.name, occurrence=v.occurrence, phase=None,
                            status=word(v.verdict), current=None, verdict=v))
    return TestReport(record=record, result=result, ops=tuple(ops),
                      measure=profile.measure,
                      outside_ops_kernels=None if by_op is None else tuple(by_op.get(-1, [])))


def phase_medians(profile: Profile) -> list[tuple[str, float]]:
    """Each phase's median time over the counted iterations (0 for a phase that ran in
    none), and last ``("outside phases", ...)``: the median iteration's wall time less
    those (never below 0). Empty with no phase or no counted iteration."""
    counted = slice(profile.skip, None)
    if not profile.phases or profile.counted == 0:
        return []
    medians = [float(np.nanmedian(profile.phase_samples[counted, j]))
               if np.isfinite(profile.phase_samples[counted, j]).any() else 0.0
               for j in range(len(profile.phases))]
    rest = max(float(np.median(profile.wall[counted])) - sum(medians), 0.0)
    return [*zip(profile.phases, medians, strict=True), ("outside phases", rest)]


def segment_levels(values: Sequence[float], edges: Sequence[int]) -> list[float]:
    """The median of ``values`` between each two consecutive ``edges`` (indices)."""
    data = np.asarray(values, dtype=float)
    return [float(np.median(data[start:end])) for start, end in itertools.pairwise(edges)]
