"""``opprof history`` as text (sparklines and step lines) and as JSON.

The words every output shows (the terminal, ``--json`` and ``--html``) are decided once,
here: :func:`summary` (a test's), :func:`op_status` (an op's) and :func:`shared_text` (a
step all ops shared).

``--json PATH`` writes (schema ``pytest-opprof/history/3``; version 2 took each run's
drift out of every op, counts too, and named the factor ``drift``; version 1 named the
figures ``*_ns`` whatever their unit)::

    {"schema": "pytest-opprof/history/3",
     "tolerance": 0.05 or null,              # the one given (--tolerance), else null
     "method": {"library": "ruptures", "algorithm": "PELT", "cost": "l1",
                "penalty": 4.0, "margin_z": 3.0, "min_segment": 2,
                "confirm": 2, "min_runs": 5},  # later runs that must agree with a step
     "unreadable": ["<one line per baseline file that could not be read>"],
     "tests": [{
        "nodeid": "tests/test_net.py::test_net", "machine": "<machine key>",
        "measure": "time",                   # the measure of the latest run, and what
        "unit": "ns" or "count",             # its figures (below) count
        "tolerance": 0.05,                   # the smallest step reported (the measure's)
        "summary": "no step beyond ...",     # the test's line, as the terminal says it
        "runs": [{"date": "2026-11-30T01:02:03+00:00" or null,
                  "commit": {pytest-benchmark's commit info: "id", "time", "branch",
                             "dirty", ...} or null}],      # oldest first
        "shared": {"factor": [1.01, 0.98, ...],  # each run's factor shared by its ops
                   "taken_out": [...] or null,   # what was taken out of each run's ops:
                                                 # the factor's passing part; null for
                                                 # counts (nothing is)
                   "steps": [STEP, ...]}         # where the ops moved together
                  or null,                       # (fewer than 5 ops)
        "ops": [{"op_id": 0, "name": "conv2d", "occurrence": 0,
                 "runs": [0, 1, ...],        # indices into the test's runs that hold it
                 "median": [...],            # the op's median in each of those runs
                 "corrected": [...],         # the same less "taken_out"
                 "noise": 0.004 or null,     # sigma: spread of one run's log median
                 "status": "+18.3% at ...",  # the op's line, as every output says it
                 "steps": [STEP, ...]}]}]}

    STEP = {"run": 7,                        # index into runs: the first run after it
            "commit_id": "a1b2c3d..." or null, "date": "..." or null,
            "ratio": 1.183,                  # after / before
            "margin": 1.05,                  # the smallest ratio reported, up or down
            "confirmed": 3,                  # later runs that agree with the new level
            "before": 1.0e6, "after": 1.183e6,   # the levels either side
            "text": "+18.3% at a1b2c3d (2026-11-30), held by 3 later runs"}

``--html PATH`` draws each op's medians across the runs with its steps marked (the
ops with steps first, then the slowest).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..judge.changepoints import (
    CONFIRM,
    DRIFT_MIN_OPS,
    MARGIN_Z,
    MIN_RUNS,
    MIN_SEGMENT,
    NOISE_FLOOR,
    PENALTY,
    log_times,
    measure_of,
)
from ..model.baseline import BaselineRun
from ..model.history import History, OpHistory, Step
from . import display_name, percent
from .table import align

SCHEMA = "pytest-opprof/history/3"
SHARED_LABEL = "all ops (shared)"
SPARKS = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
ASCII_SPARKS = "_.-=*#"


def sparkline(values: Sequence[float], chars: str) -> str:
    """One character per value, from the lowest to the highest (log scale); a flat
    series (within 0.1%) is drawn at mid height."""
    logs = log_times(values)
    low, high = float(logs.min()), float(logs.max())
    if high - low < NOISE_FLOOR:
        return chars[len(chars) // 2] * len(values)
    levels = np.round((logs - low) / (high - low) * (len(chars) - 1)).astype(int)
    return "".join(chars[k] for k in levels)


def runs_word(n: int, what: str = "run") -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def op_name(op: OpHistory) -> str:
    return f"OP_ID{op.op_id}. {display_name(op.name)}"


def margin(step: Step) -> str:
    return f"\u00b1{(step.margin - 1) * 100:.1f}%"


def step_text(test: History, step: Step) -> str:
    """``+18.3% at a1b2c3d (2026-11-30), held by 3 later runs``."""
    return (f"{percent(step.ratio)} at {test.where(step.run)}, held by "
            f"{runs_word(step.confirmed, 'later run')}")


def op_status(test: History, op: OpHistory) -> str:
    """The op's line in every output: its steps, or why it has none."""
    if op.steps:
        return "; ".join(step_text(test, step) for step in op.steps)
    if len(op.runs) < MIN_RUNS:
        return f"too few runs for a step ({len(op.runs)} of {MIN_RUNS})"
    spread = "under 0.1%" if op.noise is None or op.noise <= NOISE_FLOOR \
        else f"{op.noise * 100:.1f}%"
    return f"no step (noise {spread} a run)"


def summary(test: History) -> str:
    """The test's line in every output: how many steps, or why there are none."""
    rule = f"the noise and the tolerance ({test.tolerance * 100:g}%)"
    if len(test.runs) < MIN_RUNS:
        return (f"no step can be found in fewer than {MIN_RUNS} runs (two before a step, "
                f"{CONFIRM} after it to confirm it): grow the history with pytest "
                "--opprof-update-baseline=append")
    found = sum(len(op.steps) for op in test.ops)
    if not found:
        return f"no step beyond {rule}"
    return (f"{runs_word(found, 'step')} beyond {rule}, each held by at least {CONFIRM} "
            "later runs")


