"""Every chart of the HTML reports, and the one module that imports matplotlib.

matplotlib (the optional ``report`` extra) draws each chart as SVG, inlined in the page:
no script, no network, nothing to load. Labels come from data (test ids and op names from
user code) and are escaped: shown through :func:`display_name`, then ``$``-escaped
(matplotlib reads ``$...$`` as math).
"""

from __future__ import annotations

import io
import itertools
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .._extras import install
from ..errors import OpprofError
from ..model.words import Unit
from ..stats.reports import phase_medians
from . import display_name, percent
from .kernels import measure_of

if TYPE_CHECKING:
    from ..measure.measures import Measure
    from ..model.history import History, OpHistory
    from ..model.reports import OpReport, TestReport

NEEDS_MATPLOTLIB = f"the HTML report needs matplotlib: {install('report')}"
#: The ops a chart shows at most (the slowest, or those that moved most).
TOP_OPS = 25
MOVED = 4


def label(value: Any) -> str:
    """Anything from data, safe as a matplotlib label (no math mode, one line)."""
    return display_name(str(value)).replace("$", r"\$")


def pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise OpprofError(NEEDS_MATPLOTLIB) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: How the charts are written: text as SVG text, not one path per glyph (a chart's
#: labels were most of its bytes), and no hash salt (the same data, the same bytes).
SVG_STYLE = {"svg.fonttype": "none", "svg.hashsalt": "opprof"}


def svg(fig: Any) -> str:
    plt = pyplot()
    buffer = io.StringIO()
    with plt.rc_context(SVG_STYLE):
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # inline: no XML prologue or doctype


#: What every chart divides its figures by: ms of ns, millions of counts.
SCALE = 1e6


def axis(measure: type[Measure]) -> str:
    """The axis's unit: ``ms``, or ``millions of instructions``."""
    return "ms" if measure.unit is Unit.NANOSECONDS else f"millions of {what(measure)}"


def scaled(values: Any) -> Any:
    return np.asarray(values, dtype=float) / SCALE


def what(measure: type[Measure]) -> str:
    """What a chart's figures are: ``host time``, ``kernel time``, ``instructions``."""
    return measure.figure if measure.unit is Unit.NANOSECONDS else measure.counts[0] or "counts"


def ops_chart(record: TestReport) -> str:
    """Each op's current median against its baseline's (the slowest TOP_OPS ops)."""
    plt = pyplot()
    ops = sorted((op for op in record.ops if op.current is not None),
                 key=lambda op: -(op.median or 0))[:TOP_OPS]
    if not ops:
        return ""
    measure = measure_of(record.profile)
    ops.reverse()  # the slowest at the top
    labels = [label(f"OP_ID{op.op_id}. {op.name}") for op in ops]
    current = [op.judged_median or 0 for op in ops]  # the verdict's, as the table's
    baseline = [math.nan if op.baseline is None else op.baseline.baseline_median
                for op in ops]
    colors = ["#b00020" if op.status in ("regressed", "over_budget") else
              "#1b5e20" if op.status == "improved" else "#1565c0" for op in ops]
    y = np.arange(len(ops))
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(ops) + 1.2))
    ax.barh(y + 0.2, scaled(current), height=0.4, color=colors, label="current")
    if not all(math.isnan(b) for b in baseline):
        ax.barh(y - 0.2, scaled(baseline), height=0.4, color="#9e9e9e", label="baseline")
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel(f"median per iteration ({axis(measure)})")
    ax.set_title(f"Per-op {what(measure)} against the baseline")
    ax.legend(loc="lower right", fontsize=8)
    return svg(fig)


def _moved(op: OpReport) -> float:
    return math.nan if op.baseline is None else op.baseline.corrected_ratio


#: A per-iteration series longer than this is drawn as this many buckets: each bucket's
#: median as the line and its min to max as a band, so that a chart of a million
#: iterations is as large as one of a thousand (each point was an SVG path of its own).
SERIES_POINTS = 500


