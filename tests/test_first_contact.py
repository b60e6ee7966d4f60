"""First contact: help, an installed but unused plugin, conflicting flags, hostile
marker and ini values, and plugins that decorate test ids (pytest-repeat,
pytest-rerunfailures, flaky)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_opprof.errors import OpprofError
from pytest_opprof.plugin import SESSION, pytest_testnodedown
from pytest_opprof.run import options

PLAIN = "def test_plain():\n    assert True\n"
PROFILED = """
def test_profiled(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(3):
        with gpu_profiler.op("relu"):
            dev.kernel(1000)
"""
CPU_PROFILED = """
def test_profiled(gpu_profiler):
    for _ in gpu_profiler.iterations(3):
        with gpu_profiler.op("relu"):
            sum(range(100))
"""


# ---- help (class: help strings) -----------------------------------------------------

@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_through_pytester_lists_the_options(pytester, flag):
    result = pytester.runpytest(flag)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*per-op profiling (pytest-opprof)*", "*--opprof-tolerance=X*",
                                 "*opprof_tolerance*"])


@pytest.mark.pytester
def test_help_through_the_installed_entry_point(tmp_path):
    """The plugin as pip installs it: loaded from its entry point in a new process."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "--opprof-measure=NAME" in done.stdout and "Traceback" not in done.stderr
    assert "--opprof-backend" not in done.stdout
    # an ini value's help is printed raw, a flag's %-formatted: "(default 5%%)" showed
    assert "%%" not in done.stdout
    assert "(default 5%, 1% under --opprof-measure=instructions)" in " ".join(
        done.stdout.split())
    # the visible flags: the mission's, the outputs' (the registry's), the gate's
    flags = re.findall(r"^ +(--opprof-[a-z-]+)", done.stdout, re.MULTILINE)
    assert flags == [
        "--opprof-verbosity", "--opprof-skip", "--opprof-measure",
        "--opprof-baseline-dir", "--opprof-machine-key", "--opprof-update-baseline",
        "--opprof-tolerance", "--opprof-strict", "--opprof-json", "--opprof-markdown",
        "--opprof-trace", "--opprof-html", "--opprof-no-confirm", "--opprof-no-gate"]


def test_the_variables_between_pytest_opprof_and_its_children(pytester, monkeypatch, tmp_path):
    """The batch of an update's runs and a child's folder are environment variables that
    pytest-opprof sets for the processes it starts; the folder is read only where the
    child plugin is loaded (not in the processes a child's tests start)."""
    pytester.makepyfile(test_profiled=PROFILED)
    monkeypatch.setenv(options.BATCH_VARIABLE, "b1")
    pytester.runpytest("--opprof-measure=fake", "--opprof-update-baseline").assert_outcomes(
        passed=1)
    assert '"b1"' in next((pytester.path / ".opprof").rglob("*.json")).read_text()
    monkeypatch.setenv(options.CHILD_VARIABLE, str(tmp_path))
    pytester.runpytest("--opprof-measure=fake").assert_outcomes(passed=1)
    assert not list(tmp_path.iterdir())  # no child plugin: a grandchild, say
    pytester.runpytest("-p", options.CHILD_PLUGIN, "--opprof-measure=fake",
                       "--opprof-strict").assert_outcomes(passed=1)  # a child gates nothing
    assert "test_profiled.py::test_profiled" in (tmp_path / "records.json").read_text()
    assert (tmp_path / "outcomes.json").read_text() == "{}"
    pytester.makepyfile(test_profiled=PLAIN)  # no option, nothing profiled: no records
    pytester.runpytest("-p", options.CHILD_PLUGIN).assert_outcomes(passed=1)
    assert (tmp_path / "records.json").read_text() == "[]"


def _all_help_texts() -> list[str]:
    parser = pytest.Parser(_ispytest=True)
    options.add_options(parser)
    return [o.attrs().get("help", "") for g in parser._groups for o in g.options
            if o.attrs().get("help", "")]


def _ini_help_texts() -> list[str]:
    parser = pytest.Parser(_ispytest=True)
    options.add_options(parser)
    return [help_text for help_text, _type, _default in parser._inidict.values()]


@pytest.mark.parametrize("text", _all_help_texts())
def test_every_help_string_formats_under_argparse(text):
    """argparse %-formats each flag's help string: a bare % crashes --help."""
    formatter = argparse.HelpFormatter("pytest")
    action = argparse.Action(["--x"], "x", help=text, default=None)
    assert formatter._expand_help(action)


@pytest.mark.parametrize("text", _ini_help_texts())
def test_no_ini_help_string_shows_a_doubled_percent(text):
    """pytest prints an ini value's help as it is: no argparse escape in it."""
    assert "%%" not in text


# ---- installed but unused: inert ------------------------------------------------------

MODULES_CONFTEST = """
import sys

def pytest_unconfigure(config):
    names = sorted(m for m in sys.modules if m.startswith("pytest_opprof"))
    with open("modules.txt", "w") as f:
        f.write("\\n".join(names))
"""
#: What pytest imports of ours in a session that profiles nothing: the plugin, its
#: options, the error type and the measures' registry (the names the help offers, and the
#: units and conditions of the model they name). No numpy, no profiler, gate or renderer.
#: judge.config: the shared defaults the options take (the tolerance), no imports of its own;
#: _extras: what each extra installs, which the options' help names, no imports of its own.
#: run.outputs: the output registry, whose flags the options register (its renderers and
#: checks import what they need when called).
INERT_MODULES = ["pytest_opprof", "pytest_opprof._extras", "pytest_opprof._version",
                 "pytest_opprof.errors",
                 "pytest_opprof.judge", "pytest_opprof.judge.config",
                 "pytest_opprof.measure", "pytest_opprof.measure.measures",
                 "pytest_opprof.measure.measures.events", "pytest_opprof.measure.measures.fake",
                 "pytest_opprof.measure.measures.host",
                 "pytest_opprof.measure.measures.instructions",
                 "pytest_opprof.measure.measures.kernel", "pytest_opprof.model",
                 "pytest_opprof.model.conditions", "pytest_opprof.model.words",
                 "pytest_opprof.plugin", "pytest_opprof.run", "pytest_opprof.run.options",
                 "pytest_opprof.run.outputs"]


@pytest.mark.no_opprof_flags
def test_unused_plugin_prints_nothing_and_imports_only_its_options(pytester):
    pytester.makeconftest(MODULES_CONFTEST)
    pytester.makepyfile(test_plain=PLAIN)
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1)
    assert "opprof:" not in result.stdout.str()
    modules = (pytester.path / "modules.txt").read_text().split()
    assert modules == INERT_MODULES


