"""Change points of each op's figure across stored runs (the choices and the simulation
behind them: docs/design/history.md, ``benchmarks/history_sim.py``).

The op's medians, one per run, are taken as logarithms (a step is a ratio) and segmented
with PELT (Killick et al. 2012, ``ruptures``) with the L1 cost (each segment's median: one
run taken under contention is not a segment of its own) and a BIC-like penalty ``PENALTY
* sigma * log(n)``, sigma the op's noise (the MAD of successive differences over sqrt 2,
which a step hardly moves). A step is reported only beyond both the tolerance and
``MARGIN_Z`` standard errors of the difference of its segments, and only where at least
:data:`CONFIRM` runs after its first sit nearer its new level than its old one: a run or
two off and back (an excursion) is no step, and its runs are left out of the levels
either side. The weakest step under these is dropped and the rest measured again.

What every op of a run shares (the median over the test's ops of their deviation from
their own median; with at least :data:`DRIFT_MIN_OPS` ops) is segmented the same way: its
steps are where the ops moved together, reported as such and left in each op (a change
the ops share is a change: a slower common helper, a dependency). Only its passing part,
a run off the level it holds, is taken out, and only for a measure the machine's speed
moves (``Measure.gate.drift``): counts are judged as counted.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .._extras import install
from ..errors import OpprofError
from ..measure import measures
from ..measure.measures import Measure
from ..model.baseline import Baseline, BaselineRun
from ..model.history import History, OpHistory, Step
from ..model.words import Unit
from ..stats.drift import run_drifts
from ..stats.robust import mad_sd
from .config import MIN_OPS_FOR_DRIFT

#: c in the penalty ``c * sigma * log(n)`` of one more change point (BIC-like).
PENALTY = 4.0
#: A step must exceed this many standard errors of the difference of its segments.
MARGIN_Z = 3.0
#: Runs a segment holds at least (PELT's least segment): two runs before a step.
MIN_SEGMENT = 2
#: Runs after a step's first that must agree with its new level: a two-run excursion on
#: unchanged code (up, then back) is not a step.
CONFIRM = 2
#: The fewest runs a step can be found in.
MIN_RUNS = MIN_SEGMENT + 1 + CONFIRM
#: The smallest noise assumed (0.1%): a perfectly flat history (a virtual clock, counts)
#: would make every split free.
NOISE_FLOOR = 1e-3
#: Ops a test needs for what its ops share in a run to be measured (as the gate's rule).
DRIFT_MIN_OPS = MIN_OPS_FOR_DRIFT
NEEDS_RUPTURES = ("opprof history needs ruptures to find change points: "
                  f"{install('history')}")


def require_ruptures() -> None:
    """OpprofError, one line saying what to install, when ruptures is missing."""
    if importlib.util.find_spec("ruptures") is None:
        raise OpprofError(NEEDS_RUPTURES)


def measure_of(run: BaselineRun) -> type[Measure]:
    """The measure a stored run names: its figures' words, unit, tolerance and whether
    the machine's speed moves them."""
    return measures.of(str(run.meta["measure"]), Unit(run.meta["unit"]))


def noise(log_medians: np.ndarray) -> float | None:
    """The spread of one run's log median: the MAD of successive differences over
    sqrt 2 (a step moves one difference, so it hardly counts), at least NOISE_FLOOR;
    None with fewer than 3 runs (not measured)."""
    if log_medians.size < 3:
        return None
    return max(mad_sd(np.diff(log_medians)) / math.sqrt(2), NOISE_FLOOR)


class Found(NamedTuple):
    """A step in logs: its index, the levels either side, its log margin and the runs
    after it that agree with the new level."""

    at: int
    before: float
    after: float
    margin: float
    confirmed: int


def _level(logs: np.ndarray, kept: np.ndarray, start: int, end: int) -> np.ndarray:
    """The runs of ``start:end`` that count towards its level (all, were every one an
    excursion's)."""
    part = logs[start:end][kept[start:end]]
    return part if part.size else logs[start:end]


def _measured(logs: np.ndarray, kept: np.ndarray, breaks: list[int], sigma: float,
              tolerance: float) -> list[Found]:
    edges = [0, *breaks, logs.size]
    found = []
    for k, at in enumerate(breaks):
        left, right = _level(logs, kept, edges[k], at), _level(logs, kept, at, edges[k + 2])
        before, after = float(np.median(left)), float(np.median(right))
        later = logs[at + 1:edges[k + 2]][kept[at + 1:edges[k + 2]]]
        margin = max(MARGIN_Z * sigma * math.sqrt(1 / left.size + 1 / right.size),
                     math.log1p(tolerance))
        found.append(Found(at, before, after, margin, int(np.sum(
            np.abs(later - after) < np.abs(later - before)))))
    return found


