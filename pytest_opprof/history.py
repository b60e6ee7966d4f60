"""``opprof history``: each op's time across the stored runs, and where it stepped.

    opprof history [TEST] [--dir DIR] [--machine-key KEY] [--tolerance X]
                   [--json PATH] [--html PATH]

``pytest --opprof-append-baseline`` (on the main branch, once per commit) grows each
test's stored baseline run by run, each run with its date and commit (see
:mod:`pytest_opprof.baseline`; the last 20 are kept). This command reads those runs,
in date order, and finds for each op where its median stepped.

How a step is found. The op's medians, one per run, are taken as logarithms (a step
is then a ratio, whatever the op's size) and segmented with PELT (Killick et al. 2012)
from ``ruptures``, with the L1 cost (each segment's median: one run taken under
contention does not make a segment of its own) and a BIC-like penalty scaled by the
op's noise, ``PENALTY * sigma * log(n)``, where sigma is the robust spread of one run's
median: the MAD of successive differences over sqrt 2, which a step hardly moves.
A step between two segments is reported only when the ratio of their medians is
beyond both the tolerance (the gate's, or ``--tolerance``) and the noise-based margin
``MARGIN_Z * sigma * sqrt(1/n_before + 1/n_after)``; the weakest step under them is
merged away and the rest measured again until every step left is beyond both. A
segment holds at least :data:`MIN_SEGMENT` runs, so a step is found once a second run
confirms it. ``benchmarks/history_sim.py`` measures these choices on simulated runs.

``--json PATH`` writes (schema ``pytest-opprof/history/1``)::

    {"schema": "pytest-opprof/history/1",
     "tolerance": 0.05,                      # the smallest step reported (a fraction)
     "method": {"library": "ruptures", "algorithm": "PELT", "cost": "l1",
                "penalty": 3.0, "margin_z": 3.0, "min_segment": 2},
     "unreadable": ["<one line per baseline file that could not be read>"],
     "tests": [{
        "nodeid": "tests/test_net.py::test_net", "machine": "<machine key>",
        "runs": [{"date": "2026-11-30T01:02:03+00:00" or null,
                  "commit": {pytest-benchmark's commit info: "id", "time", "branch",
                             "dirty", ...} or null}],      # oldest first
        "ops": [{"op_id": 0, "name": "conv2d", "occurrence": 0,
                 "runs": [0, 1, ...],        # indices into the test's runs that hold it
                 "median_ns": [...],         # the op's median in each of those runs
                 "noise": 0.004,             # sigma: spread of one run's log median
                 "steps": [{"run": 7,        # index into runs: the first run after it
                            "commit_id": "a1b2c3d..." or null, "date": "..." or null,
                            "before_ns": 1.0e6, "after_ns": 1.183e6,
                            "ratio": 1.183, "margin": 1.05}]}]}]}

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .baseline import Baseline, BaselineError, BaselineRun, BaselineStore
from .errors import OpprofError
from .options import parse_fraction
from .outputs import NEEDS_MATPLOTLIB, Output, problem, write
from .render import display_name, duration, percent

SCHEMA = "pytest-opprof/history/1"
#: c in the penalty ``c * sigma * log(n)`` of one more change point (BIC-like).
PENALTY = 3.0
#: A step must exceed this many standard errors of the difference of its segments.
MARGIN_Z = 3.0
#: Runs a segment holds at least: a step needs a second run after it.
MIN_SEGMENT = 2
#: The smallest noise assumed (0.1%): a perfectly flat history (a virtual clock)
#: would make every split free.
NOISE_FLOOR = 1e-3
NEEDS_RUPTURES = ("opprof history needs ruptures to find change points: "
                  "pip install 'pytest-opprof[history]'")


# -- the model --------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """A step of an op's median: ``run`` is the index (into the test's runs) of the first
    run after it."""

    run: int
    before_ns: float
    after_ns: float
    #: The smallest ratio that would have been reported, up or down.
    margin: float

    @property
    def ratio(self) -> float:
        return self.after_ns / self.before_ns


@dataclass(frozen=True)
class OpHistory:
    op_id: int
    name: str
    occurrence: int
    #: Indices into the test's runs of the runs that hold the op, oldest first.
    runs: list[int]
    median_ns: list[float]
    noise: float
    steps: list[Step]


@dataclass(frozen=True)
class History:
    nodeid: str
    machine: str
    runs: list[BaselineRun]
    ops: list[OpHistory]

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
    mad = 1.4826 * float(np.median(np.abs(diffs - np.median(diffs))))
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


def op_history(key: tuple[str, int], op_id: int, runs: list[int], medians: list[float],
               tolerance: float) -> OpHistory:
    """One op's history, its steps found (``runs``: where each median was taken)."""
    logs = np.log(np.maximum(np.asarray(medians, dtype=float), 1.0))
    sigma = noise(logs)
    steps = [Step(run=runs[at], before_ns=math.exp(before), after_ns=math.exp(after),
                  margin=math.exp(margin))
             for at, before, after, margin in significant_steps(logs, sigma, tolerance)]
    return OpHistory(op_id=op_id, name=key[0], occurrence=key[1], runs=runs,
                     median_ns=medians, noise=sigma, steps=steps)


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
    series: dict[tuple[str, int], tuple[list[int], list[float]]] = {}
    for index, run in enumerate(runs):
        columns = run.ops
        for name, occurrence, median in zip(columns["name"], columns["occurrence"],
                                            columns["median_ns"], strict=True):
            if median is not None:
                where, values = series.setdefault((name, occurrence), ([], []))
                where.append(index)
                values.append(float(median))
    ids = baseline.op_ids()
    ops = [op_history(key, ids[key], where, values, tolerance)
           for key, (where, values) in series.items()]
    return History(nodeid=baseline.nodeid, machine=baseline.machine, runs=runs,
                       ops=sorted(ops, key=lambda op: (not op.steps, op.op_id)))