@pytest.mark.no_opprof_flags
def test_collect_only_prints_no_header_without_options(pytester):
    pytester.makepyfile(test_profiled=PROFILED)
    result = pytester.runpytest("--collect-only", "-q")
    assert "opprof:" not in result.stdout.str()


def test_an_option_brings_the_header(pytester):
    pytester.makepyfile(test_plain=PLAIN)
    result = pytester.runpytest("--opprof-measure=fake")
    result.stdout.fnmatch_lines(["opprof: device fake CUDA device, *", "opprof: machine *"])


def test_an_ini_value_brings_the_header(pytester):
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile(test_plain=PLAIN)
    pytester.runpytest().stdout.fnmatch_lines(["opprof: device fake CUDA device, *"])


@pytest.mark.no_opprof_flags
def test_the_fixture_alone_wakes_the_plugin_at_first_use(pytester):
    """No option: no header, but a test that uses the fixture is profiled and gated."""
    pytester.makepyfile(test_profiled=CPU_PROFILED)
    result = pytester.runpytest("-p", "no:randomly", "-rA")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "opprof: device" not in out
    assert "no baseline" in out or "opprof gate" in out


def test_hooks_on_a_config_that_never_ran_configure_do_nothing(pytester):
    """pytest-xdist's own tests hand plugin hooks such configs (pytester.parseconfig)."""
    config = pytester.parseconfig()
    node = SimpleNamespace(config=config, workeroutput={"opprof_records": "[]"})
    pytest_testnodedown(node, None)
    assert config.stash.get(SESSION, None) is None


def test_a_test_that_does_not_profile_imports_no_gate(pytester):
    """With an option given, a test that does not use the fixture still costs nothing."""
    pytester.makeconftest(MODULES_CONFTEST)
    pytester.makepyfile(test_plain=PLAIN)
    pytester.runpytest_subprocess("-p", "no:randomly", "--opprof-measure=fake") \
        .assert_outcomes(passed=1)
    modules = (pytester.path / "modules.txt").read_text().split()
    assert not {"pytest_opprof.judge.gate", "pytest_opprof.render.verdicts"} & set(modules)


# ---- conflicting flags (class: contradictory flag pairs) -------------------------------

@pytest.mark.parametrize(("first", "second", "second_value"), [
    (a, b, "5%" if b == "--opprof-tolerance" else None) for a, b, _why in options.CONFLICTS])