def segments(logs: np.ndarray, sigma: float, tolerance: float) -> tuple[list[Found], np.ndarray]:
    """PELT's change points that are steps (beyond the margin and the tolerance, held by
    CONFIRM later runs), and each run's level (its segment's median, excursions left out)."""
    n = logs.size
    kept = np.ones(n, dtype=bool)
    breaks: list[int] = []
    if n >= MIN_RUNS and np.ptp(logs) > math.log1p(tolerance):  # else PELT is spared
        import ruptures

        algo = ruptures.Pelt(model="l1", min_size=MIN_SEGMENT, jump=1).fit(logs)
        breaks = [int(b) for b in algo.predict(pen=PENALTY * sigma * math.log(n))[:-1]]
    while True:
        found = _measured(logs, kept, breaks, sigma, tolerance)
        weak = [(abs(f.after - f.before) / f.margin, i) for i, f in enumerate(found)
                if abs(f.after - f.before) <= f.margin]
        if weak:
            del breaks[min(weak)[1]]
            continue
        brief = next((i for i, f in enumerate(found) if f.confirmed < CONFIRM), None)
        if brief is None:
            break
        # an excursion: its runs nearer the new level count towards neither level
        step, end = found[brief], ([*breaks, n])[brief + 1]
        part = logs[step.at:end]
        kept[step.at:end] &= np.abs(part - step.after) >= np.abs(part - step.before)
        del breaks[brief]
    levels = np.empty(n)
    for start, end in zip([0, *breaks], [*breaks, n], strict=True):
        levels[start:end] = np.median(_level(logs, kept, start, end))
    return found, levels


def significant_steps(log_medians: np.ndarray, sigma: float, tolerance: float) -> list[Found]:
    return segments(log_medians, sigma, tolerance)[0]


def log_times(values: Sequence[float]) -> np.ndarray:
    """Figures as logarithms (under 1 as 1: a median of 0 has no logarithm)."""
    return np.asarray(np.log(np.maximum(np.asarray(values, dtype=float), 1.0)))


def steps_of(logs: np.ndarray, runs: Sequence[int],
             tolerance: float) -> tuple[float | None, list[Step], np.ndarray]:
    """The noise of a log series, its steps (``runs``: the run of each value) and the log
    level of each value."""
    sigma = noise(logs)
    found, levels = segments(logs, NOISE_FLOOR if sigma is None else sigma, tolerance)
    return sigma, [Step(run=runs[f.at], before=math.exp(f.before), after=math.exp(f.after),
                        margin=math.exp(f.margin), confirmed=f.confirmed)
                   for f in found], levels


Series = dict[tuple[str, int], tuple[list[int], list[float]]]


def run_drift(series: Series, runs: int) -> np.ndarray | None:
    """Each run's log factor shared by its ops (:func:`pytest_opprof.stats.drift.run_drifts`);
    None with fewer than DRIFT_MIN_OPS ops."""
    if len(series) < DRIFT_MIN_OPS:
        return None
    logs = np.full((len(series), runs), np.nan)
    for i, (where, values) in enumerate(series.values()):
        logs[i, where] = log_times(values)
    return run_drifts(logs)


def op_history(key: tuple[str, int], op_id: int, runs: list[int], medians: list[float],
               taken_out: np.ndarray | None, tolerance: float) -> OpHistory:
    """One op's history, its steps found in its medians less the log factor ``taken_out``
    of each run (``runs``: where each median was taken)."""
    logs = log_times(medians) - (0.0 if taken_out is None else taken_out[runs])
    sigma, steps, levels = steps_of(logs, runs, tolerance)
    return OpHistory(op_id=op_id, name=key[0], occurrence=key[1], runs=runs, median_ns=medians,
                     corrected_ns=medians if taken_out is None else np.exp(logs).tolist(),
                     noise=sigma,
                     steps=steps, levels=np.exp(levels).tolist())


def history_of(baseline: Baseline, tolerance: float | None = None) -> History:
    """Every op of the test across its runs (OP_IDs as the latest run numbers them),
    oldest first by their ISO dates when every run has one (a stable sort), else as stored
    (the order appended); ``tolerance``: the measure's unless given."""
    runs = list(baseline.runs)
    if all(isinstance(run.meta.get("date"), str) and run.meta["date"] for run in runs):
        runs.sort(key=lambda run: str(run.meta["date"]))
    measure = measure_of(runs[-1])
    tolerance = measure.gate.tolerance if tolerance is None else tolerance
    series: Series = {}
    for index, run in enumerate(runs):
        for name, occurrence, median in zip(run.ops["name"], run.ops["occurrence"],
                                            run.ops["median"], strict=True):
            if median is not None:
                where, values = series.setdefault((name, occurrence), ([], []))
                where.append(index)
                values.append(float(median))
    shared = run_drift(series, len(runs))
    shared_steps: list[Step] = []
    taken_out = None
    if shared is not None:
        _, shared_steps, levels = steps_of(shared, range(len(runs)), tolerance)
        if measure.gate.drift:  # the machine's speed moves the figures: its passing part
            taken_out = shared - levels
    ids = baseline.op_ids()
    ops = [op_history(key, ids[key], where, values, taken_out, tolerance)
           for key, (where, values) in series.items()]
    return History(nodeid=baseline.nodeid, machine=baseline.machine, runs=runs,
                   ops=sorted(ops, key=lambda op: (not op.steps, op.op_id)),
                   tolerance=tolerance,
                   shared=None if shared is None else np.exp(shared).tolist(),
                   shared_steps=shared_steps,
                   taken_out=None if taken_out is None else np.exp(taken_out).tolist())
