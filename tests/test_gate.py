"""The gate as a user drives it (pytester, fake backend: exact, repeatable times)."""

from __future__ import annotations

import json
import math
import sys

import pytest

from pytest_opprof.model.hints import Retake
from pytest_opprof.store.baseline import SCHEMA

from .fakes import SLOW_FACTOR, batch

NET = SLOW_FACTOR + """

def run_ops(gpu_profiler, names):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(8):
        for k, name in enumerate(names):
            with gpu_profiler.op(name):
                dev.kernel(int((k + 1) * 10_000 * factor(name)))


def test_net(gpu_profiler):
    run_ops(gpu_profiler, ["conv2d", "batch_norm", "relu", "pool2d", "mul", "softmax"])


def test_other(gpu_profiler):
    run_ops(gpu_profiler, ["a", "b", "c", "d", "e"])
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.delenv("SLOW", raising=False)
    pytester.makepyfile(test_net=NET)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    return pytester


def update(pytester, *args, runs=3):
    with batch("t"):
        for _ in range(runs):
            result = pytester.runpytest(*args, "--opprof-update-baseline")
            assert result.ret == 0, result.stdout.str()
    return result


def test_without_a_baseline_tests_pass_and_the_summary_says_so(suite):
    result = suite.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*= opprof gate: machine fake-fake CUDA device =*",
        "test_net.py::test_net: no baseline on this machine (`opprof baseline update "
        "test_net.py::test_net --opprof-measure=fake` takes one)",
    ])


def test_update_writes_one_file_per_test_then_an_unchanged_run_passes(suite):
    result = update(suite)
    result.stdout.fnmatch_lines(["test_net.py::test_net: baseline updated"])
    files = sorted(p.name for p in (suite.path / ".opprof").rglob("*.json"))
    assert len(files) == 2 and files[0].startswith("test_net.py_test_net-")
    data = json.loads((suite.path / ".opprof").rglob("*test_net-*.json").__next__().read_text())
    assert len(data["runs"]) == 3
    result = suite.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["test_net.py::test_net: passed; 6 ops compared, drift +0.0%"])


@pytest.mark.rerun
def test_a_slower_op_fails_exactly_its_test_naming_the_op(suite, monkeypatch):
    update(suite)
    monkeypatch.setenv("SLOW", "relu:1.3")
    result = suite.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "opprof: 1 op(s) regressed against the baseline of machine 'fake-fake CUDA device' "
        "(3 runs; this run's drift +0.0%, from ops, confirmed by a re-run in a new process):",
        "  OP_ID2. relu: 30 us -> 39 us (+30.0%; +30.0% drift-corrected beyond its margin "
        "+*%, z=* for a spread of *% between processes; rank test p=*; 3 baseline runs)",
        "To accept: opprof baseline update test_net.py::test_net --opprof-measure=fake",
    ])
    assert "FAILED test_net.py::test_net" in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


@pytest.mark.rerun
def test_a_slowdown_the_rerun_does_not_show_passes(suite, monkeypatch):
    update(suite)
    # slow in the first process only: the re-run in a new process finds the op as before
    suite.makeconftest("""
        import os

        def pytest_configure(config):
            if os.environ.get("PYTEST_OPPROF_CHILD"):  # the re-run
                os.environ.pop("SLOW", None)
    """)
    monkeypatch.setenv("SLOW", "relu:1.3")
    result = suite.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["test_net.py::test_net: passed; *; not confirmed by a re-run: "
                                 "relu (OP_ID 2) +30.0%"])


def test_without_confirmation_the_first_run_decides(suite, monkeypatch):
    update(suite)
    monkeypatch.setenv("SLOW", "relu:1.3")
    result = suite.runpytest("--opprof-no-confirm")
    result.assert_outcomes(passed=1, failed=1)
    assert "confirmed by a re-run" not in result.stdout.str()


def test_machine_wide_drift_fails_nothing(suite, monkeypatch):
    """The machine 20% slower, which the reference probe sees too: its drift."""
    update(suite)
    monkeypatch.setenv("OPPROF_FAKE_MACHINE", "1.2")
    result = suite.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["test_net.py::test_net: passed; 6 ops compared, drift +20.0%"])


def test_a_change_every_op_shares_fails_each_op(suite, monkeypatch):
    """Issue 28: the code 20% slower in every op (a slower common helper), the probe
    unmoved: each op regressed, the shared change named; it used to pass as drift."""
    update(suite)
    everything = ",".join(f"{op}:1.2" for op in
                          ["conv2d", "batch_norm", "relu", "pool2d", "mul", "softmax"])
    monkeypatch.setenv("SLOW", everything)
    result = suite.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["test_net.py::test_net: failed; 6 ops compared, drift +0.0%; "
                                 "the ops moved together by +20.0% (the reference probe moved "
                                 "+0.0%): a change they share, judged as each op's own; "
                                 "regressed: conv2d (OP_ID 0) +20.0%*"])


@pytest.mark.parametrize("slow, fails", [("1.2", False), ("1.2,relu:2", True)])
def test_in_ci_a_shared_change_no_reference_shows_is_reported_unless_an_op_stands_out(
        suite, monkeypatch, slow, fails):
    """Issue 28: one process of a busy runner moved a whole untouched test (rfft 1.85x,
    lowpass 1.44x) while the probe after it did not, and in such a run its tightest op
    failed. In CI (``CI`` set) what a
    test's ops moved by together, with no reference showing the machine move, is
    reported and fails none; an op that stands out of it (relu 2x beside the others'
    1.2x) still fails the test."""
    update(suite)
    others = ["conv2d", "batch_norm", "pool2d", "mul", "softmax"]
    factors = dict.fromkeys([*others, "relu"], "1.2") | dict(
        part.split(":") for part in slow.split(",")[1:])
    monkeypatch.setenv("SLOW", ",".join(f"{op}:{f}" for op, f in factors.items()))
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest("test_net.py::test_net")
    if fails:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["test_net.py::test_net: failed; *regressed: *relu*"])
    else:
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines([
            "test_net.py::test_net: passed; not blocking: regressed conv2d +20.0%, "
            "batch_norm +20.0%, relu +20.0% and 3 more, but the test's ops moved together by "
            "+20.0% and no reference showed the machine move*"])


EIGHT_OPS = ["conv", "relu", "pool", "mul", "softmax", "norm", "embed", "loss"]


def test_six_of_eight_ops_slower_fail_against_a_one_run_baseline(suite, monkeypatch):
    """Issue 28, section 0: a commit makes 6 of a test's 8 ops 30% slower on a clock
    that does not move. Against a one-run baseline of the base the gate said "passed; 8
    ops compared, drift +30.0%" and could only see slowdowns over +161%; now it fails on
    the slower ops its one run lets it see (those whose margin is under +30%), never
    calls the two unchanged ones changed, and names the shared change."""
    suite.makepyfile(test_net=NET.replace(
        '["conv2d", "batch_norm", "relu", "pool2d", "mul", "softmax"]', repr(EIGHT_OPS)))
    update(suite, "test_net.py::test_net", runs=1)
    monkeypatch.setenv("SLOW", ",".join(f"{op}:1.3" for op in EIGHT_OPS[:6]))
    result = suite.runpytest("test_net.py::test_net", "--opprof-json=out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["test_net.py::test_net: failed; 8 ops compared, drift +0.0%; "
                                 "the ops moved together by +30.0% (the reference probe moved "
                                 "+0.0%): a change they share, judged as each op's own; "
                                 "regressed: *"])
    (test,) = json.loads((suite.path / "out.json").read_text())["tests"]
    verdicts = {op["name"]: op["verdict"] for op in test["ops"]}
    assert verdicts["embed"] == verdicts["loss"] == "ok"
    assert {verdicts[op] for op in EIGHT_OPS[:6]} <= {"regressed", "ok"}
    assert [op for op in EIGHT_OPS[:6] if verdicts[op] == "regressed"][-3:] == EIGHT_OPS[3:6]


def test_an_improvement_is_reported_not_failed(suite, monkeypatch):
    update(suite)
    monkeypatch.setenv("SLOW", "pool2d:0.5")
    result = suite.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["test_net.py::test_net: passed; *; improved: pool2d (OP_ID *) -50.0%"])


def test_new_and_missing_ops_fail_only_when_strict(suite):
    update(suite)
    suite.makepyfile(test_net=NET.replace('"mul", "softmax"]', '"mul", "gelu"]'))
    result = suite.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["test_net.py::test_net: passed; *; new (not in the baseline): "
                                 "gelu (OP_ID 5); missing (in the baseline only): softmax "
                                 "(OP_ID 5)"])
    result = suite.runpytest("--opprof-strict=ops")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([  # says what happened: no "regressed"
        "opprof: 1 new op(s) not in the baseline (failing under --opprof-strict=ops):",
        "  OP_ID5. gelu: new, 60 us (not in the baseline)",
        "opprof: 1 op(s) of the baseline missing from this run (failing under "
        "--opprof-strict=ops):",
        "  OP_ID5. softmax: missing (the baseline had it at 60 us)"])
    assert "op(s) regressed" not in result.stdout.str()


def test_a_strict_failure_names_each_group_of_ops_by_its_verdict(suite, monkeypatch):
    update(suite)
    monkeypatch.setenv("SLOW", "relu:1.3")
    suite.makepyfile(test_net=NET.replace('"mul", "softmax"]', '"mul", "gelu"]'))
    result = suite.runpytest("--opprof-strict=ops", "--opprof-no-confirm")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "opprof: 1 op(s) regressed against the baseline *",
        "  OP_ID2. relu: 30 us -> 39 us *",
        "opprof: 1 new op(s) not in the baseline *",
        "  OP_ID5. gelu: new, *",
        "opprof: 1 op(s) of the baseline missing from this run *",
        "  OP_ID5. softmax: missing *"])


def test_machine_key_namespaces_baselines(suite, monkeypatch):
    update(suite, "--opprof-machine-key=runner-a")
    monkeypatch.setenv("SLOW", "relu:1.3")
    result = suite.runpytest("--opprof-machine-key=runner-b")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*= opprof gate: machine runner-b =*",
                                 "test_net.py::test_net: no baseline on this machine*"])
    assert (suite.path / ".opprof" / "runner-a").is_dir()
    suite.runpytest("--opprof-machine-key=runner-a").assert_outcomes(passed=1, failed=1)


def test_baseline_dir_flag_and_ini(suite):
    update(suite, "--opprof-baseline-dir=elsewhere", runs=1)
    assert list((suite.path / "elsewhere").rglob("*.json"))
    suite.makeini("[pytest]\nopprof_measure = fake\nopprof_baseline_dir = from_ini\n")
    update(suite, runs=1)
    assert list((suite.path / "from_ini").rglob("*.json"))


def test_a_failing_test_writes_no_baseline_and_is_not_gated(pytester):
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile("""
        def test_broken(gpu_profiler):
            for _ in gpu_profiler.iterations(4):
                with gpu_profiler.op("x"):
                    gpu_profiler.timer.device_model.kernel(10)
            assert False
    """)
    result = pytester.runpytest("--opprof-update-baseline")
    result.assert_outcomes(failed=1)
    assert not (pytester.path / ".opprof").exists()
    result.stdout.fnmatch_lines(["*::test_broken: not gated"])


@pytest.mark.parametrize("content", ["", "{", '{"schema": "pytest-opprof/baseline/0"}'])
def test_a_corrupt_baseline_fails_its_test_in_one_line_and_is_kept(suite, content):
    update(suite, runs=1)
    path = next((suite.path / ".opprof").rglob("*test_net-*.json"))
    path.write_text(content)
    result = suite.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"opprof: {path}: *; delete it, or rerun with "
                                 "--opprof-update-baseline (opprof baseline update) to write a "
                                 "new one"])
    assert "Traceback" not in result.stdout.str()
    assert path.read_text() == content
    update(suite, runs=1)
    assert json.loads(path.read_text())["schema"] == SCHEMA


def test_max_time_budgets_need_no_baseline(pytester):
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile("""
        import pytest

        def work(gpu_profiler):
            dev = gpu_profiler.timer.device_model
            for _ in gpu_profiler.iterations(4):
                with gpu_profiler.op("conv2d"):
                    dev.kernel(3_000_000)
                with gpu_profiler.op("relu"):
                    dev.kernel(200_000)

        @pytest.mark.opprof(max_time={"conv2d": "2ms", "relu": "300us"})
        def test_over(gpu_profiler):
            work(gpu_profiler)

        @pytest.mark.opprof(max_time={"conv2d": 0.005, "relu": "0.3 ms"})
        def test_within(gpu_profiler):
            work(gpu_profiler)

        @pytest.mark.opprof(max_time={"convv2d": "5ms"})
        def test_typo(gpu_profiler):
            work(gpu_profiler)
    """)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "opprof: 1 op(s) over their max_time budget:",
        "  OP_ID0. conv2d: median 3 ms > budget 2 ms (+50.0%)",
    ])
    result.stdout.fnmatch_lines(["  convv2d: has a budget of 5 ms but no op of that name ran"])


@pytest.mark.parametrize(("marker", "message"), [
    ('max_time={"conv2d": "fast"}', "max_time['conv2d'] must be a duration such as '2ms'"),
    ('max_time="2ms"', "max_time must be a non-empty dict of op name to value, not '2ms'"),
    ("tolerance=-1", "tolerance=-1: the tolerance must lie between 0 and 1000%, not -1"),
    ('tolerance="lots"', "tolerance='lots': the tolerance must be a fraction or a percentage"),
    ("tolerance=5", "tolerance=5: the tolerance 5 is a fraction, 500%: write 5% or 0.05"),
    ('tolerance={"relu": 2}', "tolerance['relu'] 2 is a fraction, 200%: write 2% or 0.02"),
    ('tolerance={"relu": "x"}', "tolerance['relu'] must be a fraction or a percentage"),
])
def test_bad_gate_marker_arguments_are_one_line_errors(pytester, marker, message):
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.opprof({marker})
        def test_m(gpu_profiler):
            pass
    """)
    result = pytester.runpytest("--opprof-measure=fake")
    result.assert_outcomes(errors=1)
    assert "opprof: @pytest.mark.opprof on test_bad_gate_marker_arguments_are_one_line_errors" \
        in result.stdout.str()
    assert message in result.stdout.str()


