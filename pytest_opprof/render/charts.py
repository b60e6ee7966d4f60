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
from ..stats.reports import phase_medians, segment_levels
from . import amount, display_name, percent

if TYPE_CHECKING:
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


def svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    pyplot().close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # inline: no XML prologue or doctype


#: Each unit's axis: what a figure is divided by, and the axis's unit.
AXES = {"ns": (1e6, "ms"), "instructions": (1e6, "millions of instructions")}


def axis(unit: str) -> tuple[float, str]:
    """``(1e6, "ms")`` for ns; ``(1e6, "millions of instructions")`` for instructions."""
    return AXES.get(unit, AXES["ns"])


def scaled(values: Any, unit: str) -> Any:
    return np.asarray(values, dtype=float) / axis(unit)[0]


def what(unit: str) -> str:
    """What a chart's figures are: ``time``, or ``instructions``."""
    return "instructions" if unit == "instructions" else "time"


def ops_chart(record: TestReport) -> str:
    """Each op's current median against its baseline's (the slowest TOP_OPS ops)."""
    plt = pyplot()
    ops = sorted((op for op in record.ops if op.current is not None),
                 key=lambda op: -(op.median or 0))[:TOP_OPS]
    if not ops:
        return ""
    unit = record.profile.unit
    labels = [label(f"OP_ID{op.op_id}. {op.name}") for op in ops][::-1]
    current = [op.judged_median or 0 for op in ops][::-1]  # the verdict's, as the table's
    baseline = [math.nan if op.baseline is None else op.baseline.baseline_median
                for op in ops][::-1]
    colors = ["#b00020" if op.status in ("regressed", "over_budget") else
              "#1b5e20" if op.status == "improved" else "#1565c0" for op in ops][::-1]
    y = np.arange(len(ops))
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(ops) + 1.2))
    ax.barh(y + 0.2, scaled(current, unit), height=0.4, color=colors, label="current")
    if not all(math.isnan(b) for b in baseline):
        ax.barh(y - 0.2, scaled(baseline, unit), height=0.4, color="#9e9e9e",
                label="baseline")
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel(f"median per iteration ({axis(unit)[1]})")
    ax.set_title(f"Per-op {what(unit)} against the baseline")
    ax.legend(loc="lower right", fontsize=8)
    return svg(fig)


def _moved(op: OpReport) -> float:
    """How far the op moved against its baseline (drift-corrected); NaN without one."""
    return math.nan if op.baseline is None else op.baseline.corrected_ratio


def moved_chart(record: TestReport) -> str:
    """Per-iteration time (or instructions) of the ops that moved most against the
    baseline (or, with no baseline, took most); skipped iterations shaded."""
    plt = pyplot()
    profile = record.profile
    unit = profile.unit
    ops = [op for op in record.ops if op.current is not None]
    moved = [op for op in ops if math.isfinite(_moved(op)) and _moved(op) > 0]
    if moved:
        chosen = sorted(moved, key=lambda op: -abs(math.log(_moved(op))))[:MOVED]
        title = f"Per-iteration {what(unit)} of the ops that moved most"
    else:
        chosen = sorted(ops, key=lambda op: -(op.median or 0))[:MOVED]
        title = (f"Per-iteration {what(unit)} of the "
                 + ("costliest ops" if unit == "instructions" else "slowest ops"))
    if not chosen or profile.iterations == 0:
        return ""
    fig, ax = plt.subplots(figsize=(9, 3.2))
    x = np.arange(profile.iterations)
    for op in chosen:
        ax.plot(x, scaled(profile.gated_samples()[:, op.op_id], unit), marker="o",
                markersize=3,
                label=label(f"OP_ID{op.op_id}. {op.name}"))
        median = math.nan if op.baseline is None else op.baseline.baseline_median
        if math.isfinite(median) and median:
            ax.axhline(median / axis(unit)[0], linestyle=":", linewidth=1,
                       color=ax.lines[-1].get_color())
    if profile.skip:
        ax.axvspan(-0.5, profile.skip - 0.5, color="#eeeeee", label="skipped")
    ax.set_xlabel("iteration")
    ax.set_ylabel(axis(unit)[1])
    ax.set_title(title + " (dotted: baseline median)")
    ax.legend(fontsize=8)
    return svg(fig)


def phase_chart(record: TestReport) -> str:
    """The median time (or instructions) of each phase, and of the rest of the
    iteration, as one bar."""
    plt = pyplot()
    medians = phase_medians(record.profile)
    if not medians:
        return ""
    unit = record.profile.unit
    scale, name_of_axis = axis(unit)
    fig, ax = plt.subplots(figsize=(9, 1.4))
    left = 0.0
    for name, value in medians:
        shown = amount(value, "instructions") if unit == "instructions" \
            else f"{value / 1e6:.3g} ms"
        ax.barh([0], [value / scale], left=left, label=label(f"{name} {shown}"))
        left += value / scale
    ax.set_yticks([])
    ax.set_xlabel(f"median per iteration ({name_of_axis})")
    ax.set_title("Phase split")
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.6))
    return svg(fig)


def history_chart(test: History, op: OpHistory, unit: str = "ns") -> str:
    """The op's medians, run by run, with its segments' levels and its steps (figures in
    ``unit``: ``ns`` or ``instructions``)."""
    plt = pyplot()
    scale, name_of_axis = axis(unit)
    x = np.arange(len(op.runs))
    fig, ax = plt.subplots(figsize=(9, 2.4))
    ax.plot(x, scaled(op.median_ns, unit), marker=".", markersize=3, color="#bdbdbd",
            label="as measured")
    ax.plot(x, scaled(op.corrected_ns, unit), marker="o", markersize=3, color="#1565c0",
            label="machine drift taken out")
    position = {run: k for k, run in enumerate(op.runs)}
    edges = [0, *(position[step.run] for step in op.steps), len(op.runs)]
    for (start, end), level in zip(itertools.pairwise(edges),
                                   segment_levels(op.corrected_ns, edges), strict=True):
        ax.hlines(level / scale, start - 0.4, end - 0.6, linestyles=":", color="#616161")
    for step in op.steps:
        at = position[step.run] - 0.5
        ax.axvline(at, color="#b00020", linestyle="--", linewidth=1)
        ax.annotate(label(f"{percent(step.ratio)} at {test.label(step.run)}"), (at, 1),
                    xycoords=("data", "axes fraction"), xytext=(3, -10),
                    textcoords="offset points", color="#b00020", fontsize=8)
    ax.set_xticks(x, [label(test.label(run)) for run in op.runs], rotation=60, fontsize=7)
    ax.set_ylabel(f"median ({name_of_axis})")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(label(f"OP_ID{op.op_id}. {op.name}"), fontsize=10)
    return svg(fig)
