"""Kernel time (CUPTI) in the profile and every report, on profiles built by hand
against the data contract: ``measure``, ``kernel_samples``, ``kernel_counts``,
``activities`` and ``activity_names``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_opprof import OpprofError, Profile
from pytest_opprof.profile import MAX_ACTIVITIES, Activities

from .fakes import train_profile

LONG = ("void cutlass::Kernel<cutlass::gemm::kernel::GemmUniversal<float, "
        "cutlass::layout::RowMajor & x>>(Params<T>&)")


def kernel_profile(iterations: int = 4, skip: int = 1) -> Profile:
    """A fake-backend profile given kernel time: each op launched one kernel per
    iteration (op 0 also a memcpy), the last op launched nothing in iteration 2."""
    profile = train_profile(iterations=iterations, skip=skip)
    n_iter, n_ops = profile.samples.shape
    names = [LONG, "[memcpy HtoD]", "relu_kernel"]
    rows: list[tuple[int, int, int, int, int, float, float]] = []
    kernel = np.full((n_iter, n_ops), np.nan)
    counts = np.full((n_iter, n_ops), np.nan)
    assert profile.starts is not None
    for i in range(n_iter):
        for k in range(n_ops):
            if np.isnan(profile.samples[i, k]):
                continue
            start = float(profile.starts[i, k])
            acts = [] if (k == n_ops - 1 and i == 2) else [(k % 2 * 2, 0, 0.25)]
            if k == 0:
                acts.append((1, 1, 0.5))
            total = 0.0
            for name_id, kind, share in acts:
                dur = float(profile.samples[i, k]) * share
                rows.append((i, k, name_id, kind, 7, start, start + dur))
                start += dur
                total += dur
            kernel[i, k], counts[i, k] = total, len(acts)
    profile.measure = "kernel"
    profile.kernel_samples, profile.kernel_counts = kernel, counts
    profile.activity_names = names
    columns = list(zip(*rows, strict=True))
    profile.activities = Activities(
        *(np.array(c, dtype=np.int64) for c in columns[:5]),
        np.array(columns[5], dtype=float), np.array(columns[6], dtype=float))
    return profile


# -- the contract: Profile's kernel fields round-trip, bounded -----------------------------

def test_kernel_fields_round_trip_through_json():
    original = kernel_profile()
    copy = Profile.from_json(original.to_json())
    assert copy.measure == "kernel" and copy.activity_names == original.activity_names
    np.testing.assert_array_equal(copy.kernel_samples, np.round(original.kernel_samples))
    np.testing.assert_array_equal(copy.kernel_counts, original.kernel_counts)
    assert copy.activities is not None and original.activities is not None
    for key in Activities.COLUMNS:
        np.testing.assert_array_equal(getattr(copy.activities, key),
                                      getattr(original.activities, key))
    assert copy.gated_samples() is copy.kernel_samples


def test_a_profile_without_kernel_time_reads_as_events():
    data = json.loads(train_profile().to_json())
    for key in ("measure", "kernel_samples_ns", "kernel_counts", "activities",
                "activity_names"):
        data.pop(key)
    profile = Profile.from_dict(data)
    assert profile.measure == "events" and profile.activities is None
    assert profile.gated_samples() is profile.samples


def _set(path, value):
    def change(d):
        *keys, last = path
        for key in keys:
            d = d[key]
        d[last] = value
    return change


@pytest.mark.parametrize(("change", "message"), [
    (_set(["measure"], "cycles"), "measure must be one of"),
    (_set(["activities", "op_id", 0], 99), "activities.op_id must lie"),
    (_set(["activities", "name_id", 0], 3), "activities.name_id must lie"),
    (_set(["activities", "iteration", 0], 4), "activities.iteration must lie"),
    (_set(["activities", "kind", 0], 3), "activities.kind must lie"),
    (_set(["activities", "end_ns", 0], -1.0), "ends before it starts"),
    (_set(["activities", "start_ns", 0], "x"), "must hold numbers"),
    (_set(["activities", "stream"], [0]), "activities.stream has 1 entries"),
    (_set(["activities", "iteration"], [0] * (MAX_ACTIVITIES + 1)), "more than"),
    (_set(["activity_names"], None), "activities without activity_names"),
    (_set(["activity_names", 0], ""), "activity_names must hold"),
    (_set(["kernel_samples_ns"], [[1]]), "kernel_samples_ns"),
    (_set(["kernel_counts"], [[1]] * 4), "kernel_counts"),
])
def test_a_bad_kernel_field_is_one_line_naming_it(change, message):
    data = json.loads(kernel_profile().to_json())
    change(data)
    with pytest.raises(OpprofError, match=message) as info:
        Profile.from_dict(data)
    assert "\n" not in str(info.value)
