from __future__ import annotations

import json

import numpy as np
import pytest

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
    assert data["schema"] == "pytest-opprof/profile/1"
    assert data["samples_ns"][0] == [10, None]
    copy = Profile.from_json(text)
    np.testing.assert_array_equal(copy.samples, original.samples)
    np.testing.assert_array_equal(copy.phase_samples, original.phase_samples)
    np.testing.assert_array_equal(copy.host_samples, original.host_samples)
    assert copy.ops == original.ops and copy.wall.tolist() == original.wall.tolist()
    assert (copy.nodeid, copy.backend, copy.skip) == (original.nodeid, "fake", 1)


@pytest.mark.parametrize(("text", "message"), [
    ("{", "profile is not JSON"),
    ("[]", "not a profile of schema"),
    ('{"schema": "pytest-opprof/profile/1"}', "malformed profile: KeyError"),
])
def test_bad_profiles_raise_the_projects_error(text, message):
    with pytest.raises(OpprofError, match=message):
        Profile.from_json(text)
