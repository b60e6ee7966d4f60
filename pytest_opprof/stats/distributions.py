"""Distributions without scipy: the standard normal's tail and quantile, Student's t,
the digamma and trigamma functions; and the one-sided Mann-Whitney test. Pure numpy."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

import numpy as np


def normal_quantile(p: float) -> float:
    """The ``p`` quantile of the standard normal."""
    return statistics.NormalDist().inv_cdf(p)


_erfc = np.frompyfunc(math.erfc, 1, 1)


def normal_sf(x: np.ndarray) -> np.ndarray:
    """The standard normal's upper tail, 1 - Phi(x), elementwise."""
    return 0.5 * np.asarray(_erfc(np.asarray(x, dtype=float) / math.sqrt(2)), dtype=float)


def t_cdf(t: float, dof: int) -> float:
    """P(T <= t) for Student's t with a whole number of degrees of freedom (the closed
    form of Abramowitz and Stegun 26.7.3-4)."""
    theta = math.atan(abs(t) / math.sqrt(dof))
    c2, s, odd = math.cos(theta) ** 2, math.sin(theta), dof % 2
    # odd: cos + 2/3 cos^3 + 2*4/(3*5) cos^5 ...; even: 1 + 1/2 cos^2 + 1*3/(2*4) cos^4 ...
    term, total = math.cos(theta) if odd else 1.0, 0.0
    for k in range(1, (dof - odd) // 2 + 1):
        total += term
        term *= c2 * (2 * k - 1 + odd) / (2 * k + odd)
    if not odd:
        central = s * total
    else:
        central = 2 / math.pi * (theta + s * total) if dof > 1 else 2 * theta / math.pi
    return 0.5 + math.copysign(central / 2, t)


def t_quantile(p: float, dof: float) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t; degrees of freedom rounded down
    (conservative), normal beyond 1,000."""
    if dof > 1000:
        return normal_quantile(p)
    n = max(int(dof), 1)
    hi = 1.0
    while t_cdf(hi, n) < p:
        hi *= 2
    return _bisect(lambda x: t_cdf(x, n), p, 0.0, hi, 100)


def digamma(x: float) -> float:
    """psi(x) for x > 0 (recurrence up to 10, then the asymptotic series)."""
    shift = 0.0
    while x < 10:
        shift -= 1 / x
        x += 1
    x2 = 1 / (x * x)
    return shift + math.log(x) - 0.5 / x - x2 * (1 / 12 - x2 * (1 / 120 - x2 / 252))


def trigamma(x: float) -> float:
    """psi'(x) for x > 0 (recurrence up to 10, then the asymptotic series)."""
    shift = 0.0
    while x < 10:
        shift += 1 / (x * x)
        x += 1
    x2 = 1 / (x * x)
    return shift + 1 / x + x2 / 2 + x2 / x * (1 / 6 - x2 * (1 / 30 - x2 * (1 / 42 - x2 / 30)))


def trigamma_inverse(y: float) -> float:
    """The x > 0 with trigamma(x) = y (trigamma falls from +inf to 0: bisection in
    log x)."""
    return math.exp(_bisect(lambda m: -trigamma(math.exp(m)), -y, -30.0, 30.0, 200))


def _bisect(rising: Callable[[float], float], target: float, lo: float, hi: float,
            steps: int) -> float:
    """Where the increasing function ``rising`` reaches ``target`` between ``lo`` and
    ``hi``."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rising(mid) < target else (lo, mid)
    return (lo + hi) / 2


def mann_whitney(current: Sequence[np.ndarray],
                 baseline: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Mann-Whitney U p-values for each op: that ``current[i]`` tends to
    be greater than ``baseline[i]``, and that it tends to be less.

    Normal approximation with continuity and tie corrections, vectorised over ops
    of any sizes: rows are shifted into disjoint ranges so that one
    ``searchsorted`` serves them all.
    """
    rows = len(current)
    if rows == 0:
        return np.zeros(0), np.zeros(0)
    n = np.array([len(c) for c in current])
    m = np.array([len(b) for b in baseline])
    low = min(min(float(np.min(c)) for c in current), min(float(np.min(b)) for b in baseline))
    high = max(max(float(np.max(c)) for c in current), max(float(np.max(b)) for b in baseline))
    width = high - low + 1.0
    offsets = np.arange(rows) * width - low
    cur = _sorted_rows(current, offsets)
    base = _sorted_rows(baseline, offsets)
    base_start = np.repeat(np.concatenate([[0], np.cumsum(m)[:-1]]), n)
    below = np.searchsorted(base, cur, "left") - base_start
    below_or_tied = np.searchsorted(base, cur, "right") - base_start
    row_of_cur = np.repeat(np.arange(rows), n)
    u = np.bincount(row_of_cur, weights=(below + below_or_tied) / 2.0, minlength=rows)

    # ties: the sum of (t^3 - t) over runs of equal values in each row's combined sample
    # (two sorted runs: the stable sort merges them in linear time)
    combined = np.sort(np.concatenate([cur, base]), kind="stable")
    starts = np.concatenate([[0], np.flatnonzero(np.diff(combined) != 0) + 1])
    lengths = np.diff(np.concatenate([starts, [len(combined)]])).astype(float)
    row_of_run = np.minimum((combined[starts] // width).astype(int), rows - 1)
    ties = np.bincount(row_of_run, weights=lengths ** 3 - lengths, minlength=rows)

    total = n + m
    sd = np.sqrt(n * m / 12.0 * ((total + 1) - ties / (total * (total - 1))))
    mean = n * m / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        z_greater = np.where(sd > 0, (u - mean - 0.5) / sd, -np.inf)
        z_less = np.where(sd > 0, (mean - u - 0.5) / sd, -np.inf)
    return normal_sf(z_greater), normal_sf(z_less)


def _sorted_rows(arrays: Sequence[np.ndarray], offsets: np.ndarray) -> np.ndarray:
    """Each row sorted and shifted by its offset, concatenated: one ascending array."""
    if len({len(a) for a in arrays}) == 1:  # the common case: sort the rows as a matrix
        shifted: np.ndarray = np.sort(np.vstack(arrays).astype(float), axis=1) + offsets[:, None]
        return shifted.ravel()
    lengths = [len(a) for a in arrays]
    return np.sort(np.concatenate(arrays).astype(float) + np.repeat(offsets, lengths))
