"""The typed verdicts: str-valued enums, frozen results, and lossless, validated
``to_dict``/``from_dict`` (what xdist workers ship and ``opprof report`` reads back)."""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest_opprof
from pytest_opprof.errors import OpprofError
from pytest_opprof.judge.gate import gate_config, judge
from pytest_opprof.judge.rule import compare
from pytest_opprof.measure.measures import named
from pytest_opprof.model.hints import Retake
from pytest_opprof.model.records import TestRecord, dumps, loads
from pytest_opprof.model.verdict import (
    BudgetVerdict,
    Comparison,
    OpStatus,
    OpVerdict,
    TestResult,
    Verdict,
)

from .fakes import train_profile

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROFILE = train_profile(iterations=12)

floats = st.floats(allow_nan=True, allow_infinity=False)
op_verdicts = st.builds(
    OpVerdict, name=st.text(max_size=8), occurrence=st.integers(0, 5),
    op_id=st.integers(-1, 50), verdict=st.sampled_from(OpStatus),
    baseline_median=floats, current_median=floats, ratio=floats, corrected_ratio=floats,
    margin=floats, tolerance=floats, z=floats, p_value=floats, rank_p_value=floats,
    n_current=st.integers(0, 10**6), n_baseline=st.integers(0, 10**6),
    runs=st.integers(0, 20), reason=st.text(max_size=20), suspect=st.booleans(),
    spread=floats, detectable=floats)
comparisons = st.builds(
    Comparison, ops=st.lists(op_verdicts, max_size=4).map(tuple), drift=floats,
    drift_source=st.sampled_from(["ops", "probe", "none"]), runs=st.integers(0, 20),
    current_runs=st.integers(1, 2), unconfirmed=st.lists(op_verdicts, max_size=2).map(tuple))
results = st.builds(
    TestResult, nodeid=st.just(PROFILE.nodeid), verdict=st.sampled_from(Verdict),
    machine=st.text(max_size=10), profile=st.just(PROFILE),
    comparison=st.none() | comparisons,
    over_budget=st.lists(st.builds(BudgetVerdict, st.integers(-1, 9), st.text(max_size=8),
                                   floats, st.floats(1, 1e12)), max_size=3).map(tuple),
    at_fault=st.lists(op_verdicts, max_size=3).map(tuple),
    baseline_path=st.none() | st.text(max_size=20), reason=st.text(max_size=20))


@FAST
@given(st.none() | results)
def test_a_record_survives_the_trip_to_the_controller(result):
    """What a worker ships is what the controller rebuilds: typed, every field equal
    (compared through to_dict, where NaN is null and so equal to itself)."""
    record = TestRecord(PROFILE, result)
    [back] = loads(dumps([record]))
    assert back.to_dict() == record.to_dict()
    if result is not None:
        assert back.result is not None
        assert isinstance(back.result.verdict, Verdict)
        assert all(isinstance(v.verdict, OpStatus) for v in back.result.at_fault)


def _valid_result() -> dict:
    ops = {("conv2d", 0): [np.full(8, 1000.0)] * 3, ("relu", 0): [np.full(8, 250.0)] * 3}
    comparison = compare({k: v[0] * 1.5 for k, v in ops.items()}, ops, {})
    result = TestResult(PROFILE.nodeid, Verdict.FAILED, "m", PROFILE, comparison,
                        (BudgetVerdict(0, "conv2d", 1500.0, 1000.0),), comparison.ops[:1])
    return result.to_dict()


VALID = _valid_result()


def _paths(data, prefix=()):
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _paths(value, (*prefix, i))


PATHS = list(_paths(VALID))[1:]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)
    | st.integers(-(2 ** 70), 2 ** 70),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=8), children, max_size=3), max_leaves=10)


@FAST
@given(st.sampled_from(PATHS), json_values | st.just("__delete__"))
def test_any_field_replaced_or_removed_loads_or_is_one_line_error(path, value):
    data = json.loads(json.dumps(VALID))
    target = data
    for step in path[:-1]:
        target = target[step]
    if value == "__delete__":
        del target[path[-1]]
    else:
        target[path[-1]] = value
    try:
        result = TestResult.from_dict(data, PROFILE)
    except OpprofError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
    else:
        assert isinstance(result.verdict, Verdict)


