"""The paired model of ``opprof compare``: base and head measured now, in processes
taking turns, judged op by op. Plain arrays in, verdicts out; pure numpy.

For pair ``p`` (one base process and one head process, run back to back) and op ``i``,
``r[p, i]`` is the log ratio of the op's head median to its base median. Whatever hit
both processes of a pair alike (the machine's speed, contention, thermal state) moves
every op of the pair by about the same factor: the pair's **drift** ``g[p]``, the
median of ``r[p, :]`` over the test's ops (not estimated with fewer than
:data:`MIN_OPS_FOR_DRIFT` ops: one op would set the drift and hide its own change). The
op's change in pair ``p`` is ``d[p, i] = r[p, i] - g[p]``; its change is the mean over
pairs, and its spread the standard deviation over pairs, which holds everything that
differs between two processes (each process's own offset of the op, its sampling
noise, the drift's error): no model of those is needed, only pairs.

With few pairs an op's own standard deviation is a poor estimate, so it borrows
strength from the test's other ops: each op's variance is shrunk towards the test's
typical variance by empirical Bayes (Smyth 2004, limma's moderated t): the prior's
degrees of freedom ``d0`` are estimated from how much the ops' variances differ, so
ops that differ a lot (a GPU kernel at 0.01% beside a launch-bound op at 20%) are
barely shrunk, and ops that are alike are pooled. The interval is Student's t with
``d0 + N - 1`` degrees of freedom, at the family-wise level ``alpha`` over the test's
ops (Bonferroni, two-sided: regressed and improved are both claims).

An op **regressed** when the interval's lower bound is above ``log(1 + tolerance)``,
**improved** when its upper bound is below ``-log(1 + tolerance)``, else it is **ok**.

One pair (two results files) cannot see how an op moves between processes; the
spread then comes from the op's own samples (the standard error of each median) and
the test's other ops (how far the ops' changes scatter beyond that), never below
:data:`SINGLE_PAIR_FLOOR`, with normal quantiles: conservative by design.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .rule import MAD_SIGMA, robust_var

Verdict = Literal["regressed", "improved", "ok"]

DEFAULT_TOLERANCE = 0.05
DEFAULT_ALPHA = 0.01
#: Fewer ops than this: no drift correction (one op's change would be its own drift).
MIN_OPS_FOR_DRIFT = 5
#: Fewer ops than this: no borrowing of strength (too few variances to learn a prior).
MIN_OPS_FOR_PRIOR = 5
#: The prior of an op's variance never weighs more than this many times the op's own
#: pairs: the test's other ops are informative, not alike (a GPU kernel's runs agree
#: to 0.01% beside a launch-bound op's 20%), and with few pairs the moments cannot
#: tell them apart (one pair's variance has a chi-squared(1) log, which scatters more
#: than most real differences between ops).
MAX_PRIOR_WEIGHT = 4
#: The least spread (sd of the log ratio) one pair is credited with: the typical
#: process-to-process spread of an op's median on a shared 2-core runner is 2-3%
#: (docs: /work/shared GATE analysis, "Real runs"), and one pair cannot measure it.
SINGLE_PAIR_FLOOR = 0.03
#: The least variance of a log ratio: a deterministic clock (the fake backend) gives
#: exactly zero, whose logarithm the prior cannot take.
_VAR_FLOOR = 1e-12


@dataclass(frozen=True)
class OpChange:
    """One op's comparison. Ratios are head/base (1.10: 10% slower); times in ns."""

    base_ns: float
    head_ns: float
    #: The drift-corrected change, as a ratio, and its interval.
    change: float
    low: float
    high: float
    #: The standard deviation of the op's drift-corrected log ratio per pair (after
    #: shrinkage); with one pair, the spread credited to it.
    sd: float
    verdict: Verdict


@dataclass(frozen=True)
class PairedResult:
    ops: tuple[OpChange, ...]
    pairs: int
    #: Each pair's drift (head/base, the ratio every op moved by alike).
    drift: tuple[float, ...]
    drift_corrected: bool
    #: The interval's degrees of freedom (inf: normal quantiles) and its quantile.
    dof: float
    quantile: float
    #: Sentences a reader needs to trust the verdicts (no drift correction, one pair).
    notes: tuple[str, ...]


