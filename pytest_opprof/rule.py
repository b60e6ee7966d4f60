"""The comparison rule: a current run's op samples against a baseline's runs.

Plain arrays in, verdicts out; no pytest, no files. For each op matched by
(name, occurrence), with ``r`` the log ratio of the current median to the mean
log median of the K baseline runs and ``g`` the run's drift (the median ``r``
over ops, or a reference probe's ratio when a test has too few ops), the op
*regressed* when all of these hold for ``d = r - g``:

1. effect: ``d > log(1 + tolerance)``;
2. between-run noise: ``d`` is improbable given the op's own process-to-process
   spread ``tau``: ``d ~ N(0, c^2 (tau^2 (1 + 1/K) + se_cur^2 + se_base^2 / K))``,
   where ``c`` (``spread_inflation``, 2) covers what runs taken back to back do not
   show of how ops move over minutes and hours (contention bursts, process-level
   modes; calibrated on real runs, benchmarks/RESULTS.md), with
   ``tau`` not assumed but inferred: a lognormal prior across ops centred on the
   test's typical spread and widened for short ops, updated by the spread of the
   K baseline runs; its p-value is Holm-corrected across ops at ``alpha``, one
   error rate for the whole test, so 300 ops fail no more often than 3;
   A run far from the baseline's speed widens every margin (``drift_sensitivity``):
   ops react unequally to a contended machine;
3. rank test: a one-sided Mann-Whitney U test of the drift-corrected current
   samples against the pooled baseline samples, Holm-corrected likewise;
4. floor: the drift-corrected median grew by more than ``floor_ns``, below which
   timer resolution and dispatch jitter dominate.

*improved* is the mirror image. Ops only in the current run are *new*, only in
the baseline *missing*; neither fails unless the caller says so.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np

from .verdict import Comparison, Key, OpStatus, OpVerdict

#: Var(median) ~ (pi / 2) sigma^2 / n for normal samples; MAD * 1.4826 estimates sigma.
_MEDIAN_VAR = math.pi / 2
_MAD_SIGMA = 1.4826

#: Absolute floors per backend: perf_counter_ns plus Python dispatch jitter on the CPU,
#: CUDA event resolution (about 0.5 us) plus launch jitter on the GPU.
FLOOR_NS = {"cpu": 500.0, "cuda": 1000.0, "fake": 0.0}


@dataclass(frozen=True)
class GateConfig:
    #: The smallest slowdown that may fail a test (drift-corrected ratio - 1).
    tolerance: float = 0.05
    #: Per-op tolerances by op name; ops not named here use ``tolerance``.
    tolerances: Mapping[str, float] = field(default_factory=dict)
    #: Family-wise false-alarm rate of each test, shared by all its ops.
    alpha: float = 0.001
    #: With a confirmation re-run: the looser rate at which the first run asks for one.
    trigger_alpha: float = 0.05
    #: A slowdown must also exceed this much time per call, drift-corrected.
    floor_ns: float = 500.0
    #: Fewer counted samples than this in either run: the op is not judged.
    min_samples: int = 5
    #: Fewer comparable ops than this: the drift comes from the probe, not the ops.
    min_ops_for_drift: int = 5
    #: The typical process-to-process spread of an op's median, assumed when a test
    #: has too few ops to measure its own, and the least a measured one is taken to be;
    #: ops spread around it lognormally with this log-sd (fitted to real runs) ...
    tau_prior: float = 0.025
    tau_floor: float = 0.01
    tau_spread: float = 0.55
    #: ... plus this much absolute jitter per call, so short ops get a wider margin.
    jitter_ns: float = 300.0
    #: Real runs spread this much more than baseline runs taken back to back show; a
    #: baseline whose runs span an hour or more (a history) has seen most of it.
    spread_inflation: float = 2.0
    history_inflation: float = 1.5
    #: Ops react unequally to a machine-wide slowdown (multi-threaded BLAS suffers most
    #: from a busy neighbour): a run whose drift g is beyond the deadband widens every
    #: op's spread by this times the excess of |log g|, so a run on a contended machine
    #: cannot fail on one class of ops.
    drift_sensitivity: float = 1.0
    drift_deadband: float = 0.05
    #: Spread of the drift estimate when it cannot come from the test's own ops.
    drift_uncertainty: float = 0.03

    def tolerance_for(self, name: str) -> float:
        return self.tolerances.get(name, self.tolerance)


def _log_median_se2(rows: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """For each row of samples: the log median, and the squared standard error of
    that log median (from the MAD of the log samples, robust to spikes)."""
    lengths = np.array([len(r) for r in rows])
    if (lengths == lengths[0]).all():  # the common case, and far faster than nanmedian
        logs = np.log(np.vstack(rows).astype(float))
        median = np.median(logs, axis=1)
        sigma = _MAD_SIGMA * np.median(np.abs(logs - median[:, None]), axis=1)
    else:
        padded = np.full((len(rows), lengths.max()), np.nan)
        for i, r in enumerate(rows):
            padded[i, :len(r)] = r
        logs = np.log(padded)
        median = np.nanmedian(logs, axis=1)
        sigma = _MAD_SIGMA * np.nanmedian(np.abs(logs - median[:, None]), axis=1)
    return median, _MEDIAN_VAR * sigma * sigma / lengths


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


def holm(p_values: np.ndarray, alpha: float) -> np.ndarray:
    """Which hypotheses Holm's step-down procedure rejects at family-wise ``alpha``."""
    order = np.argsort(p_values, kind="stable")
    k = len(p_values)
    thresholds = alpha / (k - np.arange(k))
    passing = p_values[order] <= thresholds
    stop = np.argmin(passing) if not passing.all() else k
    rejected = np.zeros(k, dtype=bool)
    rejected[order[:stop]] = True
    return rejected


