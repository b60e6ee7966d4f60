"""The plugin as a user drives it: flags, ini, marker, reports, errors (pytester)."""

from __future__ import annotations

import json

import pytest

from pytest_opprof.measure.measures import events

from .fakes import SIX_OP_NET, batch

TRAIN = """
def test_train(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for i in gpu_profiler.iterations(4):
        with gpu_profiler.phase("forward"):
            with gpu_profiler.op("conv2d"):
                dev.kernel(3000 if i == 0 else 1000)
            with gpu_profiler.op("relu"):
                dev.kernel(250)
        with gpu_profiler.phase("backward"):
            with gpu_profiler.op("relu_grad"):
                dev.kernel(500)
            with gpu_profiler.op("conv2d_grad"):
                dev.kernel(2000)
        dev.cpu(5000 if i else 7000)
"""


@pytest.fixture
def train(pytester):
    pytester.makepyfile(test_train=TRAIN)
    return pytester


def run(pytester, *args):
    return pytester.runpytest("--opprof-measure=fake", *args)


def test_verbosity_0_prints_no_profile(train):
    result = run(train)
    result.assert_outcomes(passed=1)
    assert "opprof profile" not in result.stdout.str()


def test_verbosity_1_prints_singas_block_under_the_node_id(train):
    result = run(train, "--opprof-verbosity=1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*= opprof profile =*",
        "*- test_train.py::test_train -*",
        "measure fake (fake CUDA device; event span from virtual CUDA events): 3 of 4 "
        "iterations counted "
        "(first 1 skipped)",
        "",
        "Time Profiling:",
        "Forward Propagation Time : 1.25e-06 sec",
        "Backward Propagation Time : 2.5e-06 sec",
    ], consecutive=True)
    assert "OP_ID" not in result.stdout.str()


def test_verbosity_2_prints_ops_table_and_outside_line(train):
    result = run(train, "--opprof-verbosity=2")
    result.stdout.fnmatch_lines([
        "Backward Propagation Time : 2.5e-06 sec",
        "",
        "Time Profiling:",
        "OP_ID0. conv2d : 1e-06 sec",
        "OP_ID1. relu : 2.5e-07 sec",
        "OP_ID2. relu_grad : 5e-07 sec",
        "OP_ID3. conv2d_grad : 2e-06 sec",
        "",
        "Per op type (event span, ms; over the counted iterations):",
        "Stat=conv2d_grad   total=0.006 *   avg=0.002 *   max=0.002 *   min=0.002 *   count=3",
        "Stat=conv2d  *",
        "Stat=relu_grad  *",
        "Stat=relu  *",
        "",
        "Op time : 3.75e-06 sec of 5e-06 sec iteration wall time per counted iteration, "
        "25.0% outside any op",
    ], consecutive=True)
    assert len([line for line in result.stdout.lines  # its profile printed once
                if line.startswith("-") and "test_train.py::test_train" in line]) == 1


def test_skip_changes_the_counted_iterations_and_the_figures(train):
    result = run(train, "--opprof-verbosity=2", "--opprof-skip=0")
    result.stdout.fnmatch_lines([
        "*: 4 of 4 iterations counted (none skipped)",
        "*Forward Propagation Time : 1.75e-06 sec",  # the slow first iteration is in
        "OP_ID0. conv2d : 1.5e-06 sec",
    ])
    result = run(train, "--opprof-verbosity=1", "--opprof-skip=3")
    result.stdout.fnmatch_lines(["*: 1 of 4 iterations counted (first 3 skipped)"])


def test_ini_twins(train):
    train.makeini("[pytest]\nopprof_verbosity = 2\nopprof_skip = 2\nopprof_measure = fake\n")
    result = train.runpytest()
    result.stdout.fnmatch_lines(["*: 2 of 4 iterations counted (first 2 skipped)", "OP_ID0.*"])


def test_the_flag_wins_over_the_ini(train):
    train.makeini("[pytest]\nopprof_skip = 2\n")
    result = run(train, "--opprof-verbosity=1", "--opprof-skip=1")
    result.stdout.fnmatch_lines(["*: 3 of 4 iterations counted (first 1 skipped)"])


