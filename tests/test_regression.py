"""The comparison rule on synthetic samples with known answers."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from pytest_opprof.judge.rule import GateConfig, compare
from pytest_opprof.stats.distributions import mann_whitney, normal_sf


def make_runs(rng, medians, runs, n=20, noise=0.02, run_spread=0.005, scale=None):
    """{key: [samples per run]} for ops of the given medians (ns)."""
    out = {}
    for k, m in enumerate(medians):
        factor = 1.0 if scale is None else scale.get(k, 1.0)
        out[(f"op{k}", 0)] = [
            m * factor * math.exp(rng.normal(0, run_spread)) * np.exp(rng.normal(0, noise, n))
            for _ in range(runs)]
    return out


def judge(current, baseline, machine=None, **config):
    """The rule; ``machine``: what the reference probe says the machine moved by (None:
    a measure no machine moves, no probe)."""
    ids = {key: i for i, key in enumerate(sorted(set(current) | set(baseline)))}
    return compare(current, baseline, ids, GateConfig(**config), lambda: machine)


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
    result = judge(current, baseline, machine=1.055)  # the probe saw the machine move
    assert set(verdicts(result).values()) == {"ok"}
    assert result.drift == pytest.approx(1.06, rel=0.01) and result.drift_source == "ops"


@pytest.mark.parametrize("probe", [None, 1.0])
def test_a_change_every_op_shares_is_each_ops_without_a_machine_to_show_it(rng, probe):
    """Every op 30% slower and no probe (a measure no machine moves), or a probe that
    did not move: each op regressed by about 30%, the drift taken out only the probe's."""
    baseline = make_runs(rng, MEDIANS, runs=5)
    slower = dict.fromkeys(range(len(MEDIANS)), 1.3)
    current = {k: v[0] for k, v in make_runs(rng, MEDIANS, runs=1, scale=slower).items()}
    result = judge(current, baseline, machine=probe)
    assert set(verdicts(result).values()) == {"regressed"}
    assert result.drift_source == ("none" if probe is None else "probe")
    assert result.drift == 1.0
    assert [v.corrected_ratio for v in result.ops] == pytest.approx([1.3] * 20, rel=0.05)


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
    with_probe = compare(current, baseline, ids, GateConfig(), lambda: 1.6)
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


# ---- power that follows each op's measured spread (issue 11) -------------------------

#: 40 ops from 5 us to 5 ms, as a real many-op test has them.
SPAN = list(np.geomspace(5e3, 5e6, 40))


def real_like_runs(rng, medians, runs, spreads, scale=None, n=30, noise=0.05, drifts=None):
    """Runs of ops whose medians move between processes by each op's own spread (log-sd),
    with a machine-wide drift per run (``drifts``, log; drawn when not given) and
    per-sample noise."""
    out = {}
    drifts = rng.normal(0, 0.02, runs) if drifts is None else drifts
    for k, m in enumerate(medians):
        factor = 1.0 if scale is None else scale.get(k, 1.0)
        out[(f"op{k}", 0)] = [
            m * factor * math.exp(drifts[r] + rng.normal(0, spreads[k]))
            * np.exp(rng.normal(0, noise, n)) for r in range(runs)]
    return out


def heterogeneous_spreads(rng, count, typical=0.025):
    """Per-op spreads between processes: lognormal around the typical, as measured."""
    return typical * np.exp(rng.normal(0, 0.55, count))


@pytest.mark.parametrize("seed", range(5))
def test_a_2x_slowdown_of_a_60us_op_is_caught_against_a_one_run_baseline(seed):
    """The README's quick path (one baseline run): the other 39 ops moved by a few
    percent, which is how much this test's ops move; the old rule's p-values could not
    fall below ~1e-4 and passed this as "ok"."""
    rng = np.random.default_rng(seed)
    spreads = heterogeneous_spreads(rng, len(SPAN))
    slowed = int(np.argmin(np.abs(np.array(SPAN) - 60e3)))
    then, now = rng.normal(0, 0.02, 2)  # the machine's speed, which the probe sees
    baseline = real_like_runs(rng, SPAN, 1, spreads, drifts=[then])
    current = {k: v[0] for k, v in real_like_runs(rng, SPAN, 1, spreads, scale={slowed: 2.0},
                                                  drifts=[now]).items()}
    result = judge(current, baseline, machine=math.exp(now - then), floor_ns=500.0)
    assert [v.name for v in result.having("regressed")] == [f"op{slowed}"]
    v = result.having("regressed")[0]
    assert v.detectable < 0.6 and v.margin < 1.5


