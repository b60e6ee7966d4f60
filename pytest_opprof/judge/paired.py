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

**The machine's state, iteration by iteration** (:func:`state_adjusted`, applied to the
samples before the medians are taken). On a shared runner the machine's speed moves
within a process too (11% between iterations on our 2-core runner), and ops do not all
move alike: a compute-bound op follows the clock, a memory-bound or dispatch-bound one
less (elasticities 0.2 to 2 over the many-op test's 44 ops). A median drift per pair
assumes every op moves by the same factor, so what is left of each op's response shows
as spread between processes. Instead each iteration's state ``G`` is the median over the
other ops of how far each is from its usual time, and each op's elasticity ``beta`` to
it is learned from how the op followed ``G`` within processes (so a change between base
and head, which is constant within a process, does not teach it); the op's samples are
then taken at the common state, ``log t - beta G``. That halved the ops' spread between
processes (8.1% to 4.0%, benchmarks/compare_replay.py). Where the state hardly moved
within processes ``beta`` stays near 1, the median drift's assumption (a prior worth
:data:`ELASTICITY_PRIOR` of state movement). A gap between the sides' mean states that
the pairs' swings cannot explain is a change every op shares, not the machine
(:func:`shared_change`): then the caller judges plain medians.

**Detectable** is the slowdown of an op its interval would call regressed with
probability :data:`POWER`; :func:`pairs_needed` is how many pairs make nine in ten
ops of a test see a given slowdown (``opprof compare`` sizes its run with it).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np

from ..model.comparison import OpChange, PairedResult
from ..model.verdict import OpStatus
from .rule import MAD_SIGMA, robust_var

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
#: An op's detectable slowdown is the one its interval calls regressed this often (as
#: the stored-baseline gate's).
POWER = 0.8
#: The share of a test's ops whose detectable slowdown sizes a compare (nine in ten:
#: the noisiest op of ten does not set its cost). Replayed on 160 real processes of a
#: noisy 2-core runner, sizing on the 75th percentile caught +15% of one op in 87% of
#: compares (19 pairs), the 90th in 95% (28 pairs; benchmarks/compare_replay.py).
SIZING_QUANTILE = 90
#: Elasticities are learned as if the state had also moved this much (sd of log) with
#: elasticity 1 in every sample: where it moved far less, 1 stands.
ELASTICITY_PRIOR = 0.01
#: No op follows the machine's state more than this many times over.
MAX_ELASTICITY = 3.0


def judge_pairs(base: np.ndarray, head: np.ndarray, tolerance: float = DEFAULT_TOLERANCE,
                alpha: float = DEFAULT_ALPHA,
                shown: tuple[np.ndarray, np.ndarray] | None = None) -> PairedResult:
    """Judge every op from ``base`` and ``head``, each of shape (pairs, ops): the op's
    median (ns) in each process. Pairs >= 2 (one pair: :func:`judge_single`).
    ``shown``: the medians to report as base and head times, when ``base`` and
    ``head`` are taken at a common state (:func:`state_adjusted`)."""
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
    times = _checked(*shown) if shown is not None else (base, head)
    return PairedResult(
        ops=_changes(_geo_mean(times[0]), _geo_mean(times[1]), d.mean(axis=0), se,
                     np.sqrt(var), q, tolerance),
        pairs=pairs, drift=tuple(float(x) for x in np.exp(drift)),
        drift_corrected=n_ops >= MIN_OPS_FOR_DRIFT, dof=dof, quantile=q,
        notes=tuple(notes))


