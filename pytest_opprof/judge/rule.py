"""The stored-baseline rule: a current run's op samples against a baseline's runs (plain
arrays in, verdicts out).

For each op matched by (name, occurrence), with ``r`` the log ratio of the current median
to the mean log median of the K baseline runs and ``g`` the run's drift, the change is
``d = r - g``. **A drift is the machine's, and only a reference the code does not touch
shows it** (:func:`_drift`): the ops' median ``r`` (each weighted by its precision) is
taken out only where the reference probe, measured again when the ops moved, moved by
as much; where the probe did not, only the probe's drift is taken out and what the ops
moved by beyond it stays in every op (a slower common helper, a dependency upgrade:
the changes users most need to see); with no probe (a measure no machine moves)
nothing is. A test with too few ops takes the probe's. Under no change, ``d`` is normal
with variance

    sigma^2 = lambda^2 (tau^2 (1/C + 1/K) + se_cur^2 / C + se_base^2 / K + var(g))

with ``tau`` the op's spread between processes, ``se`` the standard errors of the medians
within a run and C the current runs. The op *regressed* when

1. ``d`` exceeds its **margin**, ``max(log(1 + tolerance), k sigma)``, ``k`` the normal
   quantile of ``alpha`` shared by the test's ops (a test of 300 ops fails no more often
   than one of 3; never under ``min_sigmas``);
2. the slowdown is more than ``floor_ns`` per call (timer resolution and dispatch jitter
   dominate below it);
3. a one-sided Mann-Whitney test of the drift-corrected samples agrees at the loose
   ``rank_alpha``: a guard against one odd run, never what limits power;
4. with a confirmation re-run (a new process): each run alone passes 1-3 at the looser
   ``trigger_alpha``, and both runs together pass 1-3.

*improved* is the mirror image; ops only in the current run are *new*, only in the
baseline *missing*, and neither fails unless the caller says so. Each judged op carries
its **detectable effect**: the slowdown that would fail it with probability ``power``.

``tau`` is learned by empirical Bayes across the test's ops: ``t h`` plus absolute jitter
(``jitter_ns`` per call: short ops move more), ``t`` the test's typical spread, the larger
of what the baseline's runs show (K >= 2) and how far its ops moved since (the spread of
``d`` across ops; ``tau_prior`` with neither), ``h`` the op's own factor, with a lognormal
prior (most ops move alike) and a heavy tail (a GPU kernel's runs agree to 0.01% where a
launch-bound op's move 20%) updated by the op's K runs: one run already knows how much
this test's ops move, five know this op. What runs taken back to back show is widened by
``spread_inflation`` (they miss how ops move over hours; calibrated on real A/A runs,
benchmarks/RESULTS.md); how far the ops moved since needs no widening. ``lambda`` (at
least 1) is how much wider the ops' ``d / sigma`` spread than the model expects, read at
the ops' 80th percentile: a few ops that changed do not move it, a class of ops moving
together on a contended machine does, and widens every margin.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np

from ..model.verdict import Comparison, Key, OpStatus, OpVerdict
from ..stats.distributions import mann_whitney, normal_quantile, normal_sf
from ..stats.drift import precision_weights, weighted_median
from ..stats.power import detectable
from ..stats.robust import MEDIAN_VAR, log_median_se2, median, positive, robust_var, typical_spread
from ..stats.shrink import spread_posterior
from . import config as defaults


@dataclass(frozen=True)
class GateConfig:
    #: The smallest slowdown that may fail a test (drift-corrected ratio - 1).
    tolerance: float = defaults.TOLERANCE
    #: Per-op tolerances by op name; ops not named here use ``tolerance``.
    tolerances: Mapping[str, float] = field(default_factory=dict)
    #: The nominal false-alarm rate of each test, shared by all its ops: the margin is
    #: ``k`` sigmas with ``k`` the normal quantile of ``alpha / ops``.
    alpha: float = defaults.GATE_ALPHA
    #: With a confirmation re-run: the looser rate at which the first run asks for one.
    trigger_alpha: float = 0.05
    #: The margin is never fewer sigmas than this, however few ops a test has.
    min_sigmas: float = 3.0
    #: The rank test's level: it guards against one odd run and must not limit power.
    rank_alpha: float = 0.01
    #: The detectable effect is the slowdown caught with this probability.
    power: float = defaults.POWER
    #: A slowdown must also exceed this much time per call, drift-corrected.
    floor_ns: float = 500.0
    #: Fewer counted samples than this in either run: the op is not judged.
    min_samples: int = defaults.MIN_SAMPLES
    #: Fewer comparable ops than this: the drift comes from the probe, not the ops.
    min_ops_for_drift: int = defaults.MIN_OPS_FOR_DRIFT
    #: Fewer ops than this: the test's typical spread is not read from how its ops moved.
    min_ops_for_spread: int = 8
    #: When more than this share of a test's ops moved beyond what their spreads allow,
    #: they moved together (a contended machine): every margin widens to match, and the
    #: gate (gate.contention_problem) leaves the test unjudged.
    together: float = 0.1
    #: The typical relative spread of an op's median between processes, assumed when a
    #: test has neither baseline runs nor ops enough to measure its own, and the least
    #: a measured one is taken to be.
    tau_prior: float = 0.025
    tau_floor: float = 0.005
    #: Ops spread around the typical lognormally with this log-sd (fitted to real runs),
    #: and this share of them anywhere from 1/10,000 to 30 times it (the heavy tail).
    tau_spread: float = 0.55
    tau_tail: float = 0.05
    #: An op is taken to spread as this quantile of what its own runs and its test's
    #: ops say (the median of a chi-square of 4 degrees of freedom is often well under
    #: its mean: five runs may underestimate an op that moves a lot); an op with one
    #: baseline run may be one that moves more than most of its test's.
    measured_quantile: float = 0.5
    unmeasured_quantile: float = 0.9
    #: Absolute jitter per call, so short ops get a wider margin.
    jitter_ns: float = 300.0
    #: Real runs spread this much more than baseline runs taken back to back show; a
    #: baseline whose runs span an hour or more (a history) has seen most of it.
    spread_inflation: float = 1.5
    history_inflation: float = 1.0
    #: Ops react unequally to a machine-wide slowdown (multi-threaded BLAS suffers most
    #: from a busy neighbour): a run whose drift g is beyond the deadband widens every
    #: op's spread by this times the excess of |log g|.
    drift_sensitivity: float = 1.0
    drift_deadband: float = 0.05
    #: Spread of the drift estimate when it cannot come from the test's own ops.
    drift_uncertainty: float = 0.03
    #: Whether the run's drift is estimated and divided out (times, which a machine's
    #: speed moves) or every op judged as measured (instruction counts).
    drift: bool = True

    def tolerance_for(self, name: str) -> float:
        return self.tolerances.get(name, self.tolerance)

    def sigmas(self, alpha: float, ops: int) -> float:
        """The margin in sigmas for a test of ``ops`` judged ops at rate ``alpha``."""
        return max(self.min_sigmas, normal_quantile(1 - alpha / max(ops, 1)))


#: One judged op's samples: its current runs and its baseline runs (positive values,
#: no empty run), the current first.
RunPair = tuple[list[np.ndarray], list[np.ndarray]]


#: The reference probe's current/baseline ratio, asked only when needed (None: none).
Machine = Callable[[], float | None]


def _no_probe() -> float | None:
    return None


def compare(current: Mapping[Key, np.ndarray | Sequence[np.ndarray]],
            baseline: Mapping[Key, Sequence[np.ndarray]], op_ids: Mapping[Key, int],
            config: GateConfig = GateConfig(), machine: Machine = _no_probe) -> Comparison:
    """Judge every op of ``current`` (counted samples, ns) against ``baseline`` (the
    samples of each baseline run). ``op_ids`` numbers current ops and, for missing ones,
    the baseline's. ``machine``: the reference probe's current/baseline ratio, asked
    only when the drift needs it."""
    verdicts: dict[Key, OpVerdict] = {}
    stats: dict[Key, RunPair] = {}
    for key, value in current.items():
        prepared = _prepare(key, value, baseline, op_ids.get(key, -1), config)
        if isinstance(prepared, OpVerdict):
            verdicts[key] = prepared
        else:
            stats[key] = prepared
    for key in (key for key in baseline if key not in current):
        pooled = np.concatenate([np.asarray(r, dtype=float) for r in baseline[key]])
        verdicts[key] = OpVerdict(key[0], key[1], op_ids.get(key, -1), OpStatus.MISSING,
                                  baseline_median=median(pooled), n_baseline=len(pooled))
    drift, source = 1.0, "none"
    if stats:
        ev = _evidence(stats, config, machine)
        for i, (key, pair) in enumerate(stats.items()):
            verdicts[key] = _op_verdict(i, key, ev, pair, op_ids.get(key, -1), config)
        drift, source = math.exp(ev.drift_log), ev.drift_source
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
    cur_runs = [r for r in map(positive, given) if len(r)]
    cur_all = np.concatenate(cur_runs) if cur_runs else np.zeros(0)
    if key not in baseline:
        return OpVerdict(name, occurrence, op_id, OpStatus.NEW,
                         current_median=median(cur_all), n_current=len(cur_all))
    base_runs = [b for b in map(positive, baseline[key]) if len(b)]
    if not cur_runs or not base_runs or \
            min(len(r) for r in cur_runs + base_runs) < config.min_samples:
        return OpVerdict(
            name, occurrence, op_id, OpStatus.UNJUDGED,
            current_median=median(cur_all), n_current=len(cur_all),
            baseline_median=median(np.concatenate(base_runs)) if base_runs else math.nan,
            reason=f"fewer than {config.min_samples} samples")
    return cur_runs, base_runs


def compare_with_rerun(current: Mapping[Key, np.ndarray],
                       baseline: Mapping[Key, Sequence[np.ndarray]], op_ids: Mapping[Key, int],
                       config: GateConfig,
                       rerun: Callable[[list[OpVerdict]], Mapping[Key, np.ndarray] | None] | None,
                       machine: Machine = _no_probe) -> Comparison:
    """:func:`compare`, with a confirmation when ``rerun`` is given.

    When the first run looks regressed at the looser ``config.trigger_alpha``,
    ``rerun(suspects)`` measures the test again in a new process (with new process-level
    offsets, and past whatever transient load hit the first run). An op then regresses
    only if each run alone would have asked for a re-run (the slowdown was seen twice,
    in two processes) and both runs judged together clear its margin at
    ``config.alpha``.
    """
    first = compare(current, baseline, op_ids, config, machine)
    suspects = {v.key for v in first.ops if v.suspect}
    if rerun is None or not suspects:
        return first
    again = rerun([v for v in first.ops if v.suspect])
    if again is None:
        return first
    both: dict[Key, np.ndarray | list[np.ndarray]] = {
        key: [samples, again[key]] if key in again else samples
        for key, samples in current.items()}
    combined = compare(both, baseline, op_ids, config, machine)
    seen_again = {v.key for v in compare(again, baseline, op_ids, config, machine).ops
                  if v.suspect} & suspects
    ops = tuple(replace(v, verdict=OpStatus.OK)
                if v.verdict == OpStatus.REGRESSED and v.key not in seen_again else v
                for v in combined.ops)
    confirmed = {v.key for v in ops if v.verdict == OpStatus.REGRESSED}
    unconfirmed = tuple(v for v in first.ops if v.suspect and v.key not in confirmed)
    return replace(combined, ops=ops, current_runs=2, unconfirmed=unconfirmed)


@dataclass(frozen=True)
class _Evidence:
    """What each judged op's verdict is read from (arrays in the order of the ops)."""

    #: Baseline and current medians, (ops, 2).
    medians: np.ndarray
    #: The drift-corrected log ratio, its standard deviation under no change, and the
    #: op's estimated spread between processes (relative, jitter included).
    d: np.ndarray
    sigma: np.ndarray
    spread: np.ndarray
    runs: np.ndarray
    #: The run's log drift and where it came from ("ops", "probe", "none").
    drift_log: float
    drift_source: str
    #: Rank-test p-values, slower and faster.
    p_rank: tuple[np.ndarray, np.ndarray]
    #: The margins in sigmas: to fail, and to ask for a re-run.
    k_final: float
    k_screen: float