def test_tolerance_per_op_through_the_marker(suite, monkeypatch):
    update(suite)
    suite.makepyfile(test_net=NET.replace(
        "def test_net(", '@pytest.mark.opprof(tolerance={"relu": "50%"})\ndef test_net('))
    monkeypatch.setenv("SLOW", "relu:1.3")
    suite.runpytest().assert_outcomes(passed=2)


@pytest.mark.parametrize(("flag", "message"), [
    ("--opprof-tolerance=0", "*--opprof-tolerance: the tolerance must lie between 0 and 1000%*"),
    ("--opprof-tolerance=abc", "*--opprof-tolerance: the tolerance must be a fraction*"),
    # a bare 5 was 500%: a 2x regression passed
    ("--opprof-tolerance=5", "*--opprof-tolerance: the tolerance '5' is a fraction, 500%: "
                             "write 5% or 0.05 for 5 percent (or 500% if that is meant)"),
    ("--opprof-tolerance=1", "*the tolerance '1' is a fraction, 100%: write 1% or 0.01*"),
])
def test_bad_tolerance_flag(suite, flag, message):
    result = suite.runpytest(flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_bare_tolerance_above_one_in_the_ini_file_is_refused(suite):
    suite.makeini("[pytest]\nopprof_measure = fake\nopprof_tolerance = 5\n")
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini option opprof_tolerance = '5' in tox.ini: the "
                                 "tolerance '5' is a fraction, 500%: write 5% or 0.05 *"])


