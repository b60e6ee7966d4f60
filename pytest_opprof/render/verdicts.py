"""How verdicts are worded: a test's failure text, its summary line, and the run's counts."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..judge.config import BLIND, GREW_SHOWN, more_runs
from ..judge.strict import seen as sees_of
from ..measure.measures import Measure
from ..model.conditions import remedies
from ..model.hints import Retake
from ..model.verdict import (
    COMPARED,
    BudgetVerdict,
    Comparison,
    OpStatus,
    OpVerdict,
    TestResult,
    Verdict,
)
from ..model.words import Unit
from ..stats.kernels import kernels_by_op
from ..stats.power import blind
from . import count, display_name, duration, percent, word
from .kernels import abbreviate, measure_of
from .table import align

#: How the summary line names the ops of each verdict (at most SHOWN of each).
_LABELS = {OpStatus.REGRESSED: OpStatus.REGRESSED.value, OpStatus.IMPROVED: OpStatus.IMPROVED.value,
           OpStatus.NEW: f"{OpStatus.NEW.value} (not in the baseline)",
           OpStatus.MISSING: f"{OpStatus.MISSING.value} (in the baseline only)"}
SHOWN = 5


def op_name(v: OpVerdict | BudgetVerdict) -> str:
    """``relu_grad (OP_ID 12)``: the name as the user wrote it, and which op it is."""
    return f"{display_name(v.name)} (OP_ID {v.op_id})" if v.op_id >= 0 \
        else display_name(v.name)


def op_line(v: OpVerdict, measure: type[Measure]) -> str:
    """``OP_ID30. relu_grad: 25.1 us -> 32.6 us (+29.9%; ...)`` with the evidence (the
    drift-corrected change and the rank test where the measure's gate has them)."""
    head = f"OP_ID{v.op_id}. {display_name(v.name)}"
    amount = measure.amount
    if v.verdict in COMPARED:
        beyond = "" if math.isnan(v.margin) else f" beyond its margin {percent(v.margin)}"
        corrected = (f"; {percent(v.corrected_ratio)} drift-corrected" if measure.gate.drift
                     else "")
        rank = f"; rank test p={v.rank_p_value:.2g}" if measure.gate.rank_test else ""
        return (f"{head}: {amount(v.baseline_median)} -> {amount(v.current_median)} "
                f"({percent(v.ratio)}{corrected}{beyond}, z={v.z:.1f}, p={v.p_value:.2g} for a "
                f"spread of {spread(v.spread)} between processes{rank}; {v.runs} baseline runs)")
    if v.verdict == OpStatus.NEW:
        return f"{head}: new, {amount(v.current_median)} (not in the baseline)"
    if v.verdict == OpStatus.MISSING:
        return f"{head}: missing (the baseline had it at {amount(v.baseline_median)})"
    return f"{head}: not judged ({v.reason})"


#: The longest function name a regressed op's "grew" line prints whole (C++ names can
#: run to hundreds of characters).
FUNCTION_WIDTH = 80


def grew_lines(v: OpVerdict, measure: type[Measure]) -> list[str]:
    """``    grew: DOUBLE_add 1.2M -> 1.5M instr (+300k)``: the functions whose count grew
    most in a regressed op (instructions)."""
    return [f"    grew: {abbreviate(name, FUNCTION_WIDTH)} {count(before)} -> "
            f"{measure.amount(after)} ({'-' if after < before else '+'}"
            f"{count(abs(after - before))})" for name, before, after in v.grew[:GREW_SHOWN]]


def spread(value: float) -> str:
    """A relative spread: 0.025 -> ``2.5%``, 0.0001 -> ``0.01%``; ``-`` for none."""
    if not math.isfinite(value):
        return "-"
    return f"{value * 100:.2g}%" if value < 0.01 else f"{value * 100:.1f}%"


def more_data(runs: int, retake: Retake) -> list[str]:
    """What a gate blind on ``runs`` baseline runs would see more with, before a quieter
    machine: more runs (while they help: ``retake`` takes them), more iterations."""
    more = more_runs(runs)
    return [*([f"more baseline runs (`{display_name(retake.command(runs=more))}`)"]
              if more else []),
            "more iterations (gpu_profiler.iterations(n))"]


def blind_tests(results: Iterable[TestResult]) -> list[tuple[TestResult, float]]:
    """The judged tests whose gate could see only slowdowns beyond ``BLIND`` of their
    median op, each with what it could see."""
    found = []
    for result in results:
        if result.comparison is not None:
            seen = sees_of(result.comparison)
            if blind(seen, BLIND):
                found.append((result, seen))
    return found


def blind_words(found: Sequence[tuple[TestResult, float]], judged: int,
                name: Callable[[str], str] = display_name) -> str:
    """Which tests were blind and to what, in one sentence (without advice), each test
    written by ``name`` (Markdown's escaping there)."""
    tests = ", ".join(f"{name(r.nodeid)} {percent(1 + seen)}" for r, seen in found)
    return (f"{len(found)} of {judged} judged test(s) could only see slowdowns over "
            f"{percent(1 + BLIND)} for their median op: {tests}")


def blind_line(results: Sequence[TestResult], retake: Retake,
               conditions: Mapping[str, Any] | None = None) -> str | None:
    """One line for the run when the gate of some tests could see only large slowdowns
    of their median op (beyond ``BLIND``), and what would help (``retake``: the run's
    ``opprof baseline update``); ``conditions`` None: the run's are not known, so a
    quieter machine changes everything."""
    found = blind_tests(results)
    if not found:
        return None
    judged = sum(r.comparison is not None for r in results)
    helps = more_data(min(r.comparison.runs for r, _ in found if r.comparison),
                      retake.of(*(r.nodeid for r, _ in found)))
    quieter = remedies(conditions)
    helps.append("a quieter machine" + (f" with {' and '.join(quieter)}" if quieter else ""))
    return (f"opprof: blind: {blind_words(found, judged)}; {', '.join(helps[:-1])}, or "
            f"{helps[-1]} would help")


def shared_words(c: Comparison) -> str:
    """What a test's ops moved by together beyond the drift taken out, in words."""
    reference = (f"the reference probe moved {percent(c.drift)}" if c.drift_source == "probe"
                 else "no reference to show the machine moved")
    return (f"the ops moved together by {percent(c.shared)} ({reference}): a change they "
            "share, judged as each op's own")


def verdict_table(result: TestResult) -> str:
    """Every op the gate looked at, in OP_ID order."""
    c = result.comparison
    if c is None:
        return ""
    measure = measure_of(result.profile)
    rows = [["OP_ID", "op", "baseline", "now", "change", "margin", "detectable", "spread",
             "verdict"]]
    for v in c.ops:
        rows.append([str(v.op_id) if v.op_id >= 0 else "-", display_name(v.name),
                     measure.amount(v.baseline_median), measure.amount(v.current_median),
                     percent(v.corrected_ratio), percent(v.margin),
                     percent(1 + v.detectable), spread(v.spread), word(v.verdict)])
    head = (f"gate: drift {percent(c.drift)} (from {c.drift_source}), {c.runs} baseline runs; "
            "change is drift-corrected" if measure.gate.drift
            else f"gate: {c.runs} baseline runs; {measure.figure}, not drift-corrected")
    return "\n".join([head, *align(rows, right=set(range(len(rows[0]))) - {1})])


def budget_line(b: BudgetVerdict) -> str:
    if math.isnan(b.median_ns):
        return (f"{display_name(b.name)}: has a budget of {duration(b.budget_ns)} but no op "
                "of that name ran")
    return (f"OP_ID{b.op_id}. {display_name(b.name)}: median {duration(b.median_ns)} > budget "
            f"{duration(b.budget_ns)} ({percent(b.median_ns / b.budget_ns)})")


def failure_text(result: TestResult, retake: Retake) -> str:
    """One block per cause (budgets, regressions, new ops, missing ops), then how to
    accept the change: ``retake``, the run's ``opprof baseline update``, for this test."""
    lines = []
    if result.over_budget:
        lines.append(f"opprof: {len(result.over_budget)} op(s) over their max_time budget:")
        lines += ["  " + budget_line(b) for b in result.over_budget]
    c = result.comparison
    if c is not None and result.at_fault:
        confirmed = ", confirmed by a re-run in a new process" if c.current_runs > 1 else ""
        measure = measure_of(result.profile)
        drift = (f"this run's drift {percent(c.drift)}, from {c.drift_source}"
                 if measure.gate.drift
                 else f"{measure.counts[0] or measure.figure} are not drift-corrected")
        where = (f"the baseline of machine {display_name(result.machine)!r} ({c.runs} runs; "
                 f"{drift}{confirmed})")
        kernel = result.profile.kernel_samples is not None
        named = f" in {measure.figure}" if kernel or measure.unit is Unit.COUNT else ""
        heads = {
            OpStatus.REGRESSED: f"op(s) regressed{named} against {where}",
            OpStatus.NEW: "new op(s) not in the baseline (failing under --opprof-strict=ops)",
            OpStatus.MISSING: "op(s) of the baseline missing from this run (failing "
                              "under --opprof-strict=ops)",
        }
        for status, ops in result.at_fault_by_verdict().items():
            lines.append(f"opprof: {len(ops)} {heads[status]}:")
            for v in ops:
                lines.append("  " + op_line(v, measure))
                if status == OpStatus.REGRESSED:
                    lines += [*(kernel_lines(result, v.op_id) if kernel else []),
                              *grew_lines(v, measure)]
        lines.append("To accept: " + display_name(retake.of(result.nodeid).command()))
    return "\n".join(lines)


#: The kernels a regressed op's failure text names (its longest).
KERNELS_SHOWN = 3


def kernel_lines(result: TestResult, op_id: int) -> list[str]:
    """The kernels a regressed op launched itself, longest first: where to look."""
    profile = result.profile
    rows = kernels_by_op(profile).get(op_id, [])
    lines = [f"    {k.kind} {abbreviate(k.name)}: {k.count} in {profile.counted} counted "
             f"iterations, mean {duration(k.mean)}" for k in rows[:KERNELS_SHOWN]]
    if len(rows) > KERNELS_SHOWN:
        lines.append(f"    and {len(rows) - KERNELS_SHOWN} more kernel name(s)")
    return lines


def _named(ops: Sequence[OpVerdict], with_change: bool) -> str:
    names = ", ".join(op_name(v) + (f" {percent(v.corrected_ratio)}" if with_change else "")
                      for v in ops[:SHOWN])
    return names + (f" and {len(ops) - SHOWN} more" if len(ops) > SHOWN else "")


def summary_line(result: TestResult, retake: Retake) -> str:
    """``t.py::test: failed; 5 ops compared, drift +0.3%; regressed: relu (OP_ID 1) +85.0%``;
    a test without a baseline names the run's ``opprof baseline update`` (``retake``)."""
    c = result.comparison
    parts = [f"{display_name(result.nodeid)}: {word(result.verdict)}"]
    if result.verdict == Verdict.NO_BASELINE:
        command = display_name(retake.of(result.nodeid).command())
        parts[0] += f" on this machine (`{command}` takes one)"
    if result.reason:  # unjudged, or failed on a budget: its reason has the drift too
        parts.append(display_name(result.reason))  # names env values the user set
    elif c is not None:
        judged = c.having(*COMPARED)
        parts.append(f"{len(judged)} ops compared, drift {percent(c.drift)}")
        if math.isfinite(c.shared):
            parts.append(shared_words(c))
        for verdict, label in _LABELS.items():
            ops = c.having(verdict)
            if ops:
                changed = verdict in (OpStatus.REGRESSED, OpStatus.IMPROVED)
                parts.append(f"{label}: {_named(ops, changed)}")
        if c.unconfirmed:
            parts.append("not confirmed by a re-run: " + _named(c.unconfirmed, True))
    if result.over_budget:
        parts.append("over budget: " + ", ".join(op_name(b) for b in result.over_budget))
    return "; ".join(parts)


def counts_line(results: Iterable[TestResult]) -> str:
    """``opprof: 1 regressed, 0 improved, 2 unjudged, 6 without baseline (ops of 4 tests)``
    (as the Markdown summary counts). An op is *without baseline* when it is new or its
    test has no baseline; tests the gate did not compare (not gated, baselines updated)
    are not counted."""
    counted = dict.fromkeys((OpStatus.REGRESSED, OpStatus.IMPROVED, OpStatus.UNJUDGED), 0)
    without_baseline = tests = 0
    for result in results:
        c = result.comparison
        if c is None:
            if result.verdict == Verdict.NO_BASELINE:
                tests += 1
                without_baseline += len(result.profile.ops)
            elif result.verdict == Verdict.UNJUDGED:  # refused: none of its ops judged
                tests += 1
                counted[OpStatus.UNJUDGED] += len(result.profile.ops)
            continue
        tests += 1
        for status in counted:
            counted[status] += len(c.having(status))
        without_baseline += len(c.having(OpStatus.NEW))
    labels = [f"{n} {status.value}" for status, n in counted.items()]
    labels.append(f"{without_baseline} without baseline")
    return "opprof: " + ", ".join(labels) + f" (ops of {tests} test(s))"