def test_iterations_default_comes_from_the_ini(pytester):
    pytester.makeini("[pytest]\nopprof_iterations = 6\n")
    pytester.makepyfile("""
        def test_n(gpu_profiler):
            assert len(list(gpu_profiler.iterations())) == 6
    """)
    run(pytester).assert_outcomes(passed=1)


def test_header_names_the_device_verbosity_and_skip(train):
    result = run(train, "--opprof-skip=2")
    result.stdout.fnmatch_lines([
        "opprof: device fake CUDA device, verbosity 0, skip 2, iterations 20"])


@pytest.mark.parametrize(("flag", "message"), [
    ("--opprof-verbosity=3", "*--opprof-verbosity: the verbosity must be 0, 1 or 2, not '3'"),
    ("--opprof-verbosity=loud", "*--opprof-verbosity: the verbosity must be 0, 1 or 2, not 'loud'"),
    ("--opprof-skip=-1", "*--opprof-skip: the number of skipped iterations must be a whole "
                         "number from 0 to 1000000, not '-1'"),
    ("--opprof-skip=two", "*--opprof-skip: * not 'two'"),
    ("--opprof-measure=tpu", "ERROR: --opprof-measure: unknown measure 'tpu'; choose one of "
                             "auto, time, events, kernel, instructions*"),
])
def test_bad_flags_are_usage_errors_naming_the_flag(train, flag, message):
    result = train.runpytest(flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(("ini", "message"), [
    ("opprof_verbosity = 5", "ERROR: ini option opprof_verbosity = '5' in tox.ini: the "
                             "verbosity must be 0, 1 or 2, not '5'"),
    ("opprof_skip = -2", "ERROR: ini option opprof_skip = '-2' in tox.ini: *from 0 to 1000000*"),
    ("opprof_iterations = 0", "ERROR: ini option opprof_iterations = '0' in tox.ini: *from 1 to "
                              "1000000*"),
    ("opprof_backend = gpu", "ERROR: ini option opprof_backend = 'gpu' in tox.ini: is gone, set "
                             "opprof_measure instead (auto, time, *; time for cpu, events or "
                             "kernel for cuda)"),
])
def test_bad_ini_values_are_usage_errors_naming_the_key(train, ini, message):
    train.makeini(f"[pytest]\n{ini}\n")
    result = train.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(("override", "message"), [
    ("opprof_skip=-2", "ERROR: -o opprof_skip=-2: *from 0 to 1000000*"),
    ("opprof_backend=fake", "ERROR: -o opprof_backend=fake: is gone, set opprof_measure *"),
    ("opprof_measure=events", "ERROR: -o opprof_measure=events: CuPy is not installed (pip "
                              "...); use --opprof-measure=auto"),
])
def test_a_problem_in_a_setting_names_where_it_came_from(train, monkeypatch, override,
                                                         message):
    """Issue 28: an ``-o`` override was named ``--opprof-measure=kernel`` (a flag not
    given), the ini file's measure too: a setting is named as it was given."""
    monkeypatch.setattr(events, "cuda_problem", lambda: "CuPy is not installed (pip ...)")
    result = train.runpytest("-o", override)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    train.makeini("[pytest]\nopprof_measure = events\n")
    result = train.runpytest()
    result.stderr.fnmatch_lines(["ERROR: ini option opprof_measure = 'events' in tox.ini: "
                                 "CuPy is not installed (pip ...); use --opprof-measure=auto"])


def test_cuda_without_a_gpu_is_one_clear_usage_error(train, monkeypatch):
    monkeypatch.setattr(events, "cuda_problem", lambda: "CuPy is not installed (pip ...)")
    result = train.runpytest("--opprof-measure=events")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: --opprof-measure=events: CuPy is not installed (pip ...); "
        "use --opprof-measure=auto"])