def judge_single(base: list[np.ndarray], head: list[np.ndarray],
                 tolerance: float = DEFAULT_TOLERANCE, alpha: float = DEFAULT_ALPHA,
                 shown: tuple[np.ndarray, np.ndarray] | None = None) -> PairedResult:
    """Judge every op from one base run and one head run: ``base[i]`` and ``head[i]``
    are op ``i``'s samples (ns) in each. Conservative: see the module's docstring.
    ``shown``: the medians to report, as :func:`judge_pairs`."""
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
    times = _checked(*(np.array([x]) for x in shown)) if shown is not None else (b, h)
    return PairedResult(
        ops=_changes(times[0][0], times[1][0], d[0], se, se, q, tolerance), pairs=1,
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
    power = statistics.NormalDist().inv_cdf(POWER)
    changes = []
    for i in range(len(mean)):
        low, high = mean[i] - q * se[i], mean[i] + q * se[i]
        verdict = (OpStatus.REGRESSED if low > bound else OpStatus.IMPROVED
                   if high < -bound else OpStatus.OK)
        changes.append(OpChange(float(base[i]), float(head[i]), math.exp(mean[i]),
                                math.exp(low), math.exp(high), float(sd[i]), verdict,
                                math.expm1(bound + (q + power) * se[i])))
    return tuple(changes)


def pairs_needed(result: PairedResult, detect: float,
                 tolerance: float = DEFAULT_TOLERANCE) -> int:
    """The pairs at which nine in ten of the result's ops (:data:`SIZING_QUANTILE`)
    would see a slowdown of ``detect`` (a fraction above ``tolerance``) with
    probability :data:`POWER`, at the result's spreads and quantile. Sizing on the
    spreads alone, never on the changes, keeps the intervals' level (an internal pilot,
    Wittes and Brittain 1990)."""
    if not result.ops:
        return result.pairs
    room = math.log1p(detect) - math.log1p(tolerance)
    if room <= 0:
        raise ValueError("the change to detect must exceed the tolerance")
    sd = float(np.percentile([op.sd for op in result.ops], SIZING_QUANTILE))
    z = result.quantile + statistics.NormalDist().inv_cdf(POWER)
    return max(2, math.ceil((z * sd / room) ** 2))


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


# -- the machine's state, iteration by iteration ------------------------------------------

@dataclass(frozen=True)
class StateAdjusted:
    """What :func:`state_adjusted` found."""

    #: Each process's log times at the common state (as given: too few ops).
    logs: list[np.ndarray]
    #: Each op's elasticity to the machine's state.
    beta: np.ndarray
    #: Each process's mean state (log): how fast the machine ran it, from all its ops.
    level: np.ndarray


def state_adjusted(processes: list[np.ndarray]) -> StateAdjusted:
    """Every process's log times taken at the common machine state, and each op's
    elasticity (module docstring). ``processes[k]`` is process ``k``'s log times,
    (iterations, ops), NaN where an op did not run; the ops (columns) are the same in
    every process. Fewer than :data:`MIN_OPS_FOR_DRIFT` ops: returned as they are."""
    n_ops = processes[0].shape[1] if processes else 0
    if n_ops < MIN_OPS_FOR_DRIFT:
        return StateAdjusted(processes, np.ones(n_ops), np.zeros(len(processes)))
    center = np.nanmedian(np.vstack(processes), axis=0)
    states = [_others_median(x - center) for x in processes]
    sxy, sxx, count = np.zeros(n_ops), np.zeros(n_ops), np.zeros(n_ops)
    for x, g in zip(processes, states, strict=True):
        both = np.isfinite(x) & np.isfinite(g)
        # centred within the process: a change between base and head teaches nothing
        xc, gc = _centred(x, both), _centred(g, both)
        sxy += (xc * gc).sum(axis=0)
        sxx += (gc * gc).sum(axis=0)
        count += both.sum(axis=0)
    prior = count * ELASTICITY_PRIOR ** 2
    beta = np.clip((sxy + prior) / np.maximum(sxx + prior, _VAR_FLOOR), 0.0, MAX_ELASTICITY)
    adjusted, level = [], []
    for x, g in zip(processes, states, strict=True):
        # a cell with too few other ops to tell its state: the process's usual state
        usual = float(np.median(g[np.isfinite(g)])) if np.isfinite(g).any() else 0.0
        adjusted.append(x - beta * np.where(np.isfinite(g), g, usual))
        level.append(float(np.mean(g[np.isfinite(g)])) if np.isfinite(g).any() else 0.0)
    return StateAdjusted(adjusted, beta, np.array(level))


def shared_change(base_level: np.ndarray, head_level: np.ndarray,
                  alpha: float = DEFAULT_ALPHA) -> float | None:
    """The change every op shares between the sides, when the machine's swings between
    processes cannot explain it: None when they can. The state adjustment reads the
    sides' mean state difference as the machine's, each op moving by its elasticity;
    ABBA order makes that difference a draw around 0 whose spread the pairs show (a t
    test, two-sided at ``alpha``). A change all ops share in code (a slower allocator,
    an upgrade) is not the machine's: read as one, a less elastic op would look slower
    and a more elastic one faster than it is. Then the caller judges plain medians,
    every op around the shared change."""
    gap = np.asarray(head_level, dtype=float) - np.asarray(base_level, dtype=float)
    if gap.size < 2:
        return None
    se = float(gap.std(ddof=1)) / math.sqrt(gap.size)
    mean = float(gap.mean())
    if abs(mean) <= t_quantile(1 - alpha / 2, gap.size - 1) * max(se, _VAR_FLOOR):
        return None
    return math.expm1(mean)


def _centred(a: np.ndarray, where: np.ndarray) -> np.ndarray:
    """``a`` less its column means over ``where``; 0 elsewhere."""
    mean = np.where(where, a, 0.0).sum(axis=0) / np.maximum(where.sum(axis=0), 1)
    return np.where(where, a - mean, 0.0)


def _others_median(x: np.ndarray) -> np.ndarray:
    """For every cell of ``x`` (rows of values, NaN absent), the median of its row's
    other finite values (NaN where the cell is absent or fewer than
    MIN_OPS_FOR_DRIFT - 1 others are present): an op's own time must not set the state
    it is corrected by."""
    finite = np.isfinite(x)
    c = finite.sum(axis=1, keepdims=True)  # finite values per row
    order = np.argsort(np.where(finite, x, np.inf), axis=1, kind="stable")
    ranked = np.take_along_axis(np.where(finite, x, np.inf), order, axis=1)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(x.shape[1])[None, :].repeat(len(x), 0), axis=1)
    m = c - 1  # the others
    j1, j2 = (m - 1) // 2, m // 2  # the middle (one when m is odd, two when even)
    i1 = np.clip(j1 + (j1 >= rank), 0, x.shape[1] - 1)
    i2 = np.clip(j2 + (j2 >= rank), 0, x.shape[1] - 1)
    out = (np.take_along_axis(ranked, i1, axis=1) + np.take_along_axis(ranked, i2, axis=1)) / 2
    return np.where(finite & (m >= MIN_OPS_FOR_DRIFT - 1), out, np.nan)


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