#: One judged op's samples: its current runs and its baseline runs (positive values,
#: no empty run), the current first.
RunPair = tuple[list[np.ndarray], list[np.ndarray]]


def compare(
    current: Mapping[Key, np.ndarray | Sequence[np.ndarray]],
    baseline: Mapping[Key, Sequence[np.ndarray]],
    op_ids: Mapping[Key, int],
    config: GateConfig = GateConfig(),
    probe_drift: float | None = None,
) -> Comparison:
    """Judge every op of ``current`` (counted samples, ns) against ``baseline``
    (the samples of each baseline run). ``op_ids`` numbers current ops and, for
    missing ones, the baseline's. ``probe_drift`` is the reference probe's
    current/baseline ratio, used when the test has too few ops for its own."""
    verdicts: dict[Key, OpVerdict] = {}
    stats: dict[Key, RunPair] = {}
    for key, value in current.items():
        prepared = _prepare(key, value, baseline, op_ids.get(key, -1), config)
        if isinstance(prepared, OpVerdict):
            verdicts[key] = prepared
        else:
            stats[key] = prepared
    for key in baseline:
        if key not in current:
            verdicts[key] = _missing(key, baseline[key], op_ids.get(key, -1))

    drift, source = 1.0, "none"
    if stats:
        drift, source = _judge(list(stats), stats, op_ids, config, probe_drift, verdicts)
    ordered = sorted(verdicts.values(), key=lambda v: (v.op_id < 0, v.op_id, v.name))
    runs = max((len(v) for v in baseline.values()), default=0)
    return Comparison(tuple(ordered), drift, source, runs)


