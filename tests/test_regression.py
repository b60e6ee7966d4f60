"""The comparison rule on synthetic samples with known answers."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from pytest_opprof.rule import GateConfig, compare, mann_whitney, normal_sf


def make_runs(rng, medians, runs, n=20, noise=0.02, run_spread=0.005, scale=None):
    """{key: [samples per run]} for ops of the given medians (ns)."""
    out = {}
    for k, m in enumerate(medians):
        factor = 1.0 if scale is None else scale.get(k, 1.0)
        out[(f"op{k}", 0)] = [
            m * factor * math.exp(rng.normal(0, run_spread)) * np.exp(rng.normal(0, noise, n))
            for _ in range(runs)]
    return out


def judge(current, baseline, **config):
    ids = {key: i for i, key in enumerate(sorted(set(current) | set(baseline)))}
    return compare(current, baseline, ids, GateConfig(**config))


def verdicts(result):
    return {v.name: v.verdict for v in result.ops}


MEDIANS = [20e3 * 1.3 ** k for k in range(20)]  # 20 us to 3 ms


@pytest.fixture
def rng():
    return np.random.default_rng(1)


def test_identical_samples_never_fail(rng):
    baseline = make_runs(rng, MEDIANS, runs=5)
    current = {key: runs[0] for key, runs in baseline.items()}
    result = judge(current, baseline)
    assert set(verdicts(result).values()) == {"ok"}


def test_one_op_slowed_by_half_is_the_one_flagged(rng):
    baseline = make_runs(rng, MEDIANS, runs=5)
    current = {k: v[0] for k, v in make_runs(rng, MEDIANS, runs=1, scale={7: 1.5}).items()}
    result = judge(current, baseline)
    assert [v.name for v in result.having("regressed")] == ["op7"]
    v = result.having("regressed")[0]
    assert v.corrected_ratio == pytest.approx(1.5, rel=0.05)
    assert v.p_value < 1e-5 and v.rank_p_value < 1e-6
    assert 1.05 <= v.margin < 1.5
    assert v.runs == 5 and v.n_current == 20 and v.n_baseline == 100


def test_machine_wide_drift_is_not_a_regression_and_is_reported(rng):
    baseline = make_runs(rng, MEDIANS, runs=5)
    slower = dict.fromkeys(range(len(MEDIANS)), 1.06)
    current = {k: v[0] for k, v in make_runs(rng, MEDIANS, runs=1, scale=slower).items()}
    result = judge(current, baseline)
    assert set(verdicts(result).values()) == {"ok"}
    assert result.drift == pytest.approx(1.06, rel=0.01) and result.drift_source == "ops"


def test_improvements_new_and_missing_ops_are_reported(rng):
    baseline = make_runs(rng, MEDIANS, runs=3)
    current = {k: v[0] for k, v in make_runs(rng, MEDIANS, runs=1, scale={3: 0.6}).items()}
    del current[("op5", 0)]
    current[("brand_new", 0)] = np.full(20, 1e4)
    result = judge(current, baseline)
    found = verdicts(result)
    assert found["op3"] == "improved"
    assert found["op5"] == "missing" and found["brand_new"] == "new"
    assert not result.having("regressed")


def test_too_few_samples_are_not_judged(rng):
    baseline = make_runs(rng, MEDIANS[:6], runs=2)
    current = {k: v[0][:3] for k, v in make_runs(rng, MEDIANS[:6], runs=1).items()}
    assert set(verdicts(judge(current, baseline)).values()) == {"unjudged"}


def test_the_floor_keeps_tiny_ops_from_failing(rng):
    medians = [1e3, *MEDIANS[:9]]  # a 1 us op slowed by 30% grows 300 ns < 500 ns
    baseline = make_runs(rng, medians, runs=5, noise=0.001, run_spread=0.0005)
    current = {k: v[0] for k, v in make_runs(rng, medians, runs=1, noise=0.001,
                                              run_spread=0.0005, scale={0: 1.3}).items()}
    assert verdicts(judge(current, baseline, jitter_ns=0.0))["op0"] == "ok"
    assert verdicts(judge(current, baseline, jitter_ns=0.0, floor_ns=100))["op0"] == "regressed"


def test_tolerance_overall_and_per_op(rng):
    quiet = {"noise": 0.002, "run_spread": 0.0005}
    baseline = make_runs(rng, MEDIANS, runs=5, **quiet)
    current = {k: v[0] for k, v in make_runs(rng, MEDIANS, runs=1, scale={4: 1.08},
                                              **quiet).items()}
    assert verdicts(judge(current, baseline, tau_floor=0.002))["op4"] == "regressed"
    assert verdicts(judge(current, baseline, tau_floor=0.002, tolerance=0.10))["op4"] == "ok"
    per_op = judge(current, baseline, tau_floor=0.002, tolerances={"op4": 0.10})
    assert verdicts(per_op)["op4"] == "ok"


def test_the_margin_grows_with_the_ops_own_spread_between_processes(rng):
    baseline = make_runs(rng, MEDIANS, runs=5, run_spread=0.005)
    # op2 moved 12% between baseline processes: a 15% shift is within its own noise
    for r, run in enumerate(baseline[("op2", 0)]):
        run *= (1.12, 0.9, 1.08, 0.93, 1.0)[r]
    current = {k: v[0] for k, v in make_runs(rng, MEDIANS, runs=1,
                                              scale={2: 1.15, 9: 1.15}).items()}
    found = judge(current, baseline)
    assert verdicts(found)["op9"] == "regressed"
    assert verdicts(found)["op2"] == "ok"


def test_few_ops_take_the_drift_from_the_probe(rng):
    baseline = make_runs(rng, MEDIANS[:2], runs=5)
    current = {k: v[0] * 1.6 for k, v in make_runs(rng, MEDIANS[:2], runs=1).items()}
    ids = {key: i for i, key in enumerate(current)}
    with_probe = compare(current, baseline, ids, GateConfig(), probe_drift=1.6)
    assert with_probe.drift_source == "probe" and not with_probe.having("regressed")
    without = compare(current, baseline, ids, GateConfig())
    assert without.drift_source == "none" and len(without.having("regressed")) == 2


def test_verdicts_do_not_depend_on_the_order_of_samples_or_ops(rng):
    baseline = make_runs(rng, MEDIANS, runs=4)
    current = {k: v[0] for k, v in make_runs(rng, MEDIANS, runs=1, scale={11: 1.4}).items()}
    first = verdicts(judge(current, baseline))
    keys = list(current)
    random.Random(3).shuffle(keys)
    shuffled_current = {k: np.random.default_rng(5).permutation(current[k]) for k in keys}
    shuffled_base = {k: [np.random.default_rng(6).permutation(r) for r in baseline[k]]
                     for k in reversed(keys)}
    assert verdicts(judge(shuffled_current, shuffled_base)) == first


def test_several_current_runs_are_combined(rng):
    baseline = make_runs(rng, MEDIANS, runs=5)
    current = {k: v for k, v in make_runs(rng, MEDIANS, runs=2, scale={6: 1.3}).items()}
    result = judge(current, baseline)
    assert [v.name for v in result.having("regressed")] == ["op6"]
    assert result.having("regressed")[0].n_current == 40


def test_mann_whitney_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    cur = [rng.normal(0.3, 1, 20).round(1) + 5, rng.normal(0, 1, 15).round(0),
           rng.normal(-1, 1, 30)]
    base = [rng.normal(0, 1, 25).round(1) + 5, rng.normal(0, 1, 40).round(0),
            rng.normal(0, 1, 12)]
    greater, less = mann_whitney(cur, base)
    for c, b, g, ls in zip(cur, base, greater, less, strict=True):
        assert g == pytest.approx(stats.mannwhitneyu(c, b, alternative="greater",
                                                     method="asymptotic").pvalue, rel=1e-6)
        assert ls == pytest.approx(stats.mannwhitneyu(c, b, alternative="less",
                                                      method="asymptotic").pvalue, rel=1e-6)


def test_normal_tail_is_accurate_far_out():
    x = np.array([-8.0, -1.0, 0.0, 1.0, 4.26, 8.0, 20.0])
    expected = [0.5 * math.erfc(v / math.sqrt(2)) for v in x]
    np.testing.assert_allclose(normal_sf(x), expected, rtol=2e-7)
