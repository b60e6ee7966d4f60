"""A test's verdict: its profile against its budgets and its baseline.

The rule (rule.py) compares op samples; this module decides what that means for one
test (budgets, strict ops, the confirmation re-run) and makes its :class:`TestResult`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from ..measure.measures import GateSettings
from ..model import conditions as run_conditions
from ..model.baseline import Baseline
from ..model.hints import Retake
from ..model.profile import Profile
from ..model.verdict import (
    COMPARED,
    BudgetVerdict,
    Comparison,
    Key,
    OpStatus,
    OpVerdict,
    TestResult,
    Verdict,
)
from ..model.words import display_name, percent
from ..stats.power import blind
from .config import BLIND, GREW_SHOWN
from .rule import GateConfig, compare_with_rerun
from .strict import seen

#: A baseline whose runs span this long has seen the machine vary over time, so its
#: measured spread needs less inflation (GateConfig.history_inflation).
HISTORY_SPAN_S = 3600.0


def current_samples(profile: Profile) -> tuple[dict[Key, np.ndarray], dict[Key, int]]:
    """Each op's counted samples (NaN dropped) and its OP_ID, keyed by (name, occurrence)."""
    columns = profile.counted_samples()
    samples = {(info.name, info.occurrence): columns[info.op_id] for info in profile.ops}
    ids = {(info.name, info.occurrence): info.op_id for info in profile.ops}
    return samples, ids


def check_budgets(profile: Profile, budgets: Mapping[str, float]) -> list[BudgetVerdict]:
    """Every op whose median over counted iterations exceeds its name's budget, and every
    budget naming an op that did not run (a typo must not pass silently)."""
    over = []
    samples, ids = current_samples(profile)
    for name, budget in budgets.items():
        keys = [key for key in samples if key[0] == name and samples[key].size]
        if not keys:
            over.append(BudgetVerdict(-1, name, math.nan, budget))
        for key in keys:
            median = float(np.median(samples[key]))
            if median > budget:
                over.append(BudgetVerdict(ids[key], name, median, budget))
    return over


def gate_config(gate: GateSettings, tolerance: float | None = None,
                tolerances: Mapping[str, float] | None = None) -> GateConfig:
    """The rule's settings for a measure's figures (its :class:`GateSettings`): at
    ``tolerance`` (the measure's own when None), ``tolerances`` per op name."""
    return GateConfig(
        tolerance=gate.tolerance if tolerance is None else tolerance,
        tolerances=dict(tolerances or {}), floor_ns=gate.floor, tau_prior=gate.tau_prior,
        tau_floor=gate.tau_floor, jitter_ns=gate.jitter, min_samples=gate.min_samples,
        rank_alpha=GateConfig.rank_alpha if gate.rank_test else 1.0, drift=gate.drift,
        spread_inflation=gate.spread_inflation)


#: The op verdicts that fail a test, without and with ``--opprof-strict=ops``.
FAULTS = (OpStatus.REGRESSED,)
STRICT_FAULTS = (OpStatus.REGRESSED, OpStatus.NEW, OpStatus.MISSING)


class Environment(Protocol):
    """What judging a test asks of the run it happens in, and only when it needs it:
    :mod:`pytest_opprof.run.gating` implements it for each test."""

    #: Whether a suspected regression may be confirmed by :meth:`rerun`.
    confirms: bool

    def probe_drift(self, baseline: Baseline) -> float | None:
        """The machine's speed now against ``baseline``'s by the reference probe,
        measured now, or None (a measure no machine moves); asked only when the test
        has too few ops to estimate its own drift, or its ops moved together."""

    def rerun(self, suspects: Sequence[OpVerdict]) -> Profile | None:
        """The test profiled again in a new process, to confirm ``suspects``; None when
        it gave no profile (the first run's verdict stands)."""


class Isolated:
    """No environment: no probe, no re-run (a test judged on its own)."""

    confirms = False

    def probe_drift(self, baseline: Baseline) -> float | None:
        return None

    def rerun(self, suspects: Sequence[OpVerdict]) -> Profile | None:
        return None


