"""The paired model of ``opprof compare``: base and head measured now, in processes
taking turns, judged op by op. Plain arrays in, verdicts out; pure numpy.

For pair ``p`` (one base process and one head process, run back to back) and op ``i``,
``r[p, i]`` is the log ratio of the op's head median to its base median. Whatever hit
both processes of a pair alike (the machine's speed, contention, thermal state) moves
every op of the pair by about the same factor: the pair's **drift** ``g[p]``, the
median of ``r[p, :]`` over the test's ops (not estimated with fewer than
:data:`MIN_OPS_FOR_DRIFT` ops: one op would set the drift and hide its own change). The
op's change is the mean over pairs of ``d[p, i] = r[p, i] - g[p]``, and its spread the
standard deviation over pairs, which holds everything that differs between two
processes (each process's own offset of the op, its sampling noise, the drift's error):
no model of those is needed, only pairs.

With few pairs an op's own standard deviation is a poor estimate, so each op's variance
is shrunk towards the test's typical variance by empirical Bayes (Smyth 2004, limma's
moderated t), the prior's degrees of freedom ``d0`` estimated from how much the ops'
variances differ: ops that differ a lot (a GPU kernel at 0.01% beside a launch-bound op
at 20%) are barely shrunk, ops that are alike are pooled. The interval is Student's t
with ``d0 + N - 1`` degrees of freedom, at the family-wise level ``alpha`` over the
test's ops (Bonferroni, two-sided: regressed and improved are both claims). An op
**regressed** when the interval's lower bound is above ``log(1 + tolerance)``,
**improved** when its upper bound is below ``-log(1 + tolerance)``, else it is **ok**.

Fewer than :data:`MIN_PAIRS` pairs (one pair: two results files, or ``--pairs 1``)
cannot show how an op moves between processes; :func:`judge_assumed` judges them
conservatively, with no state adjustment (with one pair a change every op shares cannot
be told from the machine's state, so it is the drift, said as such).

**The machine's state, iteration by iteration** (:func:`state_adjusted`, applied to the
samples before the medians are taken). On a shared runner the machine's speed moves
within a process too (11% between iterations on our 2-core runner), and ops do not all
move alike: a compute-bound op follows the clock, a memory-bound or dispatch-bound one
less (elasticities 0.2 to 2 over the many-op test's 44 ops), so a median drift per pair
leaves each op's own response as spread between processes. Instead each iteration's
state ``G`` is the median over the other ops of how far each is from its usual time,
and each op's elasticity ``beta`` to it is learned from how the op followed ``G``
within processes (so a change between base and head, constant within a process, does
not teach it); the op's samples are then taken at the common state, ``log t - beta G``.
That halved the ops' spread between processes (8.1% to 4.0%,
benchmarks/compare_replay.py). Where the state hardly moved within processes ``beta``
stays near 1, the median drift's assumption (:data:`ELASTICITY_PRIOR`). A gap between
the sides' mean states that the pairs' swings cannot explain is a change every op
shares, not the machine (:func:`shared_change`): then the caller judges plain medians.

**Detectable** is the slowdown of an op its interval would call regressed with
probability :data:`POWER`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..model.comparison import OpChange, PairedResult
from ..model.verdict import OpStatus
from ..stats.distributions import normal_quantile, t_quantile
from ..stats.drift import across_ops, others_median
from ..stats.power import detectable, runs_needed
from ..stats.robust import MEDIAN_VAR, is_positive, robust_var
from ..stats.shrink import moderated
from . import config
from .config import COMPARE_ALPHA, MIN_OPS_FOR_DRIFT, POWER

#: Fewer ops than this: no borrowing of strength (too few variances to learn a prior).
MIN_OPS_FOR_PRIOR = 5
#: The prior of an op's variance never weighs more than this many times the op's own
#: pairs: the test's other ops are informative, not alike (a GPU kernel's runs agree
#: to 0.01% beside a launch-bound op's 20%), and with few pairs the moments cannot
#: tell them apart (one pair's variance has a chi-squared(1) log, which scatters more
#: than most real differences between ops).
MAX_PRIOR_WEIGHT = 4
#: Fewer pairs than this: each op's spread is assumed (:func:`judge_assumed`), not
#: learned from its pairs (with 2 or 3 pairs it rests on 1-2 degrees of freedom: t
#: quantiles of 14 to 2,800 at the family-wise level of a test of 1 to 44 ops).
MIN_PAIRS = 4
#: The spread between processes (relative sd of one process's median) an op is
#: credited with when its pairs cannot show its own. Over 40 processes of the many-op
#: test on this project's shared 2-core runner the median op moved 5.4%, the 90th
#: percentile op 10.1%, the widest 16% (the example suite's six runs: 4-13% at the 90th
#: percentile by op size; benchmarks/RESULTS.md, "Few pairs"). Ops spread lognormally
#: so around it: at 10%, same-code pairs of such ops flagged 2.7% of tests, at 12% 0.3%
#: (the 1% family-wise claim kept). A GPU kernel moves far less; its stored baselines
#: cannot narrow this, only widen it.
ASSUMED_SPREAD = 0.12
#: The least variance of a log ratio: a deterministic clock (the fake backend) gives
#: exactly zero, whose logarithm the prior cannot take.
_VAR_FLOOR = 1e-12
#: Elasticities are learned as if the state had also moved this much (sd of log) with
#: elasticity 1 in every sample: where it moved far less, 1 stands.
ELASTICITY_PRIOR = 0.01
#: No op follows the machine's state more than this many times over.
MAX_ELASTICITY = 3.0


def judge_pairs(base: np.ndarray, head: np.ndarray, tolerance: float = config.TOLERANCE,
                alpha: float = COMPARE_ALPHA,
                shown: tuple[np.ndarray, np.ndarray] | None = None) -> PairedResult:
    """Judge every op from ``base`` and ``head``, each of shape (pairs, ops): the op's
    median (ns) in each process; 2 pairs or more (the comparison sends fewer than
    :data:`MIN_PAIRS` to :func:`judge_assumed`). ``shown``: the medians to report as
    base and head times, when ``base`` and ``head`` are taken at a common state
    (:func:`state_adjusted`)."""
    base, head = _checked(base, head)
    pairs, n_ops = base.shape
    if pairs < 2:
        raise ValueError("the paired model needs 2 pairs or more; fewer: judge_assumed")
    d, drift, notes = _drift_corrected(np.log(head) - np.log(base))
    var, dof = moderated(np.maximum(d.var(axis=0, ddof=1), _VAR_FLOOR), pairs - 1,
                         min_ops=MIN_OPS_FOR_PRIOR, max_prior_weight=MAX_PRIOR_WEIGHT)
    if n_ops < MIN_OPS_FOR_PRIOR:
        notes.append(f"{n_ops} op(s): each op's spread is its own, over {pairs} pairs")
    q = t_quantile(1 - alpha / (2 * n_ops), dof)
    times = _checked(*shown) if shown is not None else (base, head)
    return PairedResult(
        ops=_changes(_geo_mean(times[0]), _geo_mean(times[1]), d.mean(axis=0),
                     np.sqrt(var / pairs), np.sqrt(var), q, tolerance),
        pairs=pairs, drift=tuple(float(x) for x in np.exp(drift)),
        drift_corrected=n_ops >= MIN_OPS_FOR_DRIFT, dof=dof, quantile=q,
        notes=tuple(notes))


def judge_assumed(base: tuple[np.ndarray, np.ndarray], head: tuple[np.ndarray, np.ndarray],
                  tolerance: float = config.TOLERANCE, alpha: float = COMPARE_ALPHA,
                  spreads: np.ndarray | None = None,
                  fastest: tuple[np.ndarray, np.ndarray] | None = None,
                  names: Sequence[str] | None = None) -> PairedResult:
    """Judge every op from fewer than :data:`MIN_PAIRS` pairs: each op credited
    :data:`ASSUMED_SPREAD` or what its ``spreads``, its pairs or the test's ops show
    where more, the drift's error added, normal quantiles. ``base`` and ``head`` are each
    (log medians, their squared standard errors), of shape (pairs, ops); ``spreads``:
    each op's known spread between processes (relative sd of a median, NaN where
    unknown: a stored baseline's), which widens the assumed one, never narrows.

    ``fastest``: each process's log fastest sample of each op, base and head, (pairs,
    ops). A change of the code moves every iteration of an op, its fastest too; a busy
    machine (more runnable processes than cores) slows the iterations it preempts, and
    ops of a millisecond or more most: on our loaded 2-core runner such ops ran 2.5-4x
    slower at their median in about half the processes, their fastest iteration as
    fast as ever. So an op is called changed only where its fastest iteration's
    change, drift-corrected and given the same interval, is a change too. ``names``:
    the ops', for the notes."""
    b_log, b_se2 = (np.asarray(x, dtype=float) for x in base)
    h_log, h_se2 = (np.asarray(x, dtype=float) for x in head)
    b, h = _checked(np.exp(b_log), np.exp(h_log))
    pairs, n_ops = b.shape
    d, drift, notes = _drift_corrected(h_log - b_log)
    sampling = np.nan_to_num(b_se2 + h_se2, nan=0.0)  # (pairs, ops)
    tau = np.full(n_ops, ASSUMED_SPREAD)
    if spreads is not None:
        tau = np.fmax(tau, np.asarray(spreads, dtype=float))  # NaN: unknown, not wider
    var = sampling.mean(axis=0) + 2 * tau ** 2  # one pair's log ratio, under no change
    if pairs > 1:  # what the pairs show, where it is more
        var = np.maximum(var, d.var(axis=0, ddof=1))
    if n_ops >= MIN_OPS_FOR_PRIOR:  # how far the ops scattered, where the machine is worse
        var = np.maximum(var, float(np.median([robust_var(row) for row in d])))
    if n_ops >= MIN_OPS_FOR_DRIFT:  # the error of the drift, a median over the ops
        var = var + MEDIAN_VAR * float(np.median(var)) / n_ops
    q = normal_quantile(1 - alpha / (2 * n_ops))
    what = "one run per side" if pairs == 1 else f"{pairs} pairs"
    changes = _changes(_geo_mean(b), _geo_mean(h), d.mean(axis=0), np.sqrt(var / pairs),
                       np.sqrt(var), q, tolerance)
    if fastest is not None:
        fast, _, _ = _drift_corrected(np.asarray(fastest[1], dtype=float)
                                      - np.asarray(fastest[0], dtype=float))
        changes, held = _fastest_agrees(changes, fast.mean(axis=0), tolerance)
        if held:
            named = [names[i] if names is not None else f"op {i}" for i in held]
            notes.append(f"{', '.join(named)}: moved at the median but not at the fastest "
                         "iteration, as on a busy machine (a change of the code moves every "
                         "iteration): not called changed")
    notes.append(f"{what}: too few to see how each op moves between processes, so each op "
                 f"is credited a spread of {ASSUMED_SPREAD:.0%} of its median per process or "
                 "more (a little over what the 90th percentile op moved on a shared 2-core "
                 "runner; wider where its "
                 f"stored baselines{'' if pairs == 1 else ', its pairs'} or the test's ops "
                 "show more): only large changes can be told; "
                 f"{MIN_PAIRS} or more pairs of processes taking turns learn each op's own "
                 "spread")
    shared = float(np.mean(drift))
    if abs(shared) > math.log1p(tolerance):
        notes.append(f"every op moved by about {math.expm1(shared):+.1%} between the sides "
                     "(the drift): a change all ops share, the machine's or the code's alike "
                     f"({what} cannot tell which); no op is judged for it, each around it")
    return PairedResult(
        ops=changes, pairs=pairs, drift=tuple(float(x) for x in np.exp(drift)),
        drift_corrected=n_ops >= MIN_OPS_FOR_DRIFT, dof=math.inf, quantile=q,
        notes=tuple(notes))


