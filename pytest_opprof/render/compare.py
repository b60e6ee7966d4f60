"""``opprof compare``'s outputs: the terminal table, ``--json`` (schema
pytest_opprof/schemas/compare-2.schema.json) and ``--markdown`` (for
``$GITHUB_STEP_SUMMARY``), the medians written as the compared profiles' measure says them.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from ..measure import measures
from ..model.comparison import differences
from ..stats.power import blind
from . import display_name, percent
from .markdown import code, head, quote, row, span
from .results_json import finite
from .table import align

if TYPE_CHECKING:
    from ..model.comparison import Environment, OpRow, Report, TestComparison

#: Version 2: the measure named, its unit ``ns`` or ``count`` (version 1: ``instructions``).
SCHEMA = "pytest-opprof/compare/2"
COLUMNS = ["OP_ID", "op", "base", "head", "change", "corrected", "interval", "detectable",
           "verdict"]
#: What the columns say, under every table: ``change`` is what the medians beside it show.
LEGEND = ("change is head/base of the medians; corrected is the op's own change, less the "
          "drift (what every op moved by alike): the interval and the verdict are its")
#: The same for figures that repeat (counts: ``{}`` is what an op's figure is).
COUNTS_LEGEND = ("change is head/base of the medians, {}; corrected is its mean over the "
                 "pairs (counts are not drift-corrected): the interval and the verdict are "
                 "its")


def _cells(row: OpRow, measure: type[measures.Measure]) -> list[str]:
    c = row.change
    return [str(row.op_id), display_name(row.name), measure.amount(c.base_ns),
            measure.amount(c.head_ns), percent(c.change), percent(c.own),
            f"{percent(c.low)} .. {percent(c.high)}", percent(1 + c.detectable), c.verdict]


def _legend(measure: type[measures.Measure]) -> str:
    return COUNTS_LEGEND.format(measure.figure) if measure.repeats else LEGEND


def _blind(report: Report, test: TestComparison) -> str | None:
    """A sentence when the test's ops could not see the slowdown the run was sized for."""
    if not test.ops or not blind(test.sees, report.detect):
        return None
    more = ("more pairs (--max-pairs), " if report.mode == "pairs"
            else "opprof compare REF (pairs of processes), ")
    return (f"nine in ten ops could only show slowdowns over {percent(1 + test.sees)} "
            f"(--detect {percent(1 + report.detect)}); {more}more iterations or a quieter "
            "machine would help")


def _how(report: Report, test: TestComparison) -> str:
    """How the test was judged: pairs, drift, the interval's level."""
    r = test.result
    level = f"{1 - report.alpha:.0%} family-wise over {len(test.ops)} op(s)"
    dof = "normal" if math.isinf(r.dof) else f"t, {r.dof:.1f} dof"
    drift = ("no drift correction" if not r.drift_corrected
             else f"drift {percent(r.drift[0])}" if len(r.drift) == 1
             else f"drift per pair {percent(min(r.drift))} to {percent(max(r.drift))}")
    sees = f"; nine in ten ops can show {percent(1 + test.sees)}" if test.ops else ""
    return f"{r.pairs} pair(s), {drift}; interval {level} ({dof}){sees}"


def _summary(report: Report) -> str:
    judged = sum(len(t.ops) for t in report.tests)
    return (f"{report.count('regressed')} regressed, {report.count('improved')} improved, "
            f"{judged - report.count('regressed') - report.count('improved')} ok of {judged} "
            f"op(s) in {len(report.tests)} test(s); tolerance {report.tolerance:.0%}")


def _one_side(report: Report) -> list[tuple[str, str]]:
    """(what, where) for everything not judged: measured on one side only, or on both
    but not in every pair."""
    found = [(f"test {t}", "base") for t in report.base_only_tests]
    found += [(f"test {t}", "head") for t in report.head_only_tests]
    for t in report.tests:
        found += [(f"op {op} of {t.nodeid}", "base") for op in t.base_only_ops]
        found += [(f"op {op} of {t.nodeid}", "head") for op in t.head_only_ops]
        found += [(f"op {op} of {t.nodeid}", "some pairs") for op in t.partial_ops]
    return found


#: The packages that differ, at most, in the terminal and Markdown (the JSON has all).
SHOWN_DIFFERENCES = 12


def _environments(report: Report) -> list[str]:
    """The sides' environments and what differs between them, a line each (none when
    both ran under one interpreter)."""
    if report.environments is None:
        return []
    base, head = report.environments
    rows = differences(base, head)
    shown = ", ".join(f"{display_name(n)} {display_name(b)} -> {display_name(h)}"
                      for n, b, h in rows[:SHOWN_DIFFERENCES])
    more = (f", and {len(rows) - SHOWN_DIFFERENCES} more (--json lists them)"
            if len(rows) > SHOWN_DIFFERENCES else "")
    return [f"base environment: {display_name(base.summary())}",
            f"head environment: {display_name(head.summary())}",
            f"packages that differ: {shown}{more}" if rows
            else "packages that differ: none (the same versions of everything)"]


