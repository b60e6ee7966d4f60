"""The visual report: one self-contained HTML file, charts drawn as inline SVG.

``--opprof-html=PATH`` from pytest, or ``opprof report RESULTS.json -o report.html``
from a results file. Per test: each op's median against its baseline's, the
per-iteration time of the ops that moved most (or took most, with no baseline), and
the phase split. Drawn with matplotlib (the optional ``report`` extra), which writes
SVG: no script, no network, nothing to load, so the file opens offline anywhere.
"""

from __future__ import annotations

import html
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import OpprofError
from ..files import atomic_write
from .results_json import test_entry

if TYPE_CHECKING:
    from ..records import TestRecord
    from ..session import OpprofSession

TOP_OPS = 25
MOVED = 4

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-top: 1px solid #ddd;
padding-top: 1em; } .verdict { font-weight: bold; } .failed { color: #b00020; }
.passed, .baseline-updated { color: #1b5e20; } .chart { margin: 0.5em 0; }
table { border-collapse: collapse; } td, th { padding: 2px 8px; text-align: left; }
"""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise OpprofError("the HTML report needs matplotlib: pip install 'pytest-opprof[report]'"
                          ) from None
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


def ops_chart(record: TestRecord) -> str:
    """Each op's current median against its baseline's (the slowest TOP_OPS ops)."""
    plt = _pyplot()
    ops = [op for op in test_entry(record)["ops"] if op.get("current")]
    ops = sorted(ops, key=lambda op: -(op["current"]["median_ns"] or 0))[:TOP_OPS]
    if not ops:
        return ""
    labels = [f"OP_ID{op['op_id']}. {op['name']}" for op in ops][::-1]
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


def moved_chart(record: TestRecord) -> str:
    """Per-iteration time of the ops that moved most against the baseline (or, with no
    baseline, took most); skipped iterations shaded."""
    plt = _pyplot()
    profile = record.profile
    ops = [op for op in test_entry(record)["ops"] if op.get("current")]
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
        ax.plot(x, _ms(profile.samples[:, op["op_id"]]), marker="o", markersize=3,
                label=f"OP_ID{op['op_id']}. {op['name']}")
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


def phase_chart(record: TestRecord) -> str:
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
        ax.barh([0], [value / 1e6], left=left, label=f"{name} {value / 1e6:.3g} ms")
        left += value / 1e6
    ax.set_yticks([])
    ax.set_xlabel("median per iteration (ms)")
    ax.set_title("Phase split")
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.6))
    return _svg(fig)


def render(records: list[TestRecord], machine: dict[str, Any]) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>opprof report</title>", f"<style>{STYLE}</style></head><body>",
             "<h1>opprof report</h1>",
             f"<p>Machine <code>{html.escape(str(machine.get('key', '?')))}</code>: "
             f"{html.escape(str(machine.get('device', '?')))}, backend "
             f"{html.escape(str(machine.get('backend', '?')))}. "
             f"{len(records)} profiled test(s).</p>"]
    for record in records:
        entry = test_entry(record)
        verdict = str(entry.get("verdict", "?"))
        drift = entry.get("drift")
        parts += [f'<section class="test"><h2>{html.escape(record.nodeid)}</h2>',
                  f'<p>Verdict: <span class="verdict {verdict.replace(" ", "-")}">'
                  f"{html.escape(verdict)}</span>; {entry.get('counted', '?')} counted "
                  f"iterations; {entry.get('baseline_runs', 0)} baseline runs"
                  + (f"; machine drift {100 * (drift - 1):+.1f}%" if drift else "") + ".</p>"]
        for chart in (ops_chart(record), moved_chart(record), phase_chart(record)):
            if chart:
                parts.append(f'<div class="chart">{chart}</div>')
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write(path: Path, records: list[TestRecord], session: OpprofSession) -> None:
    write_report(path, records, session.machine_info)


def write_report(path: Path, records: list[TestRecord], machine: dict[str, Any]) -> None:
    text = render(records, machine)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)
