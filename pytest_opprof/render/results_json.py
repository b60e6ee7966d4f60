"""``--opprof-json``: every profiled test's result, for machines.

Schema ``pytest-opprof/results/2``: pytest_opprof/schemas/results-2.schema.json (a JSON
Schema, validated in the tests); the fields are described in docs/reference.md ("Results
for machines"). Each test's entry is its :class:`~pytest_opprof.model.reports.TestReport`
written out, the same figures the Markdown and HTML reports show;
:func:`pytest_opprof.store.results.load` reads a file back. Each test's ``unit`` says
what its figures count: ``ns``, or ``count`` (its ``*_ns`` fields, and its profile's, then
hold counts, such as the instructions of ``measure`` instructions).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from ..model.reports import RESULTS_SCHEMA, Figures, KernelStats, OpReport, TestReport
from ..model.runinfo import RunInfo
from ..stats.reports import report_of

if TYPE_CHECKING:
    from ..judge.strict import Unjudged
    from ..model.records import TestRecord

SCHEMA = RESULTS_SCHEMA


def finite(x: float | None) -> float | None:
    """A figure for JSON, which has no NaN or infinity."""
    return None if x is None or not math.isfinite(x) else float(x)


def entry(report: TestReport) -> dict[str, Any]:
    """The test's entry in the results JSON (without its profile and result)."""
    result, c = report.result, report.result.comparison
    return {
        "nodeid": result.nodeid, "verdict": report.verdict, "reason": result.reason,
        "iterations": report.profile.iterations, "skip": report.profile.skip,
        "counted": report.profile.counted,
        "drift": finite(c.drift) if c else None, "drift_source": c.drift_source if c else None,
        "current_runs": c.current_runs if c else None,
        "baseline_runs": report.baseline_runs, "baseline_file": result.baseline_path,
        "unknown_budgets": [b.name for b in result.over_budget if b.op_id < 0],
        "measure": report.measure, "unit": report.profile.unit.value,
        "zero_instrumentation": report.zero_instrumentation,
        "ops": [_op(op) for op in report.ops],
        "outside_ops_kernels": _kernels(report.outside_ops_kernels),
    }


def _current(f: Figures | None) -> dict[str, Any] | None:
    if f is None:
        return None
    return {"median_ns": f.median, "mean_ns": f.mean, "min_ns": f.min, "max_ns": f.max,
            "count": f.count}


def _op(op: OpReport) -> dict[str, Any]:
    v = op.baseline
    return {
        "op_id": op.op_id, "name": op.name, "occurrence": op.occurrence, "phase": op.phase,
        "verdict": op.status, "current": _current(op.current),
        "baseline": None if v is None else {
            "median_ns": finite(v.baseline_median), "count": v.n_baseline, "runs": v.runs,
            "current_median_ns": finite(v.current_median), "current_count": v.n_current,
            "ratio": finite(v.ratio), "corrected_ratio": finite(v.corrected_ratio),
            "margin": finite(v.margin), "z": finite(v.z), "p_value": finite(v.p_value),
            "rank_p_value": finite(v.rank_p_value),
            "spread": finite(v.spread), "detectable": finite(v.detectable)},
        "budget_ns": op.budget_ns,
        "kernel": None if op.kernel is None else {
            "median_ns": op.median, "count": op.kernel.count,
            "span_median_ns": op.kernel.span_median},
        "kernels": _kernels(op.kernels),
    }


def _kernels(rows: tuple[KernelStats, ...] | None) -> list[dict[str, Any]] | None:
    """Each name's activities inside one op, over the counted iterations (names whole)."""
    if rows is None:
        return None
    return [{"name": k.name, "kind": k.kind, "count": k.count, "total_ns": k.total,
             "mean_ns": k.mean, "min_ns": k.min, "max_ns": k.max} for k in rows]


def render_reports(reports: list[TestReport], run_info: RunInfo, *,
                   strict: list[Unjudged] | None = None,
                   strict_effect: float | None = None) -> str:
    """The results file of these tests (schema results/2); under strict mode, its
    ``strict`` object: whether it failed the session, and for which tests, why."""
    data: dict[str, Any] = {"schema": SCHEMA, **run_info.to_dict(),
                            "tests": [{**entry(r), "profile": r.profile.to_dict(),
                                       "result": None if r.record.result is None
                                       else r.record.result.to_dict()}
                                      for r in reports]}
    if strict is not None:
        data["strict"] = {"failed": bool(strict), "effect": strict_effect,
                          "unjudged": [u.to_dict() for u in strict]}
    return json.dumps(data, sort_keys=True, indent=1) + "\n"


def render(records: list[TestRecord], run_info: RunInfo) -> str:
    """The results file of a run (schema results/2)."""
    return render_reports([report_of(r) for r in records], run_info)
