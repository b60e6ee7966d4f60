"""The paired model of ``opprof compare``: base and head measured now, in processes
taking turns, judged op by op. Plain arrays in, verdicts out; pure numpy.

For pair ``p`` (one base process and one head process, run back to back) and op ``i``,
``r[p, i]`` is the log ratio of the op's head median to its base median. **An op is
judged against no change, never against what the other ops did**: its change is the
mean of ``r[p, i]`` over the pairs, and a change every op shares (a slower common
helper, a dependency upgrade that slows every kernel) is each op's change. Taking
turns is what cancels the machine: whatever hit a pair's two processes alike moves
every op of that pair by about the same factor, the pair's **common component**
``c[p, i]`` (the median over the test's ops of ``r[p, :]``, or with the machine's state
read iteration by iteration, below, the op's own response to it), and over
alternating pairs that averages out. So only the common component's swing between
pairs is taken out of each op's spread, ``d[p, i] = r[p, i] - (c[p, i] - mean_p c)``,
which keeps the mean (``mean_p d = mean_p r``), and the uncertainty of the common
component's mean is added back to each op's variance. What the ops moved by together,
``mean_p c``, is reported as a finding of its own with its interval
(:class:`~pytest_opprof.model.comparison.Shared`), never subtracted. Before this
(issue 28), each pair's median op was subtracted: a numpy upgrade that moved most ops
of a class alike hid their change and called the class's unchanged ops improved or
regressed, and how the ops were grouped into tests decided the verdicts.

Each op's spread is the standard deviation of ``d`` over pairs, which holds everything
that differs between two processes (each process's own offset of the op, its sampling
noise): no model of those is needed, only pairs. With few pairs an op's own standard
deviation is a poor estimate, so each op's variance is shrunk towards the test's
typical variance by empirical Bayes (Smyth 2004, limma's moderated t), the prior's
degrees of freedom ``d0`` estimated from how much the ops' variances differ: ops that
differ a lot (a GPU kernel at 0.01% beside a launch-bound op at 20%) are barely shrunk,
ops that are alike are pooled. The interval is the sum of two Student's t half-widths,
each at half the level ``alpha`` (a union bound): the op's own part, family-wise over
the test's ops (Bonferroni, two-sided: regressed and improved are both claims), and the
common component's mean, one figure for all the ops. An op **regressed** when the
interval's lower bound is above ``log(1 + tolerance)``, **improved** when its upper
bound is below ``-log(1 + tolerance)``, else it is **ok**.

Fewer than :data:`MIN_PAIRS` pairs (one pair: two results files, or ``--pairs 1``)
cannot show how an op moves between processes; :func:`judge_assumed` judges them
conservatively, each op credited an assumed spread between processes (which holds the
machine's swings too).

**The machine's state, iteration by iteration** (:func:`state_adjusted`, applied to the
samples before the medians are taken). On a shared runner the machine's speed moves
within a process too (11% between iterations on our 2-core runner), and ops do not all
move alike: a compute-bound op follows the clock, a memory-bound or dispatch-bound one
less (elasticities 0.2 to 2 over the many-op test's 44 ops). So each iteration's state
``G`` is the median over the other ops of how far each is from its usual time, and each
op's elasticity ``beta`` to it is learned from how the op followed ``G`` within
processes (so a change between base and head, constant within a process, does not
teach it). Each op's samples are taken at its process's mean state (``log t - beta (G
- mean G)``: a process's level is kept), and its common component is ``beta`` times
how far the pair's two processes' mean states differ. That halved the ops' spread
between processes (8.1% to 4.0%, benchmarks/compare_replay.py). Where the state hardly
moved within processes ``beta`` stays near 1 (:data:`ELASTICITY_PRIOR`).

**Detectable** is the slowdown of an op its interval would call regressed with
probability :data:`POWER`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..model.comparison import OpChange, PairedResult, Shared
from ..model.verdict import OpStatus
from ..stats.distributions import normal_quantile, t_quantile
from ..stats.drift import across_ops, others_median
from ..stats.power import detectable
from ..stats.robust import is_positive, robust_var
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
#: How far the machine's speed is credited to swing between two processes when the
#: pairs cannot show it (one pair): 4% per process on our shared runner
#: (benchmarks/RESULTS.md), a little more on a loaded night. One pair cannot tell it
#: from a change every op shares, so each op's change carries it.
ASSUMED_SWING = 0.06
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
                shown: tuple[np.ndarray, np.ndarray] | None = None,
                common: np.ndarray | None = None) -> PairedResult:
    """Judge every op from ``base`` and ``head``, each of shape (pairs, ops): the op's
    median (ns) in each process; 2 pairs or more (the comparison sends fewer than
    :data:`MIN_PAIRS` to :func:`judge_assumed`). ``shown``: the medians to report as
    base and head times, when ``base`` and ``head`` are taken at each process's mean
    state (:func:`state_adjusted`); ``common``: each pair's common component of each
    op (log, (pairs, ops)), the pairs' median op where not given."""
    base, head = _checked(base, head)
    pairs, n_ops = base.shape
    if pairs < 2:
        raise ValueError("the paired model needs 2 pairs or more; fewer: judge_assumed")
    r = np.log(head) - np.log(base)
    c = _common(r) if common is None else np.asarray(common, dtype=float)
    d = r - (c - c.mean(axis=0))  # the common component's swing out, its mean kept
    var, dof = moderated(np.maximum(d.var(axis=0, ddof=1), _VAR_FLOOR), pairs - 1,
                         min_ops=MIN_OPS_FOR_PRIOR, max_prior_weight=MAX_PRIOR_WEIGHT)
    # the common component's mean is one figure for every op, known this well: the
    # interval is the op's own part, family-wise over the ops, plus the common part's,
    # each at half the level (a union bound)
    var_c = c.var(axis=0, ddof=1)
    q_own = t_quantile(1 - alpha / (4 * n_ops), dof)
    q_common = t_quantile(1 - alpha / 4, pairs - 1)
    half = q_own * np.sqrt(var / pairs) + q_common * np.sqrt(var_c / pairs)
    notes = [] if n_ops >= MIN_OPS_FOR_PRIOR else [
        f"{n_ops} op(s): each op's spread is its own, over {pairs} pairs"]
    times = _checked(*shown) if shown is not None else (base, head)
    return PairedResult(
        ops=_changes(_geo_mean(times[0]), _geo_mean(times[1]), d.mean(axis=0), half,
                     np.sqrt((var + var_c) / pairs), np.sqrt(var + var_c), tolerance),
        pairs=pairs, common=tuple(float(x) for x in np.exp(np.median(c, axis=1))),
        shared=_shared(np.median(r, axis=1), n_ops, alpha), dof=dof,
        quantile=float(np.median(half * math.sqrt(pairs) / np.sqrt(var + var_c))),
        notes=tuple(notes))