def judge(
    profile: Profile,
    baseline: Baseline | None,
    *,
    machine: str,
    retake: Retake,
    config: GateConfig,
    budgets: Mapping[str, float],
    strict_ops: bool,
    environment: Environment | None = None,
    refusal: str | None = None,
    baseline_path: str | None = None,
    blocks_blind: bool = True,
) -> TestResult:
    """The verdict of a test that ran and passed, made once. ``environment`` is asked
    for the machine's drift only when the test has too few ops to estimate its own, and
    to profile the test again in a new process to confirm suspects (when it
    ``confirms``); ``refusal`` is why ``baseline`` cannot judge this run at all (its run
    conditions differ), or None; ``baseline_path`` is where ``baseline`` is stored;
    ``retake`` is the run's ``opprof baseline update`` (for this test), which its
    reasons advise. Budgets are checked whatever the baseline says."""
    environment = environment if environment is not None else Isolated()
    over_budget = tuple(check_budgets(profile, budgets))
    comparison: Comparison | None = None
    at_fault: tuple[OpVerdict, ...] = ()
    reason = refusal if baseline is not None else None
    if baseline is not None and reason is None:
        comparison = _compare(profile, baseline, config, environment)
        if config.drift:  # counts have no drift, and ops growing together are a change
            conditions = baseline.conditions()  # this run's too: they matched
            reason = drift_problem(comparison, conditions, retake)
            shared = shared_change(comparison, config)
            if shared is not None:  # the ops' change: judged, never a busy machine
                comparison = replace(comparison, shared=shared)
            elif reason is None:
                reason = contention_problem(comparison, config, conditions)
        if reason is not None:
            comparison = _unjudged(comparison, reason)
        if profile.op_functions is not None:
            comparison = _with_growth(comparison, profile, baseline)
        at_fault = tuple(comparison.having(*(STRICT_FAULTS if strict_ops else FAULTS)))
    unheld = None  # regressions the runner cannot show: said, passed
    if at_fault and not over_budget and not blocks_blind and comparison is not None \
            and config.drift and reason is None:
        at_fault, unheld = not_blocking(comparison, at_fault)
        unheld = None if at_fault else unheld  # a failing test lists all it regressed
    if over_budget or at_fault:
        verdict = Verdict.FAILED
    elif reason is not None:
        verdict = Verdict.UNJUDGED
    else:
        verdict = Verdict.NO_BASELINE if baseline is None else Verdict.PASSED
    return TestResult(profile.nodeid, verdict, machine, profile, comparison=comparison,
                      over_budget=over_budget, at_fault=at_fault,
                      baseline_path=baseline_path if baseline is not None else None,
                      reason=reason or unheld or "",
                      baseline_runs=0 if baseline is None else len(baseline.runs))


def not_blocking(comparison: Comparison,
                 at_fault: Sequence[OpVerdict]) -> tuple[tuple[OpVerdict, ...], str | None]:
    """Of a time gate's regressions where the runner cannot show them all (CI, without
    a strict effect ``--opprof-strict=PCT``), those that still fail the test, and why
    the others do not (None when none is held; a test none fails passes with it). Held:

    - every regression of a test whose gate could only see slowdowns over
      :data:`~pytest_opprof.judge.config.BLIND` for its median op, the mark of a runner
      whose times move more than a change worth gating (on a shared 2-core runner the
      realistic tests' gates could only see +36% to +2,464%, and untouched code failed);
    - a regression that is no more than what the test's ops moved by together where no
      reference showed the machine move (``comparison.shared``): one process of a
      busy runner moved a whole untouched test (rfft 1.85x, lowpass 1.44x) while the
      probe after it did not (in such a run lowpass failed at +56.4%); a stored
      baseline cannot tell that from a change the ops share, and ``opprof compare``
      (both sides now) can.
    """
    sees = seen(comparison)
    if blind(sees, BLIND):
        why = (f"on this runner the gate could only see slowdowns over {percent(1 + sees)} "
               "for its median op, so its times cannot show a change it would fail on")
        return (), _held(at_fault, why)
    if not math.isfinite(comparison.shared):
        return tuple(at_fault), None
    stands_out = tuple(v for v in at_fault if v.corrected_ratio / comparison.shared > v.margin)
    held = [v for v in at_fault if v not in stands_out]
    if not held:
        return stands_out, None
    why = (f"the test's ops moved together by {percent(comparison.shared)} and no reference "
           "showed the machine move: a stored baseline cannot tell a busy process from a "
           "change they share (opprof compare can)")
    return stands_out, _held(held, why)