def _evidence(stats: Mapping[Key, RunPair], config: GateConfig,
              machine: Machine) -> _Evidence:
    """Each op's change, the spread it would have under no change, and the rank test."""
    pairs = list(stats.values())
    c_logs, c_se2s = _per_run([cur for cur, _ in pairs])
    b_logs, b_se2s = _per_run([base for _, base in pairs])
    c_runs = (~np.isnan(c_logs)).sum(axis=1)
    runs = (~np.isnan(b_logs)).sum(axis=1)
    c_mean, c_se2 = np.nanmean(c_logs, axis=1), np.nanmean(c_se2s, axis=1)
    b_mean, b_se2 = np.nanmean(b_logs, axis=1), np.nanmean(b_se2s, axis=1)
    between = 1 / c_runs + 1 / runs
    sampling = c_se2 / c_runs + b_se2 / runs

    # the ops' spread between processes (how far the ops moved does not depend on the
    # drift, so it is known first), then the drift, each op weighted by its precision
    raw = c_mean - b_mean
    tau2 = _spread2(b_logs, b_mean, b_se2, raw, sampling, between, config)
    precision = tau2 * between + sampling
    weights = precision_weights(precision)
    drift_log, source, drift_var = _drift(raw, weights, precision, machine, config)
    d = raw - drift_log

    # the variance of d under no change: spread, the medians' sampling error, the drift's
    contention = config.drift_sensitivity * max(abs(drift_log) - config.drift_deadband, 0.0)
    var_d = precision + drift_var + contention ** 2
    if len(pairs) >= config.min_ops_for_spread:  # this run's ops moved more than the model says
        # around what they moved by together: a change they share is no scatter
        shared = weighted_median(d, weights)
        var_d = var_d * _excess_spread((d - shared) / np.sqrt(var_d), config.together)

    # each current run's samples scaled by that run's own drift before they are pooled
    run_drift = np.exp([_run_drift(c_logs[:, j] - b_mean, weights, drift_log, config)
                        if source == "ops" else drift_log for j in range(c_logs.shape[1])])
    cur_scaled = [np.concatenate([r / run_drift[j] for j, r in enumerate(cur)])
                  for cur, _ in pairs]
    return _Evidence(
        medians=np.column_stack([np.exp(b_mean), np.exp(c_mean)]), d=d, sigma=np.sqrt(var_d),
        spread=np.sqrt(tau2), runs=runs, drift_log=drift_log, drift_source=source,
        p_rank=mann_whitney(cur_scaled, [np.concatenate(base) for _, base in pairs]),
        k_final=config.sigmas(config.alpha, len(pairs)),
        k_screen=config.sigmas(max(config.trigger_alpha, config.alpha), len(pairs)))