def judge_pairs(base: np.ndarray, head: np.ndarray, tolerance: float = DEFAULT_TOLERANCE,
                alpha: float = DEFAULT_ALPHA) -> PairedResult:
    """Judge every op from ``base`` and ``head``, each of shape (pairs, ops): the op's
    median (ns) in each process. Pairs >= 2 (one pair: :func:`judge_single`)."""
    base, head = _checked(base, head)
    pairs, n_ops = base.shape
    if pairs < 2:
        raise ValueError("the paired model needs 2 pairs or more; one pair: judge_single")
    d, drift, notes = _drift_corrected(np.log(head) - np.log(base))
    var = np.maximum(d.var(axis=0, ddof=1), _VAR_FLOOR)
    var, dof = _moderated(var, pairs - 1)
    if n_ops < MIN_OPS_FOR_PRIOR:
        notes.append(f"{n_ops} op(s): each op's spread is its own, over {pairs} pairs")
    q = t_quantile(1 - alpha / (2 * n_ops), dof)
    se = np.sqrt(var / pairs)
    return PairedResult(
        ops=_changes(_geo_mean(base), _geo_mean(head), d.mean(axis=0), se, np.sqrt(var), q,
                     tolerance),
        pairs=pairs, drift=tuple(float(x) for x in np.exp(drift)),
        drift_corrected=n_ops >= MIN_OPS_FOR_DRIFT, dof=dof, quantile=q,
        notes=tuple(notes))


def judge_single(base: list[np.ndarray], head: list[np.ndarray],
                 tolerance: float = DEFAULT_TOLERANCE,
                 alpha: float = DEFAULT_ALPHA) -> PairedResult:
    """Judge every op from one base run and one head run: ``base[i]`` and ``head[i]``
    are op ``i``'s samples (ns) in each. Conservative: see the module's docstring."""
    if len(base) != len(head) or not base:
        raise ValueError("base and head need the same ops, one or more")
    b_med, b_se2 = zip(*(_median_and_se2(x) for x in base), strict=True)
    h_med, h_se2 = zip(*(_median_and_se2(x) for x in head), strict=True)
    b, h = _checked(np.array([b_med]), np.array([h_med]))
    d, drift, notes = _drift_corrected(np.log(h) - np.log(b))
    sampling = np.array(b_se2) + np.array(h_se2)
    scatter = robust_var(d[0]) - float(np.median(sampling)) if len(base) >= 3 else 0.0
    between = max(scatter, SINGLE_PAIR_FLOOR ** 2)
    notes.append("one run per side: how ops move between processes is not seen, so each "
                 f"op is credited a spread of {math.sqrt(between):.1%} or more (opprof "
                 "compare REF runs pairs of processes and sees it)")
    n_ops = len(base)
    q = statistics.NormalDist().inv_cdf(1 - alpha / (2 * n_ops))
    se = np.sqrt(sampling + between)
    return PairedResult(
        ops=_changes(b[0], h[0], d[0], se, se, q, tolerance), pairs=1,
        drift=tuple(float(x) for x in np.exp(drift)),
        drift_corrected=n_ops >= MIN_OPS_FOR_DRIFT, dof=math.inf, quantile=q,
        notes=tuple(notes))