@pytest.mark.parametrize(("given", "fraction"), [
    ("5%", 0.05), ("0.05", 0.05), (0.5, 0.5), ("500%", 5.0), ("100%", 1.0), ("0.999", 0.999)])
def test_tolerances_as_fractions_below_one_or_as_percentages_are_taken(given, fraction):
    from pytest_opprof.run.options import parse_fraction

    assert parse_fraction(given) == pytest.approx(fraction)


def test_json_results(suite, monkeypatch):
    update(suite)
    monkeypatch.setenv("SLOW", "relu:1.3")
    result = suite.runpytest("--opprof-json=out/results.json", "--opprof-no-confirm")
    result.assert_outcomes(passed=1, failed=1)
    data = json.loads((suite.path / "out" / "results.json").read_text())
    assert data["schema"] == "pytest-opprof/results/2"
    assert data["machine"]["key"] == "fake-fake CUDA device" and "numpy" in data["machine"]
    tests = {t["nodeid"]: t for t in data["tests"]}
    net = tests["test_net.py::test_net"]
    assert net["verdict"] == "failed" and net["baseline_runs"] == 3 and net["counted"] == 7
    relu = next(op for op in net["ops"] if op["name"] == "relu")
    assert relu["verdict"] == "regressed"
    assert relu["current"]["median_ns"] == 39_000
    assert relu["baseline"]["median_ns"] == pytest.approx(30_000)
    assert relu["baseline"]["ratio"] == pytest.approx(1.3)
    assert {op["verdict"] for op in net["ops"] if op["name"] != "relu"} == {"ok"}
    assert tests["test_net.py::test_other"]["verdict"] == "passed"


