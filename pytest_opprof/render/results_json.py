"""``--opprof-json``: every profiled test's result, for machines.

Schema ``pytest-opprof/results/1`` (fields in README.md, "Results for machines").
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..baseline import atomic_write
from ..gate import NOT_GATED, TestResult
from ..stats import op_stats

if TYPE_CHECKING:
    from ..session import OpprofSession

SCHEMA = "pytest-opprof/results/1"


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def test_entry(result: TestResult) -> dict[str, Any]:
    profile = result.profile
    compared = {}
    if result.comparison is not None:
        compared = {(v.name, v.occurrence): v for v in result.comparison.ops}
    budgets = {b.op_id: b for b in result.over_budget}
    ops = []
    for s, info in zip(op_stats(profile), profile.ops, strict=True):
        v = compared.pop((info.name, info.occurrence), None)
        verdict = v.verdict if v is not None else "ok"
        if info.op_id in budgets:
            verdict = "over_budget"
        ops.append({
            "op_id": info.op_id, "name": info.name, "occurrence": info.occurrence,
            "phase": info.phase, "verdict": verdict,
            "current": {"median_ns": _num(s.median), "mean_ns": _num(s.mean),
                        "min_ns": _num(s.min), "max_ns": _num(s.max), "count": s.count},
            "baseline": _baseline_part(v),
            "budget_ns": _num(budgets[info.op_id].budget_ns) if info.op_id in budgets else None,
        })
    for v in compared.values():  # missing: in the baseline only
        ops.append({"op_id": v.op_id, "name": v.name, "occurrence": v.occurrence, "phase": None,
                    "verdict": v.verdict, "current": None, "baseline": _baseline_part(v),
                    "budget_ns": None})
    c = result.comparison
    return {
        "nodeid": result.nodeid, "verdict": result.verdict,
        "iterations": profile.iterations, "skip": profile.skip, "counted": profile.counted,
        "drift": _num(c.drift) if c else None, "drift_source": c.drift_source if c else None,
        "baseline_runs": c.runs if c else 0, "baseline_file": result.baseline_path,
        "unknown_budgets": [b.name for b in result.over_budget if b.op_id < 0],
        "ops": ops,
    }


def _baseline_part(v: Any) -> dict[str, Any] | None:
    if v is None or v.verdict == "new":
        return None
    return {"median_ns": _num(v.baseline_median), "count": v.n_baseline, "runs": v.runs,
            "ratio": _num(v.ratio), "corrected_ratio": _num(v.corrected_ratio),
            "margin": _num(v.margin), "z": _num(v.z), "p_value": _num(v.p_value)}


def build(session: OpprofSession) -> dict[str, Any]:
    tests = []
    for nodeid, profile in session.profiles.items():
        result = session.results.get(nodeid) or TestResult(nodeid, NOT_GATED, session.machine,
                                                           profile)
        tests.append(test_entry(result))
    return {
        "schema": SCHEMA,
        "machine": {"key": session.machine, "backend": session.backend,
                    "device": session.device, **session.versions},
        "tests": tests,
    }


def write(path: Path, session: OpprofSession) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(build(session), sort_keys=True, indent=1) + "\n")