def test_marker_sets_skip_and_iterations_for_one_test(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.opprof(skip=0, iterations=3)
        def test_marked(gpu_profiler):
            for _ in gpu_profiler.iterations():
                with gpu_profiler.op("x"):
                    gpu_profiler.timer.device_model.kernel(10)

        def test_plain(gpu_profiler):
            for _ in gpu_profiler.iterations(5):
                with gpu_profiler.op("x"):
                    gpu_profiler.timer.device_model.kernel(10)
    """)
    result = run(pytester, "--opprof-verbosity=1", "--opprof-skip=2")
    result.assert_outcomes(passed=2)
    # each test's block, in whichever order the tests ran
    result.stdout.fnmatch_lines(["*test_marked -*", "*: 3 of 3 iterations counted (none skipped)"])
    result.stdout.fnmatch_lines(["*test_plain -*",
                                 "*: 3 of 5 iterations counted (first 2 skipped)"])


def test_the_call_sets_the_skip_in_code_over_the_marker_and_the_flag(pytester):
    """``iterations(n, skip=k)``: the test's own warm-up, as torch's schedule(warmup=)."""
    pytester.makepyfile("""
        import pytest

        @pytest.mark.opprof(skip=0)
        def test_warm(gpu_profiler):
            for _ in gpu_profiler.iterations(5, skip=3):
                with gpu_profiler.op("x"):
                    gpu_profiler.timer.device_model.kernel(10)
            assert gpu_profiler.profile.skip == 3

        def test_too_few(gpu_profiler):
            for _ in gpu_profiler.iterations(2, skip=2):
                pass

        def test_not_a_count(gpu_profiler):
            for _ in gpu_profiler.iterations(5, skip=1.5):
                pass
    """)
    result = run(pytester, "--opprof-verbosity=1", "--opprof-skip=1")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*test_warm -*", "*: 2 of 5 iterations counted (first 3 skipped)"])
    result.stdout.fnmatch_lines([
        "opprof: iterations(2) with skip=2 leaves no iteration to count: run more than 2 "
        "iterations or lower its skip="])
    result.stdout.fnmatch_lines(["opprof: iterations(skip=1.5): give a whole number of "
                                 "iterations to skip from 0 to 1000000"])


def test_class_marker_applies_and_the_closest_wins(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.opprof(skip=3, iterations=8)
        class TestK:
            @pytest.mark.opprof(skip=1)
            def test_m(self, gpu_profiler):
                assert gpu_profiler.skip == 1
                assert len(list(gpu_profiler.iterations())) == 8
    """)
    run(pytester).assert_outcomes(passed=1)


def test_a_marker_takes_numpys_integers_as_counts(pytester):
    """Issue 28: ``@pytest.mark.opprof(iterations=np.int64(3))`` was refused."""
    pytester.makepyfile("""
        import numpy as np
        import pytest

        @pytest.mark.opprof(skip=np.int64(0), iterations=np.int32(3))
        def test_marked(gpu_profiler):
            assert gpu_profiler.skip == 0
            assert len(list(gpu_profiler.iterations())) == 3
    """)
    run(pytester).assert_outcomes(passed=1)


@pytest.mark.parametrize(("marker", "message"), [
    ("skp=1", "unknown argument 'skp'; accepted: iterations, max_time, skip, tolerance"),
    ("2", "takes keyword arguments only (iterations, max_time, skip, tolerance), got (2,)"),
    ("skip=-1", "skip=-1: the number of skipped iterations must be a whole number from 0 to "
                "1000000"),
    ("iterations='10'", "iterations='10': the number of iterations must be a whole number "
                        "from 1 to 1000000"),
    ("skip=True", "skip=True: *"),
    ("skip=np.float64(1)", "skip=np.float64(1.0): *"),
])
def test_bad_marker_arguments_error_that_test_in_one_line(pytester, marker, message):
    pytester.makepyfile(f"""
        import numpy as np
        import pytest

        @pytest.mark.opprof({marker})
        def test_bad(gpu_profiler):
            pass

        def test_good(gpu_profiler):
            pass
    """)
    result = run(pytester)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([f"opprof: @pytest.mark.opprof on test_*.py::test_bad: {message}"])
    assert "Traceback" not in result.stdout.str()
    assert "def test_bad" not in result.stdout.str()


def test_zero_counted_iterations_fail_in_one_line(pytester):
    pytester.makepyfile("""
        def test_short(gpu_profiler):
            for _ in gpu_profiler.iterations(2):
                pass
    """)
    result = run(pytester, "--opprof-skip=2", "--opprof-verbosity=2")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "opprof: iterations(2) with skip=2 leaves no iteration to count: run more than 2 "
        "iterations or lower --opprof-skip"])
    assert "opprof profile" not in result.stdout.str()
    assert "def test_short" not in result.stdout.str()


