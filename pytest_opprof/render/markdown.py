"""``--opprof-markdown``: a summary for ``$GITHUB_STEP_SUMMARY`` or a pull request.

Regressions first, then improvements, then new and missing ops, each with baseline,
current and ratio; then budget overruns and one line per test. Made from the records'
:class:`~pytest_opprof.model.reports.TestReport` (the same figures as ``--opprof-json``).
Every string from data (test ids, op names, the machine key) is a code span, so no name
renders as a link, an image or HTML, and none breaks the table. Every block (heading,
paragraph, quote, table, list) stands between blank lines: CommonMark continues a quote
or a paragraph into the next line (a table right after a ``>`` line would render as part
of the quote, on GitHub as everywhere); ``tests/test_markdown_gfm.py`` renders every
Markdown the package writes through cmark-gfm, GitHub's renderer.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..model.reports import OpReport, TestReport
from ..model.runinfo import RunInfo
from ..model.words import Unit
from ..stats.reports import report_of
from . import display_name, duration, percent
from .kernels import measure_of

if TYPE_CHECKING:
    from ..model.records import TestRecord

SECTIONS = (("regressed", "Regressions"), ("improved", "Improvements"), ("new", "New ops"),
            ("missing", "Missing ops"), ("over_budget", "Over budget"))


def span(text: str) -> str:
    """``text`` as an inline code span outside a table (a heading, a paragraph, a list
    item): fenced by more backticks than it holds in a row (CommonMark)."""
    text = display_name(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code(text: str) -> str:
    """``text`` as an inline code span inside a table cell: :func:`span` with its pipes
    escaped (GitHub's tables split a row at every unescaped pipe, code spans included;
    the escape is taken out again inside the span, so ``a|b`` shows as ``a|b``)."""
    return span(text.replace("|", "\\|"))


def row(cells: Sequence[str]) -> str:
    """A table row of cells made safe already (:func:`code`)."""
    return "| " + " | ".join(cells) + " |"


def head(*columns: str) -> list[str]:
    """A table's first two lines."""
    return [row(columns), "|---" * len(columns) + "|"]


def quote(sentences: Sequence[str]) -> list[str]:
    """Sentences as one block quote, each its own paragraph in it, and a blank line
    after it (without that line, the block that follows would join the quote)."""
    lines: list[str] = []
    for sentence in sentences:
        lines += [">"] if lines else []
        lines.append(f"> {sentence}")
    return [*lines, ""] if lines else []


def _row(test: TestReport, op: OpReport) -> str:
    base, amount = op.baseline, measure_of(test.profile).amount
    cells = [code(test.nodeid), f"OP_ID{op.op_id}. {code(op.name)}",
             amount(None if base is None else base.baseline_median),
             amount(op.judged_median),
             percent(None if base is None else base.corrected_ratio),
             percent(None if base is None else base.margin)]
    if op.status == "over_budget":
        cells[2] = f"budget {duration(op.budget_ns)}"
    return row(cells)


def _measures(tests: list[TestReport]) -> str:
    """Which measure the op figures are: ``op times are kernel time``, or how many tests
    used each when they differ (``op figures are`` when some are counts)."""
    figures = Counter(measure_of(t.profile).figure for t in tests)
    are = ("op figures are" if any(t.profile.unit is Unit.COUNT for t in tests)
           else "op times are")
    if len(figures) <= 1:
        return f"{are} {next(iter(figures), 'not taken')}"
    return f"{are} " + " and ".join(f"{m} in {n} test(s)" for m, n in sorted(figures.items()))


def render(records: list[TestRecord], run_info: RunInfo) -> str:
    return render_reports([report_of(r) for r in records], run_info)


def render_reports(tests: list[TestReport], run_info: RunInfo) -> str:
    counts = {label: sum(len(t.having(label)) for t in tests) for label, _ in SECTIONS}
    failed = [t.nodeid for t in tests if t.failed]
    lines = ["## opprof: per-op performance", "",
             f"Machine {span(run_info.machine)}: {len(tests)} profiled test(s), "
             f"{_measures(tests)}, "
             f"{len(failed)} failed by the gate; " + ", ".join(
                 f"{n} {label.replace('_', ' ')}" for label, n in counts.items()) + "."]
    from .verdicts import blind_tests, blind_words

    found = blind_tests(t.result for t in tests)
    if found:
        judged = sum(t.result.comparison is not None for t in tests)
        lines += ["", f"**Blind:** {blind_words(found, judged, code)}."]
    # a percentage, drift-corrected where every test's measure corrects it (counts not)
    change = ("change (drift-corrected)" if all(measure_of(t.profile).gate.drift for t in tests)
              else "change")
    for label, title in SECTIONS:
        rows = [_row(t, op) for t in tests for op in t.having(label)]
        if not rows:
            continue
        lines += ["", f"### {title}", "", *head("test", "op", "baseline", "current", change,
                                                "margin"), *rows]
    lines += ["", "### Tests", "", *head("test", "verdict", "drift", "baseline runs")]
    for t in tests:
        reason = t.result.reason
        verdict = t.verdict + (f": {code(str(reason))}" if reason else "")
        lines.append(row([code(t.nodeid), verdict, percent(t.drift), str(t.baseline_runs)]))
    return "\n".join(lines) + "\n"
