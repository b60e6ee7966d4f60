"""``opprof history --html``: each op's median across the stored runs, steps marked.

One self-contained HTML file, drawn as the HTML report is (:mod:`.html`: matplotlib,
inline SVG, every string from data escaped). Per test: a table of the steps, then one
chart per op (the ops with steps first, then the slowest; at most :data:`CHARTS_PER_TEST`
a test and :data:`CHARTS_PER_PAGE` a page, the ops with steps of every test first): its
median in each run against the run's short commit, the level of each segment dotted,
and a red line where each step happened, labelled with its change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import charts, percent
from .history import measure_of
from .html import STYLE, _h

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
    out = ["<table><thead><tr><th>OP_ID</th><th>op</th><th>change</th><th>at</th>"
           "<th>before</th><th>after</th><th>margin</th></tr></thead><tbody>"]
    for op_id, name, step, before, after in rows:
        css = "regressed" if step.ratio > 1 else "improved"
        out.append(f'<tr class="{css}"><td class="num">{op_id}</td>'
                   f"<td><code>{_h(name)}</code></td>"
                   f'<td class="num">{percent(step.ratio)}</td>'
                   f"<td><code>{_h(test.where(step.run))}</code></td>"
                   f'<td class="num">{before}</td><td class="num">{after}</td>'
                   f'<td class="num">\u00b1{(step.margin - 1) * 100:.1f}%</td></tr>')
    out.append("</tbody></table>")
    return "\n".join(out)


#: The charts a page draws at most, and those of one test: each op's chart is tens of
#: kB and a fraction of a second to draw (1,000 tests of 25 drawn ops each did not
#: finish in 600 s). The ops with steps are drawn first, over every test, then each
#: test's slowest, in page order; the step table lists every step whatever is drawn.
CHARTS_PER_PAGE = 40
CHARTS_PER_TEST = 6


def _ranked(test: History) -> list[OpHistory]:
    """The test's ops in the order they are drawn: those with steps, then the slowest
    (latest median)."""
    return sorted(test.ops, key=lambda op: (not op.steps, -op.median_ns[-1]))


def _budget(tests: list[History]) -> list[int]:
    """How many charts each test gets: the ops with steps first (tests in page order),
    then the slowest ops of each test, until CHARTS_PER_PAGE are given out, at most
    CHARTS_PER_TEST a test."""
    given = [0] * len(tests)
    left = CHARTS_PER_PAGE
    stepped = [min(sum(1 for op in t.ops if op.steps), CHARTS_PER_TEST) for t in tests]
    for k, want in enumerate(stepped):
        given[k] = min(want, left)
        left -= given[k]
    for k, test in enumerate(tests):
        more = min(min(len(test.ops), CHARTS_PER_TEST) - given[k], left)
        given[k] += max(more, 0)
        left -= max(more, 0)
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
    """The page: every test's steps and per-op trends."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>opprof history</title>", f"<style>{STYLE}</style></head><body>",
             "<h1>opprof history</h1>",
             f"<p>{len(tests)} test(s). Steps found by PELT (ruptures) on each op's log "
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
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
