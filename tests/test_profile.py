from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_opprof import OpprofError, Profile

from .fakes import train_profile


def test_json_round_trip_keeps_everything_nan_included():
    def body(profiler, dev, i):
        with profiler.phase("forward"):
            with profiler.op("a"):
                dev.kernel(10)
            if i % 2:
                with profiler.op("b"):
                    dev.kernel(20)

    original = train_profile(iterations=4, body=body)
    text = original.to_json()
    data = json.loads(text)
    assert data["schema"] == "pytest-opprof/profile/2"
    assert data["samples_ns"][0] == [10, None]
    copy = Profile.from_json(text)
    np.testing.assert_array_equal(copy.samples, original.samples)
    np.testing.assert_array_equal(copy.phase_samples, original.phase_samples)
    np.testing.assert_array_equal(copy.host_samples, original.host_samples)
    assert copy.ops == original.ops and copy.wall.tolist() == original.wall.tolist()
    assert (copy.nodeid, copy.measure, copy.unit, copy.skip) == (
        original.nodeid, "fake", original.unit, 1)


@pytest.mark.parametrize(("text", "message"), [
    ("{", "profile: not JSON"),
    ("[]", "not a profile of schema"),
    ('{"schema": "pytest-opprof/profile/2"}', r"malformed profile \(KeyError"),
])
def test_bad_profiles_raise_the_projects_error(text, message):
    with pytest.raises(OpprofError, match=message):
        Profile.from_json(text)


# -- a profile read back (results files, xdist worker records) is checked, not trusted --

def _valid() -> dict:
    profile = train_profile(iterations=4)
    profile.op_streams = [0] * len(profile.ops)
    return json.loads(profile.to_json())


def _drop_row(key):
    return lambda d: d[key].pop()


def _widen_row(key):
    return lambda d: d[key][1].append(5)


@pytest.mark.parametrize(("change", "message"), [
    (_drop_row("samples_ns"), "samples_ns has 3 rows for 4 iterations"),
    (_widen_row("samples_ns"), "samples_ns: every row must hold 4 values"),
    (_widen_row("host_samples_ns"), "host_samples_ns: every row must hold 4 values"),
    (_widen_row("phase_samples_ns"), "phase_samples_ns: every row must hold 2 values"),
    (_drop_row("op_time_ns"), "op_time_ns has 3 rows for 4 iterations"),
    (lambda d: d["wall_ns"].append(1), "samples_ns has 4 rows for 5 iterations"),
    (_drop_row("iteration_starts_ns"), "iteration_starts_ns has 3 rows for 4 iterations"),
    (_widen_row("starts_ns"), "starts_ns: every row must hold 4 values"),
    (lambda d: d["op_streams"].pop(), "op_streams has 3 entries for 4 ops"),
    (lambda d: d["ops"].reverse(), "op 0 has op_id 3: ops are listed by OP_ID"),
    (lambda d: d["samples_ns"][0].__setitem__(0, 1e400), "samples_ns holds an infinite time"),
    (lambda d: d.__setitem__("skip", -1), "skip must be a whole number, got -1"),
    (lambda d: d.__setitem__("skip", True), "skip must be a whole number"),
    (lambda d: d["ops"][0].__setitem__("depth", 1.5), "depth must be a whole number"),
    (lambda d: d["ops"][0].__setitem__("name", ""), "op name must be a non-empty string"),
    (lambda d: d["phases"].__setitem__(0, 7), "phase name must be a non-empty string"),
    (lambda d: d.__setitem__("ops", {"a": 1}), "ops is a dict, not a list"),
    (lambda d: d.__setitem__("samples_ns", "x"), "samples_ns is a str, not a list"),
])
def test_a_profile_whose_shapes_disagree_is_one_error_line(change, message):
    data = _valid()
    Profile.from_dict(data)  # valid as written
    change(data)
    with pytest.raises(OpprofError, match=re.escape(message)) as error:
        Profile.from_json(json.dumps(data))
    assert "\n" not in str(error.value)


MATRICES = ["samples_ns", "phase_samples_ns", "host_samples_ns", "wall_ns", "op_time_ns",
            "starts_ns", "host_starts_ns", "phase_starts_ns", "iteration_starts_ns"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MATRICES), st.integers(0, 9), st.integers(0, 9), st.data())
def test_a_matrix_of_any_other_size_is_refused(key, rows, cols, data):
    profile = _valid()
    matrix = profile[key]
    expected = (len(matrix), len(matrix[0]) if isinstance(matrix[0], list) else None)
    if expected[1] is None:
        new = [data.draw(st.integers(0, 10**6)) for _ in range(rows)]
        assume(rows != expected[0])
    else:
        new = [[1] * cols for _ in range(rows)]
        assume((rows, cols) != expected and not (rows == expected[0] == 0))
    profile[key] = new
    with pytest.raises(OpprofError, match=r"profile: malformed profile \("):
        Profile.from_json(json.dumps(profile))
