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
import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import OpprofError
from ..model.runinfo import RunInfo
from ..run.outputs import NEEDS_MATPLOTLIB
from . import display_name, duration, percent
from .kernels import kernel_stats, measure_word
from .results_json import Reported, test_entry

if TYPE_CHECKING:
    from ..model.records import TestRecord

TOP_OPS = 25
MOVED = 4

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


def _label(value: Any) -> str:
    """Anything from data, safe as a matplotlib label (no math mode, one line)."""
    return display_name(str(value)).replace("$", r"\$")


def _css_class(verdict: Any) -> str:
    return str(verdict).replace(" ", "-") if verdict in STYLED else ""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise OpprofError(NEEDS_MATPLOTLIB) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    _pyplot().close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # inline: no XML prologue or doctype


def _ms(ns: Any) -> Any:
    return np.asarray(ns, dtype=float) / 1e6


def ops_chart(record: Reported) -> str:
    """Each op's current median against its baseline's (the slowest TOP_OPS ops)."""
    plt = _pyplot()
    ops = [op for op in record.entry["ops"] if op.get("current")]
    ops = sorted(ops, key=lambda op: -(op["current"]["median_ns"] or 0))[:TOP_OPS]
    if not ops:
        return ""
    labels = [_label(f"OP_ID{op['op_id']}. {op['name']}") for op in ops][::-1]
    current = [op["current"]["median_ns"] or 0 for op in ops][::-1]
    baseline = [(op.get("baseline") or {}).get("median_ns") or math.nan for op in ops][::-1]
    colors = ["#b00020" if op["verdict"] in ("regressed", "over_budget") else
              "#1b5e20" if op["verdict"] == "improved" else "#1565c0" for op in ops][::-1]
    y = np.arange(len(ops))
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(ops) + 1.2))
    ax.barh(y + 0.2, _ms(current), height=0.4, color=colors, label="current")
    if not all(math.isnan(b) for b in baseline):
        ax.barh(y - 0.2, _ms(baseline), height=0.4, color="#9e9e9e", label="baseline")
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("median per iteration (ms)")
    ax.set_title("Per-op time against the baseline")
    ax.legend(loc="lower right", fontsize=8)
    return _svg(fig)


def moved_chart(record: Reported) -> str:
    """Per-iteration time of the ops that moved most against the baseline (or, with no
    baseline, took most); skipped iterations shaded."""
    plt = _pyplot()
    profile = record.profile
    ops = [op for op in record.entry["ops"] if op.get("current")]
    moved = [op for op in ops if (op.get("baseline") or {}).get("corrected_ratio")]
    if moved:
        chosen = sorted(moved, key=lambda op: -abs(
            math.log(op["baseline"]["corrected_ratio"])))[:MOVED]
        title = "Per-iteration time of the ops that moved most"
    else:
        chosen = sorted(ops, key=lambda op: -(op["current"]["median_ns"] or 0))[:MOVED]
        title = "Per-iteration time of the slowest ops"
    if not chosen or profile.iterations == 0:
        return ""
    fig, ax = plt.subplots(figsize=(9, 3.2))
    x = np.arange(profile.iterations)
    for op in chosen:
        ax.plot(x, _ms(profile.gated_samples()[:, op["op_id"]]), marker="o", markersize=3,
                label=_label(f"OP_ID{op['op_id']}. {op['name']}"))
        median = (op.get("baseline") or {}).get("median_ns")
        if median:
            ax.axhline(median / 1e6, linestyle=":", linewidth=1, color=ax.lines[-1].get_color())
    if profile.skip:
        ax.axvspan(-0.5, profile.skip - 0.5, color="#eeeeee", label="skipped")
    ax.set_xlabel("iteration")
    ax.set_ylabel("ms")
    ax.set_title(title + " (dotted: baseline median)")
    ax.legend(fontsize=8)
    return _svg(fig)


def phase_chart(record: Reported) -> str:
    """The median time of each phase, and of the rest of the iteration, as one bar."""
    plt = _pyplot()
    profile = record.profile
    counted = slice(profile.skip, None)
    if not profile.phases or profile.counted == 0:
        return ""
    medians = [float(np.nanmedian(profile.phase_samples[counted, j]))
               if np.isfinite(profile.phase_samples[counted, j]).any() else 0.0
               for j in range(len(profile.phases))]
    rest = max(float(np.median(profile.wall[counted])) - sum(medians), 0.0)
    fig, ax = plt.subplots(figsize=(9, 1.4))
    left = 0.0
    for name, value in [*zip(profile.phases, medians, strict=True), ("outside phases", rest)]:
        ax.barh([0], [value / 1e6], left=left, label=_label(f"{name} {value / 1e6:.3g} ms"))
        left += value / 1e6
    ax.set_yticks([])
    ax.set_xlabel("median per iteration (ms)")
    ax.set_title("Phase split")
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.6))
    return _svg(fig)