def _prepare(key: Key, value: np.ndarray | Sequence[np.ndarray],
             baseline: Mapping[Key, Sequence[np.ndarray]], op_id: int,
             config: GateConfig) -> OpVerdict | RunPair:
    """A current op's runs and its baseline's, ready to judge; or its verdict when it
    cannot be judged (new, or too few samples on a side)."""
    name, occurrence = key
    given = value if isinstance(value, list) else [cast(np.ndarray, value)]
    cur_runs = [_positive(r) for r in given]
    cur_runs = [r for r in cur_runs if len(r)]
    cur_all = np.concatenate(cur_runs) if cur_runs else np.zeros(0)
    if key not in baseline:
        return OpVerdict(name, occurrence, op_id, OpStatus.NEW,
                         current_median=_median(cur_all), n_current=len(cur_all))
    base_runs = [b for b in (_positive(r) for r in baseline[key]) if len(b)]
    if not cur_runs or not base_runs or \
            min(len(r) for r in cur_runs + base_runs) < config.min_samples:
        return OpVerdict(
            name, occurrence, op_id, OpStatus.UNJUDGED,
            current_median=_median(cur_all), n_current=len(cur_all),
            baseline_median=_median(np.concatenate(base_runs)) if base_runs else math.nan,
            reason=f"fewer than {config.min_samples} samples")
    return cur_runs, base_runs


def _missing(key: Key, runs: Sequence[np.ndarray], op_id: int) -> OpVerdict:
    """An op of the baseline that the current run did not have."""
    pooled = np.concatenate([np.asarray(r, dtype=float) for r in runs])
    return OpVerdict(key[0], key[1], op_id, OpStatus.MISSING,
                     baseline_median=_median(pooled), n_baseline=len(pooled))


def compare_with_rerun(
    current: Mapping[Key, np.ndarray],
    baseline: Mapping[Key, Sequence[np.ndarray]],
    op_ids: Mapping[Key, int],
    config: GateConfig,
    rerun: Callable[[list[OpVerdict]], Mapping[Key, np.ndarray] | None] | None,
    probe_drift: float | None = None,
) -> Comparison:
    """:func:`compare`, with a confirmation when ``rerun`` is given.

    When the first run looks regressed at the looser ``config.trigger_alpha``,
    ``rerun(suspects)`` measures the test again in a new process (with new process-level
    offsets, and past whatever transient load hit the first run). The runs are then
    judged together at ``config.alpha``, and an op regresses only if the combined
    runs and the first run agree.
    """
    first = compare(current, baseline, op_ids, config, probe_drift)
    suspects = {v.key for v in first.ops if v.suspect}
    if rerun is None or not suspects:
        return first
    again = rerun([v for v in first.ops if v.suspect])
    if again is None:
        return first
    both: dict[Key, np.ndarray | list[np.ndarray]] = {
        key: [samples, again[key]] if key in again else samples
        for key, samples in current.items()}
    combined = compare(both, baseline, op_ids, config, probe_drift)
    ops = tuple(replace(v, verdict=OpStatus.OK)
                if v.verdict == OpStatus.REGRESSED and v.key not in suspects else v
                for v in combined.ops)
    confirmed = {v.key for v in ops if v.verdict == OpStatus.REGRESSED}
    unconfirmed = tuple(v for v in first.ops if v.suspect and v.key not in confirmed)
    return replace(combined, ops=ops, current_runs=2, unconfirmed=unconfirmed)


@dataclass(frozen=True)
class _Evidence:
    """Per judged op (arrays indexed like the keys): what its verdict is read from."""

    #: Baseline and current medians, (ops, 2).
    medians: np.ndarray
    #: The drift-corrected log ratio, and its variance under each candidate spread of
    #: the op with the posterior weight of each, (ops, grid).
    d: np.ndarray
    var_d: np.ndarray
    weight: np.ndarray
    z: np.ndarray
    runs: np.ndarray
    #: One-sided p-values: between runs and by rank, slower and faster.
    p_between: tuple[np.ndarray, np.ndarray]
    p_rank: tuple[np.ndarray, np.ndarray]
    #: Holm's decisions at ``alpha`` (slower, faster) and at the looser trigger level.
    slower: np.ndarray
    faster: np.ndarray
    suspect: np.ndarray
    #: Counted samples on each side, and whether they could ever reach the test's level.
    n_cur: np.ndarray
    n_base: np.ndarray
    undecidable: np.ndarray


