"""The visual report: one self-contained HTML file, charts drawn as inline SVG.

``--opprof-html=PATH`` from pytest, or ``opprof report RESULTS.json -o report.html``
from a results file. Per test: a table of each op's numbers (OP_ID, name, baseline and
current median, change, verdict), each op's median against its baseline's, the
per-iteration time of the ops that moved most (or took most, with no baseline), and
the phase split. Drawn with matplotlib (the optional ``report`` extra), which writes
SVG: no script, no network, nothing to load, so the file opens offline anywhere.

Every string from data (test ids and op names come from user code; a results file
may come from anywhere) is escaped: shown through :func:`display_name`, then HTML-escaped
in the page and ``$``-escaped in the charts (matplotlib reads ``$...$`` as math).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..model.reports import OpReport, TestReport
from ..model.runinfo import RunInfo
from ..model.words import Unit
from ..stats.kernels import kernel_stats
from ..stats.reports import report_of
from . import charts as draw
from . import display_name, duration, percent
from .kernels import has_kernel_time, measure_of

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
    """The ops the table lists: all of them, or TABLE_ROWS of them (the flagged ones,
    then the slowest), in graph order."""
    if len(test.ops) <= TABLE_ROWS:
        return list(test.ops)
    ranked = sorted(test.ops, key=lambda op: (op.status not in FLAGGED, -(op.median or 0)))
    return sorted(ranked[:TABLE_ROWS], key=lambda op: op.op_id)


def op_table(test: TestReport) -> str:
    """Each op's numbers, in graph order: what the charts show, as figures. With kernel
    time, the medians are kernel time and the op's event span and kernels per iteration
    follow; with counts, they are counts. At most TABLE_ROWS ops."""
    kernel = has_kernel_time(test.profile)
    measure = measure_of(test.profile)
    extra = "<th>event span median</th><th>kernels per iteration</th>" if kernel else ""
    what = (f" ({_h(measure.counts[0])})" if measure.unit is Unit.COUNT
            else f" ({_h(measure.figure)})" if kernel else "")
    rows = ["<table><thead><tr><th>OP_ID</th><th>op</th><th>baseline median</th>"
            f"<th>current median{what}</th>{extra}"
            "<th>change (drift-corrected)</th><th>verdict</th></tr></thead><tbody>"]
    listed = _table_ops(test)
    if len(listed) < len(test.ops):
        rows.insert(0, f"<p>{len(listed)} of {len(test.ops)} ops listed: those the gate "
                       "flagged, then the slowest (the results file, --opprof-json, holds "
                       "every op).</p>")
    for op in listed:
        base = op.baseline
        figures = [measure.amount(None if base is None else base.baseline_median),
                   measure.amount(op.judged_median)]
        if kernel:
            count = None if op.kernel is None else op.kernel.count
            figures += [duration(None if op.kernel is None else op.kernel.span_median),
                        "-" if count is None else f"{count:g}"]
        figures.append(percent(None if base is None else base.corrected_ratio))
        rows.append(f'<tr class="{_css_class(op.status)}"><td class="num">'
                    f"{_h(op.op_id)}</td><td><code>{_h(op.name)}</code></td>"
                    + "".join(f'<td class="num">{f}</td>' for f in figures)
                    + f"<td>{_h(op.status)}</td></tr>")
    rows.append("</tbody></table>")
    return "\n".join(rows)


def kernel_table(test: TestReport) -> str:
    """The test's GPU activities by name (kernels, memcpy, memset), longest total
    first: the draw.TOP_OPS longest."""
    rows = kernel_stats(test.profile)
    if not rows:
        return ""
    out = [f"<p>GPU activities by total time over the counted iterations "
           f"({len(rows)} name(s)"
           f"{'; the longest ' + str(draw.TOP_OPS) if len(rows) > draw.TOP_OPS else ''}"
           "):</p>",
           "<table><thead><tr><th>name</th><th>kind</th><th>count</th><th>total</th>"
           "<th>mean</th><th>min</th><th>max</th></tr></thead><tbody>"]
    for k in rows[:draw.TOP_OPS]:
        out.append(f"<tr><td><code>{_h(k.name)}</code></td><td>{_h(k.kind)}</td>"
                   f'<td class="num">{k.count}</td>'
                   + "".join(f'<td class="num">{duration(v)}</td>'
                             for v in (k.total, k.mean, k.min, k.max)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _figures(test: TestReport) -> str:
    return "op figures" if test.profile.unit is Unit.COUNT else "op times"


def _charted(tests: Sequence[TestReport]) -> set[int]:
    """The indices of the tests whose charts are drawn: CHARTED_TESTS of them, failed
    tests first, then those with an op that moved, then the rest, each in page order."""
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
    """The report of a run."""
    return render_tests([report_of(r) for r in records], run_info)


def render_tests(tests: Sequence[TestReport], run_info: RunInfo, charts: bool = True) -> str:
    """The report of these tests (a run's, or a results file's: ``opprof report``);
    without ``charts``, the tables only (no matplotlib needed)."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>opprof report</title>", f"<style>{STYLE}</style></head><body>",
             "<h1>opprof report</h1>",
             f"<p>Machine <code>{_h(run_info.machine)}</code>: {_h(run_info.device)}, "
             f"measure {_h(run_info.measure)}. {len(tests)} profiled test(s)"
             + (f"; the charts of {CHARTED_TESTS} of them (failed ones first, then those "
                "with ops that moved)" if charts and len(tests) > CHARTED_TESTS else "")
             + ".</p>"]
    drawn = _charted(tests) if charts else set()
    for k, test in enumerate(tests):
        parts += _section(test, True if k in drawn else None if charts else False)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
