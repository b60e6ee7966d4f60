"""``--opprof-markdown``: a summary for ``$GITHUB_STEP_SUMMARY`` or a pull request.

Regressions first, then improvements, then new and missing ops, each with baseline,
current and ratio; then budget overruns and one line per test. Made from the records'
results entries (the same data as ``--opprof-json``). Every string from data (test ids,
op names, the machine key) is a code span, so no name renders as a link, an image or
HTML, and none breaks the table.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..model.runinfo import RunInfo
from . import display_name, duration, percent
from .kernels import measure_word
from .results_json import test_entry

if TYPE_CHECKING:
    from ..model.records import TestRecord

SECTIONS = (("regressed", "Regressions"), ("improved", "Improvements"), ("new", "New ops"),
            ("missing", "Missing ops"), ("over_budget", "Over budget"))


def code(text: str) -> str:
    """``text`` as an inline code span inside a table cell: fenced by more backticks
    than it holds in a row (CommonMark), its pipes escaped (GitHub tables)."""
    text = display_name(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


def _row(test: dict[str, Any], op: dict[str, Any]) -> str:
    base, cur = op.get("baseline") or {}, op.get("current") or {}
    cells = [code(test["nodeid"]), f"OP_ID{op['op_id']}. {code(op['name'])}",
             duration(base.get("median_ns")), duration(cur.get("median_ns")),
             percent(base.get("corrected_ratio")), percent(base.get("margin"))]
    if op["verdict"] == "over_budget":
        cells[2] = f"budget {duration(op.get('budget_ns'))}"
    return "| " + " | ".join(cells) + " |"


def _measures(tests: list[dict[str, Any]]) -> str:
    """Which measure the op times are: ``op times are kernel time``, or how many tests
    used each when they differ."""
    counts: dict[str, int] = {}
    for t in tests:
        counts[t.get("measure", "events")] = counts.get(t.get("measure", "events"), 0) + 1
    if len(counts) <= 1:
        return f"op times are {measure_word(next(iter(counts), 'events'))}"
    return "op times are " + " and ".join(
        f"{measure_word(m)} in {n} test(s)" for m, n in sorted(counts.items()))


def render(records: list[TestRecord], run_info: RunInfo) -> str:
    tests = [test_entry(r) for r in records]
    counts = {label: sum(op["verdict"] == label for t in tests for op in t["ops"])
              for label, _ in SECTIONS}
    failed = [t["nodeid"] for t in tests if t["verdict"] == "failed"]
    lines = ["## opprof: per-op performance", "",
             f"Machine {code(run_info.machine)}: {len(tests)} profiled test(s), "
             f"{_measures(tests)}, "
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
        verdict = t["verdict"] + (f": {code(str(t['reason']))}" if t.get("reason") else "")
        lines.append(f"| {code(t['nodeid'])} | {verdict} | {percent(t['drift'])} "
                     f"| {t['baseline_runs']} |")
    return "\n".join(lines) + "\n"