def _drift(raw: np.ndarray, weights: np.ndarray, precision: np.ndarray, machine: Machine,
           config: GateConfig) -> tuple[float, str, float]:
    """The run's log drift, its source and its variance. With ops enough, their median
    change (each weighted by its precision, ``weights``, from the variance of its
    change, ``precision``) where it is within what a machine moves unseen
    (``config.drift_uncertainty``) or the reference probe moved by as much
    (``machine``, asked only then); the probe's where it moved less (what the ops moved
    by beyond it is theirs); none without a probe. With too few ops, the probe's, else
    none."""
    if not config.drift:
        return 0.0, "none", 0.0
    unseen = config.drift_uncertainty ** 2  # how far a machine moves unseen
    if len(raw) >= config.min_ops_for_drift:  # a weighted median's variance
        ops = weighted_median(raw, weights)
        var = MEDIAN_VAR * float((weights ** 2 * precision).sum() / weights.sum() ** 2)
        if abs(ops) <= config.drift_uncertainty:  # no change under it is one to see
            return ops, "ops", var
        probe = _log(machine())
        if probe is None:
            return 0.0, "none", unseen
        if abs(ops - probe) <= PROBE_AGREES * math.sqrt(var + unseen):
            return ops, "ops", var
        return probe, "probe", unseen
    probe = _log(machine())
    return (0.0, "none", unseen) if probe is None else (probe, "probe", unseen)