def envelope(values: np.ndarray, points: int = SERIES_POINTS
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``values`` (NaN where the op did not run) in ``points`` buckets of consecutive
    iterations: each bucket's centre, median, min and max; None when the series is short
    enough to draw point by point."""
    n = len(values)
    if n <= points:
        return None
    edges = np.linspace(0, n, points + 1).astype(int)
    centre = (edges[:-1] + edges[1:] - 1) / 2
    median, low, high = (np.full(points, np.nan) for _ in range(3))
    for k, (start, end) in enumerate(itertools.pairwise(edges)):
        bucket = values[start:end]
        bucket = bucket[np.isfinite(bucket)]
        if bucket.size:
            median[k], low[k], high[k] = np.median(bucket), bucket.min(), bucket.max()
    return centre, median, low, high


def moved_chart(record: TestReport) -> str:
    """Per-iteration figures of the ops that moved most against the baseline (or, with
    no baseline, took most); skipped iterations shaded."""
    plt = pyplot()
    profile = record.profile
    measure = measure_of(profile)
    ops = [op for op in record.ops if op.current is not None]
    moved = [op for op in ops if math.isfinite(_moved(op)) and _moved(op) > 0]
    if moved:
        chosen = sorted(moved, key=lambda op: -abs(math.log(_moved(op))))[:MOVED]
        title = f"Per-iteration {what(measure)} of the ops that moved most"
    else:
        chosen = sorted(ops, key=lambda op: -(op.median or 0))[:MOVED]
        title = (f"Per-iteration {what(measure)} of the "
                 + ("slowest ops" if measure.unit is Unit.NANOSECONDS else "costliest ops"))
    if not chosen or profile.iterations == 0:
        return ""
    fig, ax = plt.subplots(figsize=(9, 3.2))
    x = np.arange(profile.iterations)
    bucketed = profile.iterations > SERIES_POINTS
    for op in chosen:
        values = scaled(profile.gated_samples()[:, op.op_id])
        name = label(f"OP_ID{op.op_id}. {op.name}")
        drawn = envelope(values)
        if drawn is None:
            ax.plot(x, values, marker="o", markersize=3, label=name)
        else:
            centre, middle, low, high = drawn
            ax.plot(centre, middle, linewidth=1, label=name)
            ax.fill_between(centre, low, high, color=ax.lines[-1].get_color(), alpha=0.25,
                            linewidth=0)
        median = math.nan if op.baseline is None else op.baseline.baseline_median
        if math.isfinite(median) and median:
            ax.axhline(median / SCALE, linestyle=":", linewidth=1,
                       color=ax.lines[-1].get_color())
    if profile.skip:
        ax.axvspan(-0.5, profile.skip - 0.5, color="#eeeeee", label="skipped")
    ax.set_xlabel("iteration")
    ax.set_ylabel(axis(measure))
    if bucketed:
        title += (f"\n{profile.iterations:,} iterations in {SERIES_POINTS} buckets: line "
                  "median, band min to max;")
    ax.set_title(title + " (dotted: baseline median)", fontsize=10 if bucketed else None)
    ax.legend(fontsize=8, loc="upper right")
    return svg(fig)


def phase_chart(record: TestReport) -> str:
    """The median of each phase, and of the rest of the iteration, as one bar."""
    plt = pyplot()
    medians = phase_medians(record.profile)
    if not medians:
        return ""
    measure = measure_of(record.profile)
    fig, ax = plt.subplots(figsize=(9, 1.4))
    left = 0.0
    for name, value in medians:
        shown = (f"{value / 1e6:.3g} ms" if measure.unit is Unit.NANOSECONDS
                 else measure.amount(value))
        ax.barh([0], [value / SCALE], left=left, label=label(f"{name} {shown}"))
        left += value / SCALE
    ax.set_yticks([])
    ax.set_xlabel(f"median per iteration ({axis(measure)})")
    ax.set_title("Phase split")
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.6))
    return svg(fig)


def history_chart(test: History, op: OpHistory, measure: type[Measure]) -> str:
    """The op's medians, run by run, with its segments' levels dotted and a red line,
    labelled with its change, at each step."""
    plt = pyplot()
    x = np.arange(len(op.runs))
    fig, ax = plt.subplots(figsize=(9, 2.4))
    ax.plot(x, scaled(op.median_ns), marker=".", markersize=3, color="#bdbdbd",
            label="as measured")
    if test.taken_out is not None:
        ax.plot(x, scaled(op.corrected_ns), marker="o", markersize=3, color="#1565c0",
                label="less a run's passing shared factor")
    position = {run: k for k, run in enumerate(op.runs)}
    edges = [0, *(position[step.run] for step in op.steps), len(op.runs)]
    for start, end in itertools.pairwise(edges):  # each segment's level, excursions left out
        ax.hlines(op.levels[start] / SCALE, start - 0.4, end - 0.6, linestyles=":",
                  color="#616161")
    for step in op.steps:
        at = position[step.run] - 0.5
        ax.axvline(at, color="#b00020", linestyle="--", linewidth=1)
        ax.annotate(label(f"{percent(step.ratio)} at {test.label(step.run)}"), (at, 1),
                    xycoords=("data", "axes fraction"), xytext=(3, -10),
                    textcoords="offset points", color="#b00020", fontsize=8)
    ax.set_xticks(x, [label(test.label(run)) for run in op.runs], rotation=60, fontsize=7)
    ax.set_ylabel(f"median ({axis(measure)})")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(label(f"OP_ID{op.op_id}. {op.name}"), fontsize=10)
    return svg(fig)
