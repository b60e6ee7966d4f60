"""Strict mode (``--opprof-strict[=unjudged,PCT]``, ini ``opprof_strict``): a
gated test the gate could not judge fails the session (exit code 1), naming the test
and why; the tests' own outcomes stand. Unjudged was silent in CI: a run against a
serial baseline under ``-n 2`` exited 0 with a 3x regression present."""

from __future__ import annotations

import json
import re

import pytest

from .fakes import batch, six_op_project

NETWORK = "test_net.py::test_net"
NO_LOOP = """
def test_no_loop(gpu_profiler):
    assert gpu_profiler.xp is not None
"""
PLAIN = """
def test_plain():
    pass
"""
FAILING = """
def test_failing(gpu_profiler):
    for _ in gpu_profiler.iterations(3):
        pass
    assert False, "its own failure"
"""
HEAD = ("opprof: strict: {n} gated test(s) could not be judged: the session fails "
        "(--opprof-strict); their own outcomes stand")


@pytest.fixture
def suite(pytester, monkeypatch):
    """The fake backend's exact times, no thread variable set, no slowdown."""
    return six_op_project(pytester, monkeypatch)


def update(pytester, *args, runs=3):
    with batch("t"):
        for _ in range(runs):
            pytester.runpytest(*args, "--opprof-update-baseline").assert_outcomes(passed=1)


def strict_lines(result) -> list[str]:
    lines = result.stdout.lines
    heads = [i for i, line in enumerate(lines) if line.startswith("opprof: strict:")]
    if not heads:
        return []
    start = heads[0]
    end = start + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return lines[start:end]


def test_a_test_without_a_baseline_passes_and_the_strict_session_fails(suite):
    result = suite.runpytest("--opprof-strict")
    result.assert_outcomes(passed=1)  # the test's own outcome stands
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert strict_lines(result) == [
        HEAD.format(n=1),
        f"  {NETWORK}: no baseline on machine 'fake-fake CUDA device': take one with "
        f"`opprof baseline update {NETWORK} --opprof-measure=fake`"]
    without = suite.runpytest()
    assert without.ret == pytest.ExitCode.OK and strict_lines(without) == []


def test_the_results_file_says_what_strict_mode_decided_and_validates(suite):
    jsonschema = pytest.importorskip("jsonschema")
    from pathlib import Path

    import pytest_opprof

    schema = json.loads((Path(pytest_opprof.__file__).parent / "schemas"
                         / "results-2.schema.json").read_text())
    suite.runpytest("--opprof-strict=unjudged,30%", "--opprof-json=r.json")
    data = json.loads((suite.path / "r.json").read_text())
    jsonschema.validate(data, schema)
    assert data["strict"] == {"failed": True, "effect": 0.3, "unjudged": [
        {"nodeid": NETWORK, "why": "no baseline on machine 'fake-fake CUDA device': take one "
                                   f"with `opprof baseline update {NETWORK} "
                                   "--opprof-measure=fake`"}]}
    update(suite)
    suite.runpytest("--opprof-strict", "--opprof-json=r.json")
    data = json.loads((suite.path / "r.json").read_text())
    jsonschema.validate(data, schema)
    assert data["strict"] == {"failed": False, "effect": None, "unjudged": []}
    suite.runpytest("--opprof-json=r.json")  # no strict mode: no strict object
    assert "strict" not in json.loads((suite.path / "r.json").read_text())
    data["strict"] = {"failed": "yes", "effect": None, "unjudged": []}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


def test_a_judged_test_passes_the_strict_session(suite):
    update(suite)
    result = suite.runpytest("--opprof-strict")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK and strict_lines(result) == []
    result.stdout.fnmatch_lines(["opprof: machine *(tolerance 5%, strict)"])


def test_a_regression_fails_its_test_and_strict_adds_nothing(suite, monkeypatch):
    update(suite)
    monkeypatch.setenv("SLOW", "relu:3")
    result = suite.runpytest("--opprof-strict")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED and strict_lines(result) == []


@pytest.mark.e2e
def test_under_xdist_against_a_serial_baseline_the_controller_fails_the_session(suite,
                                                                                monkeypatch):
    """The issue's case: a serial baseline, ``-n 2``, a 3x regression: exit 0 before."""
    pytest.importorskip("xdist")
    update(suite, runs=1)
    monkeypatch.setenv("SLOW", "relu:3")
    loose = suite.runpytest("-n", "2")
    loose.assert_outcomes(passed=1)
    assert loose.ret == pytest.ExitCode.OK  # what strict mode is for
    result = suite.runpytest("-n", "2", "--opprof-strict", "--opprof-json=r.json",
                             "--junitxml=j.xml")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines = strict_lines(result)
    assert lines[0] == HEAD.format(n=1) and len(lines) == 2
    assert lines[1].startswith(f"  {NETWORK}: unjudged: the baseline was taken with 1 worker "
                               "(serial), this run has 2 xdist workers")
    strict = json.loads((suite.path / "r.json").read_text())["strict"]
    assert strict["failed"] is True and strict["effect"] is None
    assert [u["nodeid"] for u in strict["unjudged"]] == [NETWORK]
    junit = (suite.path / "j.xml").read_text()
    assert re.search(r'<property name="opprof_strict_unjudged" value="test_net.py::test_net: '
                     r'unjudged: the baseline was taken with 1 worker', junit)


