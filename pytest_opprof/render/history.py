"""``opprof history`` as text (sparklines and step lines) and as JSON.

``--json PATH`` writes (schema ``pytest-opprof/history/2``; version 1 named the figures
``*_ns`` whatever their unit, and its unit ``instructions`` is ``count`` now)::

    {"schema": "pytest-opprof/history/2",
     "tolerance": 0.05,                      # the smallest step reported (a fraction)
     "method": {"library": "ruptures", "algorithm": "PELT", "cost": "l1",
                "penalty": 4.0, "margin_z": 3.0, "min_segment": 2},
     "unreadable": ["<one line per baseline file that could not be read>"],
     "tests": [{
        "nodeid": "tests/test_net.py::test_net", "machine": "<machine key>",
        "measure": "time",                   # the measure of the latest run, and what
        "unit": "ns" or "count",             # its figures (below) count
        "runs": [{"date": "2026-11-30T01:02:03+00:00" or null,
                  "commit": {pytest-benchmark's commit info: "id", "time", "branch",
                             "dirty", ...} or null}],      # oldest first
        "drift": {"factor": [1.01, 0.98, ...],   # each run's speed factor shared by its
                                                 # ops (1: typical)
                  "steps": [STEP, ...]}          # without before/after; null with < 5 ops
                 or null,
        "ops": [{"op_id": 0, "name": "conv2d", "occurrence": 0,
                 "runs": [0, 1, ...],        # indices into the test's runs that hold it
                 "median": [...],            # the op's median in each of those runs
                 "corrected": [...],         # the same, each run's drift taken out
                 "noise": 0.004,             # sigma: spread of one run's log median
                 "steps": [STEP, ...]}]}]}

    STEP = {"run": 7,                        # index into runs: the first run after it
            "commit_id": "a1b2c3d..." or null, "date": "..." or null,
            "ratio": 1.183,                  # after / before (drift-corrected)
            "margin": 1.05,                  # the smallest ratio reported, up or down
            "before": 1.0e6, "after": 1.183e6}     # the op's levels either side

``--html PATH`` draws each op's medians across the runs with its steps marked (the
ops with steps first, then the slowest).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..judge.changepoints import (
    DRIFT_MIN_OPS,
    MARGIN_Z,
    MIN_SEGMENT,
    NOISE_FLOOR,
    PENALTY,
    log_times,
)
from ..measure import measures
from ..measure.measures import Measure
from ..model.baseline import BaselineRun
from ..model.history import History, OpHistory, Step
from ..model.words import Unit
from . import display_name, percent
from .table import align

SCHEMA = "pytest-opprof/history/2"
DRIFT_LABEL = "machine drift"
SPARKS = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
ASCII_SPARKS = "_.-=*#"


def measure_of(test: History) -> type[Measure]:
    """The measure of the history's latest run: its figures' words and unit."""
    meta = test.runs[-1].meta
    return measures.of(str(meta["measure"]), Unit(meta["unit"]))


def sparkline(values: Sequence[float], chars: str) -> str:
    """One character per value, from the lowest to the highest (log scale); a flat
    series (within 0.1%) is drawn at mid height."""
    logs = log_times(values)
    low, high = float(logs.min()), float(logs.max())
    if high - low < NOISE_FLOOR:
        return chars[len(chars) // 2] * len(values)
    levels = np.round((logs - low) / (high - low) * (len(chars) - 1)).astype(int)
    return "".join(chars[k] for k in levels)


def _op_name(op: OpHistory) -> str:
    return f"OP_ID{op.op_id}. {display_name(op.name)}"


def margin(step: Step) -> str:
    return f"\u00b1{(step.margin - 1) * 100:.1f}%"


def step_line(test: History, op: OpHistory, step: Step) -> str:
    """``OP_ID0. conv2d: +18.3% at a1b2c3d (2026-11-30): 1 ms -> 1.18 ms (margin ...)``."""
    amount = measure_of(test).amount
    return (f"{_op_name(op)}: {percent(step.ratio)} at {test.where(step.run)}: "
            f"{amount(step.before)} -> {amount(step.after)} (margin {margin(step)})")


def drift_step_line(test: History, step: Step) -> str:
    """``all ops: +12.0% at a1b2c3d (2026-11-30): ...``: every op moved at once."""
    return (f"all ops: {percent(step.ratio)} at {test.where(step.run)}: the machine, or a "
            f"change that moved every op (margin {margin(step)})")


def trend_cells(op: OpHistory, chars: str, measure: type[Measure]) -> list[str]:
    """``OP_ID0. conv2d``, ``1 ms``, ``..``, ``1.18 ms``, ``▁▁▁▁████  noise 0.4%, 8 runs``:
    one op's drift-corrected trend line, as :func:`trend_lines` lines it up."""
    return [_op_name(op), measure.amount(op.corrected_ns[0]), "..",
            measure.amount(op.corrected_ns[-1]),
            f"{sparkline(op.corrected_ns, chars)}  noise {op.noise * 100:.1f}%, "
            f"{len(op.runs)} run(s)"]