def test_json_that_cannot_be_written_is_one_error(suite):
    (suite.path / "afile").write_text("")
    result = suite.runpytest("--opprof-json=afile/r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # at start-up, before any test
    result.stderr.fnmatch_lines(["ERROR: opprof: --opprof-json=*afile/r.json: "
                                 "*afile is a file, not a folder"])


def _profile(factor_of, ops=8):
    from .fakes import train_profile

    def body(profiler, dev, i):
        for k in range(ops):
            with profiler.op(f"op{k}"):
                dev.kernel(int(10_000 * factor_of(k)))

    return train_profile(iterations=8, body=body)


#: Each op's five baseline runs are a permutation of these log offsets: a 5% spread.
_OFFSETS = (-1.26, -0.63, 0.0, 0.63, 1.26)


@pytest.mark.parametrize(("hours", "verdict"), [(0.0, "ok"), (2.0, "regressed")])
def test_a_baseline_spanning_hours_earns_tighter_margins(hours, verdict):
    """Runs taken back to back show less of how ops move than runs spread over hours:
    the same +26% of an op whose runs spread 5% is within the margin of the first and
    beyond that of the second."""
    import datetime

    from pytest_opprof.judge.gate import gate_config, judge
    from pytest_opprof.measure.measures import named
    from pytest_opprof.store.baseline import Baseline, BaselineRun

    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    runs = [BaselineRun.from_profile(
        _profile(lambda k, r=r: math.exp(0.05 * _OFFSETS[(k + r) % 5]), ops=10),
        {"date": (start + datetime.timedelta(hours=hours * r / 4)).isoformat()})
        for r in range(5)]
    baseline = Baseline("test_x.py::test_x", "m", runs)
    assert baseline.span_seconds() == hours * 3600
    current = _profile(lambda k: 1.26 if k == 3 else 1.0, ops=10)
    result = judge(current, baseline, machine="m",
                   retake=Retake(), config=gate_config(named("fake").gate, 0.05, {}),
                   budgets={}, strict_ops=False)
    assert {v.name: v.verdict for v in result.comparison.ops}["op3"] == verdict


def test_cpu_gating_without_pinned_blas_threads_gets_a_hint(pytester, monkeypatch):
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    hint = "opprof: BLAS threads are not pinned*"
    assert "BLAS threads" not in pytester.runpytest("--opprof-measure=time").stdout.str()
    (pytester.path / ".opprof").mkdir()  # baselines exist: the gate is in use
    pytester.runpytest("--opprof-measure=time").stdout.fnmatch_lines([hint])
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert "BLAS threads" not in pytester.runpytest("--opprof-measure=time").stdout.str()


def test_every_judged_op_shows_its_detectable_slowdown(suite, monkeypatch):
    """Verbosity 2 lists each op's margin, detectable slowdown and spread; the results
    file carries them; a test whose ops could only show large slowdowns says so once."""
    net = "conv2d,batch_norm,relu,pool2d,mul,softmax".split(",")
    swings = (1.5, 0.7, 1.4, 0.75, 1.3, 0.8)  # baseline runs in which every op moves 30%
    for run in ([1.0] * 6, swings, swings[::-1]):
        monkeypatch.setenv("SLOW", ",".join(f"{op}:{f}" for op, f in zip(net, run, strict=True)))
        update(suite, "test_net.py::test_net", runs=1)
    monkeypatch.delenv("SLOW")
    result = suite.runpytest("--opprof-verbosity=2", "--opprof-json=out.json",
                             "test_net.py::test_net")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "gate: drift *% (from ops), 3 baseline runs; change is drift-corrected",
        "OP_ID*op*baseline*now*change*margin*detectable*spread*verdict",
        "*relu*ok",
        "opprof: blind: 1 of 1 judged test(s) could only see slowdowns over +30.0% for "
        "their median op: test_net.py::test_net +*%; more baseline runs (`opprof baseline "
        "update --runs 5 test_net.py::test_net --opprof-measure=fake`), "
        "more iterations (gpu_profiler.iterations(n)), or a quieter machine with pinned BLAS "
        "threads (OMP_NUM_THREADS=1) would help",
    ])
    ops = json.loads((suite.path / "out.json").read_text())["tests"][0]["ops"]
    detectable = {op["name"]: op["baseline"]["detectable"] for op in ops}
    assert all(value > 0.3 for value in detectable.values()), detectable
    assert all(op["baseline"]["spread"] > 0.1 for op in ops)