def _checked(base: np.ndarray, head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    base, head = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if base.shape != head.shape or base.ndim != 2 or base.shape[1] == 0:
        raise ValueError(f"base {base.shape} and head {head.shape} must be (pairs, ops)")
    if not (np.isfinite(base).all() and np.isfinite(head).all()
            and (base > 0).all() and (head > 0).all()):
        raise ValueError("every median must be a positive finite time")
    return base, head


def _drift_corrected(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``r`` less each pair's drift (its median over ops), the drift, and a note when
    the test has too few ops to have one."""
    if r.shape[1] < MIN_OPS_FOR_DRIFT:
        note = (f"{r.shape[1]} op(s), fewer than {MIN_OPS_FOR_DRIFT}: no drift correction "
                "(a machine-wide change between the two sides counts as the ops' own)")
        return r, np.zeros(r.shape[0]), [note]
    drift = np.median(r, axis=1)
    return r - drift[:, None], drift, []


def _changes(base: np.ndarray, head: np.ndarray, mean: np.ndarray, se: np.ndarray,
             sd: np.ndarray, q: float, tolerance: float) -> tuple[OpChange, ...]:
    bound = math.log1p(tolerance)
    changes = []
    for i in range(len(mean)):
        low, high = mean[i] - q * se[i], mean[i] + q * se[i]
        verdict: Verdict = "regressed" if low > bound else "improved" if high < -bound \
            else "ok"
        changes.append(OpChange(float(base[i]), float(head[i]), math.exp(mean[i]),
                                math.exp(low), math.exp(high), float(sd[i]), verdict))
    return tuple(changes)


def _geo_mean(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.exp(np.log(x).mean(axis=0)))


def _median_and_se2(samples: np.ndarray) -> tuple[float, float]:
    """The median of ``samples`` and the variance of its logarithm's estimate
    (pi/2 sigma^2 / n, sigma from the MAD of the log samples)."""
    x = np.asarray(samples, dtype=float)
    x = x[np.isfinite(x) & (x > 0)]
    if x.size == 0:
        return math.nan, math.nan
    logs = np.log(x)
    sigma = MAD_SIGMA * float(np.median(np.abs(logs - np.median(logs))))
    return float(np.median(x)), math.pi / 2 * sigma ** 2 / x.size


# -- borrowing strength: limma's prior for the variances ---------------------------------

def _moderated(var: np.ndarray, dof: int) -> tuple[np.ndarray, float]:
    """Each op's variance shrunk towards the test's typical variance, and the degrees
    of freedom of the result (Smyth 2004: the variances as scaled chi-squared draws
    around a scaled inverse chi-squared prior, fitted by moments of log variance; its
    weight at most :data:`MAX_PRIOR_WEIGHT` times the op's own)."""
    if len(var) < MIN_OPS_FOR_PRIOR:
        return var, float(dof)
    e = np.log(var) - digamma(dof / 2) + math.log(dof / 2)
    excess = float(e.var(ddof=1)) - trigamma(dof / 2)
    # excess <= 0: the ops' variances differ no more than chance (d0 infinite)
    d0 = 2 * _trigamma_inverse(excess) if excess > 0 else math.inf
    d0 = min(d0, MAX_PRIOR_WEIGHT * dof)
    s0 = math.exp(float(e.mean()) + digamma(d0 / 2) - math.log(d0 / 2))
    return (d0 * s0 + dof * var) / (d0 + dof), d0 + dof


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


def _trigamma_inverse(y: float) -> float:
    """The x > 0 with trigamma(x) = y (trigamma falls from +inf to 0: bisection in
    log x)."""
    lo, hi = -30.0, 30.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if trigamma(math.exp(mid)) > y:
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2)


# -- Student's t without scipy ---------------------------------------------------------

def t_cdf(t: float, dof: int) -> float:
    """P(T <= t) for Student's t with a whole number of degrees of freedom (the closed
    form of Abramowitz and Stegun 26.7.3-4)."""
    theta = math.atan(abs(t) / math.sqrt(dof))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if dof % 2:
        term, total = math.cos(theta), 0.0
        for k in range(1, (dof - 1) // 2 + 1):  # cos + 2/3 cos^3 + 2*4/(3*5) cos^5 ...
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        central = 2 / math.pi * (theta + s * total) if dof > 1 else 2 * theta / math.pi
    else:
        term, total = 1.0, 0.0
        for k in range(1, dof // 2 + 1):  # 1 + 1/2 cos^2 + 1*3/(2*4) cos^4 ...
            total += term
            term *= c2 * (2 * k - 1) / (2 * k)
        central = s * total
    return 0.5 + math.copysign(central / 2, t)


def t_quantile(p: float, dof: float) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t; degrees of freedom rounded down
    (conservative), normal beyond 1,000."""
    if dof > 1000:
        return statistics.NormalDist().inv_cdf(p)
    n = max(int(dof), 1)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, n) < p:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, n) < p else (lo, mid)
    return (lo + hi) / 2