def test_a_failing_workload_still_reports_and_the_next_test_starts_clean(pytester):
    pytester.makepyfile("""
        import pytest_opprof

        def test_boom(gpu_profiler):
            for i in gpu_profiler.iterations(5):
                with gpu_profiler.op("x"):
                    gpu_profiler.timer.device_model.kernel(10)
                    if i == 3:
                        raise RuntimeError("workload broke")

        def test_next():
            assert not pytest_opprof.is_recording()
    """)
    result = run(pytester, "--opprof-verbosity=1")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: workload broke", "*test_boom -*",
                                 "*: 2 of 3 iterations counted (first 1 skipped)"])


def test_a_test_that_never_iterates_gets_no_report(pytester):
    pytester.makepyfile("def test_idle(gpu_profiler):\n    pass\n")
    result = run(pytester, "--opprof-verbosity=2")
    result.assert_outcomes(passed=1)
    assert "opprof profile" not in result.stdout.str()


def test_host_time_end_to_end(pytester):
    pytester.makepyfile("""
        def test_numpy(gpu_profiler):
            xp = gpu_profiler.xp
            a = xp.ones((64, 64))
            for _ in gpu_profiler.iterations(5):
                with gpu_profiler.op("matmul"):
                    a @ a
    """)
    result = pytester.runpytest("--opprof-measure=time", "--opprof-verbosity=2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["measure time (*; host time from perf_counter_ns): 4 of 5 "
                                 "iterations counted*",
                                 "OP_ID0. matmul : * sec", "Stat=matmul   total=*count=4"])


def test_marker_is_registered(pytester):
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.opprof(skip=N, iterations=N, tolerance=*"])


# ---- plugins that decorate test ids: pytest-repeat, pytest-rerunfailures, flaky --------

GATED = SIX_OP_NET


@pytest.fixture
def gated(pytester, monkeypatch):
    monkeypatch.delenv("SLOW", raising=False)
    pytester.makepyfile(test_net=GATED)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    return pytester


def _update(pytester, *args):
    result = pytester.runpytest("-p", "no:randomly", *args, "--opprof-update-baseline")
    assert result.ret == 0, result.stdout.str()
    return result


def test_each_repetition_of_pytest_repeat_is_gated_against_the_tests_baseline(gated,
                                                                              monkeypatch):
    pytest.importorskip("pytest_repeat", reason="pytest-repeat is not installed")
    with batch("b"):
        _update(gated)
        _update(gated)
    result = gated.runpytest("-p", "no:randomly", "--count=2")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["test_net.py::test_net[[]1-2]: passed; 6 ops compared*",
                                 "test_net.py::test_net[[]2-2]: passed; 6 ops compared*"])
    assert "no baseline" not in result.stdout.str()
    monkeypatch.setenv("SLOW", "relu:1.3")
    gated.runpytest("-p", "no:randomly", "--count=2", "--opprof-no-confirm") \
        .assert_outcomes(failed=2)


def test_an_update_with_pytest_repeat_stores_every_repetition_in_one_baseline(gated):
    pytest.importorskip("pytest_repeat", reason="pytest-repeat is not installed")
    _update(gated, "--count=3")
    files = list((gated.path / ".opprof").rglob("*.json"))
    assert len(files) == 1 and "test_net-" in files[0].name  # no [1-3] in the key
    assert len(json.loads(files[0].read_text())["runs"]) == 3
    gated.runpytest("-p", "no:randomly").assert_outcomes(passed=1)


FLAKY_ONCE = """
import os

def test_net(gpu_profiler):
    first = not os.path.exists("attempted")
    open("attempted", "w").close()
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(8):
        for k, name in enumerate(["conv2d", "batch_norm", "relu", "pool2d", "mul", "softmax"]):
            with gpu_profiler.op(name):
                # the failing first attempt is 3x slower: only the last attempt may count
                dev.kernel(int((k + 1) * 10_000 * (3 if first else 1)))
    assert not first, "flaky once"
"""