@pytest.mark.parametrize("seed", range(5))
def test_an_op_whose_runs_agree_to_a_hundredth_of_a_percent_is_judged_at_that_precision(
        seed):
    """A GPU test: twelve launch-bound ops move 10-25% between processes, a 21 ms matmul
    0.01%. Its +12.5% (old rule: p = 6.5e-5 against the 6.25e-5 needed, "ok") fails;
    with a 1% tolerance, so does +2%."""
    rng = np.random.default_rng(seed)
    medians = [150e3] * 12 + [21e6, 2.6e6, 650e3, 50e3]
    spreads = np.array([0.1 + 0.15 * rng.random() for _ in range(12)]
                       + [1e-4, 1e-4, 1e-4, 2e-3])
    then = rng.normal(0, 0.02, 4)  # the machine's speed, which the probe sees
    baseline = real_like_runs(rng, medians, 4, spreads, noise=0.0005, drifts=then)
    for factor, tolerance in ((1.125, 0.05), (1.02, 0.01)):
        now = rng.normal(0, 0.02)
        current = {k: v[0] for k, v in real_like_runs(rng, medians, 1, spreads,
                                                      scale={12: factor}, noise=0.0005,
                                                      drifts=[now]).items()}
        result = judge(current, baseline, machine=math.exp(now - then.mean()),
                       floor_ns=1000.0, tolerance=tolerance)
        assert [v.name for v in result.having("regressed")] == ["op12"], factor
        assert result.having("regressed")[0].detectable < tolerance + 0.01


@pytest.mark.parametrize("runs", [1, 5])
def test_unchanged_runs_of_heterogeneous_ops_do_not_fail(runs):
    """A/A on the same model: ops of 5 us to 5 ms whose spreads differ tenfold."""
    failures = 0
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        spreads = heterogeneous_spreads(rng, len(SPAN))
        baseline = real_like_runs(rng, SPAN, runs, spreads)
        current = {k: v[0] for k, v in real_like_runs(rng, SPAN, 1, spreads).items()}
        failures += bool(judge(current, baseline, floor_ns=500.0).having("regressed"))
    assert failures <= 1


def test_every_judged_op_says_what_slowdown_it_could_have_seen(rng):
    """The detectable effect follows the op's own spread: precise ops see small
    slowdowns, noisy ones only large; an op with more baseline runs sees more."""
    spreads = np.array([0.002] * 10 + [0.08] * 10)
    medians = [1e6] * 20
    baseline = real_like_runs(rng, medians, 5, spreads, noise=0.01)
    current = {k: v[0] for k, v in real_like_runs(rng, medians, 1, spreads,
                                                  noise=0.01).items()}
    found = {v.name: v for v in judge(current, baseline).ops}
    quiet = max(found[f"op{k}"].detectable for k in range(10))
    noisy = min(found[f"op{k}"].detectable for k in range(10, 20))
    assert quiet < 0.1 < 0.2 < noisy
    assert all(0 < v.spread < 1 for v in found.values())


def test_a_class_of_ops_moving_together_is_the_machine_not_a_regression(rng):
    """A contended machine: a third of a test's ops (its BLAS-heavy ones) 2-4x slower at
    once, the rest unmoved, so the drift stays near 1 (seen in real -n 2 runs under
    load). The gate leaves that test unjudged; one op slowed alone is still caught."""
    from pytest_opprof.judge.gate import contention_problem

    spreads = np.full(len(SPAN), 0.03)
    baseline = real_like_runs(rng, SPAN, 5, spreads)
    contended = {k: 2.0 + 2.0 * rng.random() for k in range(0, len(SPAN), 3)}
    current = {k: v[0] for k, v in real_like_runs(rng, SPAN, 1, spreads,
                                                  scale=contended).items()}
    line = contention_problem(judge(current, baseline), GateConfig())
    assert line is not None and line.startswith(f"{len(contended)} of 40 ops grew")
    alone = {k: v[0] for k, v in real_like_runs(rng, SPAN, 1, spreads, scale={20: 2.0}).items()}
    result = judge(alone, baseline)
    assert [v.name for v in result.having("regressed")] == ["op20"]
    assert contention_problem(result, GateConfig()) is None


@pytest.mark.parametrize(("ops", "slowed", "factor"), [(10, 3, 3.0), (20, 5, 2.0), (40, 9, 2.0)])
def test_many_ops_slower_at_once_are_not_hidden_by_widened_margins(ops, slowed, factor):
    """However many ops changed, the margins widen at most twofold: the changed ops stay
    regressed here (the gate then says whether so many at once look like a busy
    machine), never a silent pass."""
    rng = np.random.default_rng(7)
    medians = list(np.geomspace(50e3, 5e6, ops))
    spreads = np.full(ops, 0.01)
    baseline = real_like_runs(rng, medians, 5, spreads, noise=0.01)
    scale = dict.fromkeys(range(slowed), factor)
    current = {k: v[0] for k, v in real_like_runs(rng, medians, 1, spreads, scale=scale,
                                                  noise=0.01).items()}
    found = {v.name for v in judge(current, baseline).having("regressed")}
    assert found == {f"op{k}" for k in range(slowed)}


def test_a_rerun_that_lacks_ops_is_judged_with_the_ops_it_has(rng):
    """A confirmation re-run may miss ops (a branch not taken): the ops it has are
    judged on both runs, the others on the first, with no error."""
    from pytest_opprof.judge.rule import compare_with_rerun

    baseline = make_runs(rng, MEDIANS, runs=5)
    current = {k: v[0] for k, v in make_runs(rng, MEDIANS, runs=1, scale={3: 2.0}).items()}
    again = {k: v[0] for k, v in make_runs(rng, MEDIANS[:8], runs=1, scale={3: 2.0}).items()}
    ids = {key: i for i, key in enumerate(current)}
    result = compare_with_rerun(current, baseline, ids, GateConfig(), lambda suspects: again)
    assert [v.name for v in result.having("regressed")] == ["op3"]
    assert result.current_runs == 2
