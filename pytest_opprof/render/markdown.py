"""``--opprof-markdown``: a summary for ``$GITHUB_STEP_SUMMARY`` or a pull request.

Regressions first, then improvements, then new and missing ops, each with baseline,
current and ratio; then budget overruns and one line per test. Made from the records'
results entries only (the same data as ``--opprof-json``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import atomic_write
from .gate import duration
from .results_json import test_entry

if TYPE_CHECKING:
    from ..records import TestRecord
    from ..session import OpprofSession

SECTIONS = (("regressed", "Regressions"), ("improved", "Improvements"), ("new", "New ops"),
            ("missing", "Missing ops"), ("over_budget", "Over budget"))


def _ns(value: float | None) -> str:
    return "-" if value is None else duration(value)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{(value - 1) * 100:+.1f}%"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(test: dict[str, Any], op: dict[str, Any]) -> str:
    base, cur = op.get("baseline") or {}, op.get("current") or {}
    cells = [f"`{_cell(test['nodeid'])}`", f"OP_ID{op['op_id']}. {_cell(op['name'])}",
             _ns(base.get("median_ns")), _ns(cur.get("median_ns")),
             _ratio(base.get("corrected_ratio")), _ratio(base.get("margin"))]
    if op["verdict"] == "over_budget":
        cells[2] = f"budget {_ns(op.get('budget_ns'))}"
    return "| " + " | ".join(cells) + " |"


def render(records: list[TestRecord], machine: str) -> str:
    tests = [test_entry(r) for r in records]
    counts = {label: sum(op["verdict"] == label for t in tests for op in t["ops"])
              for label, _ in SECTIONS}
    failed = [t["nodeid"] for t in tests if t["verdict"] == "failed"]
    lines = ["## opprof: per-op performance", "",
             f"Machine `{_cell(machine)}`: {len(tests)} profiled test(s), "
             f"{len(failed)} failed by the gate; " + ", ".join(
                 f"{n} {label.replace('_', ' ')}" for label, n in counts.items()) + "."]
    for label, title in SECTIONS:
        rows = [_row(t, op) for t in tests for op in t["ops"] if op["verdict"] == label]
        if not rows:
            continue
        lines += ["", f"### {title}", "",
                  "| test | op | baseline | current | ratio (drift-corrected) | margin |",
                  "|---|---|---|---|---|---|", *rows]
    lines += ["", "### Tests", "", "| test | verdict | drift | baseline runs |",
              "|---|---|---|---|"]
    for t in tests:
        lines.append(f"| `{_cell(t['nodeid'])}` | {t['verdict']} | {_ratio(t['drift'])} "
                     f"| {t['baseline_runs']} |")
    return "\n".join(lines) + "\n"


def write(path: Path, records: list[TestRecord], session: OpprofSession) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, render(records, session.machine))