#: The ops' median change is the machine's where the probe's is within this many of
#: their joint standard deviations of it.
PROBE_AGREES = 3.0


def _log(ratio: float | None) -> float | None:
    return math.log(ratio) if ratio is not None and ratio > 0 else None


def _run_drift(raw: np.ndarray, weights: np.ndarray, otherwise: float,
               config: GateConfig) -> float:
    """One run's own log drift from the ops it has (NaN where it lacks one; a re-run may),
    ``otherwise`` when it has too few or the drift is not divided out."""
    present = ~np.isnan(raw)
    if not config.drift or present.sum() < config.min_ops_for_drift:
        return otherwise
    return weighted_median(raw[present], weights[present])


#: The most the ops' excess spread widens every margin (in variance: sigma doubled).
#: Beyond it, so many ops moved that widening would hide them all: the gate reports
#: the test unjudged instead (gate.contention_problem), never a silent pass.
MAX_EXCESS = 4.0


def _excess_spread(z: np.ndarray, together: float) -> float:
    """How much wider (in variance) the ops' changes spread than the model expects, at
    least 1, read where only the top ``2 together`` share of ops lies beyond: a few ops
    that really changed do not widen the others' margins, but a whole class of ops
    moving together (multi-threaded or memory-bound ops on a contended machine, a third
    of a test's ops 2-4x slower at once in real runs) widens every margin."""
    level = 1 - 2 * together
    seen = float(np.quantile(np.abs(z), level))
    expected = normal_quantile((1 + level) / 2)
    return min(max(1.0, (seen / expected) ** 2), MAX_EXCESS)


