"""``--opprof-json``: every profiled test's result, for machines.

Schema ``pytest-opprof/results/1``: pytest_opprof/schemas/results-1.schema.json (a JSON
Schema, validated in the tests); the fields are described in README.md.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import OpprofError
from ..files import atomic_write
from ..stats import op_stats
from ..verdict import OpStatus, TestResult, Verdict

if TYPE_CHECKING:
    from ..records import TestRecord
    from ..session import OpprofSession

SCHEMA = "pytest-opprof/results/1"


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def test_entry(record: TestRecord) -> dict[str, Any]:
    """The record's entry in the results file (a test the gate did not look at: not gated)."""
    profile = record.profile
    result = record.result or TestResult(profile.nodeid, Verdict.NOT_GATED, "", profile)
    compared = {}
    if result.comparison is not None:
        compared = {(v.name, v.occurrence): v for v in result.comparison.ops}
    budgets = {b.op_id: b for b in result.over_budget}
    ops = []
    for s, info in zip(op_stats(profile), profile.ops, strict=True):
        v = compared.pop((info.name, info.occurrence), None)
        verdict: str = v.verdict if v is not None else OpStatus.OK
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
    if v is None or v.verdict == OpStatus.NEW:
        return None
    return {"median_ns": _num(v.baseline_median), "count": v.n_baseline, "runs": v.runs,
            "ratio": _num(v.ratio), "corrected_ratio": _num(v.corrected_ratio),
            "margin": _num(v.margin), "z": _num(v.z), "p_value": _num(v.p_value)}


def build(records: list[TestRecord], session: OpprofSession) -> dict[str, Any]:
    run = session.run_meta
    return {"schema": SCHEMA, "machine": session.machine_info,
            "run": {"date": run["date"], "commit": run["commit"]},
            "tests": [{**test_entry(r), "profile": r.profile.to_dict(),
                       "result": None if r.result is None else r.result.to_dict()}
                      for r in records]}


def load(path: Path) -> tuple[dict[str, Any], list[TestRecord]]:
    """A results file's machine and its tests as records; OpprofError naming the file
    when it cannot be read (JSON into validated data only)."""
    from ..records import TestRecord

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise OpprofError(f"{path}: cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise OpprofError(f"{path}: not a results file of schema {SCHEMA!r} "
                          "(pytest --opprof-json=PATH writes one)")
    tests, machine = data.get("tests"), data.get("machine")
    if not isinstance(tests, list) or not isinstance(machine, dict):
        raise OpprofError(f"{path}: malformed results (tests or machine missing)")
    records = []
    for test in tests:
        if not isinstance(test, dict) or not isinstance(test.get("ops"), list):
            raise OpprofError(f"{path}: malformed results (a test without ops)")
        try:
            records.append(TestRecord.from_dict({"profile": test.get("profile"),
                                                 "result": test.get("result")}))
        except OpprofError as exc:
            raise OpprofError(f"{path}: {test.get('nodeid')!r}: {exc}") from None
    return machine, records


def write(path: Path, records: list[TestRecord], session: OpprofSession) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(build(records, session), sort_keys=True, indent=1) + "\n")
