"""The gate's words: the failure text of a test and its line in the summary."""

from __future__ import annotations

import math
import shlex

from ..verdict import COMPARED, BudgetVerdict, OpStatus, OpVerdict, TestResult, Verdict


def duration(ns: float) -> str:
    """812 ns, 25.1 us, 3.42 ms, 1.25 s."""
    if not math.isfinite(ns):
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def percent(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def op_line(v: OpVerdict) -> str:
    """``OP_ID30. relu_grad: 25.1 us -> 32.6 us (+29.9%; ...)`` with the evidence."""
    head = f"OP_ID{v.op_id}. {v.name}"
    if v.verdict in COMPARED:
        beyond = "" if math.isnan(v.margin) else f" beyond the margin {percent(v.margin)}"
        return (f"{head}: {duration(v.baseline_median)} -> {duration(v.current_median)} "
                f"({percent(v.ratio)}; {percent(v.corrected_ratio)} drift-corrected{beyond}; "
                f"between-run p={v.p_value:.2g}, rank test p={v.rank_p_value:.2g}; "
                f"{v.runs} baseline runs)")
    if v.verdict == OpStatus.NEW:
        return f"{head}: new, {duration(v.current_median)} (not in the baseline)"
    if v.verdict == OpStatus.MISSING:
        return f"{head}: missing (the baseline had it at {duration(v.baseline_median)})"
    return f"{head}: not judged ({v.reason})"


def budget_line(b: BudgetVerdict) -> str:
    if math.isnan(b.median_ns):
        return f"{b.name}: has a budget of {duration(b.budget_ns)} but no op of that name ran"
    return (f"OP_ID{b.op_id}. {b.name}: median {duration(b.median_ns)} > budget "
            f"{duration(b.budget_ns)} ({percent(b.median_ns / b.budget_ns)})")


def failure_text(result: TestResult) -> str:
    """Why the test failed: one line per op at fault, then how to accept the change."""
    lines = []
    if result.over_budget:
        lines.append(f"opprof: {len(result.over_budget)} op(s) over their max_time budget:")
        lines += ["  " + budget_line(b) for b in result.over_budget]
    c = result.comparison
    if c is not None and result.at_fault:
        confirmed = ", confirmed by a re-run in a new process" if c.current_runs > 1 else ""
        counts = ", ".join(f"{len(ops)} {status.value} op(s)"
                           for status, ops in result.at_fault_by_verdict().items())
        lines.append(
            f"opprof: {counts} against the baseline of machine "
            f"{result.machine!r} ({c.runs} runs; this run's drift {percent(c.drift)}, "
            f"from {c.drift_source}{confirmed}):")
        lines += ["  " + op_line(v) for v in result.at_fault]
        lines.append("To accept: opprof baseline update " + shlex.quote(result.nodeid))
    return "\n".join(lines)


def summary_line(result: TestResult) -> str:
    """One line per profiled test for the terminal summary."""
    c = result.comparison
    parts = [f"{result.nodeid}: {result.verdict}"]
    if result.verdict == Verdict.NO_BASELINE:
        parts[0] += " on this machine (opprof baseline update to create one)"
    if c is not None:
        judged = [v for v in c.ops if v.verdict in COMPARED]
        parts.append(f"{len(judged)} ops compared, drift {percent(c.drift)}")
        for label in (OpStatus.REGRESSED, OpStatus.IMPROVED, OpStatus.NEW, OpStatus.MISSING):
            ops = c.having(label)
            if ops:
                names = ", ".join(f"{v.name} {percent(v.corrected_ratio)}"
                                  if label in COMPARED else v.name
                                  for v in ops[:5])
                more = f" and {len(ops) - 5} more" if len(ops) > 5 else ""
                parts.append(f"{label}: {names}{more}")
    if c is not None and c.unconfirmed:
        parts.append("not confirmed by a re-run: " + ", ".join(
            f"{v.name} {percent(v.corrected_ratio)}" for v in c.unconfirmed[:5]))
    if result.over_budget:
        parts.append("over budget: " + ", ".join(b.name for b in result.over_budget))
    return "; ".join(parts)