def _judge(keys: list[Key], stats: Mapping[Key, RunPair], op_ids: Mapping[Key, int],
           config: GateConfig, probe_drift: float | None,
           verdicts: dict[Key, OpVerdict]) -> tuple[float, str]:
    """Judge ops with enough samples on both sides; returns the drift and its source."""
    c_logs, c_se2s = _per_run(keys, stats, 0)
    b_logs, b_se2s = _per_run(keys, stats, 1)
    b_mean = np.nanmean(b_logs, axis=1)
    log_ratio = np.nanmean(c_logs, axis=1) - b_mean
    drift_log, source, drift_var = _drift(log_ratio, probe_drift, config)
    ev = _evidence(keys, stats, config, drift_log, drift_var, (c_logs, c_se2s),
                   (b_logs, b_se2s))
    for i, key in enumerate(keys):
        verdicts[key] = _op_verdict(i, key, ev, stats[key], op_ids.get(key, -1), config,
                                    drift_log, len(keys))
    return math.exp(drift_log), source


def _drift(log_ratio: np.ndarray, probe_drift: float | None,
           config: GateConfig) -> tuple[float, str, float]:
    """The run's log drift, its source and its variance: from the ops when there are
    enough of them, else from the reference probe, else none."""
    if len(log_ratio) >= config.min_ops_for_drift:
        return float(np.median(log_ratio)), "ops", 0.0
    if probe_drift is not None and probe_drift > 0:
        return math.log(probe_drift), "probe", config.drift_uncertainty ** 2
    return 0.0, "none", config.drift_uncertainty ** 2


def _evidence(keys: list[Key], stats: Mapping[Key, RunPair], config: GateConfig,
              drift_log: float, drift_var: float, current: tuple[np.ndarray, np.ndarray],
              base: tuple[np.ndarray, np.ndarray]) -> _Evidence:
    """The between-run and rank tests of every judged op, Holm-corrected over them."""
    k_ops = len(keys)
    (c_logs, c_se2s), (b_logs, b_se2s) = current, base
    c_runs = (~np.isnan(c_logs)).sum(axis=1)
    runs = (~np.isnan(b_logs)).sum(axis=1)
    c_mean, c_se2 = np.nanmean(c_logs, axis=1), np.nanmean(c_se2s, axis=1)
    b_mean, b_se2 = np.nanmean(b_logs, axis=1), np.nanmean(b_se2s, axis=1)
    medians = np.column_stack([np.exp(b_mean), np.exp(c_mean)])
    d = c_mean - b_mean - drift_log

    # the variance of d under each candidate spread of the op, and how likely each is
    tau2, weight = _spread_posterior(b_logs, b_mean, b_se2, runs, medians[:, 0], config)
    var_d = config.spread_inflation ** 2 * (
        tau2 * (1 / c_runs + 1 / runs)[:, None]
        + (c_se2 / c_runs + b_se2 / runs + drift_var)[:, None]
    ) + (config.drift_sensitivity * max(abs(drift_log) - config.drift_deadband, 0.0)) ** 2
    p_between = (_mixture_tail(d, var_d, weight), _mixture_tail(-d, var_d, weight))
    z = d / np.sqrt((weight * var_d).sum(axis=1))

    # each current run's samples scaled by that run's own drift before they are pooled
    run_drift = np.exp(np.nanmedian(c_logs - b_mean[:, None], axis=0)) \
        if k_ops >= config.min_ops_for_drift else np.full(c_logs.shape[1], math.exp(drift_log))
    cur_scaled = [np.concatenate([r / run_drift[j] for j, r in enumerate(stats[key][0])])
                  for key in keys]
    pooled = [np.concatenate(stats[key][1]) for key in keys]
    p_rank = mann_whitney(cur_scaled, pooled)
    loose = max(config.trigger_alpha, config.alpha)
    # an op whose samples could not reach the test's level even if every current
    # sample exceeded every baseline one is not judged (saying "ok" would be a guess)
    n_cur = np.array([len(c) for c in cur_scaled], dtype=float)
    n_base = np.array([len(b) for b in pooled], dtype=float)
    undecidable = normal_sf(np.sqrt(3 * n_cur * n_base / (n_cur + n_base + 1))) \
        > config.alpha / k_ops
    return _Evidence(
        medians=medians, d=d, var_d=var_d, weight=weight, z=z, runs=runs,
        p_between=p_between, p_rank=p_rank,
        slower=holm(p_between[0], config.alpha) & holm(p_rank[0], config.alpha),
        faster=holm(p_between[1], config.alpha) & holm(p_rank[1], config.alpha),
        suspect=holm(p_between[0], loose) & holm(p_rank[0], loose),
        n_cur=n_cur, n_base=n_base, undecidable=undecidable)