def _op_verdict(i: int, key: Key, ev: _Evidence, pair: RunPair, op_id: int,
                config: GateConfig) -> OpVerdict:
    """The verdict of the ``i``-th judged op: its change against its margin, the floor
    and the rank test."""
    tol = config.tolerance_for(key[0])
    effect = math.log1p(tol)
    base_med, cur_med = ev.medians[i]
    d, sigma = float(ev.d[i]), float(ev.sigma[i])
    margin = max(effect, ev.k_final * sigma)
    grown_ns = cur_med / math.exp(ev.drift_log) - base_med
    slower = grown_ns > config.floor_ns and ev.p_rank[0][i] <= config.rank_alpha
    faster = -grown_ns > config.floor_ns and ev.p_rank[1][i] <= config.rank_alpha
    n_cur, n_base = (sum(len(r) for r in side) for side in pair)
    verdict, reason = OpStatus.OK, ""
    if slower and d > margin:
        verdict = OpStatus.REGRESSED
    elif faster and d < -margin:
        verdict = OpStatus.IMPROVED
    # an op whose samples could not reach the rank level even if every current sample
    # exceeded every baseline one is not judged (saying "ok" would be a guess)
    elif _sf(math.sqrt(3 * n_cur * n_base / (n_cur + n_base + 1))) > config.rank_alpha:
        verdict = OpStatus.UNJUDGED
        reason = (f"{n_cur} samples against {n_base} cannot reach the rank test's level; "
                  "run more iterations")
    side = 0 if d >= 0 else 1  # the rank p-value in the direction of the change
    return OpVerdict(
        key[0], key[1], op_id, verdict, reason=reason,
        baseline_median=base_med, current_median=cur_med,
        ratio=cur_med / base_med, corrected_ratio=math.exp(d), margin=math.exp(margin),
        tolerance=tol, z=d / sigma, p_value=_sf(d / sigma),
        rank_p_value=float(ev.p_rank[side][i]), n_current=n_cur, n_baseline=n_base,
        runs=int(ev.runs[i]), suspect=bool(slower and d > max(effect, ev.k_screen * sigma)),
        spread=float(ev.spread[i]),
        detectable=detectable(max(margin, math.log1p(config.floor_ns / base_med)), sigma,
                              config.power),
    )


def _sf(x: float) -> float:
    return float(normal_sf(np.array(x)))


@dataclass(frozen=True)
class OpNoise:
    """What a baseline alone says of one op: its spread between processes (relative sd
    of its median, jitter included) and the slowdown a run judged against it would be
    sure to catch with the rule's power, were that run as quiet as the baseline's."""

    spread: float
    detectable: float
    runs: int


