"""``opprof compare``'s outputs: the terminal table, ``--json`` (schema
pytest_opprof/schemas/compare-3.schema.json) and ``--markdown`` (for
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
SCHEMA = "pytest-opprof/compare/3"
COLUMNS = ["OP_ID", "op", "base", "head", "change", "estimate", "interval", "detectable",
           "verdict"]
#: What the columns say, under every table: ``change`` is what the medians beside it show.
LEGEND = ("change is head/base of the medians; estimate is the op's change as the pairs "
          "show it, judged against no change (never less what the other ops did): the "
          "interval and the verdict are its")
#: The same for figures that repeat (counts: ``{}`` is what an op's figure is).
COUNTS_LEGEND = ("change is head/base of the medians, {}; estimate is its mean over the "
                 "pairs: the interval and the verdict are its")


def _cells(row: OpRow, measure: type[measures.Measure]) -> list[str]:
    c = row.change
    return [str(row.op_id), display_name(row.name), measure.amount(c.base_ns),
            measure.amount(c.head_ns), percent(c.change), percent(c.own),
            f"{percent(c.low)} .. {percent(c.high)}", percent(1 + c.detectable), c.verdict]


def _legend(measure: type[measures.Measure]) -> str:
    return COUNTS_LEGEND.format(measure.figure) if measure.repeats else LEGEND


def blind_tests(report: Report) -> list[TestComparison]:
    """The tests whose ops could not show the slowdown asked: ``--strict-effect``'s,
    else the one the run was sized for (``--detect``)."""
    effect = report.detect if report.strict_effect is None else report.strict_effect
    return [t for t in report.tests if t.ops and blind(t.sees, effect)]


def _blind(report: Report) -> str | None:
    """One sentence for the run: which tests could not show the slowdown asked, and
    what each could (said once per run, in every output)."""
    found = blind_tests(report)
    if not found:
        return None
    flag = ("--strict-effect" if report.strict_effect is not None else "--detect")
    effect = report.detect if report.strict_effect is None else report.strict_effect
    more = ("more pairs (--max-pairs)" if report.mode == "pairs"
            else "opprof compare REF (pairs of processes)")
    tests = ", ".join(f"{display_name(t.nodeid)} {percent(1 + t.sees)}" for t in found)
    return (f"{len(found)} of {len(report.tests)} test(s) could not show a slowdown of "
            f"{percent(1 + effect)} ({flag}; nine in ten of their ops could only show: "
            f"{tests}); {more}, more iterations or a quieter machine would help")


def _shared(report: Report, test: TestComparison) -> str:
    """What the test's ops moved by together, as a finding of its own."""
    s = test.result.shared
    if s is None:
        return ""
    interval = f"{percent(s.low)} .. {percent(s.high)}"
    if not s.seen():
        return f"; no change shared by the ops ({percent(s.change)}, {interval})"
    who = ("the machine's or the code's alike: one run per side cannot tell"
           if test.result.pairs < 2 else "the code's or the environment's: the pairs "
           "took turns, which cancels the machine's")
    return (f"; the ops moved together by {percent(s.change)} ({interval}), {who}; "
            "each op judged with it, against no change")


def _how(report: Report, test: TestComparison) -> str:
    """How the test was judged: pairs, what its ops moved by together, the interval."""
    r = test.result
    level = f"{1 - report.alpha:.0%} family-wise over {len(test.ops)} op(s)"
    dof = "normal" if math.isinf(r.dof) else f"t, {r.dof:.1f} dof or more"
    sees = f"; nine in ten ops can show {percent(1 + test.sees)}" if test.ops else ""
    return f"{r.pairs} pair(s){_shared(report, test)}; interval {level} ({dof}){sees}"


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
        rows = [COLUMNS, *(_cells(row, measure) for row in test.ops)]
        lines += ["  " + line for line in align(rows, right=set(range(len(COLUMNS))) - {1})]
    lines += [f"{where} only: {display_name(what)}" for what, where in _one_side(report)]
    blind_line = _blind(report)
    lines += ["", *([f"opprof compare: blind: {blind_line}"] if blind_line else []),
              f"opprof compare: {_summary(report)}"]
    return "\n".join(lines)


def markdown(report: Report) -> str:
    """A job summary: the counts, then a table per test (regressions first; medians as
    the report's measure says them)."""
    measure = measures.of(report.measure, report.unit)
    lines = ["## opprof compare", "",
             f"Base {span(report.base)}, head {span(report.head)}: {_summary(report)}.", ""]
    blind_line = _blind(report)
    lines += [f"**Blind:** {blind_line}.", ""] if blind_line else []
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
        lines += quote(list(test.result.notes))
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
    """The comparison as schema compare/3 (``unit``: what its ``*_ns`` medians count)."""
    data: dict[str, Any] = {
        "schema": SCHEMA, "mode": report.mode, "base": report.base, "head": report.head,
        "measure": report.measure, "unit": report.unit.value,
        "pairs": report.pairs, "tolerance": report.tolerance, "alpha": report.alpha,
        "detect": report.detect, "strict_effect": report.strict_effect,
        "blind": [t.nodeid for t in blind_tests(report)],
        "regressed": report.count("regressed"), "improved": report.count("improved"),
        "base_only_tests": list(report.base_only_tests),
        "head_only_tests": list(report.head_only_tests),
        "tests": [{
            "nodeid": t.nodeid, "pairs": t.result.pairs,
            "common": list(t.result.common),
            "shared": None if t.result.shared is None else {
                "change": t.result.shared.change, "low": t.result.shared.low,
                "high": t.result.shared.high},
            "dof": finite(t.result.dof), "quantile": t.result.quantile,
            "notes": list(t.result.notes),
            "base_only_ops": list(t.base_only_ops), "head_only_ops": list(t.head_only_ops),
            "partial_ops": list(t.partial_ops),
            "sees": finite(t.sees) if t.ops else None,
            "ops": [{"op_id": r.op_id, "name": r.name, "occurrence": r.occurrence,
                     "base_median_ns": r.change.base_ns, "head_median_ns": r.change.head_ns,
                     "change": r.change.change, "estimate": r.change.own,
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
