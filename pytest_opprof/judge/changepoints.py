"""Change points of each op's time across stored runs (the choices and the simulation
behind them: docs/design/history.md, ``benchmarks/history_sim.py``).

The op's medians, one per run, are taken as logarithms (a step is a ratio), less each
run's machine drift (the plain median over the test's ops of their deviation from their
own median; with at least :data:`DRIFT_MIN_OPS` ops), and segmented with PELT (Killick et
al. 2012, ``ruptures``) with the L1 cost (each segment's median: one run taken under
contention is not a segment of its own) and a BIC-like penalty ``PENALTY * sigma *
log(n)``, sigma the op's noise (the MAD of successive differences over sqrt 2, which a
step hardly moves). A step is reported only beyond both the tolerance and ``MARGIN_Z``
standard errors of the difference of its segments; the weakest step under them is merged
away and the rest measured again. A segment holds at least :data:`MIN_SEGMENT` runs, so a
second run confirms a step. The drift is segmented the same way: its steps are "all ops".
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .._extras import install
from ..errors import OpprofError
from ..model.baseline import Baseline
from ..model.history import History, OpHistory, Step
from ..stats.drift import run_drifts
from ..stats.robust import mad_sd
from .config import MIN_OPS_FOR_DRIFT

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
DRIFT_MIN_OPS = MIN_OPS_FOR_DRIFT
NEEDS_RUPTURES = ("opprof history needs ruptures to find change points: "
                  f"{install('history')}")


def require_ruptures() -> None:
    """OpprofError, one line saying what to install, when ruptures is missing."""
    if importlib.util.find_spec("ruptures") is None:
        raise OpprofError(NEEDS_RUPTURES)


def noise(log_medians: np.ndarray) -> float:
    """The spread of one run's log median: the MAD of successive differences over
    sqrt 2 (a step moves one difference, so it hardly counts), at least NOISE_FLOOR."""
    if log_medians.size < 3:
        return NOISE_FLOOR
    return max(mad_sd(np.diff(log_medians)) / math.sqrt(2), NOISE_FLOOR)


def significant_steps(log_medians: np.ndarray, sigma: float,
                      tolerance: float) -> list[tuple[int, float, float, float]]:
    """PELT's change points whose step is beyond the margin and the tolerance, each as
    (index, log median before, log median after, log margin)."""
    n = log_medians.size
    if n < 2 * MIN_SEGMENT or np.ptp(log_medians) <= math.log1p(tolerance):
        return []  # segment medians differ by no more than this: PELT is spared
    import ruptures

    algo = ruptures.Pelt(model="l1", min_size=MIN_SEGMENT, jump=1).fit(log_medians)
    breaks = [int(b) for b in algo.predict(pen=PENALTY * sigma * math.log(n))[:-1]]
    while True:
        edges = [0, *breaks, n]
        steps = []
        for k, at in enumerate(breaks):
            left, right = log_medians[edges[k]:at], log_medians[at:edges[k + 2]]
            margin = max(MARGIN_Z * sigma * math.sqrt(1 / left.size + 1 / right.size),
                         math.log1p(tolerance))
            steps.append((at, float(np.median(left)), float(np.median(right)), margin))
        weak = [(abs(a - b) / m, i) for i, (_, b, a, m) in enumerate(steps) if abs(a - b) <= m]
        if not weak:
            return steps
        del breaks[min(weak)[1]]


def log_times(values: Sequence[float]) -> np.ndarray:
    """Times in ns as logarithms (under 1 ns as 1 ns: a median of 0 has no logarithm)."""
    return np.asarray(np.log(np.maximum(np.asarray(values, dtype=float), 1.0)))


def steps_of(logs: np.ndarray, runs: Sequence[int], tolerance: float) -> tuple[float, list[Step]]:
    """The noise of a log series and its steps (``runs``: the run of each value)."""
    sigma = noise(logs)
    return sigma, [Step(run=runs[at], before=math.exp(before), after=math.exp(after),
                        margin=math.exp(margin))
                   for at, before, after, margin in significant_steps(logs, sigma, tolerance)]


Series = dict[tuple[str, int], tuple[list[int], list[float]]]


def run_drift(series: Series, runs: int) -> np.ndarray | None:
    """Each run's log drift (:func:`pytest_opprof.stats.drift.run_drifts`); None with
    fewer than DRIFT_MIN_OPS ops. A slower machine, or contention, moves every op of a
    run alike and hides an op's own step in that noise."""
    if len(series) < DRIFT_MIN_OPS:
        return None
    logs = np.full((len(series), runs), np.nan)
    for i, (where, values) in enumerate(series.values()):
        logs[i, where] = log_times(values)
    return run_drifts(logs)


def op_history(key: tuple[str, int], op_id: int, runs: list[int], medians: list[float],
               drift: np.ndarray | None, tolerance: float) -> OpHistory:
    """One op's history, its steps found in its drift-corrected medians (``runs``: where
    each median was taken)."""
    logs = log_times(medians) - (0.0 if drift is None else drift[runs])
    sigma, steps = steps_of(logs, runs, tolerance)
    return OpHistory(op_id=op_id, name=key[0], occurrence=key[1], runs=runs,
                     median_ns=medians, corrected_ns=np.exp(logs).tolist(), noise=sigma,
                     steps=steps)


def history_of(baseline: Baseline, tolerance: float) -> History:
    """Every op of the test across its runs (OP_IDs as the latest run numbers them),
    oldest first by their ISO dates when every run has one (a stable sort), else as stored
    (the order appended)."""
    runs = list(baseline.runs)
    if all(isinstance(run.meta.get("date"), str) and run.meta["date"] for run in runs):
        runs.sort(key=lambda run: str(run.meta["date"]))
    series: Series = {}
    for index, run in enumerate(runs):
        for name, occurrence, median in zip(run.ops["name"], run.ops["occurrence"],
                                            run.ops["median"], strict=True):
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