def noise(baseline: Mapping[Key, Sequence[np.ndarray]],
          config: GateConfig = GateConfig()) -> dict[Key, OpNoise]:
    """Each op's spread and detectable effect as the rule sees them from ``baseline``
    (the samples of each run; ops with too few samples are left out): what
    ``opprof baseline show`` prints, before any current run exists."""
    keys = [key for key, runs in baseline.items()
            if runs and min(len(positive(r)) for r in runs) >= config.min_samples]
    if not keys:
        return {}
    b_logs, b_se2s = _per_run([[positive(r) for r in baseline[key]] for key in keys])
    b_mean, b_se2 = np.nanmean(b_logs, axis=1), np.nanmean(b_se2s, axis=1)
    runs = (~np.isnan(b_logs)).sum(axis=1)
    between = 1 + 1 / runs  # a current run as quiet as the baseline's
    sampling = b_se2 * between
    tau2 = _spread2(b_logs, b_mean, b_se2, np.zeros(0), sampling, between, config)
    sigma = np.sqrt(tau2 * between + sampling)
    base_ns = np.exp(b_mean)
    k = config.sigmas(config.alpha, len(keys))
    found = {}
    for i, key in enumerate(keys):
        margin = max(math.log1p(config.tolerance_for(key[0])), k * sigma[i],
                     math.log1p(config.floor_ns / base_ns[i]))
        found[key] = OpNoise(spread=float(np.sqrt(tau2[i])),
                             detectable=detectable(margin, float(sigma[i]), config.power),
                             runs=int(runs[i]))
    return found


def _per_run(runs: Sequence[Sequence[np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Each op's runs as (ops, runs) log medians and their squared standard errors, NaN
    where an op lacks a run."""
    rows = [(i, r) for i, op in enumerate(runs) for r in range(len(op))]
    logs, se2s = log_median_se2([runs[i][r] for i, r in rows])
    op_index, run_index = np.array(rows).T
    log_m = np.full((len(runs), run_index.max() + 1), np.nan)
    se2_m = log_m.copy()
    log_m[op_index, run_index] = logs
    se2_m[op_index, run_index] = se2s
    return log_m, se2_m


def _spread2(b_logs: np.ndarray, b_mean: np.ndarray, b_se2: np.ndarray, changes: np.ndarray,
             sampling: np.ndarray, between: np.ndarray, config: GateConfig) -> np.ndarray:
    """Each op's variance of its log median between processes, by the rule's shrinker
    (:func:`pytest_opprof.stats.shrink.spread_posterior`) from the op's own baseline runs
    around the test's typical relative spread: the larger of what its baseline runs show
    and how far its ops moved since (the spread of their ``changes``, whatever the
    drift), or the prior with neither."""
    # each op's sample variance over the baseline runs (dof 0: one run), each run's own
    # drift out when the test has ops enough to tell it (its ops weighted by how precise
    # their medians are as measured, drift and all)
    runs = (~np.isnan(b_logs)).sum(axis=1)
    deviation = b_logs - b_mean[:, None]
    if len(b_logs) >= config.min_ops_for_drift:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an op with one run
            raw_var = np.where(runs > 1, np.nanvar(b_logs, axis=1, ddof=1), np.nan)
        weights = precision_weights(raw_var + b_se2)
        for j in range(b_logs.shape[1]):
            deviation[:, j] -= _run_drift(deviation[:, j], weights, 0.0, config)
    dof = np.maximum(runs - 1, 0).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        sample_var = np.where(dof > 0, np.nansum(deviation ** 2, axis=1) / dof, np.nan)
    # runs taken back to back show less than later runs will
    sample_var = sample_var * config.spread_inflation ** 2

    jitter2 = (config.jitter_ns / np.exp(b_mean)) ** 2
    found = []
    measured = typical_spread(np.maximum(sample_var - b_se2 - jitter2, 0.0), dof,
                              config.min_ops_for_drift)
    if measured is not None:
        found.append(measured)
    if len(changes) >= config.min_ops_for_spread:
        excess = robust_var(changes) - float(np.median(sampling + jitter2 * between))
        found.append(math.sqrt(max(excess, 0.0) / float(np.median(between))))
    typical = max(*found, config.tau_floor) if found else config.tau_prior
    return spread_posterior(sample_var, dof, b_se2, jitter2, typical,
                            tau_spread=config.tau_spread, tau_tail=config.tau_tail,
                            measured_quantile=config.measured_quantile,
                            unmeasured_quantile=config.unmeasured_quantile)
