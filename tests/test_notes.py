"""What a passing test did that its figures cannot show, said once each (one line in the
run's summary, a section of the test's report, an ``opprof_note`` property for JUnit):
``gpu_profiler`` used without ``iterations()``, ops run outside the loop, a loop left by
a ``break`` (whose last iteration was dropped: "3 of 4 counted" after 5 ran)."""

from __future__ import annotations

import json

import pytest

TESTS = """
def test_no_loop(gpu_profiler):
    pass


def test_outside(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for _ in range(10):  # a warm-up outside the loop: untimed
        with gpu_profiler.op("warmup"):
            dev.kernel(10)
    for _ in gpu_profiler.iterations(3):
        with gpu_profiler.op("step"):
            dev.kernel(10)
    with gpu_profiler.op("after"):
        pass


def test_break(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for i in gpu_profiler.iterations(8):
        with gpu_profiler.op("step"):
            dev.kernel(10)
        if i == 4:
            break


def test_clean(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(3):
        with gpu_profiler.op("step"):
            dev.kernel(10)


def test_failing_without_a_loop(gpu_profiler):
    assert False
"""

NOTES = [
    "opprof: test_notes_suite.py::test_break: the loop was left in iteration 5 of 8 (a break): "
    "the iterations that ran are kept, 4 counted (skip 1)",
    "opprof: test_notes_suite.py::test_no_loop: gpu_profiler was used without iterations(): "
    "nothing was profiled (ops record only inside its loop)",
    "opprof: test_notes_suite.py::test_outside: 11 op call(s) ran outside the iterations() "
    "loop and were not timed (ops record only inside it)",
]


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(test_notes_suite=TESTS)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    return pytester


def notes(result) -> list[str]:
    return [line for line in result.stdout.lines
            if line.startswith("opprof: test_notes_suite.py::")]


def test_each_footgun_is_said_once_and_a_clean_test_says_nothing(suite):
    result = suite.runpytest("--opprof-json=r.json", "--junitxml=j.xml", "-p", "no:randomly")
    result.assert_outcomes(passed=4, failed=1)
    assert notes(result) == NOTES  # one line each, not one per op call; none for the rest
    tests = {t["nodeid"]: t for t in json.loads((suite.path / "r.json").read_text())["tests"]}
    # the iteration broken out of ran its ops: it counts (it was dropped)
    assert tests["test_notes_suite.py::test_break"]["counted"] == 4
    assert tests["test_notes_suite.py::test_break"]["iterations"] == 5
    junit = (suite.path / "j.xml").read_text()
    assert junit.count('name="opprof_note"') == 3
    assert 'value="gpu_profiler was used without iterations(): nothing was profiled' in junit


@pytest.mark.e2e
def test_under_xdist_the_workers_notes_reach_the_controllers_summary(suite):
    pytest.importorskip("xdist")
    result = suite.runpytest("-n", "2")
    result.assert_outcomes(passed=4, failed=1)
    assert notes(result) == NOTES


def test_the_note_is_in_the_tests_own_report(suite):
    result = suite.runpytest("-rP", "-k", "no_loop")
    result.stdout.fnmatch_lines(["*_ test_no_loop _*", "*- opprof -*",
                                 "opprof: gpu_profiler was used without iterations(): "
                                 "nothing was profiled *"])
