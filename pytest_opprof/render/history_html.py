"""``opprof history --html``: each op's median across the stored runs, steps marked.

One self-contained HTML file, drawn as the HTML report is (:mod:`.html`). Per test: a
table of the steps, then one chart per op (:func:`.charts.history_chart`), as many as
:func:`_budget` gives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import charts, percent
from .history import margin, measure_of
from .html import _h, num, page, table

if TYPE_CHECKING:
    from ..model.history import History, OpHistory


def step_table(test: History) -> str:
    """Every step of the test: the machine drift's (all ops), then each op's."""
    amount = measure_of(test).amount
    rows = [("", "all ops (machine drift)", step, "-", "-") for step in test.drift_steps]
    rows += [(str(op.op_id), op.name, step, amount(step.before), amount(step.after))
             for op in test.ops for step in op.steps]
    if not rows:
        return "<p>No step beyond the noise and the tolerance.</p>"
    return table(["OP_ID", "op", "change", "at", "before", "after", "margin"], (
        f'<tr class="{"regressed" if step.ratio > 1 else "improved"}">{num(op_id)}'
        f"<td><code>{_h(name)}</code></td>{num(percent(step.ratio))}"
        f"<td><code>{_h(test.where(step.run))}</code></td>{num(before)}{num(after)}"
        + num(margin(step)) + "</tr>"
        for op_id, name, step, before, after in rows))


#: The charts a page draws at most, and those of one test: each op's chart is tens of
#: kB and a fraction of a second to draw (1,000 tests of 25 drawn ops each did not
#: finish in 600 s). The ops with steps are drawn first, over every test, then each
#: test's slowest, in page order; the step table lists every step whatever is drawn.
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
    measure = measure_of(test)
    shown = {id(op) for op in drawn}
    undrawn = [op for op in test.ops if id(op) not in shown]
    stepped = sum(1 for op in undrawn if op.steps)
    left = [f"{len(undrawn) - stepped} op(s) without a step"] if len(undrawn) > stepped else []
    left += [f"{stepped} op(s) with steps (in the table)"] if stepped else []
    return [f'<section class="test"><h2>{_h(test.nodeid)}</h2>',
            f"<p>Machine <code>{_h(test.machine)}</code>: {len(test.runs)} run(s), "
            f"{len(test.ops)} op(s)"
            + (f"; not drawn: {' and '.join(left)}" if left else "")
            + ".</p>",
            step_table(test),
            *(f'<div class="chart">{charts.history_chart(test, op, measure)}</div>'
              for op in drawn),
            "</section>"]


def render_history(tests: list[History], tolerance: float) -> str:
    parts = [f"<p>{len(tests)} test(s). Steps found by PELT (ruptures) on each op's log "
             f"medians; steps under the noise or the tolerance ({tolerance * 100:g}%) "
             "are not shown.</p>"]
    budget = _budget(tests)
    drawn = sum(budget)
    total = sum(len(t.ops) for t in tests)
    if drawn < total:
        parts.append(f"<p>{drawn} of {total} op charts drawn: the ops with steps first, "
                     f"then each test's slowest ({CHARTS_PER_TEST} a test, "
                     f"{CHARTS_PER_PAGE} a page); the tables list every step.</p>")
    for test, given in zip(tests, budget, strict=True):
        parts += _section(test, given)
    return page("opprof history", parts)
