"""``--opprof-json``: every profiled test's result, for machines.

Schema ``pytest-opprof/results/1``: pytest_opprof/schemas/results-1.schema.json (a JSON
Schema, validated in the tests); the fields are described in README.md.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import OpprofError
from ..model.profile import Profile
from ..model.runinfo import RunInfo
from ..model.verdict import OpStatus, OpVerdict, TestResult, Verdict
from ..stats.summary import op_stats
from ..store.files import read_bounded
from . import word
from .kernels import KernelStats, counts_per_iteration, gated, has_kernel_time, kernels_by_op, spans

if TYPE_CHECKING:
    from ..model.records import TestRecord

SCHEMA = "pytest-opprof/results/1"
#: A results file larger than this is refused unread (a profile of 1,000 ops over
#: 1,000 iterations is about 20 MB).
MAX_BYTES = 512 * 2**20


class Reported(NamedTuple):
    """One test as a results file holds it: its entry (verdicts and numbers per op)
    and its profile. What the HTML report draws, from a run or from a file."""

    entry: dict[str, Any]
    profile: Profile


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def test_entry(record: TestRecord) -> dict[str, Any]:
    """The record's entry in the results JSON, computed from its result."""
    profile = record.profile
    result = record.result or TestResult(profile.nodeid, Verdict.NOT_GATED, "", profile)
    compared = {}
    if result.comparison is not None:
        compared = {(v.name, v.occurrence): v for v in result.comparison.ops}
    # a test refused before any comparison (its run conditions) has no op judged
    default = "unjudged" if result.verdict == Verdict.UNJUDGED else "ok"
    budgets = {b.op_id: b for b in result.over_budget}
    kernel = has_kernel_time(profile)
    span_stats = op_stats(spans(profile))
    counts = counts_per_iteration(profile)
    by_op = kernels_by_op(profile) if profile.activities is not None else None
    ops = []
    for s, info in zip(op_stats(gated(profile)), profile.ops, strict=True):
        v = compared.pop((info.name, info.occurrence), None)
        verdict = word(v.verdict) if v is not None else default
        if info.op_id in budgets:
            verdict = "over_budget"
        ops.append({
            "op_id": info.op_id, "name": info.name, "occurrence": info.occurrence,
            "phase": info.phase, "verdict": verdict,
            "current": {"median_ns": _num(s.median), "mean_ns": _num(s.mean),
                        "min_ns": _num(s.min), "max_ns": _num(s.max), "count": s.count},
            "baseline": _baseline_part(v),
            "budget_ns": _num(budgets[info.op_id].budget_ns) if info.op_id in budgets else None,
            "kernel": {"median_ns": _num(s.median), "count": counts[info.op_id],
                       "span_median_ns": _num(span_stats[info.op_id].median)} if kernel else None,
            "kernels": None if by_op is None else [
                _kernel_row(k) for k in by_op.get(info.op_id, [])],
        })
    for v in compared.values():  # missing: in the baseline only
        ops.append({"op_id": v.op_id, "name": v.name, "occurrence": v.occurrence, "phase": None,
                    "verdict": word(v.verdict), "current": None, "baseline": _baseline_part(v),
                    "budget_ns": None, "kernel": None, "kernels": None})
    c = result.comparison
    return {
        "nodeid": result.nodeid, "verdict": word(result.verdict), "reason": result.reason,
        "iterations": profile.iterations, "skip": profile.skip, "counted": profile.counted,
        "drift": _num(c.drift) if c else None, "drift_source": c.drift_source if c else None,
        "baseline_runs": c.runs if c else 0, "baseline_file": result.baseline_path,
        "unknown_budgets": [b.name for b in result.over_budget if b.op_id < 0],
        "measure": "kernel" if kernel else "events",
        "zero_instrumentation": bool(profile.meta.get("zero_instrumentation")),
        "ops": ops,
        "outside_ops_kernels": None if by_op is None else [
            _kernel_row(k) for k in by_op.get(-1, [])],
    }


def _kernel_row(k: KernelStats) -> dict[str, Any]:
    """One name's activities inside one op, over the counted iterations (names whole)."""
    return {"name": k.name, "kind": k.kind, "count": k.count, "total_ns": k.total,
            "mean_ns": k.mean, "min_ns": k.min, "max_ns": k.max}


def _baseline_part(v: OpVerdict | None) -> dict[str, Any] | None:
    if v is None or v.verdict == OpStatus.NEW:
        return None
    return {"median_ns": _num(v.baseline_median), "count": v.n_baseline, "runs": v.runs,
            "ratio": _num(v.ratio), "corrected_ratio": _num(v.corrected_ratio),
            "margin": _num(v.margin), "z": _num(v.z), "p_value": _num(v.p_value),
            "spread": _num(v.spread), "detectable": _num(v.detectable)}


def render(records: list[TestRecord], run_info: RunInfo) -> str:
    """The results file of a run (schema results/1)."""
    data = {"schema": SCHEMA, **run_info.to_dict(),
            "tests": [{**test_entry(r), "profile": r.profile.to_dict(),
                       "result": None if r.result is None else r.result.to_dict()}
                      for r in records]}
    return json.dumps(data, sort_keys=True, indent=1) + "\n"


def load(path: Path) -> tuple[RunInfo, list[Reported]]:
    """A results file's run info and its tests; OpprofError naming the file when it
    cannot be read (JSON into validated data only, at most MAX_BYTES read)."""
    try:
        data = json.loads(read_bounded(Path(path), MAX_BYTES).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise OpprofError(f"{path}: cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise OpprofError(f"{path}: not a results file of schema {SCHEMA!r} "
                          "(pytest --opprof-json=PATH writes one)")
    tests, machine = data.get("tests"), data.get("machine")
    if not isinstance(tests, list) or not isinstance(machine, dict):
        raise OpprofError(f"{path}: malformed results (tests or machine missing)")
    reported = []
    for test in tests:
        if not isinstance(test, dict) or not isinstance(test.get("ops"), list):
            raise OpprofError(f"{path}: malformed results (a test without ops)")
        try:
            reported.append(_reported(test))
        except OpprofError as exc:
            raise OpprofError(f"{path}: {test.get('nodeid')!r}: {exc}") from None
    return RunInfo.from_dict(data), reported


def _reported(test: dict[str, Any]) -> Reported:
    """One test of a results file: its entry made again from the typed ``result`` the
    file carries (validated), or, in a file without one, the entry as the file has it."""
    from ..model.records import TestRecord

    profile = Profile.from_dict(test.get("profile"))
    result = test.get("result")
    if result is None:
        return Reported(test, profile)
    record = TestRecord(profile, TestResult.from_dict(result, profile))
    return Reported(test_entry(record), profile)
