"""Property-based tests (hypothesis): every loader takes arbitrary input and either loads
it or raises the project's own error; the gate's verdicts hold for any samples."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pytest_opprof.errors import OpprofError
from pytest_opprof.judge.rule import GateConfig, compare
from pytest_opprof.model.baseline import READER
from pytest_opprof.model.profile import Profile
from pytest_opprof.run.options import parse_duration_ns, parse_fraction
from pytest_opprof.store.baseline import SCHEMA, BaselineError, BaselineRun

from .fakes import train_profile

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=30,
)


def valid_baseline() -> dict:
    run = BaselineRun.from_profile(train_profile(), {"date": "2026-01-01T00:00:00+00:00"})
    return {"schema": SCHEMA, "nodeid": "t.py::t", "machine": "m", "batch": "b",
            "runs": [run.to_dict(), run.to_dict()]}


def paths(data, prefix=()):
    """Every path into a JSON value (keys and indexes), the value itself first."""
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from paths(value, (*prefix, i))


BASELINE = valid_baseline()
BASELINE_PATHS = list(paths(BASELINE))[1:]


def replaced(data, path, value):
    data = json.loads(json.dumps(data))
    target = data
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return data


def load_baseline(text: str) -> None:
    try:
        READER.parse(text, "f.json")
    except BaselineError as exc:
        assert str(exc).startswith("f.json: ") and "\n" not in str(exc)


@FAST
@given(json_values)
def test_any_json_value_loads_as_a_baseline_or_is_a_baseline_error(value):
    load_baseline(json.dumps(value))


@FAST
@given(st.text(max_size=200) | st.binary(max_size=200).map(
    lambda b: b.decode("utf-8", errors="surrogateescape")))
def test_any_text_loads_as_a_baseline_or_is_a_baseline_error(text):
    load_baseline(text)


@FAST
@given(st.sampled_from(BASELINE_PATHS), json_values)
def test_a_valid_baseline_with_any_field_replaced_loads_or_is_a_baseline_error(path, value):
    load_baseline(json.dumps(replaced(BASELINE, path, value)))


PROFILE = json.loads(train_profile().to_json())
PROFILE_PATHS = list(paths(PROFILE))[1:]


def load_profile(text: str) -> None:
    try:
        Profile.from_json(text)
    except OpprofError as exc:
        assert "\n" not in str(exc)


@FAST
@given(json_values | st.text(max_size=100))
def test_any_input_loads_as_a_profile_or_is_an_opprof_error(value):
    load_profile(value if isinstance(value, str) else json.dumps(value))


@FAST
@given(st.sampled_from(PROFILE_PATHS), json_values)
def test_a_valid_profile_with_any_field_replaced_loads_or_is_an_opprof_error(path, value):
    load_profile(json.dumps(replaced(PROFILE, path, value)))


@FAST
@given(json_values | st.text(max_size=30))
def test_tolerances_and_durations_parse_or_are_usage_errors(value):
    for parse_one in (parse_fraction, lambda v: parse_duration_ns(v, "max_time")):
        try:
            result = parse_one(value)
        except argparse.ArgumentTypeError as exc:
            assert "\n" not in str(exc)
        else:
            assert math.isfinite(result) and result > 0


# ---- the gate -------------------------------------------------------------------

def ops_strategy(min_ops=1, max_ops=12):
    """(op medians in ns, per-sample noise, samples per run) for a test's ops."""
    return st.tuples(
        st.lists(st.floats(2e3, 5e7), min_size=min_ops, max_size=max_ops),
        st.floats(0.0, 0.05),
        st.integers(5, 30),
    )


def make_baseline(medians, noise, n, seed, runs=5, run_spread=0.01):
    rng = np.random.default_rng(seed)
    return {(f"op{k}", 0): [m * math.exp(rng.normal(0, run_spread))
                            * np.exp(rng.normal(0, noise, n)) for _ in range(runs)]
            for k, m in enumerate(medians)}


def judge(current, baseline):
    ids = {key: i for i, key in enumerate(sorted(set(current) | set(baseline)))}
    return {v.name: v.verdict for v in compare(current, baseline, ids, GateConfig()).ops}