@pytest.mark.parametrize(("data", "message"), [
    ("passed", "malformed test result: expected an object, found str"),
    ({**VALID, "verdict": "fine"}, "'verdict' is 'fine', not one of 'passed', "),
    ({**VALID, "nodeid": "other"}, "it names 'other', its profile "),
    ({**VALID, "at_fault": [{"name": "x"}]}, "'occurrence' is missing"),
    ({**VALID, "comparison": {**VALID["comparison"], "runs": 1.5}}, "'runs' is not an integer"),
    ({**VALID, "comparison": {**VALID["comparison"], "drift_source": "moon"}},
     "drift_source 'moon' is not one of ops, probe, none"),
    ({**VALID, "reason": ["busy"]}, "malformed test result: 'reason' is not a string"),
])
def test_a_malformed_result_names_what_is_wrong(data, message):
    with pytest.raises(OpprofError, match=re.escape(message)):
        TestResult.from_dict(data, PROFILE)


def test_a_result_written_before_unjudged_tests_had_a_reason_reads_as_none():
    data = {key: value for key, value in VALID.items() if key != "reason"}
    assert TestResult.from_dict(data, PROFILE).reason == ""
    data = {**VALID, "verdict": "unjudged", "reason": "drift +900.0%"}
    assert TestResult.from_dict(data, PROFILE).reason == "drift +900.0%"


def test_a_worker_record_with_a_malformed_result_is_one_line():
    record = {"profile": PROFILE.to_dict(), "result": {**VALID, "verdict": 3}}
    with pytest.raises(OpprofError, match=r"a worker's records: .*'verdict' is int, not one of"):
        loads(json.dumps([record]))


def test_verdicts_are_str_enums_that_compare_and_serialise_as_their_words():
    assert Verdict.FAILED == "failed" and OpStatus.REGRESSED == "regressed"
    assert f"{Verdict.NO_BASELINE}" == "no baseline" and str(OpStatus.NEW) == "new"
    assert json.dumps([Verdict.UPDATED, OpStatus.OK]) == '["baseline updated", "ok"]'


def test_a_result_is_made_once_with_its_final_values():
    config = gate_config(named("fake").gate, 0.05, {})
    result = judge(PROFILE, None, machine="m",
                   retake=Retake(), config=config, budgets={"relu": 1.0},
                   strict_ops=False)
    assert result.verdict == Verdict.FAILED and result.over_budget[0].name == "relu"
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.verdict = Verdict.PASSED  # type: ignore[misc]
    updated = dataclasses.replace(result, verdict=Verdict.UPDATED)
    assert result.verdict == Verdict.FAILED and updated.verdict == Verdict.UPDATED


def test_at_fault_groups_ops_by_what_happened_to_them():
    def op(name: str, status: OpStatus) -> OpVerdict:
        return OpVerdict(name, 0, 0, status)

    result = TestResult("t", Verdict.FAILED, "m", PROFILE, at_fault=(
        op("gelu", OpStatus.NEW), op("relu", OpStatus.REGRESSED),
        op("softmax", OpStatus.MISSING), op("mul", OpStatus.REGRESSED)))
    groups = result.at_fault_by_verdict()
    assert list(groups) == [OpStatus.REGRESSED, OpStatus.NEW, OpStatus.MISSING]
    assert [v.name for v in groups[OpStatus.REGRESSED]] == ["relu", "mul"]


PACKAGE = Path(pytest_opprof.__file__).parent
#: Modules that judge or record: no verdict word may appear there as a bare string.
#: (run/gating.py is left out: "failed" there is pytest's outcome, not a verdict.)
TYPED_MODULES = [*sorted(str(p.relative_to(PACKAGE)) for folder in ("model", "stats", "judge")
                         for p in (PACKAGE / folder).glob("*.py")), "render/verdicts.py"]


@pytest.mark.parametrize("module", TYPED_MODULES)
def test_no_bare_verdict_strings(module):
    """A verdict spelt as a string escapes the type checker and the enums' one list."""
    words = {v.value for v in Verdict} | {s.value for s in OpStatus}
    source = PACKAGE / module
    tree = ast.parse(source.read_text(encoding="utf-8"))
    found = [node.value for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and node.value in words
             and not _in_enum_body(tree, node)]
    assert found == []


def _in_enum_body(tree: ast.Module, node: ast.Constant) -> bool:
    """The enums' own member definitions are where the words are written, once."""
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and cls.name in ("Verdict", "OpStatus"):
            if any(child is node for child in ast.walk(cls)):
                return True
    return False


def test_nan_travels_as_null():
    v = OpVerdict("a", 0, 0, OpStatus.NEW)
    data = v.to_dict()
    assert data["ratio"] is None and "NaN" not in json.dumps(data)
    assert math.isnan(OpVerdict.from_dict(data).ratio)
