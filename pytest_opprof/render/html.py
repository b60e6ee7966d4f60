"""The visual report: one self-contained HTML file, charts drawn as inline SVG.

``--opprof-html=PATH`` from pytest, or ``opprof report RESULTS.json -o report.html``
from a results file. Per test: a table of each op's numbers and the charts of
:mod:`.charts`; no script, no network, nothing to load, so the file opens offline
anywhere. Every string from data (names from user code; a results file may come from
anywhere) is shown through :func:`display_name`, then HTML-escaped.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..model.reports import OpReport, TestReport
from ..model.runinfo import RunInfo
from ..model.words import Unit
from ..stats.kernels import kernel_stats
from ..stats.reports import report_of
from . import charts as draw
from . import display_name, duration, percent
from .kernels import measure_of

if TYPE_CHECKING:
    from ..model.records import TestRecord


STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-top: 1px solid #ddd;
padding-top: 1em; } .verdict { font-weight: bold; } .failed { color: #b00020; }
.passed, .baseline-updated { color: #1b5e20; } .chart { margin: 0.5em 0; }
table { border-collapse: collapse; } td, th { padding: 2px 8px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.regressed, tr.over_budget { color: #b00020; } tr.improved { color: #1b5e20; }
"""
#: Verdicts with a style of their own; any other value (a results file may hold
#: anything) gets no class.
STYLED = {"failed", "passed", "baseline updated", "regressed", "improved", "over_budget"}


def _h(value: Any) -> str:
    """Anything from data, safe as HTML text or as a quoted attribute value."""
    return html.escape(display_name(str(value)))


def _css_class(verdict: Any) -> str:
    return str(verdict).replace(" ", "-") if verdict in STYLED else ""


def num(value: object) -> str:
    return f'<td class="num">{value}</td>'


def table(head: Iterable[str], rows: Iterable[str]) -> str:
    """A table of these column heads (HTML already) and rows (``<tr>`` lines)."""
    return "\n".join(["<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head)
                      + "</tr></thead><tbody>", *rows, "</tbody></table>"])


def page(title: str, body: Iterable[str]) -> str:
    return "\n".join(["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                      f"<title>{title}</title>", f"<style>{STYLE}</style></head><body>",
                      f"<h1>{title}</h1>", *body, "</body></html>"]) + "\n"


#: The ops a test's table lists at most: those the gate flagged, then the slowest.
TABLE_ROWS = 200
#: The tests whose charts a page draws at most (three charts each): failed tests first,
#: then those with ops that moved, then the rest, in the page's order; the others get
#: their tables. A chart is tens of kB and a fraction of a second: 1,000 tests drew
#: 3,000 of them.
CHARTED_TESTS = 10
#: Op verdicts a shortened table keeps before the slowest.
FLAGGED = ("regressed", "over_budget", "improved", "new", "missing")


def _table_ops(test: TestReport) -> list[OpReport]:
    """All the ops, or TABLE_ROWS of them (the flagged, then the slowest), in graph order."""
    if len(test.ops) <= TABLE_ROWS:
        return list(test.ops)
    ranked = sorted(test.ops, key=lambda op: (op.status not in FLAGGED, -(op.median or 0)))
    return sorted(ranked[:TABLE_ROWS], key=lambda op: op.op_id)


def op_table(test: TestReport) -> str:
    """Each op's numbers in graph order: what the charts show, as figures. With kernel
    time, the op's event span and kernels per iteration follow its medians."""
    kernel = test.profile.kernel_samples is not None
    measure = measure_of(test.profile)
    what = (f" ({_h(measure.counts[0])})" if measure.unit is Unit.COUNT
            else f" ({_h(measure.figure)})" if kernel else "")
    head = ["OP_ID", "op", "baseline median", f"current median{what}",
            *(["event span median", "kernels per iteration"] if kernel else []),
            "change (drift-corrected)" if measure.gate.drift else "change", "verdict"]
    rows = []
    for op in (listed := _table_ops(test)):
        base = op.baseline
        figures = [measure.amount(None if base is None else base.baseline_median),
                   measure.amount(op.judged_median)]
        if kernel:
            count = None if op.kernel is None else op.kernel.count
            figures += [duration(None if op.kernel is None else op.kernel.span_median),
                        "-" if count is None else f"{count:g}"]
        figures.append(percent(None if base is None else base.corrected_ratio))
        rows.append(f'<tr class="{_css_class(op.status)}">{num(_h(op.op_id))}'
                    f"<td><code>{_h(op.name)}</code></td>{''.join(map(num, figures))}"
                    f"<td>{_h(op.status)}</td></tr>")
    shortened = (f"<p>{len(listed)} of {len(test.ops)} ops listed: those the gate flagged, "
                 "then the slowest (the results file, --opprof-json, holds every op).</p>\n"
                 if len(listed) < len(test.ops) else "")
    return shortened + table(head, rows)