def test_the_ini_value_turns_strict_mode_on_and_an_update_is_not_judged(suite):
    suite.makeini("[pytest]\nopprof_measure = fake\nopprof_strict = unjudged\n")
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED and strict_lines(result)
    # updating judges nothing: strict mode has nothing to fail, the flag neither
    for args in ([], ["--opprof-strict"]):
        updating = suite.runpytest("--opprof-update-baseline", *args)
        updating.assert_outcomes(passed=1)
        assert updating.ret == pytest.ExitCode.OK and strict_lines(updating) == []
    suite.makeini("[pytest]\nopprof_measure = fake\nopprof_strict = sometimes\n")
    bad = suite.runpytest()
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["ERROR: ini option opprof_strict = 'sometimes' in tox.ini: "
                              "'sometimes' is not ops, unjudged or an effect such as 25%"])


@pytest.mark.parametrize("flag", ["--opprof-strict", "--opprof-strict=25%"])
def test_strict_mode_and_no_gate_contradict_in_one_line(suite, flag):
    result = suite.runpytest(flag, "--opprof-no-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    name = flag.split("=")[0]
    result.stderr.fnmatch_lines([f"ERROR: --opprof-no-gate and {name} contradict: strict mode "
                                 "is about what the gate judged and the gate is off; drop "
                                 "one of them"])
    assert len([line for line in result.stderr.lines if line.strip()]) == 1


def test_an_ini_strict_under_no_gate_is_off(suite):
    """The ini file is the project's standing default: ``--opprof-no-gate`` (as the
    re-runs and ``opprof compare`` use) switches it off, no contradiction."""
    suite.makeini("[pytest]\nopprof_measure = fake\nopprof_strict = ops,unjudged\n")
    result = suite.runpytest("--opprof-no-gate")
    assert result.ret == pytest.ExitCode.OK and strict_lines(result) == []


def test_blind_beyond_the_strict_effect_fails_the_session(suite):
    """A judged test whose gate could only see slowdowns beyond the effect asked for
    (the fake backend's priors give its ops a detectable effect of several percent)."""
    update(suite)
    result = suite.runpytest("--opprof-strict=0.1%", "--opprof-verbosity=2")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines = strict_lines(result)
    assert len(lines) == 2 and re.fullmatch(
        rf"  {NETWORK}: blind: the gate could only see slowdowns over \+\d+\.\d% for its "
        r"median op, beyond the strict effect \+0\.1%", lines[1]), lines
    result.stdout.fnmatch_lines(["opprof: machine *(tolerance 5%, strict, blind beyond "
                                 "+0.1% fails)"])
    wide = suite.runpytest("--opprof-strict=900%")
    assert wide.ret == pytest.ExitCode.OK and strict_lines(wide) == []
    suite.makeini("[pytest]\nopprof_measure = fake\nopprof_strict = 0.1%\n")
    assert suite.runpytest().ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize(("given", "says"), [
    (["--opprof-strict=25"], "the strict effect must lie between 0 and 1000%, not '25'"),
    (["--opprof-strict=ops,x"], "'x' is not ops, unjudged or an effect such as 25%"),
    (["--opprof-strict=10%,20%"], "'10%,20%' gives 2 effects; give one"),
    (["--opprof-strict", "test_net.py"], "'test_net.py' is not ops, unjudged or an effect "
                                         "such as 25% (put a test path before this flag)"),
])
def test_a_bad_strictness_is_one_usage_line(suite, given, says):
    result = suite.runpytest(*given)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*argument --opprof-strict: {says}"])


def test_strict_ops_alone_fails_new_ops_and_not_the_session(suite):
    """``--opprof-strict=ops``: what was --opprof-strict-ops; no baseline is no fault."""
    update(suite)
    suite.makepyfile(test_net=suite.path.joinpath("test_net.py").read_text().replace(
        '"relu"', '"gelu"'))
    result = suite.runpytest("--opprof-strict=ops")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["opprof: 1 new op(s) not in the baseline (failing under "
                                 "--opprof-strict=ops):*"])
    assert strict_lines(result) == []


def test_a_fixture_without_a_loop_counts_a_failing_test_and_a_plain_one_do_not(suite):
    suite.makepyfile(test_no_loop=NO_LOOP, test_plain=PLAIN, test_failing=FAILING)
    update(suite, "test_net.py")
    result = suite.runpytest("--opprof-strict")
    result.assert_outcomes(passed=3, failed=1)
    assert strict_lines(result) == [
        HEAD.format(n=1),
        "  test_no_loop.py::test_no_loop: gpu_profiler was used without iterations(): "
        "nothing was profiled"]
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_loop_that_counted_nothing_fails_the_strict_session(suite):
    """A break in the first iteration with skip 1: a profile with no counted iteration."""
    suite.makepyfile(test_net="""
        def test_net(gpu_profiler):
            for _ in gpu_profiler.iterations(5):
                with gpu_profiler.op("relu"):
                    pass
                break
    """)
    result = suite.runpytest("--opprof-strict")
    result.assert_outcomes(passed=1)
    assert strict_lines(result)[1] == (f"  {NETWORK}: no counted iteration (1 ran, 1 skipped): "
                                       "nothing to judge; run more iterations than "
                                       "--opprof-skip")
