"""``opprof history``: each op's time across the stored runs, and where it stepped.

    opprof history [TEST] [--dir DIR] [--machine-key KEY] [--tolerance X]
                   [--json PATH] [--html PATH]

``pytest --opprof-append-baseline`` (on the main branch, once per commit) grows each
test's stored baseline run by run, each run with its date and commit (see
:mod:`pytest_opprof.store.baseline`; the last 20 are kept). This command reads those runs,
in date order, and finds for each op where its median stepped.

How a step is found. The op's medians, one per run, are taken as logarithms (a step
is then a ratio, whatever the op's size), less each run's machine drift (the plain
median over the test's ops of their deviation from their own median; the gate weighs ops
by precision; only with at least :data:`DRIFT_MIN_OPS` ops), and segmented with PELT
(Killick et al. 2012) from ``ruptures``, with the L1 cost (each segment's median: one run
taken under contention does not make a segment of its own) and a BIC-like penalty scaled by the
op's noise, ``PENALTY * sigma * log(n)``, where sigma is the robust spread of one run's
median: the MAD of successive differences over sqrt 2, which a step hardly moves.
A step between two segments is reported only when the ratio of their medians is
beyond both the tolerance (the gate's, or ``--tolerance``) and the noise-based margin
``MARGIN_Z * sigma * sqrt(1/n_before + 1/n_after)``; the weakest step under them is
merged away and the rest measured again until every step left is beyond both. A
segment holds at least :data:`MIN_SEGMENT` runs, so a step is found once a second run
confirms it. The drift itself is segmented the same way: its steps are reported as
"all ops" (the machine changed, or a change moved every op). ``benchmarks/history_sim.py``
measures these choices on simulated runs.

``--json PATH`` writes (schema ``pytest-opprof/history/1``)::

    {"schema": "pytest-opprof/history/1",
     "tolerance": 0.05,                      # the smallest step reported (a fraction)
     "method": {"library": "ruptures", "algorithm": "PELT", "cost": "l1",
                "penalty": 4.0, "margin_z": 3.0, "min_segment": 2},
     "unreadable": ["<one line per baseline file that could not be read>"],
     "tests": [{
        "nodeid": "tests/test_net.py::test_net", "machine": "<machine key>",
        "runs": [{"date": "2026-11-30T01:02:03+00:00" or null,
                  "commit": {pytest-benchmark's commit info: "id", "time", "branch",
                             "dirty", ...} or null}],      # oldest first
        "drift": {"factor": [1.01, 0.98, ...],   # each run's speed factor shared by its
                                                 # ops (1: typical)
                  "steps": [STEP, ...]}          # without before/after; null with < 5 ops
                 or null,
        "ops": [{"op_id": 0, "name": "conv2d", "occurrence": 0,
                 "runs": [0, 1, ...],        # indices into the test's runs that hold it
                 "median_ns": [...],         # the op's median in each of those runs
                 "corrected_ns": [...],      # the same, each run's drift taken out
                 "noise": 0.004,             # sigma: spread of one run's log median
                 "steps": [STEP, ...]}]}]}

    STEP = {"run": 7,                        # index into runs: the first run after it
            "commit_id": "a1b2c3d..." or null, "date": "..." or null,
            "ratio": 1.183,                  # after / before (drift-corrected)
            "margin": 1.05,                  # the smallest ratio reported, up or down
            "before_ns": 1.0e6, "after_ns": 1.183e6}  # the op's levels either side

``--html PATH`` draws each op's medians across the runs with its steps marked (the
ops with steps first, then the slowest).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OpprofError
from ..judge.rule import MAD_SIGMA
from ..render import display_name, duration, percent
from ..run.options import parse_fraction
from ..run.outputs import NEEDS_MATPLOTLIB, Output, problem, write
from ..store.baseline import Baseline, BaselineError, BaselineRun, BaselineStore

SCHEMA = "pytest-opprof/history/1"
#: c in the penalty ``c * sigma * log(n)`` of one more change point (BIC-like).
PENALTY = 4.0
#: A step must exceed this many standard errors of the difference of its segments.
MARGIN_Z = 3.0
#: Runs a segment holds at least: a step needs a second run after it.
MIN_SEGMENT = 2
#: The smallest noise assumed (0.1%): a perfectly flat history (a virtual clock)
#: would make every split free.
NOISE_FLOOR = 1e-3
#: Ops a test needs for its runs' machine drift to be measured (as the gate's rule).
DRIFT_MIN_OPS = 5
NEEDS_RUPTURES = ("opprof history needs ruptures to find change points: "
                  "pip install 'pytest-opprof[history]'")


# -- the model --------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """A step of a series: ``run`` is the index (into the test's runs) of the first run
    after it; ``before`` and ``after`` the levels either side (an op's: drift-corrected
    ns; the machine drift's: a speed factor)."""

    run: int
    before: float
    after: float
    #: The smallest ratio that would have been reported, up or down.
    margin: float

    @property
    def ratio(self) -> float:
        return self.after / self.before


@dataclass(frozen=True)
class OpHistory:
    op_id: int
    name: str
    occurrence: int
    #: Indices into the test's runs of the runs that hold the op, oldest first.
    runs: list[int]
    #: The op's median in each of those runs, as measured.
    median_ns: list[float]
    #: The same with each run's machine drift taken out (what steps are found in).
    corrected_ns: list[float]
    noise: float
    steps: list[Step]


@dataclass(frozen=True)
class History:
    nodeid: str
    machine: str
    runs: list[BaselineRun]
    ops: list[OpHistory]
    #: Each run's speed factor shared by its ops (1: typical), and where it stepped;
    #: None when the test has fewer than DRIFT_MIN_OPS ops (nothing is corrected).
    drift: list[float] | None = None
    drift_steps: list[Step] = field(default_factory=list)

    def commit_id(self, run: int) -> str | None:
        """The run's commit id; None outside git (pytest-benchmark says ``unversioned``)."""
        commit = self.runs[run].meta.get("commit")
        found = commit.get("id") if isinstance(commit, dict) else None
        return str(found) if found and found != "unversioned" else None

    def date(self, run: int) -> str | None:
        date = self.runs[run].meta.get("date")
        return date if isinstance(date, str) and date else None

    def label(self, run: int) -> str:
        """The run as a person names it: its short commit, else its number."""
        commit = self.commit_id(run)
        return commit[:7] if commit else f"run {run + 1}"

    def where(self, run: int) -> str:
        """``a1b2c3d (2026-11-30)``."""
        date = self.date(run)
        return self.label(run) + (f" ({date[:10]})" if date else "")


# -- finding steps ----------------------------------------------------------------------

def require_ruptures() -> None:
    """OpprofError, one line saying what to install, when ruptures is missing."""
    if importlib.util.find_spec("ruptures") is None:
        raise OpprofError(NEEDS_RUPTURES)


def noise(log_medians: np.ndarray) -> float:
    """The spread of one run's log median: the MAD of successive differences over
    sqrt 2 (a step moves one difference, so it hardly counts), at least NOISE_FLOOR."""
    if log_medians.size < 3:
        return NOISE_FLOOR
    diffs = np.diff(log_medians)
    mad = MAD_SIGMA * float(np.median(np.abs(diffs - np.median(diffs))))
    return max(mad / math.sqrt(2), NOISE_FLOOR)


def change_points(log_medians: np.ndarray, sigma: float) -> list[int]:
    """PELT's segmentation: the index of the first point of each segment but the first."""
    import ruptures

    n = log_medians.size
    if n < 2 * MIN_SEGMENT:
        return []
    algo = ruptures.Pelt(model="l1", min_size=MIN_SEGMENT, jump=1).fit(log_medians)
    return [int(b) for b in algo.predict(pen=PENALTY * sigma * math.log(n))[:-1]]


def _margin(sigma: float, before: int, after: int, tolerance: float) -> float:
    """The smallest log step reported between segments of ``before`` and ``after`` runs."""
    return max(MARGIN_Z * sigma * math.sqrt(1 / before + 1 / after), math.log1p(tolerance))


def significant_steps(log_medians: np.ndarray, sigma: float,
                      tolerance: float) -> list[tuple[int, float, float, float]]:
    """The change points whose step is beyond the margin and the tolerance, each as
    (index, log median before, log median after, log margin): the weakest of the rest is
    merged away, and the steps measured again, until none is left."""
    if log_medians.size == 0 or np.ptp(log_medians) <= math.log1p(tolerance):
        return []  # segment medians differ by no more than this: PELT is spared
    breaks = change_points(log_medians, sigma)
    while True:
        edges = [0, *breaks, log_medians.size]
        steps = []
        for k, at in enumerate(breaks):
            before = float(np.median(log_medians[edges[k]:at]))
            after = float(np.median(log_medians[at:edges[k + 2]]))
            margin = _margin(sigma, at - edges[k], edges[k + 2] - at, tolerance)
            steps.append((at, before, after, margin))
        weak = [(abs(a - b) / m, i) for i, (_, b, a, m) in enumerate(steps) if abs(a - b) <= m]
        if not weak:
            return steps
        del breaks[min(weak)[1]]


def _logs(values: Sequence[float]) -> np.ndarray:
    """Times in ns as logarithms (under 1 ns as 1 ns: a median of 0 has no logarithm)."""
    logs: np.ndarray = np.log(np.maximum(np.asarray(values, dtype=float), 1.0))
    return logs


def steps_of(logs: np.ndarray, runs: Sequence[int], tolerance: float) -> tuple[float, list[Step]]:
    """The noise of a log series and its steps (``runs``: the run of each value)."""
    sigma = noise(logs)
    return sigma, [Step(run=runs[at], before=math.exp(before), after=math.exp(after),
                        margin=math.exp(margin))
                   for at, before, after, margin in significant_steps(logs, sigma, tolerance)]


Series = dict[tuple[str, int], tuple[list[int], list[float]]]


def run_drift(series: Series, runs: int) -> np.ndarray | None:
    """Each run's log speed factor shared by its ops: the median over the ops of its
    deviation from the op's own median (so one op's step does not move it); None with
    fewer than DRIFT_MIN_OPS ops. A slower machine, or contention, moves every op of a
    run alike and hides an op's own step in that noise; taken out, an op's step stands
    out, and a change that moved every op shows as a step of the drift instead."""
    if len(series) < DRIFT_MIN_OPS:
        return None
    deviations: list[list[float]] = [[] for _ in range(runs)]
    for where, values in series.values():
        logs = _logs(values)
        for run, deviation in zip(where, logs - np.median(logs), strict=True):
            deviations[run].append(float(deviation))
    return np.array([float(np.median(d)) if d else 0.0 for d in deviations])


def op_history(key: tuple[str, int], op_id: int, runs: list[int], medians: list[float],
               drift: np.ndarray | None, tolerance: float) -> OpHistory:
    """One op's history, its steps found in its drift-corrected medians (``runs``: where
    each median was taken)."""
    logs = _logs(medians) - (0.0 if drift is None else drift[runs])
    sigma, steps = steps_of(logs, runs, tolerance)
    return OpHistory(op_id=op_id, name=key[0], occurrence=key[1], runs=runs,
                     median_ns=medians, corrected_ns=np.exp(logs).tolist(), noise=sigma,
                     steps=steps)


def in_date_order(runs: list[BaselineRun]) -> list[BaselineRun]:
    """The runs oldest first, by their ISO dates when every run has one (a stable sort:
    runs of one date keep their stored order), else as stored (the order appended)."""
    dates = [run.meta.get("date") for run in runs]
    if all(isinstance(d, str) and d for d in dates):
        return sorted(runs, key=lambda run: str(run.meta["date"]))
    return list(runs)


def history_of(baseline: Baseline, tolerance: float) -> History:
    """Every op of the test across its runs (OP_IDs as the latest run numbers them)."""
    runs = in_date_order(baseline.runs)
    series: Series = {}
    for index, run in enumerate(runs):
        columns = run.ops
        for name, occurrence, median in zip(columns["name"], columns["occurrence"],
                                            columns["median_ns"], strict=True):
            if median is not None:
                where, values = series.setdefault((name, occurrence), ([], []))
                where.append(index)
                values.append(float(median))
    ids = baseline.op_ids()
    drift = run_drift(series, len(runs))
    ops = [op_history(key, ids[key], where, values, drift, tolerance)
           for key, (where, values) in series.items()]
    history = History(nodeid=baseline.nodeid, machine=baseline.machine, runs=runs,
                      ops=sorted(ops, key=lambda op: (not op.steps, op.op_id)))
    if drift is None:
        return history
    _, drift_steps = steps_of(drift, range(len(runs)), tolerance)
    return replace(history, drift=np.exp(drift).tolist(), drift_steps=drift_steps)


# -- the terminal -------------------------------------------------------------------------

DRIFT_LABEL = "machine drift"
SPARKS = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
ASCII_SPARKS = "_.-=*#"


def sparkline(values: Sequence[float], chars: str) -> str:
    """One character per value, from the lowest to the highest (log scale); a flat
    series (within 0.1%) is drawn at mid height."""
    logs = _logs(values)
    low, high = float(logs.min()), float(logs.max())
    if high - low < NOISE_FLOOR:
        return chars[len(chars) // 2] * len(values)
    levels = np.round((logs - low) / (high - low) * (len(chars) - 1)).astype(int)
    return "".join(chars[k] for k in levels)


def _spark_chars() -> str:
    """Block characters where the terminal's encoding has them, else ASCII."""
    try:
        SPARKS.encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return ASCII_SPARKS
    return SPARKS


def _op_name(op: OpHistory) -> str:
    return f"OP_ID{op.op_id}. {display_name(op.name)}"


def step_line(test: History, op: OpHistory, step: Step) -> str:
    """``OP_ID0. conv2d: +18.3% at a1b2c3d (2026-11-30): 1 ms -> 1.18 ms``."""
    return (f"{_op_name(op)}: {percent(step.ratio)} at {test.where(step.run)}: "
            f"{duration(step.before)} -> {duration(step.after)} (margin "
            f"\u00b1{(step.margin - 1) * 100:.1f}%)")


def drift_step_line(test: History, step: Step) -> str:
    """``all ops: +12.0% at a1b2c3d (2026-11-30): ...``: every op moved at once."""
    return (f"all ops: {percent(step.ratio)} at {test.where(step.run)}: the machine, or a "
            f"change that moved every op (margin \u00b1{(step.margin - 1) * 100:.1f}%)")


def trend_line(op: OpHistory, chars: str, width: int = 0) -> str:
    """``OP_ID0. conv2d  1 ms .. 1.18 ms  ▁▁▁▁████  noise 0.4%, 8 runs`` (drift-corrected);
    the name padded to ``width`` so that the trends of a test line up."""
    return (f"{_op_name(op):<{width}}  {duration(op.corrected_ns[0]):>8} .. "
            f"{duration(op.corrected_ns[-1]):<8}  {sparkline(op.corrected_ns, chars)}  "
            f"noise {op.noise * 100:.1f}%, {len(op.runs)} run(s)")


def render_text(test: History, tolerance: float, chars: str) -> str:
    """A test's history: its steps, then one trend line per op (those with steps first)."""
    days = sorted({d[:10] for d in (test.date(k) for k in range(len(test.runs))) if d})
    span = "" if not days else f", {days[0]}" + (f" .. {days[-1]}" if len(days) > 1 else "")
    lines = [f"{display_name(test.nodeid)} on machine {display_name(test.machine)!r}: "
             f"{len(test.runs)} run(s){span}, {len(test.ops)} op(s)"]
    steps = [drift_step_line(test, step) for step in test.drift_steps]
    steps += [step_line(test, op, step) for op in test.ops for step in op.steps]
    if steps:
        lines += ["  steps:", *(f"    {line}" for line in steps)]
    elif len(test.runs) < 2 * MIN_SEGMENT:
        lines.append(f"  no step can be found in fewer than {2 * MIN_SEGMENT} runs: grow the "
                     "history with pytest --opprof-append-baseline")
    else:
        lines.append(f"  no step beyond the noise and the tolerance ({tolerance * 100:g}%)")
    width = max([len(_op_name(op)) for op in test.ops] + [len(DRIFT_LABEL)])
    if test.drift is None:
        lines.append(f"  trends, oldest run first (fewer than {DRIFT_MIN_OPS} ops: machine "
                     "drift not taken out):")
    else:
        lines += ["  trends, oldest run first, each run's machine drift taken out:",
                  f"    {DRIFT_LABEL:<{width}}  {percent(test.drift[0]):>8} .. "
                  f"{percent(test.drift[-1]):<8}  {sparkline(test.drift, chars)}"]
    lines += [f"    {trend_line(op, chars, width)}" for op in test.ops]
    return "\n".join(lines)


# -- the JSON file ------------------------------------------------------------------------

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
        "nodeid": test.nodeid, "machine": test.machine,
        "runs": [{"date": test.date(k), "commit": commit(run)}
                 for k, run in enumerate(test.runs)],
        "drift": None if test.drift is None else {
            "factor": test.drift, "steps": [where(s) for s in test.drift_steps]},
        "ops": [{"op_id": op.op_id, "name": op.name, "occurrence": op.occurrence,
                 "runs": op.runs, "median_ns": op.median_ns, "corrected_ns": op.corrected_ns,
                 "noise": op.noise,
                 "steps": [{**where(s), "before_ns": s.before, "after_ns": s.after}
                           for s in op.steps]}
                for op in test.ops]}


# -- the command ----------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``opprof history`` besides --dir and --machine-key (the CLI's)."""
    parser.add_argument("test", nargs="?", default=None,
                        help="a node id, or part of one (default: every test)")
    parser.add_argument("--tolerance", type=parse_fraction, default=None, metavar="X",
                        help="the smallest step reported, such as 0.05 or 5%% (default: the "
                             "gate's, opprof_tolerance)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write the history as JSON (fields: pydoc "
                             "pytest_opprof.commands.history)")
    parser.add_argument("--html", type=Path, default=None, metavar="PATH",
                        help="also draw each op's trend with its steps as a self-contained "
                             "HTML file (needs matplotlib: the 'report' extra)")


def check_outputs(json_path: Path | None, html_path: Path | None) -> None:
    """Each file asked for can be written (and drawn): OpprofError, one line, if not."""
    for flag, path in (("--json", json_path), ("--html", html_path)):
        if path is None:
            continue
        why = problem(Output(flag, path))
        if why is None and flag == "--html" and importlib.util.find_spec("matplotlib") is None:
            why = NEEDS_MATPLOTLIB
        if why is not None:
            raise OpprofError(f"{flag} {path}: {why}")


def collect(stores: list[BaselineStore], test: str | None, tolerance: float,
            ) -> tuple[list[History], list[str]]:
    """The history of each stored test (matching ``test``), and a line for each file
    that could not be read."""
    found, unreadable = [], []
    for store in stores:
        for _, entry in store.entries():
            if isinstance(entry, BaselineError):
                unreadable.append(str(entry))
            elif test is None or test in entry.nodeid:
                found.append(history_of(entry, tolerance))
    return found, unreadable


def run(stores: list[BaselineStore], root: Path, args: argparse.Namespace,
        tolerance: float) -> int:
    """The command: the history of the stored tests printed, and written to the files
    asked for; 1 when a baseline file could not be read (the rest still shown)."""
    require_ruptures()
    check_outputs(args.json, args.html)
    tests, unreadable = collect(stores, args.test, tolerance)
    if not tests and not unreadable:
        if args.test is not None:
            raise OpprofError(f"no stored baseline matches {args.test!r} under {root}")
        raise OpprofError(f"{root}: no stored runs (grow a history with pytest "
                          "--opprof-append-baseline on each commit)")
    chars = _spark_chars()
    for line in unreadable:
        print(f"unreadable: {line}")
    for test in tests:
        print(render_text(test, tolerance, chars))
    if args.json is not None:
        write("--json", args.json, to_json(tests, tolerance, unreadable))
        print(f"opprof: wrote {args.json}")
    if args.html is not None:
        from ..render.history_html import render_history

        write("--html", args.html, render_history(tests, tolerance))
        print(f"opprof: wrote {args.html}")
    return 1 if unreadable else 0