def test_contradictory_flags_are_one_usage_error(pytester, first, second, second_value):
    pytester.makepyfile(test_plain=PLAIN)
    args = ["--opprof-measure=fake", first, f"{second}={second_value}" if second_value else second]
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {first} and {second} contradict: *"])
    assert len([line for line in result.stderr.lines if line.strip()]) == 1


def test_a_typed_flag_overrides_a_standing_one_of_addopts(pytester):
    """addopts is the project's standing default: --opprof-no-gate turns its strict mode
    off, as it does the ini value's."""
    pytester.makeini("[pytest]\naddopts = --opprof-strict --opprof-tolerance=10%\n")
    pytester.makepyfile(test_profiled=PROFILED)
    result = pytester.runpytest("--opprof-measure=fake", "--opprof-no-gate")
    result.assert_outcomes(passed=1)
    assert "strict" not in result.stdout.str()


# ---- hostile marker, ini and flag values (class: values that reach a traceback) --------

def _marked(**kwargs):
    mark = pytest.mark.opprof(**kwargs).mark
    return SimpleNamespace(nodeid="t.py::test", iter_markers=lambda name: [mark])


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=30)
    | st.sampled_from(["5%", "1e999", "2ms", "1e999s", "nan%", "-1", "0", "1" + "0" * 5000]),
    lambda inner: st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=3)
    | st.lists(inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["skip", "iterations", "tolerance", "max_time"]), value=values)
def test_any_marker_value_is_accepted_or_one_opprof_error_line(key, value):
    try:
        per_test = options.test_settings(_marked(**{key: value}), options.Settings())
    except OpprofError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
        return
    assert 0 <= per_test.skip <= options.MAX_ITERATIONS
    assert 1 <= per_test.iterations <= options.MAX_ITERATIONS
    assert 0 < per_test.tolerance <= 10
    assert all(0 < v <= 10 for v in per_test.tolerances.values())
    assert all(0 < v < float("inf") for v in per_test.budgets.values())


@pytest.mark.parametrize(("marker", "message"), [
    ('max_time={"a": 10**400}', "max_time[[]'a'] must be a duration*, not 10000000000*..."),
    ("iterations=10**400", "iterations=1000000*...: * from 1 to 1000000"),
    ('tolerance={"a": float("nan")}', "tolerance[[]'a'] must lie between 0 and 1000%*"),
    ('max_time={"a": "1e999s"}', "max_time[[]'a'] must be a positive duration*"),
])
def test_huge_marker_values_are_one_line_in_the_run(pytester, marker, message):
    pytester.makepyfile(PROFILED.replace("def test_profiled",
                                         f"import pytest\n@pytest.mark.opprof({marker})\n"
                                         "def test_profiled"))
    result = pytester.runpytest("--opprof-measure=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"opprof: @pytest.mark.opprof on *{message}"])
    assert "Traceback" not in result.stdout.str()


ini_values = st.text(max_size=40) | st.sampled_from(
    ["1" + "0" * 5000, "1e999", "nan", "inf%", "-0", "5%%", "0x10", "\uff11"])


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(["opprof_verbosity", "opprof_skip", "opprof_iterations",
                             "opprof_tolerance", "opprof_strict", "opprof_measure"]),
       raw=ini_values)
def test_any_ini_value_is_accepted_or_one_usage_error_line(name, raw):
    ini = {name: raw}
    config = SimpleNamespace(getoption=lambda name, default=None: None,
                             getini=lambda name: ini.get(name, ""),
                             option=SimpleNamespace(override_ini=None), inipath=None)
    parse = {"opprof_verbosity": options._verbosity, "opprof_skip": options._skip,
             "opprof_iterations": options._iterations, "opprof_tolerance": options._tolerance,
             "opprof_strict": options.parse_strict, "opprof_measure": options._measure}[name]
    try:
        options._resolve(config, name, parse, None)  # type: ignore[arg-type]
    except pytest.UsageError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400


@pytest.mark.parametrize("flag", [
    "--opprof-tolerance=1e999", "--opprof-tolerance=nan", "--opprof-strict=ops,",
    "--opprof-verbosity=99999999999999999999", "--opprof-update-baseline=add"])
def test_huge_flag_values_are_one_usage_error(pytester, flag):
    pytester.makepyfile(test_plain=PLAIN)
    result = pytester.runpytest(flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in result.stderr.str()
    assert len(max(result.stderr.lines, key=len)) < 400
