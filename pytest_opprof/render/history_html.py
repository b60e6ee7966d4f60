"""``opprof history --html``: each op's median across the stored runs, steps marked.

One self-contained HTML file, drawn as the HTML report is (:mod:`.html`). Per test: its
summary, the steps ops shared, a table of every op with its status (the words
:mod:`.history` decides for every output), then one chart per op
(:func:`.charts.history_chart`), as many as :func:`_budget` gives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..judge.changepoints import measure_of
from . import charts
from .history import op_status, shared_text, summary, trends_header
from .html import _h, num, page, table

if TYPE_CHECKING:
    from ..model.history import History, OpHistory


def op_table(test: History) -> str:
    """Every op of the test, those with steps first: its first and last figure and its
    status."""
    amount = measure_of(test.runs[-1]).amount
    return table(["OP_ID", "op", "first", "last", "status"], (
        f'<tr class="{_row_class(op)}">{num(op.op_id)}<td><code>{_h(op.name)}</code></td>'
        f"{num(amount(op.corrected_ns[0]))}{num(amount(op.corrected_ns[-1]))}"
        f"<td>{_h(op_status(test, op))}</td></tr>" for op in test.ops))


def _row_class(op: OpHistory) -> str:
    if not op.steps:
        return ""
    return "regressed" if op.steps[-1].after > op.steps[0].before else "improved"


#: The charts a page draws at most, and those of one test: each op's chart is tens of
#: kB and a fraction of a second to draw (1,000 tests of 25 drawn ops each did not
#: finish in 600 s). The ops with steps are drawn first, over every test, then each
#: test's slowest, in page order; the op table lists every op whatever is drawn.
CHARTS_PER_PAGE = 40
CHARTS_PER_TEST = 6


def _ranked(test: History) -> list[OpHistory]:
    """The ops with steps, then the slowest (latest median)."""
    return sorted(test.ops, key=lambda op: (not op.steps, -op.median_ns[-1]))


def _budget(tests: list[History]) -> list[int]:
    """How many charts each test gets."""
    given, left = [], CHARTS_PER_PAGE
    for test in tests:
        given.append(min(sum(1 for op in test.ops if op.steps), CHARTS_PER_TEST, left))
        left -= given[-1]
    for k, test in enumerate(tests):
        more = min(min(len(test.ops), CHARTS_PER_TEST) - given[k], left)
        given[k] += more
        left -= more
    return given


def _section(test: History, charts_given: int) -> list[str]:
    drawn = _ranked(test)[:charts_given]
    measure = measure_of(test.runs[-1])
    undrawn = len(test.ops) - len(drawn)
    return [f'<section class="test"><h2>{_h(test.nodeid)}</h2>',
            f"<p>Machine <code>{_h(test.machine)}</code>: {len(test.runs)} run(s), "
            f"{len(test.ops)} op(s); {_h(summary(test))}.</p>",
            *(f"<p><b>All ops:</b> {_h(shared_text(test, step))}.</p>"
              for step in test.shared_steps),
            op_table(test),
            f"<p>{_h(trends_header(test))}"
            + (f" ({undrawn} op(s) not drawn: in the table)" if undrawn else "") + "</p>",
            *(f'<div class="chart">{charts.history_chart(test, op, measure)}</div>'
              for op in drawn),
            "</section>"]


def render_history(tests: list[History]) -> str:
    parts = [f"<p>{len(tests)} test(s). Steps found by PELT (ruptures) on each op's log "
             "medians; a step is reported beyond the noise and the test's tolerance, "
             "held by the runs after it.</p>"]
    budget = _budget(tests)
    drawn = sum(budget)
    total = sum(len(t.ops) for t in tests)
    if drawn < total:
        parts.append(f"<p>{drawn} of {total} op charts drawn: the ops with steps first, "
                     f"then each test's slowest ({CHARTS_PER_TEST} a test, "
                     f"{CHARTS_PER_PAGE} a page); the tables list every op.</p>")
    for test, given in zip(tests, budget, strict=True):
        parts += _section(test, given)
    return page("opprof history", parts)