def judge_assumed(base: tuple[np.ndarray, np.ndarray], head: tuple[np.ndarray, np.ndarray],
                  tolerance: float = config.TOLERANCE, alpha: float = COMPARE_ALPHA,
                  spreads: np.ndarray | None = None,
                  fastest: tuple[np.ndarray, np.ndarray] | None = None,
                  names: Sequence[str] | None = None) -> PairedResult:
    """Judge every op from fewer than :data:`MIN_PAIRS` pairs: each op credited
    :data:`ASSUMED_SPREAD` or what its ``spreads``, its pairs or the test's ops show
    where more, normal quantiles. ``base`` and ``head`` are each (log medians, their
    squared standard errors), of shape (pairs, ops); ``spreads``: each op's known spread
    between processes (relative sd of a median, NaN where unknown: a stored
    baseline's), which widens the assumed one, never narrows. Nothing the ops share is
    taken out: with one pair a change of the code and the machine's cannot be told
    apart, so each op is credited the machine's swing (:data:`ASSUMED_SWING`) too, and
    only a change beyond both is called.

    ``fastest``: each process's log fastest sample of each op, base and head, (pairs,
    ops). A change of the code moves every iteration of an op, its fastest too; a busy
    machine (more runnable processes than cores) slows the iterations it preempts, and
    ops of a millisecond or more most: on our loaded 2-core runner such ops ran 2.5-4x
    slower at their median in about half the processes, their fastest iteration as
    fast as ever. So an op is not called changed where its fastest iteration moved
    less than half as far as its median. ``names``: the ops', for the notes."""
    b_log, b_se2 = (np.asarray(x, dtype=float) for x in base)
    h_log, h_se2 = (np.asarray(x, dtype=float) for x in head)
    b, h = _checked(np.exp(b_log), np.exp(h_log))
    pairs, n_ops = b.shape
    r = h_log - b_log
    c = _common(r)
    d = r - (c - c.mean(axis=0))
    sampling = np.nan_to_num(b_se2 + h_se2, nan=0.0)  # (pairs, ops)
    tau = np.full(n_ops, ASSUMED_SPREAD)
    if spreads is not None:
        tau = np.fmax(tau, np.asarray(spreads, dtype=float))  # NaN: unknown, not wider
    # one pair's log ratio under no change: the op's spread and the machine's swing
    var = sampling.mean(axis=0) + 2 * tau ** 2 + 2 * ASSUMED_SWING ** 2
    if pairs > 1:  # what the pairs show, where it is more
        var = np.maximum(var, r.var(axis=0, ddof=1))
    if n_ops >= MIN_OPS_FOR_PRIOR:  # how far the ops scattered, where the machine is worse
        var = np.maximum(var, float(np.median([robust_var(row) for row in d])))
    q = normal_quantile(1 - alpha / (2 * n_ops))
    what = "one run per side" if pairs == 1 else f"{pairs} pairs"
    changes = _changes(_geo_mean(b), _geo_mean(h), d.mean(axis=0),
                       q * np.sqrt(var / pairs), np.sqrt(var / pairs), np.sqrt(var), tolerance)
    if fastest is not None:
        fast = np.asarray(fastest[1], dtype=float) - np.asarray(fastest[0], dtype=float)
        changes, held = _fastest_agrees(changes, fast.mean(axis=0))
        if held:
            named = [f"{names[i] if names is not None else f'op {i}'} "
                     f"({changes[i].own - 1:+.1%} at the median, "
                     f"{math.expm1(fast.mean(axis=0)[i]):+.1%} at the fastest iteration)"
                     for i in held]
            notes = [f"{', '.join(named)}: moved at the median but its fastest iteration "
                     "less than half as far, as on a busy machine (a change of the code "
                     "moves every iteration): not called changed"]
        else:
            notes = []
    else:
        notes = []
    notes.append(f"{what}: too few to see how each op moves between processes, so each op "
                 f"is credited a spread of {ASSUMED_SPREAD:.0%} of its median per process or "
                 "more (a little over what the 90th percentile op moved on a shared 2-core "
                 f"runner), and the machine a swing of {ASSUMED_SWING:.0%}; wider where its "
                 f"stored baselines{'' if pairs == 1 else ', its pairs'} or the test's ops "
                 "show more): only large changes can be told; "
                 f"{MIN_PAIRS} or more pairs of processes taking turns learn each op's own "
                 "spread")
    shared = None
    if n_ops >= MIN_OPS_FOR_DRIFT:  # the median op's change, at the same assumed spread
        mid = float(np.median(c.mean(axis=0)))
        half = normal_quantile(1 - alpha / 2) * math.sqrt(float(np.median(var)) / pairs)
        shared = Shared(math.exp(mid), math.exp(mid - half), math.exp(mid + half))
    return PairedResult(
        ops=changes, pairs=pairs, common=tuple(float(x) for x in np.exp(np.median(c, axis=1))),
        shared=shared, dof=math.inf, quantile=q, notes=tuple(notes))