def _op_verdict(i: int, key: Key, ev: _Evidence, pair: RunPair, op_id: int,
                config: GateConfig, drift_log: float, k_ops: int) -> OpVerdict:
    """The verdict of the ``i``-th judged op: the effect, the floor and both tests."""
    name, occurrence = key
    tol = config.tolerance_for(name)
    effect = math.log1p(tol)
    base_med, cur_med = ev.medians[i]
    d = ev.d[i]
    grown_ns = cur_med / math.exp(drift_log) - base_med
    slower_enough = d > effect and grown_ns > config.floor_ns
    if slower_enough and ev.slower[i]:
        verdict = OpStatus.REGRESSED
    elif d < -effect and ev.faster[i] and -grown_ns > config.floor_ns:
        verdict = OpStatus.IMPROVED
    else:
        verdict = OpStatus.OK
    margin = math.nan
    if verdict != OpStatus.OK:
        needed = _needed_shift(ev.var_d[i], ev.weight[i], config.alpha / k_ops)
        margin = math.exp(max(effect, needed))
    reason = ""
    if verdict == OpStatus.OK and ev.undecidable[i]:
        verdict = OpStatus.UNJUDGED
        reason = (f"{int(ev.n_cur[i])} samples against {int(ev.n_base[i])} cannot reach the "
                  f"significance level over {k_ops} ops; run more iterations")
    side = 0 if d >= 0 else 1  # the p-values in the direction of the change
    cur_runs, base_runs = pair
    return OpVerdict(
        name, occurrence, op_id, verdict, reason=reason,
        baseline_median=base_med, current_median=cur_med,
        ratio=cur_med / base_med, corrected_ratio=math.exp(d), margin=margin,
        tolerance=tol, z=float(ev.z[i]),
        p_value=float(ev.p_between[side][i]), rank_p_value=float(ev.p_rank[side][i]),
        n_current=sum(len(r) for r in cur_runs),
        n_baseline=sum(len(b) for b in base_runs), runs=int(ev.runs[i]),
        suspect=bool(slower_enough and ev.suspect[i]),
    )


def _per_run(keys: list[Key], stats: Mapping[Key, RunPair],
             side: int) -> tuple[np.ndarray, np.ndarray]:
    """(ops, runs) log medians and their squared standard errors, NaN where an op
    lacks a run; ``side`` 0 is the current runs, 1 the baseline's."""
    rows = [(i, r) for i, key in enumerate(keys) for r in range(len(stats[key][side]))]
    logs, se2s = _log_median_se2([stats[keys[i]][side][r] for i, r in rows])
    width = max(r for _, r in rows) + 1
    log_m = np.full((len(keys), width), np.nan)
    se2_m = np.full((len(keys), width), np.nan)
    op_index, run_index = np.array(rows).T
    log_m[op_index, run_index] = logs
    se2_m[op_index, run_index] = se2s
    return log_m, se2_m


#: The grid over an op's unknown relative spread, in prior standard deviations.
_SPREAD_GRID = np.linspace(-4.0, 4.0, 49)