def shared_text(test: History, step: Step) -> str:
    """A step of what every op shares: how many ops stepped there, and what it may be
    (``all 6 ops moved together: +30.0% at a1b2c3d (2026-11-30), held by 3 later runs
    (...)``)."""
    stepped = sum(1 for op in test.ops if any(s.run == step.run for s in op.steps))
    ops = f"all {len(test.ops)}" if stepped == len(test.ops) else f"{stepped} of {len(test.ops)}"
    could = "a common helper, a dependency"
    if test.taken_out is not None:  # a timed measure: the machine's speed moves it too
        could += ", or the machine"
    return f"{ops} ops moved together: {step_text(test, step)} (a change they share: {could})"


def trend_cells(test: History, op: OpHistory, chars: str) -> list[str]:
    """``OP_ID0. conv2d``, ``1 ms``, ``..``, ``1.18 ms``, ``▁▁▁▁████  <status>``: one
    op's trend line, as :func:`trend_lines` lines it up."""
    amount = measure_of(test.runs[-1]).amount
    return [op_name(op), amount(op.corrected_ns[0]), "..", amount(op.corrected_ns[-1]),
            f"{sparkline(op.corrected_ns, chars)}  {op_status(test, op)}"]


def trend_lines(rows: list[list[str]]) -> list[str]:
    return align(rows, right={1}, sep=("  ", " ", " ", "  "), minimum={1: 8, 3: 8})


def trends_header(test: History) -> str:
    if test.taken_out is not None:
        return ("trends, oldest run first, less what all ops shared in a run alone (the "
                "machine's; what they shared from a step on is kept)")
    if measure_of(test.runs[-1]).gate.drift:
        return f"trends, oldest run first (fewer than {DRIFT_MIN_OPS} ops: nothing taken out)"
    return "trends, oldest run first, as counted (no machine moves a count)"


def render_text(test: History, chars: str) -> str:
    """A test's history: its summary and steps, then one trend line per op (those with
    steps first)."""
    days = sorted({display_name(d[:10]) for d in (test.date(k) for k in range(len(test.runs)))
                   if d})
    span = "" if not days else f", {days[0]}" + (f" .. {days[-1]}" if len(days) > 1 else "")
    lines = [f"{display_name(test.nodeid)} on machine {display_name(test.machine)!r}: "
             f"{runs_word(len(test.runs))}{span}, {runs_word(len(test.ops), 'op')}"]
    amount = measure_of(test.runs[-1]).amount
    steps = [f"{op_name(op)}: {step_text(test, step)}: {amount(step.before)} -> "
             f"{amount(step.after)}" for op in test.ops for step in op.steps]
    steps += [shared_text(test, step) for step in test.shared_steps]
    lines.append(f"  {summary(test)}" + (":" if steps else ""))
    lines += [f"    {line}" for line in steps]
    lines.append(f"  {trends_header(test)}:")
    rows = [trend_cells(test, op, chars) for op in test.ops]
    shared = test.shared or [1.0]
    rows.insert(0, [SHARED_LABEL, percent(shared[0]), "..", percent(shared[-1]),
                    sparkline(shared, chars)])
    lines += [f"    {line}" for line in trend_lines(rows)[test.shared is None:]]
    return "\n".join(lines)


def to_json(tests: list[History], tolerance: float | None, unreadable: list[str]) -> str:
    """The ``--json`` file (its fields: this module's docstring)."""
    return json.dumps({
        "schema": SCHEMA, "tolerance": tolerance,
        "method": {"library": "ruptures", "algorithm": "PELT", "cost": "l1",
                   "penalty": PENALTY, "margin_z": MARGIN_Z, "min_segment": MIN_SEGMENT,
                   "confirm": CONFIRM, "min_runs": MIN_RUNS},
        "unreadable": unreadable,
        "tests": [_test_json(test) for test in tests]}, indent=1) + "\n"


def _test_json(test: History) -> dict[str, Any]:
    def commit(run: BaselineRun) -> Any:
        found = run.meta.get("commit")
        return found if isinstance(found, dict) else None

    def step(found: Step, text: str) -> dict[str, Any]:
        return {"run": found.run, "commit_id": test.commit_id(found.run),
                "date": test.date(found.run), "ratio": found.ratio, "margin": found.margin,
                "confirmed": found.confirmed, "before": found.before, "after": found.after,
                "text": text}

    measure = measure_of(test.runs[-1])
    return {
        "nodeid": test.nodeid, "machine": test.machine, "measure": measure.name,
        "unit": measure.unit.value, "tolerance": test.tolerance, "summary": summary(test),
        "runs": [{"date": test.date(k), "commit": commit(run)}
                 for k, run in enumerate(test.runs)],
        "shared": None if test.shared is None else {
            "factor": test.shared, "taken_out": test.taken_out,
            "steps": [step(s, shared_text(test, s)) for s in test.shared_steps]},
        "ops": [{"op_id": op.op_id, "name": op.name, "occurrence": op.occurrence,
                 "runs": op.runs, "median": op.median_ns, "corrected": op.corrected_ns,
                 "noise": op.noise, "status": op_status(test, op),
                 "steps": [step(s, step_text(test, s)) for s in op.steps]}
                for op in test.ops]}