def swinging_baseline(suite, monkeypatch):
    """Three baseline runs in which every op but relu moves 30%: a gate blind beyond
    +30% for its median op, that can see relu's own."""
    net = "conv2d,batch_norm,relu,pool2d,mul,softmax".split(",")
    swings = (1.5, 0.7, 1.0, 0.75, 1.3, 0.8)
    for run in ([1.0] * 6, swings, swings[::-1]):
        monkeypatch.setenv("SLOW", ",".join(f"{op}:{f}" for op, f in zip(net, run, strict=True)))
        update(suite, runs=1)


@pytest.mark.parametrize("ci, strict, fails", [("", [], True), ("true", [], False),
                                               ("true", ["--opprof-strict"], False),
                                               ("true", ["--opprof-strict=50%"], True)])
def test_in_ci_a_blind_time_gate_reports_its_regressions_and_fails_none(
        suite, monkeypatch, ci, strict, fails):
    """Issue 28: on a runner whose times move this much, the stored-baseline gate failed
    untouched code. In CI (``CI`` set) a test blind beyond +30% reports its regressions
    and fails none (it passes, saying why), the blindness said once for the run, in the
    Markdown too; plain --opprof-strict (fail what could not be judged) keeps that, an
    effect (fail what could only see beyond it) makes it block; outside CI it fails."""
    swinging_baseline(suite, monkeypatch)
    monkeypatch.setenv("SLOW", "relu:10")
    monkeypatch.setenv("CI", ci)
    result = suite.runpytest("test_net.py", "--opprof-markdown=s.md", *strict)
    out = result.stdout.str()
    assert out.count("opprof: blind: 1 of 2 judged test(s)") == 1
    if fails:
        assert result.ret == 1
    else:
        result.assert_outcomes(passed=2)
        result.stdout.fnmatch_lines([
            "*tolerance 5%*, CI: a test blind beyond +30.0% reports its regressions, fails none*",
            "test_net.py::test_net: passed; not blocking: regressed relu +*%, but on "
            "this runner the gate could only see slowdowns over +*% for its median op*"])
    md = (suite.path / "s.md").read_text()
    assert md.count("**Blind:** 1 of 2 judged test(s)") == 1 and "`relu`" in md


