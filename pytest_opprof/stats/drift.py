"""Drift: the factor every op of a run (or a pair, or an iteration) moved by alike, a
median across the test's ops (so the few ops that really changed do not move it), on
logarithms (a drift is a ratio). Two forms:

- **weighted** (:func:`weighted_median` with :func:`precision_weights`): the
  stored-baseline rule, where each op's precision is known from the model and differs by
  orders of magnitude (a GPU kernel's 0.01% beside a launch-bound op's 20%): the precise
  ops set the drift;
- **plain** (the others): every op counts alike, where no per-op precision is known
  before the drift is (the paired model, a baseline's runs against each other, history).

Each caller decides what to do with fewer ops than its minimum (one op's change would
be its own drift).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

#: The weighted drift weighs no op more than the DRIFT_PEERS-th most precise, so no
#: single op sets the drift alone and hides its own change.
DRIFT_PEERS = 3


def precision_weights(variance: np.ndarray) -> np.ndarray:
    """1 / variance, capped at that of the :data:`DRIFT_PEERS`-th most precise op (all
    ops weigh the same where the variance is unknown)."""
    if len(variance) < DRIFT_PEERS or not np.isfinite(variance).all():
        return np.ones(len(variance))
    cap = float(np.partition(variance, DRIFT_PEERS - 1)[DRIFT_PEERS - 1])
    return np.asarray(1.0 / np.maximum(variance, max(cap, 1e-300)))


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The value at half the total weight (the mean of the two straddling it on a tie:
    with equal weights, the plain median)."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    half = cumulative[-1] / 2
    low = int(np.searchsorted(cumulative, half, "left"))
    if math.isclose(cumulative[low], half) and low + 1 < len(values):
        return float((values[order[low]] + values[order[low + 1]]) / 2)
    return float(values[order[low]])


def across_ops(changes: np.ndarray) -> np.ndarray:
    """The plain drift of each row of ``changes`` (log ratios; columns: ops)."""
    drift: np.ndarray = np.median(np.asarray(changes, dtype=float), axis=-1)
    return drift


def run_drifts(logs: np.ndarray) -> np.ndarray:
    """Each run's plain drift from ``logs`` (ops, runs; NaN where an op lacks a run): the
    median over the ops of how far each sits from its own median over the runs (so one
    op's step does not move it); 0 for a run no op has."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a run no op has
        drift = np.nanmedian(logs - np.nanmedian(logs, axis=1)[:, None], axis=0)
    return np.asarray(np.nan_to_num(drift))


def others_median(x: np.ndarray, min_others: int) -> np.ndarray:
    """For every cell of ``x`` (rows of values, NaN absent), the median of its row's
    other finite values (NaN where the cell is absent or fewer than ``min_others``
    others are present): an op's own time must not set the state it is corrected by."""
    finite = np.isfinite(x)
    c = finite.sum(axis=1, keepdims=True)  # finite values per row
    filled = np.where(finite, x, np.inf)
    order = np.argsort(filled, axis=1, kind="stable")
    ranked = np.take_along_axis(filled, order, axis=1)
    rank = np.argsort(order, axis=1)  # each cell's place in its sorted row
    m = c - 1  # the others
    j1, j2 = (m - 1) // 2, m // 2  # the middle (one when m is odd, two when even)
    i1 = np.clip(j1 + (j1 >= rank), 0, x.shape[1] - 1)
    i2 = np.clip(j2 + (j2 >= rank), 0, x.shape[1] - 1)
    out = (np.take_along_axis(ranked, i1, axis=1) + np.take_along_axis(ranked, i2, axis=1)) / 2
    return np.asarray(np.where(finite & (m >= min_others), out, np.nan))