def op_table(entry: dict[str, Any]) -> str:
    """Each op's numbers, in graph order: what the charts show, as figures. With kernel
    time, the medians are kernel time and the op's event span and kernels per iteration
    follow."""
    kernel = any(isinstance(op.get("kernel"), dict) for op in entry["ops"])
    extra = "<th>event span median</th><th>kernels per iteration</th>" if kernel else ""
    rows = ["<table><thead><tr><th>OP_ID</th><th>op</th><th>baseline median</th>"
            f"<th>current median{' (kernel time)' if kernel else ''}</th>{extra}"
            "<th>change (drift-corrected)</th><th>verdict</th></tr></thead><tbody>"]
    for op in entry["ops"]:
        base, cur = op.get("baseline") or {}, op.get("current") or {}
        figures = [duration(_number(base.get("median_ns"))),
                   duration(_number(cur.get("median_ns")))]
        if kernel:
            k = op.get("kernel") if isinstance(op.get("kernel"), dict) else {}
            count = _number(k.get("count"))
            figures += [duration(_number(k.get("span_median_ns"))),
                        "-" if count is None else f"{count:g}"]
        figures.append(percent(_number(base.get("corrected_ratio"))))
        rows.append(f'<tr class="{_css_class(op["verdict"])}"><td class="num">'
                    f"{_h(op['op_id'])}</td><td><code>{_h(op['name'])}</code></td>"
                    + "".join(f'<td class="num">{f}</td>' for f in figures)
                    + f"<td>{_h(op['verdict'])}</td></tr>")
    rows.append("</tbody></table>")
    return "\n".join(rows)


def kernel_table(test: Reported) -> str:
    """The test's GPU activities by name (kernels, memcpy, memset), longest total
    first: the TOP_OPS longest."""
    rows = kernel_stats(test.profile)
    if not rows:
        return ""
    out = [f"<p>GPU activities by total time over the counted iterations "
           f"({len(rows)} name(s){'; the longest ' + str(TOP_OPS) if len(rows) > TOP_OPS else ''}"
           "):</p>",
           "<table><thead><tr><th>name</th><th>kind</th><th>count</th><th>total</th>"
           "<th>mean</th><th>min</th><th>max</th></tr></thead><tbody>"]
    for k in rows[:TOP_OPS]:
        out.append(f"<tr><td><code>{_h(k.name)}</code></td><td>{_h(k.kind)}</td>"
                   f'<td class="num">{k.count}</td>'
                   + "".join(f'<td class="num">{duration(v)}</td>'
                             for v in (k.total, k.mean, k.min, k.max)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _number(value: Any) -> float | None:
    """A figure from data; None for anything that is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _section(test: Reported, charts: bool) -> list[str]:
    entry = test.entry
    verdict = entry.get("verdict", "?")
    drift = _number(entry.get("drift"))
    parts = [f'<section class="test"><h2>{_h(entry.get("nodeid", "?"))}</h2>',
             f'<p>Verdict: <span class="verdict {_css_class(verdict)}">{_h(verdict)}</span>'
             + (f" ({_h(entry['reason'])})" if entry.get("reason") else "") + "; "
             f"{_h(entry.get('counted', '?'))} counted iterations; "
             f"{_h(entry.get('baseline_runs', 0))} baseline runs"
             + (f"; machine drift {percent(drift)}" if drift else "")
             + f"; op times are {_h(measure_word(str(entry.get('measure', 'events'))))}.</p>",
             op_table(entry), kernel_table(test)]
    if charts:
        parts += [f'<div class="chart">{chart}</div>'
                  for chart in (ops_chart(test), moved_chart(test), phase_chart(test)) if chart]
    parts.append("</section>")
    return parts


def render(records: list[TestRecord], run_info: RunInfo) -> str:
    """The report of a run."""
    return render_tests([Reported(test_entry(r), r.profile) for r in records], run_info)


def render_tests(tests: Sequence[Reported], run_info: RunInfo, charts: bool = True) -> str:
    """The report of tests as a results file holds them (``opprof report``); without
    ``charts``, the tables only (no matplotlib needed)."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>opprof report</title>", f"<style>{STYLE}</style></head><body>",
             "<h1>opprof report</h1>",
             f"<p>Machine <code>{_h(run_info.machine)}</code>: {_h(run_info.device)}, "
             f"backend {_h(run_info.backend)}. {len(tests)} profiled test(s).</p>"]
    for test in tests:
        parts += _section(test, charts)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