def test_a_quiet_baseline_prints_no_blindness_line(suite):
    update(suite)
    result = suite.runpytest()
    assert "could only see" not in result.stdout.str()


@pytest.mark.parametrize(("slowed", "unjudged"), [(1, False), (2, False), (4, True)])
def test_a_class_of_ops_slower_together_leaves_the_test_unjudged(slowed, unjudged):
    """A busy machine slows a class of ops at once (real -n 2 runs under load: 9 of a
    ResNet step's 65 ops 1.9-2.9x, the rest within 10%); a change slows what it touches.
    Past a tenth of the ops (and at least 3) beyond the test's typical margin, the test
    is not judged, in one line; fewer are judged one by one."""
    from pytest_opprof.judge.gate import contention_problem
    from pytest_opprof.judge.rule import GateConfig
    from pytest_opprof.model.verdict import Comparison, OpStatus, OpVerdict

    ops = tuple(OpVerdict(f"op{k}", 0, k, OpStatus.OK, corrected_ratio=1.0 + 0.01 * (k % 3),
                          margin=1.2) for k in range(30 - slowed))
    ops += tuple(OpVerdict(f"conv{k}", 0, 30 + k, OpStatus.REGRESSED, corrected_ratio=2.5,
                           margin=1.3) for k in range(slowed))
    line = contention_problem(Comparison(ops, 1.0, "ops", 5), GateConfig())
    assert (line is not None) == unjudged
    if unjudged:
        assert line.startswith(f"{slowed} of 30 ops grew beyond the test's typical margin "
                               "+20.0% together (+150.0% to +150.0%)")