def trend_lines(rows: list[list[str]]) -> list[str]:
    return align(rows, right={1}, sep=("  ", " ", " ", "  "), minimum={1: 8, 3: 8})


def render_text(test: History, tolerance: float, chars: str) -> str:
    """A test's history: its steps, then one trend line per op (those with steps first)."""
    days = sorted({display_name(d[:10]) for d in (test.date(k) for k in range(len(test.runs)))
                   if d})
    span = "" if not days else f", {days[0]}" + (f" .. {days[-1]}" if len(days) > 1 else "")
    lines = [f"{display_name(test.nodeid)} on machine {display_name(test.machine)!r}: "
             f"{len(test.runs)} run(s){span}, {len(test.ops)} op(s)"]
    steps = [drift_step_line(test, step) for step in test.drift_steps]
    steps += [step_line(test, op, step) for op in test.ops for step in op.steps]
    if steps:
        lines += ["  steps:", *(f"    {line}" for line in steps)]
    elif len(test.runs) < 2 * MIN_SEGMENT:
        lines.append(f"  no step can be found in fewer than {2 * MIN_SEGMENT} runs: grow the "
                     "history with pytest --opprof-update-baseline=append")
    else:
        lines.append(f"  no step beyond the noise and the tolerance ({tolerance * 100:g}%)")
    rows = [trend_cells(op, chars, measure_of(test)) for op in test.ops]
    if test.drift is None:
        lines.append(f"  trends, oldest run first (fewer than {DRIFT_MIN_OPS} ops: machine "
                     "drift not taken out):")
        rows.insert(0, [DRIFT_LABEL])  # sets the names' width, as with a drift line
        lines += [f"    {line}" for line in trend_lines(rows)[1:]]
    else:
        lines.append("  trends, oldest run first, each run's machine drift taken out:")
        rows.insert(0, [DRIFT_LABEL, percent(test.drift[0]), "..", percent(test.drift[-1]),
                        sparkline(test.drift, chars)])
        lines += [f"    {line}" for line in trend_lines(rows)]
    return "\n".join(lines)


def to_json(tests: list[History], tolerance: float, unreadable: list[str]) -> str:
    """The ``--json`` file (its fields: this module's docstring)."""
    return json.dumps({
        "schema": SCHEMA, "tolerance": tolerance,
        "method": {"library": "ruptures", "algorithm": "PELT", "cost": "l1",
                   "penalty": PENALTY, "margin_z": MARGIN_Z, "min_segment": MIN_SEGMENT},
        "unreadable": unreadable,
        "tests": [_test_json(test) for test in tests]}, indent=1) + "\n"


def _test_json(test: History) -> dict[str, Any]:
    def commit(run: BaselineRun) -> Any:
        found = run.meta.get("commit")
        return found if isinstance(found, dict) else None

    def where(step: Step) -> dict[str, Any]:
        return {"run": step.run, "commit_id": test.commit_id(step.run),
                "date": test.date(step.run), "ratio": step.ratio, "margin": step.margin}

    return {
        "nodeid": test.nodeid, "machine": test.machine, "measure": measure_of(test).name,
        "unit": measure_of(test).unit.value,
        "runs": [{"date": test.date(k), "commit": commit(run)}
                 for k, run in enumerate(test.runs)],
        "drift": None if test.drift is None else {
            "factor": test.drift, "steps": [where(s) for s in test.drift_steps]},
        "ops": [{"op_id": op.op_id, "name": op.name, "occurrence": op.occurrence,
                 "runs": op.runs, "median": op.median_ns, "corrected": op.corrected_ns,
                 "noise": op.noise,
                 "steps": [{**where(s), "before": s.before, "after": s.after}
                           for s in op.steps]}
                for op in test.ops]}