def _held(ops: Sequence[OpVerdict], why: str) -> str:
    named = ", ".join(f"{v.name} {percent(v.corrected_ratio)}" for v in ops[:3])
    more = f" and {len(ops) - 3} more" if len(ops) > 3 else ""
    return (f"not blocking: regressed {named}{more}, but {why}; reported, not failed (CI; "
            "an effect, --opprof-strict=PCT, fails it)")


def _with_growth(comparison: Comparison, profile: Profile, baseline: Baseline) -> Comparison:
    """Each regressed op with the functions whose instructions grew most since its
    baseline's latest run that recorded them (the instructions measure)."""
    before = baseline.functions()
    if not before or profile.op_functions is None:
        return comparison
    now = {(info.name, info.occurrence): dict(profile.op_functions[info.op_id])
           for info in profile.ops}
    ops = []
    for v in comparison.ops:
        if v.verdict == OpStatus.REGRESSED and v.key in before and v.key in now:
            ops.append(replace(v, grew=grown(before[v.key], now[v.key])))
        else:
            ops.append(v)
    return replace(comparison, ops=tuple(ops))


def grown(before: Mapping[str, int], after: Mapping[str, int],
          shown: int = GREW_SHOWN) -> tuple[tuple[str, float, float], ...]:
    """The ``shown`` functions whose counts grew most from ``before`` to ``after`` (a
    function absent from one side's costliest counts as 0 there): (name, before, after)."""
    growth = sorted(((after.get(name, 0) - before.get(name, 0), name)
                     for name in set(before) | set(after)), reverse=True)
    return tuple((name, float(before.get(name, 0)), float(after.get(name, 0)))
                 for delta, name in growth[:shown] if delta > 0)


def updated(profile: Profile, *, machine: str, baseline_path: str) -> TestResult:
    """The result of a test whose run was stored as a baseline run (``--opprof-update-
    baseline``; only a test within its budgets, see :func:`check_budgets`)."""
    return TestResult(profile.nodeid, Verdict.UPDATED, machine, profile,
                      baseline_path=baseline_path)


#: A run this many times slower or faster than its baseline (its drift) says that the
#: machine or the measurement changed, not the code: one probe call that met unpinned
#: BLAS threads took 16 ms instead of 30 us (drift +76,918%) and hid a 3x slowdown.
ABSURD_DRIFT = 3.0


def _absurd(drift: float) -> bool:
    return not (1 / ABSURD_DRIFT <= drift <= ABSURD_DRIFT)  # NaN is absurd too


def drift_problem(comparison: Comparison, conditions: Mapping[str, Any] | None,
                  retake: Retake) -> str | None:
    """Why the comparison's drift is beyond belief (more than :data:`ABSURD_DRIFT`
    either way, from the probe or from the ops), as one line; None when it is not.
    Unpinned BLAS threads are named among the causes only where the run's
    ``conditions`` did not pin them (None: not recorded)."""
    drift, source = comparison.drift, comparison.drift_source
    if source == "none" or not _absurd(drift):
        return None
    factor = f"{drift:.3g}x slower" if drift > 1 else f"{1 / drift:.3g}x faster"
    measured = "the reference probe" if source == "probe" else "the median of its ops"
    causes = "" if conditions is not None and run_conditions.pinned(conditions) \
        else "BLAS threads not pinned, "
    return (f"drift {percent(drift)}: the machine measured {factor} than at the baseline "
            f"({measured}), beyond the {ABSURD_DRIFT:g}x a drift correction is trusted "
            f"with; find what changed ({causes}another load, another device) and re-take "
            f"the baseline with `{display_name(retake.command())}`")