def _fastest_agrees(changes: tuple[OpChange, ...],
                    fast: np.ndarray) -> tuple[tuple[OpChange, ...], list[int]]:
    """The changes with each regressed (improved) op made ok where its fastest
    iteration's log change ``fast`` is no change by the op's own interval and less than
    half its median's (the busy machine's mark: the median moved, the fastest iteration
    did not follow); and which ops (indices) that was."""
    kept, held = list(changes), []
    for i, c in enumerate(changes):
        half_width = math.log(c.high / c.low) / 2
        follows = abs(fast[i]) >= abs(math.log(c.own)) / 2
        if follows:
            continue
        if (c.verdict == OpStatus.REGRESSED and fast[i] - half_width <= 0) or \
                (c.verdict == OpStatus.IMPROVED and fast[i] + half_width >= 0):
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


def _common(r: np.ndarray) -> np.ndarray:
    """Each pair's common component of every op (``r``: log ratios, (pairs, ops)): the
    pair's median op, the same for every op; none (zeros) with fewer than
    :data:`MIN_OPS_FOR_DRIFT` ops (one op would be its own common component)."""
    if r.shape[1] < MIN_OPS_FOR_DRIFT:
        return np.zeros_like(r)
    return np.repeat(across_ops(r)[:, None], r.shape[1], axis=1)


def _shared(per_pair: np.ndarray, n_ops: int, alpha: float) -> Shared | None:
    """What the test's ops moved by together (the mean over pairs of each pair's median
    op's log ratio, ``per_pair``) and its two-sided ``alpha`` interval over the pairs;
    None with too few ops."""
    if n_ops < MIN_OPS_FOR_DRIFT:
        return None
    mid = float(per_pair.mean())
    half = t_quantile(1 - alpha / 2, len(per_pair) - 1) * float(
        per_pair.std(ddof=1)) / math.sqrt(len(per_pair))
    return Shared(math.exp(mid), math.exp(mid - half), math.exp(mid + half))