def kernel_table(test: TestReport) -> str:
    """The test's draw.TOP_OPS longest GPU activities by name (kernels, memcpy, memset)."""
    rows = kernel_stats(test.profile)
    if not rows:
        return ""
    longest = f"; the longest {draw.TOP_OPS}" if len(rows) > draw.TOP_OPS else ""
    return (f"<p>GPU activities by total time over the counted iterations ({len(rows)} "
            f"name(s){longest}):</p>\n"
            + table(["name", "kind", "count", "total", "mean", "min", "max"],
                    (f"<tr><td><code>{_h(k.name)}</code></td><td>{_h(k.kind)}</td>"
                     + num(k.count) + "".join(num(duration(v)) for v in
                                              (k.total, k.mean, k.min, k.max)) + "</tr>"
                     for k in rows[:draw.TOP_OPS])))


def _figures(test: TestReport) -> str:
    return "op figures" if test.profile.unit is Unit.COUNT else "op times"


def _charted(tests: Sequence[TestReport]) -> set[int]:
    """The indices of the CHARTED_TESTS tests whose charts are drawn."""
    def rank(k: int) -> tuple[int, int]:
        test = tests[k]
        moved = any(op.status in FLAGGED for op in test.ops)
        return (0 if test.verdict == "failed" else 1 if moved else 2, k)

    return set(sorted(range(len(tests)), key=rank)[:CHARTED_TESTS])


def _section(test: TestReport, charts: bool | None) -> list[str]:
    """A test's section; ``charts`` None: charts were asked for, but the page's budget
    went to other tests (said so)."""
    verdict, reason, drift = test.verdict, test.result.reason, test.drift
    parts = [f'<section class="test"><h2>{_h(test.nodeid)}</h2>',
             f'<p>Verdict: <span class="verdict {_css_class(verdict)}">{_h(verdict)}</span>'
             + (f" ({_h(reason)})" if reason else "") + "; "
             f"{test.profile.counted} counted iterations; "
             f"{test.baseline_runs} baseline runs"
             + (f"; machine drift {percent(drift)}" if drift else "")
             + f"; {_figures(test)} are {_h(measure_of(test.profile).figure)}.</p>",
             op_table(test), kernel_table(test)]
    if charts:
        parts += [f'<div class="chart">{chart}</div>'
                  for chart in (draw.ops_chart(test), draw.moved_chart(test),
                                draw.phase_chart(test)) if chart]
    elif charts is None:
        parts.append(f"<p>Charts not drawn: a page draws those of {CHARTED_TESTS} tests "
                     "(failed ones first, then those with ops that moved).</p>")
    parts.append("</section>")
    return parts


def render(records: list[TestRecord], run_info: RunInfo) -> str:
    return render_tests([report_of(r) for r in records], run_info)


def render_tests(tests: Sequence[TestReport], run_info: RunInfo, charts: bool = True) -> str:
    """The report of a run's tests, or a results file's (``opprof report``); without
    ``charts``, the tables only (no matplotlib needed)."""
    parts = [f"<p>Machine <code>{_h(run_info.machine)}</code>: {_h(run_info.device)}, "
             f"measure {_h(run_info.measure)}. {len(tests)} profiled test(s)"
             + (f"; the charts of {CHARTED_TESTS} of them (failed ones first, then those "
                "with ops that moved)" if charts and len(tests) > CHARTED_TESTS else "")
             + ".</p>"]
    drawn = _charted(tests) if charts else set()
    for k, test in enumerate(tests):
        parts += _section(test, True if k in drawn else None if charts else False)
    return page("opprof report", parts)
