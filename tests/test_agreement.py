"""Do a baseline's runs agree? Synthetic runs: per-op offsets between processes, run-wide
drift, sample noise, and ops made slow in some runs as contention does."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_opprof.judge.agreement import check
from pytest_opprof.judge.rule import GateConfig

OPS = 40


def medians(rng: np.random.Generator, ops: int = OPS) -> np.ndarray:
    """Op medians spread log-uniformly from 20 us to 5 ms."""
    return np.exp(rng.uniform(np.log(20e3), np.log(5e6), ops))


def run(rng, base, drift=1.0, slow=None, offset_sd=0.02, samples=40):
    """One process's samples: its drift, each op's own offset (sd ``offset_sd``),
    lognormal noise of 5%; ``slow`` maps op indices to how much slower they are."""
    slow = slow or {}
    offsets = np.exp(rng.normal(0, offset_sd, len(base)))
    return {(f"op{i}", 0): m * drift * offsets[i] * slow.get(i, 1.0)
            * np.exp(rng.normal(0, 0.05, samples))
            for i, m in enumerate(base)}


@pytest.mark.parametrize("seed", range(5))
def test_runs_of_a_quiet_machine_agree_whatever_each_run_s_drift(seed):
    rng = np.random.default_rng(seed)
    base = medians(rng)
    runs = [run(rng, base, drift) for drift in (1.0, 1.12, 0.93, 1.0, 1.3)]
    assert check(runs).agrees


def test_runs_taken_under_contention_are_named_with_the_ops_they_are_out_on():
    """The real case: two runs of five with one op 4-6x slower than in the others."""
    rng = np.random.default_rng(7)
    base = medians(rng)
    runs = [run(rng, base), run(rng, base, slow={3: 4.0}), run(rng, base),
            run(rng, base, 1.05, slow={3: 6.0}), run(rng, base)]
    found = check(runs)
    assert not found.agrees
    assert dict(found.outliers) == {1: (("op3", 0),), 3: (("op3", 0),)}
    assert found.ops() == [("op3", 0)] and found.spread[("op3", 0)] > 0.5


def test_of_three_runs_only_the_odd_one_is_named():
    """The odd run is set aside before the others are judged: it does not drag the
    median of their "other runs" away from them."""
    rng = np.random.default_rng(3)
    base = medians(rng)
    found = check([run(rng, base), run(rng, base), run(rng, base, slow={5: 3.0, 9: 2.0})])
    assert dict(found.outliers) == {2: (("op5", 0), ("op9", 0))}


@pytest.mark.parametrize("slow_run", [0, 1])
def test_of_two_runs_that_disagree_the_slower_is_named(slow_run):
    rng = np.random.default_rng(11)
    base = medians(rng)
    runs = [run(rng, base), run(rng, base)]
    runs[slow_run] = run(rng, base, slow={2: 2.0})
    assert dict(check(runs).outliers) == {slow_run: (("op2", 0),)}


def test_short_ops_may_move_more_than_long_ones():
    """Per-call jitter (``jitter_ns``) widens the limit of a 1.5 us op, not of a 1 ms one."""
    rng = np.random.default_rng(5)
    base = medians(rng)
    base[0], base[1] = 1.5e3, 1e6
    quiet = [run(rng, base, offset_sd=0.0) for _ in range(2)]
    moved = run(rng, base, offset_sd=0.0, slow={0: 1.3, 1: 1.3})
    assert check([*quiet, moved]).outliers == {2: (("op1", 0),)}
    assert check([*quiet, moved], GateConfig(jitter_ns=0.0)).outliers == {
        2: (("op0", 0), ("op1", 0))}


def test_a_few_op_test_judges_by_the_prior_spread():
    """Three ops cannot tell a run's drift from its ops: the whole run far off is out,
    a few percent is not."""
    rng = np.random.default_rng(2)
    base = medians(rng, 3)
    assert check([run(rng, base), run(rng, base, 1.05), run(rng, base)]).agrees
    found = check([run(rng, base), run(rng, base, 1.8), run(rng, base)])
    assert list(found.outliers) == [1] and len(found.outliers[1]) == 3


def test_ops_seen_once_or_with_too_few_samples_are_left_out():
    rng = np.random.default_rng(4)
    base = medians(rng)
    runs = [run(rng, base) for _ in range(3)]
    runs[1][("op0", 0)] = runs[1][("op0", 0)][:3] * 10  # too few samples to judge
    runs[2][("only_here", 0)] = np.full(40, 1e9)
    runs[0][("op1", 0)] = np.array([np.nan, -1.0, *runs[0][("op1", 0)][:2]])
    assert check(runs).agrees
    assert check([]).agrees and check([runs[0]]).agrees