def _changes(base: np.ndarray, head: np.ndarray, mean: np.ndarray, half: np.ndarray,
             se: np.ndarray, sd: np.ndarray, tolerance: float) -> tuple[OpChange, ...]:
    """Each op's change: what its medians ``base`` and ``head`` (ns) show, exactly, and
    its estimate ``exp(mean)`` with its interval (``mean +- half``, log), from which the
    verdict is read; ``se``: the estimate's standard error, for what it can detect."""
    bound = math.log1p(tolerance)
    changes = []
    for i in range(len(mean)):
        low, high = mean[i] - half[i], mean[i] + half[i]
        verdict = (OpStatus.REGRESSED if low > bound else OpStatus.IMPROVED
                   if high < -bound else OpStatus.OK)
        changes.append(OpChange(float(base[i]), float(head[i]), float(head[i] / base[i]),
                                math.exp(low), math.exp(high), float(sd[i]), verdict,
                                detectable(bound + float(half[i]), float(se[i]), POWER),
                                estimate=math.exp(mean[i])))
    return tuple(changes)


def pairs_needed(result: PairedResult, detect: float,
                 tolerance: float = config.TOLERANCE) -> int:
    """The pairs at which nine in ten of the result's ops (``config.SIZING_QUANTILE``)
    would see a slowdown of ``detect`` (a fraction above ``tolerance``) with
    probability :data:`POWER`, each op at its spread and interval as they are now
    (the half-width shrinks as one over the root of the pairs). Sizing on the spreads
    alone, never on the changes, keeps the intervals' level (an internal pilot, Wittes
    and Brittain 1990)."""
    if not result.ops:
        return result.pairs
    room = math.log1p(detect) - math.log1p(tolerance)
    if room <= 0:
        raise ValueError("the change to detect must exceed the tolerance")
    z = normal_quantile(POWER)
    needed = [((math.log(op.high / op.low) / 2 * math.sqrt(result.pairs) + z * op.sd)
               / room) ** 2 for op in result.ops]
    return max(2, math.ceil(float(np.percentile(needed, config.SIZING_QUANTILE))))


def _geo_mean(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.exp(np.log(x).mean(axis=0)))


# -- the machine's state, iteration by iteration ------------------------------------------

@dataclass(frozen=True)
class StateAdjusted:
    #: Each process's log times at its own mean state (as given: too few ops).
    logs: list[np.ndarray]
    #: Each op's elasticity to the machine's state.
    beta: np.ndarray
    #: Each process's mean state of each op (log, (processes, ops)): how fast the
    #: machine ran it, from the op's iterations.
    level: np.ndarray

    def common(self) -> np.ndarray:
        """Each pair's common component of each op (log, (pairs, ops)): the op's
        elasticity times how far the pair's head process's mean state is from its base
        process's (processes alternate base, head)."""
        return np.asarray(self.beta * (self.level[1::2] - self.level[0::2]))


def state_adjusted(processes: list[np.ndarray]) -> StateAdjusted:
    """Every process's log times taken at the process's own mean machine state, each
    op's elasticity and each process's mean state of each op (module docstring).
    ``processes[k]`` is process ``k``'s log times, (iterations, ops), NaN where an op
    did not run; the ops (columns) are the same in every process. Fewer than
    :data:`MIN_OPS_FOR_DRIFT` ops: returned as they are, at state 0."""
    n_ops = processes[0].shape[1] if processes else 0
    if n_ops < MIN_OPS_FOR_DRIFT:
        return StateAdjusted(processes, np.ones(n_ops), np.zeros((len(processes), n_ops)))
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
        g = np.where(known, g, usual)
        mean = g.mean(axis=0)  # the op's mean state in this process
        adjusted.append(x - beta * (g - mean))
        level.append(mean)
    return StateAdjusted(adjusted, beta, np.array(level))


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
    median counts. Nothing the pairs share is taken out, not even its swing (no
    machine speed moves a count), no state adjustment; the change is the mean log ratio
    over the pairs, its spread what the pairs show, never under
    :data:`COUNT_SPREAD_FLOOR`. One pair is enough where counts repeat."""
    base, head = _checked(base, head)
    r = np.log(head) - np.log(base)
    pairs, n_ops = r.shape
    sd = np.maximum(r.std(axis=0, ddof=1) if pairs > 1 else np.zeros(n_ops),
                    COUNT_SPREAD_FLOOR)
    q = normal_quantile(1 - alpha / (2 * n_ops))
    note = ("instruction counts: no machine speed moves a count, so each op is judged "
            "from its own pairs alone, credited a spread of "
            f"{COUNT_SPREAD_FLOOR:.1%} or what its pairs show")
    return PairedResult(ops=_changes(np.median(base, axis=0), np.median(head, axis=0),
                                     r.mean(axis=0), q * sd / math.sqrt(pairs),
                                     sd / math.sqrt(pairs), sd, tolerance),
                        pairs=pairs, common=(1.0,) * pairs, shared=None,
                        dof=math.inf, quantile=q, notes=(note,))
