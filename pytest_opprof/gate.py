"""A test's verdict: its profile against its budgets and its baseline."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from .baseline import Baseline
from .profile import Profile
from .regression import FLOOR_NS, Comparison, GateConfig, Key, OpVerdict, compare_with_rerun

#: A baseline whose runs span this long has seen the machine vary over time, so its
#: measured spread needs less inflation (GateConfig.history_inflation).
HISTORY_SPAN_S = 3600.0

#: Test verdicts.
PASSED, FAILED, NO_BASELINE, UPDATED, NOT_GATED = (
    "passed", "failed", "no baseline", "baseline updated", "not gated")


@dataclass(frozen=True)
class BudgetVerdict:
    """An op over its ``max_time``; ``median_ns`` is NaN when no op of that name ran."""

    op_id: int
    name: str
    median_ns: float
    budget_ns: float


@dataclass
class TestResult:
    """What the gate concluded about one profiled test."""

    __test__ = False  # not a pytest test class

    nodeid: str
    verdict: str
    machine: str
    profile: Profile
    comparison: Comparison | None = None
    over_budget: list[BudgetVerdict] = field(default_factory=list)
    #: The ops that fail the test: regressed ones, and new or missing ones when strict.
    at_fault: list[OpVerdict] = field(default_factory=list)
    baseline_path: str | None = None

    @property
    def failed(self) -> bool:
        return self.verdict == FAILED


def current_samples(profile: Profile) -> tuple[dict[Key, np.ndarray], dict[Key, int]]:
    """Each op's counted samples (NaN dropped) and its OP_ID, keyed by (name, occurrence)."""
    counted = profile.samples[profile.skip:]
    samples, ids = {}, {}
    for info in profile.ops:
        column = counted[:, info.op_id]
        key = (info.name, info.occurrence)
        samples[key] = column[~np.isnan(column)]
        ids[key] = info.op_id
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


def gate_config(backend: str, tolerance: float, tolerances: Mapping[str, float]) -> GateConfig:
    return GateConfig(tolerance=tolerance, tolerances=dict(tolerances),
                      floor_ns=FLOOR_NS.get(backend, FLOOR_NS["cpu"]))


def judge(
    profile: Profile,
    baseline: Baseline | None,
    *,
    machine: str,
    config: GateConfig,
    budgets: Mapping[str, float],
    strict_ops: bool,
    probe_drift: Callable[[Baseline], float | None] = lambda b: None,
    rerun: Callable[[list[OpVerdict]], Profile | None] | None = None,
) -> TestResult:
    """The verdict of a test that ran and passed. ``probe_drift`` is asked for the
    machine's drift only when the test has too few ops to estimate its own;
    ``rerun(suspects)`` profiles the test again in a new process, to confirm them."""
    result = TestResult(profile.nodeid, PASSED, machine, profile,
                        over_budget=check_budgets(profile, budgets))
    if baseline is None:
        result.verdict = NO_BASELINE
    else:
        current, ids = current_samples(profile)
        stored = baseline.samples()
        common = sum(1 for key in current if key in stored)
        drift = probe_drift(baseline) if common < config.min_ops_for_drift else None
        if baseline.span_seconds() >= HISTORY_SPAN_S:
            config = replace(config, spread_inflation=config.history_inflation)

        def rerun_samples(suspects: list[OpVerdict]) -> dict[Key, np.ndarray] | None:
            again = rerun(suspects) if rerun is not None else None
            return current_samples(again)[0] if again is not None else None

        result.comparison = compare_with_rerun(
            current, stored, {**baseline.op_ids(), **ids}, config,
            rerun_samples if rerun is not None else None, probe_drift=drift)
        faults = ("regressed", "new", "missing") if strict_ops else ("regressed",)
        result.at_fault = result.comparison.having(*faults)
    if result.over_budget or result.at_fault:
        result.verdict = FAILED
    return result
