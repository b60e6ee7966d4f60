"""``opprof history --html``: each op's median across the stored runs, steps marked.

One self-contained HTML file, drawn as the HTML report is (:mod:`.html`: matplotlib,
inline SVG, every string from data escaped). Per test: a table of the steps, then one
chart per op (the ops with steps first, then the slowest; at most ``TOP_OPS``): its
median in each run against the run's short commit, the level of each segment dotted,
and a red line where each step happened, labelled with its change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import amount, charts, percent
from .charts import TOP_OPS
from .html import STYLE, _h
from .kernels import history_unit

if TYPE_CHECKING:
    from ..model.history import History, OpHistory


def step_table(test: History) -> str:
    """Every step of the test: the machine drift's (all ops), then each op's."""
    unit = history_unit(test)
    rows = [("", "all ops (machine drift)", step, "-", "-") for step in test.drift_steps]
    rows += [(str(op.op_id), op.name, step, amount(step.before, unit),
              amount(step.after, unit))
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


def _drawn(test: History) -> list[OpHistory]:
    """The ops drawn: those with steps, then the slowest (latest median), TOP_OPS in all."""
    return sorted(test.ops, key=lambda op: (not op.steps, -op.median_ns[-1]))[:TOP_OPS]


def _section(test: History) -> list[str]:
    drawn = _drawn(test)
    unit = history_unit(test)
    shown = {id(op) for op in drawn}
    undrawn = [op for op in test.ops if id(op) not in shown]
    stepped = sum(1 for op in undrawn if op.steps)
    left = [f"{len(undrawn) - stepped} op(s) without a step"] if len(undrawn) > stepped else []
    left += [f"{stepped} op(s) with steps (listed above)"] if stepped else []
    return [f'<section class="test"><h2>{_h(test.nodeid)}</h2>',
            f"<p>Machine <code>{_h(test.machine)}</code>: {len(test.runs)} run(s), "
            f"{len(test.ops)} op(s)"
            + (f"; not drawn: {' and '.join(left)}" if left else "")
            + ".</p>",
            step_table(test),
            *(f'<div class="chart">{charts.history_chart(test, op, unit)}</div>' for op in drawn),
            "</section>"]


def render_history(tests: list[History], tolerance: float) -> str:
    """The page: every test's steps and per-op trends."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>opprof history</title>", f"<style>{STYLE}</style></head><body>",
             "<h1>opprof history</h1>",
             f"<p>{len(tests)} test(s). Steps found by PELT (ruptures) on each op's log "
             f"medians; steps under the noise or the tolerance ({tolerance * 100:g}%) "
             "are not shown.</p>"]
    for test in tests:
        parts += _section(test)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