def text(report: Report) -> str:
    """The terminal table: per test, every op with its change and verdict (medians as
    the report's measure says them)."""
    measure = measures.of(report.measure, report.unit)
    lines = [f"opprof compare: base {display_name(report.base)}, head "
             f"{display_name(report.head)}; {_legend(measure)}", *_environments(report)]
    for test in report.tests:
        lines += ["", f"{display_name(test.nodeid)}: {_how(report, test)}"]
        lines += [f"  note: {note}" for note in test.result.notes]
        blind = _blind(report, test)
        lines += [f"  blind: {blind}"] if blind else []
        rows = [COLUMNS, *(_cells(row, measure) for row in test.ops)]
        lines += ["  " + line for line in align(rows, right=set(range(len(COLUMNS))) - {1})]
    lines += [f"{where} only: {display_name(what)}" for what, where in _one_side(report)]
    lines += ["", f"opprof compare: {_summary(report)}"]
    return "\n".join(lines)


def markdown(report: Report) -> str:
    """A job summary: the counts, then a table per test (regressions first; medians as
    the report's measure says them)."""
    measure = measures.of(report.measure, report.unit)
    lines = ["## opprof compare", "",
             f"Base {span(report.base)}, head {span(report.head)}: {_summary(report)}.", ""]
    envs = _environments(report)
    if envs:
        lines += [f"- {label}: {span(value)}" for label, value in
                  (line.split(": ", 1) for line in envs)] + [""]
    legend = _legend(measure)
    lines.append(legend[0].upper() + legend[1:] + ".")
    order = {"regressed": 0, "improved": 1, "ok": 2}
    for test in sorted(report.tests, key=lambda t: min(
            (order[r.change.verdict] for r in t.ops), default=3)):
        lines += ["", f"### {span(test.nodeid)}", "", _how(report, test) + ".", ""]
        blind = _blind(report, test)
        lines += quote([*test.result.notes, *([f"**blind:** {blind}"] if blind else [])])
        lines += head(*COLUMNS)
        for op in sorted(test.ops, key=lambda r: order[r.change.verdict]):
            cells = _cells(op, measure)
            cells[1] = code(op.name)
            cells[-1] = f"**{cells[-1]}**" if cells[-1] != "ok" else cells[-1]
            lines.append(row(cells))
    one_side = _one_side(report)
    if one_side:
        lines += ["", "### On one side only", ""]
        lines += [f"- {where}: {span(what)}" for what, where in one_side]
    return "\n".join(lines) + "\n"


def to_json(report: Report) -> str:
    """The comparison as schema compare/2 (``unit``: what its ``*_ns`` medians count)."""
    data: dict[str, Any] = {
        "schema": SCHEMA, "mode": report.mode, "base": report.base, "head": report.head,
        "measure": report.measure, "unit": report.unit.value,
        "pairs": report.pairs, "tolerance": report.tolerance, "alpha": report.alpha,
        "detect": report.detect,
        "regressed": report.count("regressed"), "improved": report.count("improved"),
        "base_only_tests": list(report.base_only_tests),
        "head_only_tests": list(report.head_only_tests),
        "tests": [{
            "nodeid": t.nodeid, "pairs": t.result.pairs,
            "drift_corrected": t.result.drift_corrected, "drift": list(t.result.drift),
            "dof": finite(t.result.dof), "quantile": t.result.quantile,
            "notes": list(t.result.notes),
            "base_only_ops": list(t.base_only_ops), "head_only_ops": list(t.head_only_ops),
            "partial_ops": list(t.partial_ops),
            "sees": finite(t.sees) if t.ops else None,
            "ops": [{"op_id": r.op_id, "name": r.name, "occurrence": r.occurrence,
                     "base_median_ns": r.change.base_ns, "head_median_ns": r.change.head_ns,
                     "change": r.change.change, "corrected": r.change.own,
                     "low": r.change.low, "high": r.change.high,
                     "sd": r.change.sd, "detectable": r.change.detectable,
                     "verdict": r.change.verdict} for r in t.ops],
        } for t in report.tests],
    }
    if report.environments is not None:
        base, head = report.environments
        data["environments"] = {
            "base": _environment(base), "head": _environment(head),
            "differ": [{"name": n, "base": b, "head": h}
                       for n, b, h in differences(base, head)]}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def _environment(env: Environment) -> dict[str, Any]:
    return {"python": env.python, "version": env.version, "blas": env.blas,
            "cuda": env.cuda, "venv": env.venv, "packages": dict(sorted(env.packages.items()))}