def _fastest_agrees(changes: tuple[OpChange, ...], fast: np.ndarray,
                    tolerance: float) -> tuple[tuple[OpChange, ...], list[int]]:
    """The changes with each regressed (improved) op made ok where its fastest
    iteration's drift-corrected log change ``fast``, given the same interval, is no
    change beyond the tolerance; and which ops (indices) that was."""
    bound = math.log1p(tolerance)
    kept, held = list(changes), []
    for i, c in enumerate(changes):
        half = (math.log(c.high) - math.log(c.low)) / 2
        if (c.verdict == OpStatus.REGRESSED and fast[i] - half <= bound) or \
                (c.verdict == OpStatus.IMPROVED and fast[i] + half >= -bound):
            kept[i] = replace(c, verdict=OpStatus.OK)
            held.append(i)
    return tuple(kept), held


def _checked(base: np.ndarray, head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    base, head = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if base.shape != head.shape or base.ndim != 2 or base.shape[1] == 0:
        raise ValueError(f"base {base.shape} and head {head.shape} must be (pairs, ops)")
    if not (is_positive(base).all() and is_positive(head).all()):
        raise ValueError("every median must be a positive finite time")
    return base, head


def _drift_corrected(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``r`` less each pair's drift (its median over ops), the drift, and a note when
    the test has too few ops to have one."""
    if r.shape[1] < MIN_OPS_FOR_DRIFT:
        note = (f"{r.shape[1]} op(s), fewer than {MIN_OPS_FOR_DRIFT}: no drift correction "
                "(a machine-wide change between the two sides counts as the ops' own)")
        return r, np.zeros(r.shape[0]), [note]
    drift = across_ops(r)
    return r - drift[:, None], drift, []


def _changes(base: np.ndarray, head: np.ndarray, mean: np.ndarray, se: np.ndarray,
             sd: np.ndarray, q: float, tolerance: float) -> tuple[OpChange, ...]:
    """Each op's change: what its medians ``base`` and ``head`` (ns) show, exactly, and
    its corrected change ``exp(mean)`` (less the drift) with its interval (``q``
    standard errors ``se``), from which the verdict is read."""
    bound = math.log1p(tolerance)
    changes = []
    for i in range(len(mean)):
        low, high = mean[i] - q * se[i], mean[i] + q * se[i]
        verdict = (OpStatus.REGRESSED if low > bound else OpStatus.IMPROVED
                   if high < -bound else OpStatus.OK)
        changes.append(OpChange(float(base[i]), float(head[i]), float(head[i] / base[i]),
                                math.exp(low), math.exp(high), float(sd[i]), verdict,
                                detectable(bound, float(se[i]), POWER, q),
                                corrected=math.exp(mean[i])))
    return tuple(changes)


def pairs_needed(result: PairedResult, detect: float,
                 tolerance: float = config.TOLERANCE) -> int:
    """The pairs at which nine in ten of the result's ops (``config.SIZING_QUANTILE``)
    would see a slowdown of ``detect`` (a fraction above ``tolerance``) with
    probability :data:`POWER`, at the result's spreads and quantile (``opprof compare``
    sizes its run with it). Sizing on the
    spreads alone, never on the changes, keeps the intervals' level (an internal pilot,
    Wittes and Brittain 1990)."""
    if not result.ops:
        return result.pairs
    room = math.log1p(detect) - math.log1p(tolerance)
    if room <= 0:
        raise ValueError("the change to detect must exceed the tolerance")
    sd = float(np.percentile([op.sd for op in result.ops], config.SIZING_QUANTILE))
    return runs_needed(sd, room, result.quantile, POWER, least=2)


def _geo_mean(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.exp(np.log(x).mean(axis=0)))


# -- the machine's state, iteration by iteration ------------------------------------------

@dataclass(frozen=True)
class StateAdjusted:
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
    states = [others_median(x - center, MIN_OPS_FOR_DRIFT - 1) for x in processes]
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
        known = np.isfinite(g)
        # a cell with too few other ops to tell its state: the process's usual state
        usual = float(np.median(g[known])) if known.any() else 0.0
        adjusted.append(x - beta * np.where(known, g, usual))
        level.append(float(np.mean(g[known])) if known.any() else 0.0)
    return StateAdjusted(adjusted, beta, np.array(level))


def shared_change(base_level: np.ndarray, head_level: np.ndarray,
                  alpha: float = COMPARE_ALPHA) -> float | None:
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


# -- instruction counts -------------------------------------------------------------------

#: The least spread credited to an op's count between processes: counts of one op agree
#: between processes to a median of 0.005% and at worst about 0.1% (benchmarks/RESULTS.md,
#: "Instruction counts"), so a change under a tolerance of 1% is never within it.
COUNT_SPREAD_FLOOR = 0.001


def judge_counts(base: np.ndarray, head: np.ndarray, tolerance: float,
                 alpha: float = COMPARE_ALPHA) -> PairedResult:
    """Judge every op from its instruction counts: ``base`` and ``head`` are (pairs, ops)
    median counts. No drift correction (no machine speed moves a count: a change every
    op shares is the code's), no state adjustment; the change is the mean log ratio
    over the pairs, its spread what the pairs show, never under
    :data:`COUNT_SPREAD_FLOOR`. One pair is enough where counts repeat."""
    base, head = _checked(base, head)
    r = np.log(head) - np.log(base)
    pairs, n_ops = r.shape
    sd = np.maximum(r.std(axis=0, ddof=1) if pairs > 1 else np.zeros(n_ops),
                    COUNT_SPREAD_FLOOR)
    q = normal_quantile(1 - alpha / (2 * n_ops))
    note = ("instruction counts: not drift-corrected (no machine speed moves a count; a "
            "change every op shares is the code's), each op credited a spread of "
            f"{COUNT_SPREAD_FLOOR:.1%} or what its pairs show")
    return PairedResult(ops=_changes(np.median(base, axis=0), np.median(head, axis=0),
                                     r.mean(axis=0), sd / math.sqrt(pairs), sd, q, tolerance),
                        pairs=pairs, drift=(1.0,) * pairs, drift_corrected=False,
                        dof=math.inf, quantile=q, notes=(note,))
