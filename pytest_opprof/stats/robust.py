"""Robust estimators of centre and spread. Times are taken as logarithms wherever a
centre or a spread is estimated (a change is then a ratio, whatever the op's size)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: MAD * 1.4826 estimates sigma for normal data.
MAD_SIGMA = 1.4826
#: Var(median) ~ (pi / 2) sigma^2 / n for normal samples.
MEDIAN_VAR = math.pi / 2


def is_positive(samples: np.ndarray) -> np.ndarray:
    """Where ``samples`` hold a time that can be judged (a time of 0 or NaN has no
    logarithm). The one such filter."""
    a = np.asarray(samples, dtype=float)
    mask: np.ndarray = np.isfinite(a) & (a > 0)
    return mask


def positive(samples: np.ndarray) -> np.ndarray:
    """The positive finite values of ``samples``, as floats."""
    a = np.asarray(samples, dtype=float)
    keep = is_positive(a)
    return a if keep.all() else a[keep]


def positive_or_nan(samples: np.ndarray) -> np.ndarray:
    """``samples`` as floats, NaN wherever a value is not positive and finite."""
    a = np.asarray(samples, dtype=float)
    return np.asarray(np.where(is_positive(a), a, np.nan))


def median(samples: np.ndarray) -> float:
    """The median of the positive finite values (NaN with none)."""
    a = positive(samples)
    return float(np.median(a)) if a.size else math.nan


def mad_sd(x: np.ndarray) -> float:
    """The standard deviation of ``x`` read from its median absolute deviation."""
    return MAD_SIGMA * float(np.median(np.abs(x - np.median(x))))


def robust_var(x: np.ndarray) -> float:
    """The variance of ``x`` read from its MAD (robust to the few values that really
    changed)."""
    spread = mad_sd(x)
    return spread * spread


def log_median_se2(rows: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """For each row of samples (positive values, none empty): the median of the log
    samples, and the squared standard error of that log median, (pi / 2) sigma^2 / n
    with sigma from the MAD of the log samples (robust to spikes).

    The median is taken of the logs, not of the samples: it is the log of the sample
    median for an odd count, the log of the geometric mean of the middle two for an even
    one; the standard error is that of this estimate."""
    lengths = np.array([len(r) for r in rows])
    if (lengths == lengths[0]).all():  # the common case, and far faster than nanmedian
        logs = np.log(np.vstack(rows).astype(float))
        centre = np.median(logs, axis=1)
        sigma = MAD_SIGMA * np.median(np.abs(logs - centre[:, None]), axis=1)
    else:
        padded = np.full((len(rows), lengths.max()), np.nan)
        for i, r in enumerate(rows):
            padded[i, :len(r)] = r
        logs = np.log(padded)
        centre = np.nanmedian(logs, axis=1)
        sigma = MAD_SIGMA * np.nanmedian(np.abs(logs - centre[:, None]), axis=1)
    return centre, MEDIAN_VAR * sigma * sigma / lengths


def one_log_median_se2(samples: np.ndarray) -> tuple[float, float]:
    """:func:`log_median_se2` of one run's positive samples (NaN, NaN with none)."""
    x = positive(samples)
    if x.size == 0:
        return math.nan, math.nan
    centre, se2 = log_median_se2([x])
    return float(centre[0]), float(se2[0])


def typical_spread(variance: np.ndarray, dof: np.ndarray, min_ops: int) -> float | None:
    """A test's typical spread (sd) from its ops' sample variances of ``dof`` degrees of
    freedom (0: not measured): the median variance of the measured ops (a few odd ops
    do not move it), divided by the median of a chi-square over its degrees of freedom,
    about (1 - 2 / (9 dof))^3 (Wilson-Hilferty), by which a median of sample variances
    underestimates the variance. None with fewer than ``min_ops`` measured ops."""
    measured = np.asarray(dof) > 0
    if np.count_nonzero(measured) < min_ops:
        return None
    bias = (1 - 2 / (9 * float(np.median(np.asarray(dof)[measured])))) ** 3
    return math.sqrt(float(np.median(np.asarray(variance)[measured])) / bias)