@FAST
@given(ops_strategy(), st.integers(0, 2**32 - 1), st.integers(0, 4))
def test_identical_samples_never_fail(ops, seed, which):
    medians, noise, n = ops
    baseline = make_baseline(medians, noise, n, seed)
    current = {key: runs[which].copy() for key, runs in baseline.items()}
    assert "regressed" not in judge(current, baseline).values()


@FAST
@given(st.data(), st.integers(0, 2**32 - 1))
@pytest.mark.parametrize(("shortest_ns", "slowdown"), [(20e3, 2.0), (2e3, 5.0)],
                         ids=["ops of 20us and more, 2x", "ops of 2us and more, 5x"])
def test_an_op_slower_by_far_more_than_its_noise_always_fails(shortest_ns, slowdown, data,
                                                              seed):
    """One op of a test (of at least 6, so that the drift comes from the ops) slowed by
    `slowdown` or more always fails, alone, with per-sample noise up to 5% and run-to-run
    spread 1%, unless it has too few samples for the rank test to ever reach the test's
    level: then it is "unjudged", never "ok". Short ops need more: the spread model gives
    every op 0.3 us of absolute jitter between processes (measured on shared hosts)."""
    medians, noise, n = data.draw(st.tuples(
        st.lists(st.floats(shortest_ns, 5e7), min_size=6, max_size=12),
        st.floats(0.0, 0.05), st.integers(5, 30)))
    baseline = make_baseline(medians, noise, n, seed)
    slow = data.draw(st.integers(0, len(medians) - 1))
    factor = data.draw(st.floats(slowdown, 10 * slowdown))
    rng = np.random.default_rng(seed + 1)
    current = {key: runs[0] * math.exp(rng.normal(0, 0.01)) for key, runs in baseline.items()}
    current[(f"op{slow}", 0)] = current[(f"op{slow}", 0)] * factor
    verdicts = judge(current, baseline)
    if verdicts[f"op{slow}"] == "unjudged":  # too few samples for the rank test: said so
        assert n < 8
        return
    assert [name for name, v in verdicts.items() if v == "regressed"] == [f"op{slow}"]


@FAST
@given(ops_strategy(min_ops=2), st.integers(0, 2**32 - 1), st.floats(0.5, 3.0),
       st.randoms(use_true_random=False))
def test_verdicts_do_not_depend_on_the_order_of_samples_or_ops(ops, seed, factor, rnd):
    medians, noise, n = ops
    baseline = make_baseline(medians, noise, n, seed)
    current = {key: runs[0].copy() for key, runs in baseline.items()}
    current[("op0", 0)] = current[("op0", 0)] * factor
    expected = judge(current, baseline)
    keys = list(current)
    rnd.shuffle(keys)
    shuffled_current = {}
    shuffled_baseline = {}
    for key in keys:
        shuffled_current[key] = np.array(rnd.sample(list(current[key]), len(current[key])))
        shuffled_baseline[key] = [np.array(rnd.sample(list(r), len(r))) for r in baseline[key]]
    assume(len(keys) > 1)
    assert judge(shuffled_current, shuffled_baseline) == expected


@FAST
@given(json_values | st.text(max_size=100))
def test_any_input_loads_as_results_or_worker_records_or_is_an_opprof_error(value):
    """The other two loaders: ``opprof report``'s results file and xdist workers' records."""
    import tempfile
    from pathlib import Path

    from pytest_opprof.model.records import loads
    from pytest_opprof.store.results import load

    text = value if isinstance(value, str) else json.dumps(value)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "r.json")
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        for read in (lambda: load(path), lambda: loads(text)):
            try:
                read()
            except OpprofError as exc:
                assert "\n" not in str(exc)


@FAST
@given(st.sampled_from(["tests", "machine", "schema"]), json_values)
def test_a_results_file_with_a_field_replaced_loads_or_is_an_opprof_error(tmp_path_factory,
                                                                         key, value):
    from pytest_opprof.store.results import SCHEMA as RESULTS
    from pytest_opprof.store.results import load

    data = {"schema": RESULTS, "machine": {"key": "m"},
            "tests": [{"nodeid": "t", "ops": [], "profile": PROFILE}]}
    data[key] = value
    path = tmp_path_factory.mktemp("r") / "r.json"
    path.write_text(json.dumps(data))
    try:
        load(path)
    except OpprofError as exc:
        assert "\n" not in str(exc)