@pytest.mark.e2e
def test_a_history_appended_under_the_gates_key_does_not_become_its_reference(
        suite, monkeypatch):
    """Issue 28: one machine key for the history job and the gate; after a run of a
    commit with softmax twice as slow was appended, the gate passed softmax +60% "ok"
    (the appended run read as softmax's spread between processes). The gate judges
    against the runs of its last update, and says once per test what it left out."""
    from .fakes import git

    monkeypatch.chdir(suite.path)
    git(suite.path, "init", "-q")
    git(suite.path, "add", "-A")
    git(suite.path, "commit", "-q", "-m", "base")
    update(suite, "test_net.py::test_net")
    (suite.path / "version.txt").write_text("softmax twice")
    git(suite.path, "add", "-A")
    git(suite.path, "commit", "-q", "-m", "softmax twice")
    monkeypatch.setenv("SLOW", "softmax:2")
    appended = suite.runpytest("test_net.py::test_net", "--opprof-update-baseline=append")
    appended.assert_outcomes(passed=1)
    monkeypatch.setenv("SLOW", "softmax:1.6")
    result = suite.runpytest("test_net.py::test_net")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*OP_ID5. softmax: 60 us -> 96 us (+60.0%*3 baseline runs)",
        "opprof: test_net.py::test_net: judged against the 3 baseline run(s) of one code; 1 "
        "run(s) appended at other commits (--opprof-update-baseline=append: a history for "
        "opprof history) are not its reference; keep a history under its own "
        "--opprof-machine-key"])
    shown = suite.run(sys.executable, "-m", "pytest_opprof.cli", "baseline", "show", "test_net")
    assert shown.stdout.str().count("history, not the gate's reference") == 1