# -- the terminal -------------------------------------------------------------------------

SPARKS = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
ASCII_SPARKS = "_.-=*#"


def sparkline(values: Sequence[float], chars: str) -> str:
    """One character per value, from the lowest to the highest (log scale); a flat
    series (within 0.1%) is drawn at mid height."""
    logs = np.log(np.maximum(np.asarray(values, dtype=float), 1.0))
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
            f"{duration(step.before_ns)} -> {duration(step.after_ns)} (margin "
            f"\u00b1{(step.margin - 1) * 100:.1f}%)")


def trend_line(op: OpHistory, chars: str) -> str:
    """``OP_ID0. conv2d  1 ms .. 1.18 ms  ▁▁▁▁████  noise 0.4%, 8 runs``."""
    return (f"{_op_name(op)}  {duration(op.median_ns[0])} .. {duration(op.median_ns[-1])}  "
            f"{sparkline(op.median_ns, chars)}  noise {op.noise * 100:.1f}%, "
            f"{len(op.runs)} run(s)")


def render_text(test: History, tolerance: float, chars: str) -> str:
    """A test's history: its steps, then one trend line per op (those with steps first)."""
    dates = [d for d in (test.date(k) for k in range(len(test.runs))) if d]
    span = f", {dates[0][:10]} .. {dates[-1][:10]}" if dates else ""
    lines = [f"{display_name(test.nodeid)} on machine {display_name(test.machine)!r}: "
             f"{len(test.runs)} run(s){span}, {len(test.ops)} op(s)"]
    steps = [step_line(test, op, step) for op in test.ops for step in op.steps]
    if steps:
        lines += ["  steps:", *(f"    {line}" for line in steps)]
    elif len(test.runs) < 2 * MIN_SEGMENT:
        lines.append(f"  no step can be found in fewer than {2 * MIN_SEGMENT} runs: grow the "
                     "history with pytest --opprof-append-baseline")
    else:
        lines.append(f"  no step beyond the noise and the tolerance ({tolerance * 100:g}%)")
    lines += ["  trends, oldest run first:", *(f"    {trend_line(op, chars)}" for op in test.ops)]
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

    return {
        "nodeid": test.nodeid, "machine": test.machine,
        "runs": [{"date": test.date(k), "commit": commit(run)}
                 for k, run in enumerate(test.runs)],
        "ops": [{"op_id": op.op_id, "name": op.name, "occurrence": op.occurrence,
                 "runs": op.runs, "median_ns": op.median_ns, "noise": op.noise,
                 "steps": [{"run": s.run, "commit_id": test.commit_id(s.run),
                            "date": test.date(s.run), "before_ns": s.before_ns,
                            "after_ns": s.after_ns, "ratio": s.ratio, "margin": s.margin}
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
                             "pytest_opprof.history)")
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
    if args.html is not None:
        from .render.history_html import render_history

        write("--html", args.html, render_history(tests, tolerance))
    return 1 if unreadable else 0