def _unjudged(comparison: Comparison, reason: str) -> Comparison:
    """The comparison with no op judged: when the whole run moved beyond belief, no op's
    verdict means anything (new and missing ops stay: they need no drift)."""
    short = reason.split(":")[0]
    ops = tuple(replace(v, verdict=OpStatus.UNJUDGED, suspect=False, reason=short)
                if v.verdict in COMPARED else v for v in comparison.ops)
    return replace(comparison, ops=ops, unconfirmed=())


def shared_change(comparison: Comparison, config: GateConfig) -> float | None:
    """What the test's judged ops moved by together (their median corrected ratio) when
    no machine drift took it out (the probe did not move by as much, or there is no
    probe) and it is beyond what a machine moves unseen: a change the ops share, each
    op's own, never a busy machine's; else None."""
    if comparison.drift_source == "ops":
        return None
    ratios = [v.corrected_ratio for v in comparison.having(*COMPARED)
              if math.isfinite(v.corrected_ratio)]
    if len(ratios) < config.min_ops_for_drift:
        return None
    shared = statistics.median(ratios)
    return shared if abs(math.log(shared)) > config.drift_uncertainty else None


#: Fewer ops moving together than this are judged one by one, whatever their share.
TOGETHER_MIN_OPS = 3


def contention_problem(comparison: Comparison, config: GateConfig,
                       conditions: Mapping[str, Any] | None = None) -> str | None:
    """One line when a large share of the test's ops (``config.together``, and at least
    :data:`TOGETHER_MIN_OPS`) grew beyond the test's typical margin at once, or None.

    That is what a contended machine does (real ``-n 2`` runs on a loaded 2-core VM: a
    third of a ResNet step's ops, its convolutions, 2-4x slower together while the rest
    did not move, so the drift stayed near 1, and a re-run saw the same); a change of
    the code slows the ops it touches. Failing would be a false alarm and passing would
    claim a comparison that did not happen: the test is not judged, and says so. What
    would make the machine quieter is said of what the run's ``conditions`` leave to
    change (:func:`~pytest_opprof.model.conditions.remedies`).
    """
    judged = comparison.having(*COMPARED)
    margins = [v.margin for v in judged if math.isfinite(v.margin)]
    if len(margins) < config.min_ops_for_spread:
        return None
    typical = statistics.median(margins)
    moved = [v for v in judged if v.corrected_ratio > min(v.margin, typical)]
    if len(moved) < max(TOGETHER_MIN_OPS, config.together * len(judged)):
        return None
    helps = run_conditions.remedies(conditions)
    low = min(v.corrected_ratio for v in moved)
    high = max(v.corrected_ratio for v in moved)
    return (f"{len(moved)} of {len(judged)} ops grew beyond the test's typical margin "
            f"{percent(typical)} together ({percent(low)} to {percent(high)}): a busy "
            "machine moves a class of ops at once, a change of the code the ops it touches; "
            "not judged; run it again on a quieter machine"
            + (f" ({', '.join(helps)})" if helps else ""))


def _compare(profile: Profile, baseline: Baseline, config: GateConfig,
             environment: Environment) -> Comparison:
    """The rule applied to the profile against its baseline, the probe asked when the
    test has too few ops in common with the baseline to measure its own drift, or its
    ops moved together (the rule's ``_drift``)."""
    current, ids = current_samples(profile)
    stored = baseline.samples()
    asked: list[float | None] = []

    def machine() -> float | None:  # the probe, measured at most once per test
        if not asked:
            asked.append(environment.probe_drift(baseline))
        return asked[0]

    common = sum(1 for key in current if key in stored)
    few = config.drift and common < config.min_ops_for_drift
    # an absurd drift: the test will not be judged, no re-run to confirm anything
    confirms = environment.confirms and not (few and _absurd(machine() or 1.0))
    if baseline.span_seconds() >= HISTORY_SPAN_S:
        config = replace(config, spread_inflation=config.history_inflation)

    def rerun_samples(suspects: list[OpVerdict]) -> dict[Key, np.ndarray] | None:
        again = environment.rerun(suspects)
        return current_samples(again)[0] if again is not None else None

    return compare_with_rerun(current, stored, {**baseline.op_ids(), **ids}, config,
                              rerun_samples if confirms else None, machine=machine)
