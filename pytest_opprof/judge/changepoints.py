"""Change points of each op's time across stored runs.

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
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .._extras import install
from ..errors import OpprofError
from ..model.baseline import Baseline, BaselineRun
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


def log_times(values: Sequence[float]) -> np.ndarray:
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
                                            columns["median"], strict=True):
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