def _spread_posterior(b_logs: np.ndarray, b_mean: np.ndarray, b_se2: np.ndarray,
                      runs: np.ndarray, base_ns: np.ndarray,
                      config: GateConfig) -> tuple[np.ndarray, np.ndarray]:
    """What each op's process-to-process variance of its log median may be.

    Ops differ: most move 1-3% between processes, some 10% (allocation, cache
    placement). The prior is lognormal across ops, centred on this test's typical
    spread (or ``tau_prior`` when it has too few ops to tell) with log-sd
    ``tau_spread``, plus absolute jitter that dominates short ops. The baseline runs,
    each run's own drift removed, update it for each op. Returns the candidate
    variances and their posterior weights, each (ops, grid).
    """
    k_ops = len(b_mean)
    deviation = b_logs - b_mean[:, None]
    if k_ops >= config.min_ops_for_drift:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a run no op has
            deviation = deviation - np.nan_to_num(np.nanmedian(deviation, axis=0))
    dof = np.maximum(runs - 1, 0).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        sample_var = np.where(dof > 0, np.nansum(deviation ** 2, axis=1) / dof, np.nan)
    jitter2 = (config.jitter_ns / base_ns) ** 2
    typical = config.tau_prior
    if np.count_nonzero(dof > 0) >= config.min_ops_for_drift:
        relative = np.maximum(sample_var - b_se2 - jitter2, 0.0)[dof > 0]
        # the median of a chi-square over its dof is about (1 - 2 / (9 dof))^3
        bias = (1 - 2 / (9 * float(np.median(dof[dof > 0])))) ** 3
        typical = max(math.sqrt(float(np.median(relative)) / bias), config.tau_floor)
    tau_rel2 = (typical * np.exp(config.tau_spread * _SPREAD_GRID)) ** 2
    tau2 = tau_rel2[None, :] + jitter2[:, None]
    log_weight = np.broadcast_to(-0.5 * _SPREAD_GRID ** 2, tau2.shape).copy()
    measured = dof > 0
    if measured.any():
        var = tau2[measured] + b_se2[measured, None]
        k = dof[measured, None]
        log_weight[measured] += -0.5 * k * (np.log(var) + sample_var[measured, None] / var)
    log_weight -= log_weight.max(axis=1, keepdims=True)
    weight = np.exp(log_weight)
    return tau2, weight / weight.sum(axis=1, keepdims=True)


def _mixture_tail(d: np.ndarray, var_d: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """P(D > d) for each op, D normal with a variance drawn from its posterior."""
    tail: np.ndarray = (weight * normal_sf(d[:, None] / np.sqrt(var_d))).sum(axis=1)
    return tail


def _needed_shift(var_d: np.ndarray, weight: np.ndarray, p: float) -> float:
    """The log shift at which an op's between-run tail probability falls to ``p``."""
    lo, hi = 0.0, 10.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if (weight * normal_sf(mid / np.sqrt(var_d))).sum() > p:
            lo = mid
        else:
            hi = mid
    return hi


def normal_sf(x: np.ndarray) -> np.ndarray:
    """The standard normal's upper tail, 1 - Phi(x), vectorised: erfc(x / sqrt 2) / 2 by
    Numerical Recipes' Chebyshev fit (relative error under 1.2e-7 everywhere)."""
    z = np.abs(np.asarray(x, dtype=float)) / math.sqrt(2)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(poly)
    tail: np.ndarray = np.where(np.asarray(x) >= 0, erfc / 2, 1 - erfc / 2)
    return tail


def _positive(samples: np.ndarray) -> np.ndarray:
    a = np.asarray(samples, dtype=float)
    keep = np.isfinite(a) & (a > 0)
    return a if keep.all() else a[keep]


def _median(samples: np.ndarray) -> float:
    a = _positive(samples)
    return float(np.median(a)) if a.size else math.nan
