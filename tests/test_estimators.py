"""The consolidated estimators of pytest_opprof/stats: properties cheap to state."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_opprof.judge import config
from pytest_opprof.stats import drift, power, robust

from .fakes import train_profile


def old_rule_form(x):
    """The stored-baseline rule's form before the merge: the median of the logs."""
    logs = np.log(x)
    sigma = robust.MAD_SIGMA * np.median(np.abs(logs - np.median(logs)))
    return float(np.median(logs)), math.pi / 2 * sigma ** 2 / x.size


def old_paired_form(x):
    """The paired model's one-pair form before the merge: the arithmetic median."""
    logs = np.log(x)
    sigma = robust.MAD_SIGMA * float(np.median(np.abs(logs - np.median(logs))))
    return float(np.median(x)), math.pi / 2 * sigma ** 2 / x.size


@pytest.mark.parametrize("n", [5, 19, 41])
def test_the_merged_log_median_agrees_with_both_old_forms_for_an_odd_count(n):
    rng = np.random.default_rng(n)
    half = rng.lognormal(0.0, 0.1, n // 2)
    x = np.concatenate([1e4 * half, [1e4], 1e4 / half])  # symmetric in log around 1e4
    rng.shuffle(x)
    centre, se2 = robust.one_log_median_se2(x)
    rule_centre, rule_se2 = old_rule_form(x)
    paired_median, paired_se2 = old_paired_form(x)
    assert centre == rule_centre and se2 == pytest.approx(rule_se2, rel=1e-12)
    assert math.exp(centre) == pytest.approx(paired_median, rel=1e-12)
    assert se2 == pytest.approx(paired_se2, rel=1e-12)
    assert math.exp(centre) == pytest.approx(1e4, rel=1e-12)


def test_with_an_even_count_the_log_median_is_the_geometric_mean_of_the_middle_two():
    x = np.array([100.0, 200.0, 400.0, 900.0, 1000.0, 2000.0])
    centre, _ = robust.one_log_median_se2(x)
    assert math.exp(centre) == pytest.approx(math.sqrt(400.0 * 900.0))
    assert math.exp(centre) <= old_paired_form(x)[0]  # never above the arithmetic one


def test_the_log_median_and_its_error_follow_a_common_factor():
    rng = np.random.default_rng(1)
    rows = [rng.lognormal(8, 0.05, n) for n in (7, 12, 19)]  # ragged rows
    centre, se2 = robust.log_median_se2(rows)
    scaled, scaled_se2 = robust.log_median_se2([3.0 * r for r in rows])
    np.testing.assert_allclose(scaled, centre + math.log(3.0), rtol=1e-12)
    np.testing.assert_allclose(scaled_se2, se2, rtol=1e-6)
    for i, r in enumerate(rows):  # ragged rows are judged as each alone
        assert robust.one_log_median_se2(r) == pytest.approx((centre[i], se2[i]))


def test_the_positive_filter_keeps_positive_finite_times_only():
    x = np.array([3.0, 0.0, -1.0, np.nan, np.inf, 2.0])
    assert robust.positive(x).tolist() == [3.0, 2.0]
    assert np.isnan(robust.positive_or_nan(x)[1:5]).all()
    assert math.isnan(robust.one_log_median_se2(x[1:5])[0])


def test_the_typical_spread_undoes_the_chi_square_bias():
    rng = np.random.default_rng(2)
    logs = rng.normal(0.0, 0.03, size=(4000, 5))  # 4000 ops of five runs each
    variance = logs.var(axis=1, ddof=1)
    dof = np.full(4000, 4.0)
    typical = robust.typical_spread(variance, dof, config.MIN_OPS_FOR_DRIFT)
    assert typical == pytest.approx(0.03, rel=0.03)
    assert math.sqrt(float(np.median(variance))) < 0.029  # the bias it undoes
    assert robust.typical_spread(variance[:4], dof[:4], config.MIN_OPS_FOR_DRIFT) is None


def test_the_drifts_ignore_a_common_factor_and_find_each_runs_shift():
    rng = np.random.default_rng(3)
    offsets = rng.normal(8.0, 2.0, size=(30, 1))  # each op its own size
    shift = np.array([0.0, 0.05, -0.02, 0.10, 0.01])
    logs = offsets + shift[None, :] + rng.normal(0, 1e-4, size=(30, 5))
    logs[3, 2] = np.nan  # an op missing a run
    found = drift.run_drifts(logs)
    np.testing.assert_allclose(drift.run_drifts(logs + math.log(7.0)), found, atol=1e-12)
    np.testing.assert_allclose(found - found[0], shift - shift[0], atol=1e-3)
    changes = rng.normal(0.03, 0.01, size=(4, 20))
    np.testing.assert_allclose(drift.across_ops(changes + 0.5), drift.across_ops(changes) + 0.5)


@pytest.mark.parametrize("n", [5, 6, 11])
def test_the_weighted_drift_with_equal_weights_is_the_plain_one(n):
    values = np.random.default_rng(n).normal(size=n)
    assert drift.weighted_median(values, np.ones(n)) == pytest.approx(float(np.median(values)))
    assert drift.weighted_median(values, np.ones(n)) == pytest.approx(
        float(drift.across_ops(values)))


def test_what_a_test_sees_and_when_it_is_blind():
    assert power.sees([0.1, np.inf, 0.2, 0.3, np.nan], 50) == pytest.approx(0.2)
    assert math.isnan(power.sees([np.nan], 50)) and not power.blind(math.nan, 0.3)
    assert power.blind(0.31, config.BLIND) and not power.blind(0.30, config.BLIND)


def test_the_counted_matrix_and_the_counted_samples_agree():
    profile = train_profile(iterations=6, skip=2)
    matrix = profile.counted_matrix()
    assert matrix.shape == (4, len(profile.ops))
    for column, samples in zip(matrix.T, profile.counted_samples(), strict=True):
        assert column[~np.isnan(column)].tolist() == samples.tolist()