@pytest.mark.parametrize(("plugin", "args", "decorate"), [
    ("pytest_rerunfailures", ("--reruns=1", "-p", "no:flaky"), ""),  # flaky would take over
    ("flaky", (), "import flaky\n@flaky.flaky(max_runs=2)\n"),
])
def test_a_rerun_test_is_gated_on_its_last_attempt(gated, plugin, args, decorate):
    pytest.importorskip(plugin, reason=f"{plugin} is not installed")
    with batch("b"):
        _update(gated)
        _update(gated)
    gated.makepyfile(test_net=FLAKY_ONCE.replace("def test_net", decorate + "def test_net"))
    # in a new process: flaky, loaded here, patches pytest's runner for in-process runs
    result = gated.runpytest_subprocess("-p", "no:randomly", "--opprof-json=r.json", *args)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["test_net.py::test_net: passed; 6 ops compared, drift +0.0%"])
    tests = json.loads((gated.path / "r.json").read_text())["tests"]
    assert [t["nodeid"] for t in tests] == ["test_net.py::test_net"]  # one record, the last


# ---- the confirmation re-run ----------------------------------------------------------------

SIZED_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--size", type=int, default=1, help="the relu workload's size")
"""
SIZED = GATED.replace("* factor(name))", "* factor(name) * (size if name == 'relu' else 1))") \
    .replace("def test_net(gpu_profiler):",
             "def test_net(gpu_profiler, request):\n    size = request.config.getoption('size')")


@pytest.mark.rerun
def test_the_rerun_says_why_and_measures_the_users_workload(gated, monkeypatch):
    """The re-run keeps ``--size=2``: without it, it would time half the relu work, find
    no regression and clear a real one."""
    gated.makeconftest(SIZED_CONFTEST)
    gated.makepyfile(test_net=SIZED)
    with batch("b"):
        _update(gated, "--size=2")
        _update(gated, "--size=2")
    monkeypatch.setenv("SLOW", "relu:1.3")
    result = gated.runpytest("-p", "no:randomly", "--size=2", "test_net.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "opprof: re-running test_net.py::test_net in a new process to confirm: "
        "relu (OP_ID 2) +30.0%",
        "*confirmed by a re-run in a new process*"])


@pytest.mark.rerun
def test_the_rerun_command_keeps_the_users_arguments_only(pytester):
    """The test paths and the --opprof-* flags go, each with its value (the word after a
    flag that pytest did not take as a test path); other plugins' flags stay."""
    from pytest_opprof.run import rerun

    pytester.makeconftest(SIZED_CONFTEST)
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    config = pytester.parseconfig(
        "-k", "test_a", "--size", "3", "test_a.py", "--junitxml", "j.xml", "-n", "2",
        "--opprof-json=r.json", "--opprof-strict", "ops", "-p", "no:randomly", "-o", "x=y",
        "--lf", "test_a.py::test_a")
    *kept, basetemp = rerun.user_args(config)
    assert kept == ["-k", "test_a", "--size", "3", "--junitxml", "j.xml", "-n", "2", "-p",
                    "no:randomly", "-o", "x=y", "--lf"]
    assert basetemp.startswith("--basetemp=")  # pytester's own: kept, as every other flag
    command = rerun.profiling(config, ["test_a.py::test_a"], measure="fake", skip=1)
    assert str(pytester.path / "test_a.py") + "::test_a" in command
    assert "--opprof-json=r.json" not in command and command[-2:] == ["-n", "0"]


USES_TMP = SIX_OP_NET.replace("def test_net(gpu_profiler):", """import os

def test_net(gpu_profiler, tmp_path):
    if not os.environ.get("PYTEST_OPPROF_CHILD"):
        (tmp_path / "first").write_text("the first run's")""")


@pytest.mark.rerun
def test_the_rerun_keeps_its_cache_and_temporary_folders_to_itself(gated, monkeypatch):
    """--basetemp and --lf reach the re-run (other plugins' flags may change the
    workload), but its temporary folders and cache are its own: it does not empty the
    run's --basetemp (the test's tmp_path, written before the re-run, is still there)."""
    gated.makepyfile(test_net=USES_TMP)
    with batch("b"):
        _update(gated)
        _update(gated)
    monkeypatch.setenv("SLOW", "relu:1.3")
    result = gated.runpytest("-p", "no:randomly", "--basetemp=bt", "--lf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["opprof: re-running test_net.py::test_net *",
                                 "*confirmed by a re-run in a new process*"])
    assert (gated.path / "bt" / "test_net0" / "first").read_text() == "the first run's"


