"""The channel of a measure a child takes (issue 28, section 5): each session's (and each
xdist worker's) counting child, how it learns its node ids, how workers share what their
children counted, and how it all ends. Driven through a measure of the tests' own, a
step counter whose figures a child takes as callgrind's are (no valgrind needed), and
where it is the instructions measure's own, through a ``valgrind`` on PATH that is not.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_opprof.measure.measures import instructions
from pytest_opprof.run import counting

from .fakes import STEP_COUNTER, ctrl_c_as_from_a_terminal
from .test_children import none_left

#: A step counter whose figures a child process takes (``child_counts``), as the
#: instructions measure's are: its child runs without a wrapper, known by its variable.
CONFTEST = STEP_COUNTER + '''
import os
from pathlib import Path

CHILD = "STEPPER_OUT"


@register
class Stepper(Measure):
    name = "stepper"
    help = "steps, counted in a child process"
    unit = Unit.COUNT
    counts = ("steps", "steps")
    figure = "steps taken"
    source = "a step counter"
    gate = COUNTED
    baseline_runs = 1
    key = "stepper"
    probed = False
    repeats = True
    child_counts = 3
    child_tool = "stepper"

    def __init__(self, worker=None):
        self.device = "a step counter"
        self.in_child = bool(os.environ.get(CHILD))

    def timer(self, skip):
        return Counter()

    def child_command(self, out):
        return [], {CHILD: str(out)}

    def conditions(self, workerinput):
        """As valgrind's version is for callgrind's counts: known before the child runs."""
        return {**super().conditions(workerinput), "counter": os.environ.get("COUNTER", "1")}


def pytest_configure(config):
    """Each counting child says it started (its pid), where the test asks."""
    if os.environ.get(CHILD) and os.environ.get("PIDS"):
        Path(os.environ["PIDS"], str(os.getpid())).write_text("child")
'''

#: Four tests; in the child only: one ends its worker (KILL_WORKER=gw1), one fails
#: (FAIL=1), each naps (NAP seconds). SCALE multiplies every step.
SUITE = '''
import os
import signal
import time

import pytest

CHILD = bool(os.environ.get("STEPPER_OUT"))


@pytest.mark.parametrize("k", range(4))
def test_ops(gpu_profiler, k):
    if CHILD and os.environ.get("PYTEST_XDIST_WORKER", "") == os.environ.get("KILL_WORKER"):
        os.kill(os.getppid(), signal.SIGKILL)
    if CHILD and os.environ.get("FAIL"):
        raise AssertionError("only in the child")
    if CHILD:
        time.sleep(float(os.environ.get("NAP", "0")))
    for _ in gpu_profiler.iterations(6):
        with gpu_profiler.op("solve"):
            gpu_profiler.timer.step(1000 * (k + 1) * int(os.environ.get("SCALE", "1")))
'''

INNER = ("-p", "no:randomly", "-p", "no:cacheprovider")


@pytest.fixture
def project(pytester, monkeypatch, tmp_path):
    """The step counter's project, a TMPDIR of its own, and ``pids/``."""
    for name in ("KILL_WORKER", "FAIL", "NAP", "SCALE", "COUNTER"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_steps=SUITE)
    pytester.makeini("[pytest]\nopprof_measure = stepper\n")
    for name in ("tmp", "pids"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setenv("PIDS", str(tmp_path / "pids"))
    return pytester


def ours(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("opprof"))


def counted(path: Path) -> dict[str, tuple[int, int]]:
    """Each test's counted iterations (the child's 3, not the 5 of its own process) and
    most steps in one, from the results file."""
    return {t["nodeid"]: (t["counted"], max(t["profile"]["op_time_ns"]))
            for t in json.loads(path.read_text())["tests"]}


def steps(scale: int = 1) -> dict[str, tuple[int, int]]:
    return {f"test_steps.py::test_ops[{k}]": (3, 1000 * (k + 1) * scale) for k in range(4)}


# -- the private folder -------------------------------------------------------------------

@pytest.mark.pytester
def test_a_stale_share_and_a_hostile_run_id_are_neither_read_nor_removed(project, tmp_path):
    """Workers shared through ``$TMPDIR/opprof-counts-<--testrunuid>``: a share left
    there by an earlier session was read as this run's counts, and ``--testrunuid=..``
    made the cleanup remove a folder outside it."""
    tmp = tmp_path / "tmp"
    for run_id in ("stale", "x"):
        stale = tmp / f"opprof-counts-{run_id}"
        stale.mkdir()
        for shard in (0, 1):
            (stale / f"share-{shard}.json").write_text("[" * 100_000)
    victim = tmp / "victim"
    victim.mkdir()
    (victim / "kept.txt").write_text("mine")
    for run_id in ("stale", "../victim", "x/../../victim"):
        result = project.runpytest_subprocess("-n", "2", f"--testrunuid={run_id}", *INNER,
                                              "--opprof-json=out.json")
        result.assert_outcomes(passed=4)
        assert "no steps counted" not in result.stdout.str()
        assert counted(project.path / "out.json") == steps()
    assert (victim / "kept.txt").read_text() == "mine"
    assert ours(tmp) == ["opprof-counts-stale", "opprof-counts-x"]  # theirs, untouched


@pytest.mark.pytester
def test_sessions_side_by_side_under_one_run_id_each_judge_their_own_counts(project):
    commands = []
    for scale in (1, 3):
        env = {**os.environ, "SCALE": str(scale), "NAP": "1"}
        commands.append(subprocess.Popen(
            [sys.executable, "-m", "pytest", "-n", "2", "--testrunuid=ci-42", *INNER,
             f"--opprof-json=out{scale}.json"], cwd=project.path, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for proc in commands:
        output = proc.communicate(timeout=300)[0]
        assert proc.returncode == 0, output
    for scale in (1, 3):
        assert counted(project.path / f"out{scale}.json") == steps(scale)


# -- a lost worker -------------------------------------------------------------------------

@pytest.mark.pytester
def test_a_worker_lost_while_its_child_counts_is_one_line_for_each_of_its_tests(
        project, monkeypatch, tmp_path):
    """Its share never comes: the others waited max(900, 600 x tests) s for it, in
    silence. Worker gw1's child ends gw1; the tests gw1 was to count say so."""
    monkeypatch.setenv("KILL_WORKER", "gw1")
    result = project.runpytest_subprocess("-n", "2", *INNER, timeout=300)
    lines = [line for line in result.stdout.lines if "no steps counted" in line]
    assert len(lines) == 2, result.stdout.str()  # the two tests of gw1's share
    for line in lines:
        assert line.endswith("unjudged; no steps counted: xdist worker gw1 ended before it "
                             "shared what its stepper child counted (it crashed or was "
                             "killed)"), line
    assert ours(tmp_path / "tmp") == []


def test_a_worker_that_never_said_it_started_or_ended_is_waited_for_no_longer(
        tmp_path, monkeypatch):
    monkeypatch.setattr(counting, "START_S", 0.0)
    assert counting.wait_for_share(tmp_path, 1, 900.0, "callgrind").problem == (
        "xdist worker gw1 never said it started (0 s); its tests' counts cannot be found")
    (tmp_path / "worker-1").write_text(counting._identity(os.getpid()))  # lives: its share
    (tmp_path / "share-1.json").write_text(counting.Share(problem="said").to_json())
    assert counting.wait_for_share(tmp_path, 1, 900.0, "callgrind").problem == "said"
    (tmp_path / "share-1.json").unlink()
    pid, started = counting._identity(os.getpid()).split(" ")
    (tmp_path / "worker-1").write_text(f"{pid} {started}0")  # its pid, taken again later
    assert "ended before it shared" in counting.wait_for_share(
        tmp_path, 1, 900.0, "callgrind").problem


def test_a_share_is_read_through_the_one_parse_path(tmp_path):
    (tmp_path / "share-0.json").write_text("[" * 100_000)
    share = counting.Share.read(tmp_path / "share-0.json")
    assert share.problem.startswith(f"{tmp_path / 'share-0.json'}: not JSON")
    assert share.profiles == {}


# -- the node ids --------------------------------------------------------------------------

LONG_IDS = '''
import pytest

@pytest.mark.parametrize("k", [pytest.param(k, id=f"{k:05d}" + "x" * 2000) for k in range(1200)])
def test_long(gpu_profiler, k):
    for _ in gpu_profiler.iterations(6):
        with gpu_profiler.op("solve"):
            gpu_profiler.timer.step(7)
'''


@pytest.mark.pytester
def test_node_ids_beyond_the_kernels_argument_limit_reach_the_child(project):
    """1,200 node ids of 2,000 characters (2.4 MB, past ARG_MAX's 2 MB) went on the
    child's command line: it could not start, and every test was unjudged."""
    (project.path / "test_steps.py").unlink()
    project.makepyfile(test_long=LONG_IDS)
    result = project.runpytest_subprocess(*INNER, "--opprof-json=out.json", "-q")
    result.assert_outcomes(passed=1200)
    tests = json.loads((project.path / "out.json").read_text())["tests"]
    assert len(tests) == 1200
    assert {t["counted"] for t in tests} == {3}  # the child's 3, not the 5 here


# -- the child knows it is the child -----------------------------------------------------

WRAPPER = """#!/bin/sh
# a `valgrind` that runs the program as it is: only its options are dropped
echo "$$" >> "{log}"
if [ "$1" = "--version" ]; then echo "valgrind-3.19.0"; exit 0; fi
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
exec "$@"
"""

PLAIN = """
def test_ops(gpu_profiler):
    for _ in gpu_profiler.iterations(3):
        with gpu_profiler.op("a"):
            pass
"""


def wrapper_on_path(pytester, monkeypatch) -> Path:
    if instructions.extension() is None:
        pytest.skip("pytest-opprof was built without valgrind's headers")
    log = pytester.path / "started.log"
    bin_dir = pytester.mkdir("bin")
    wrapper = bin_dir / "valgrind"
    wrapper.write_text(WRAPPER.format(log=log))
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.mark.pytester
def test_a_valgrind_that_does_not_instrument_starts_no_child_of_the_child(
        pytester, monkeypatch):
    """The child knew itself by "am I under valgrind": under such a wrapper it started
    a child of its own, and that one another (16 nested pytest processes in 30 s)."""
    log = wrapper_on_path(pytester, monkeypatch)
    pytester.makepyfile(test_one=PLAIN)
    result = pytester.runpytest_subprocess("--opprof-measure=instructions", *INNER)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*test_one.py::test_ops: unjudged; no instructions counted: the callgrind child "
        "counted nothing (exit 4): --opprof-measure=instructions: this process was started "
        "to take the figures under callgrind, but callgrind is not running it (is the tool "
        "on PATH a wrapper that runs the program itself?); nothing is counted"])
    # `valgrind --version` in the session and in its child, and one child started
    assert len(log.read_text().split()) == 3


# -- conditions known before the child starts ---------------------------------------------

@pytest.mark.pytester
def test_a_baseline_of_other_conditions_is_refused_before_any_child_starts(
        project, tmp_path, monkeypatch):
    """The refusal came only after the child had counted (76 s under callgrind)."""
    update = project.runpytest_subprocess(*INNER, "--opprof-update-baseline")
    update.assert_outcomes(passed=4)
    assert len(list((tmp_path / "pids").iterdir())) == 1
    monkeypatch.setenv("COUNTER", "2")
    result = project.runpytest_subprocess(*INNER)
    result.assert_outcomes(passed=4)
    assert len(list((tmp_path / "pids").iterdir())) == 1, "no second child"
    result.stdout.fnmatch_lines([
        "opprof: 4 profiled test(s) not counted: their baselines were taken under other "
        "conditions (each test's line says which)",
        "*test_ops?0?: unjudged; the baseline's counter was 1, this run's is 2*"])


# -- a test that fails only in the child ----------------------------------------------------

@pytest.mark.pytester
def test_a_test_failing_only_in_the_child_is_named_and_an_update_stores_nothing(
        project, monkeypatch):
    """It said "profiled nothing (it failed or was skipped there: <the child's last
    line>)", and --opprof-update-baseline exited 0 having stored nothing."""
    monkeypatch.setenv("FAIL", "1")
    result = project.runpytest_subprocess(*INNER, "--opprof-update-baseline")
    result.assert_outcomes(passed=4)  # natively they pass: their outcomes are their own
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*test_ops?0?: unjudged; no steps counted: it failed under stepper: AssertionError: "
        "only in the child",
        "opprof: 4 profiled test(s) passed but their baselines were not stored (each line "
        "above says why): the session fails"])
    assert not (project.path / ".opprof").exists()


# -- signals -------------------------------------------------------------------------------

def _started(pids: Path, count: int, proc: subprocess.Popen[str]) -> list[int]:
    deadline = time.monotonic() + 120
    while len(list(pids.iterdir())) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the children never started"
        time.sleep(0.05)
    return [int(p.name) for p in pids.iterdir()]


@pytest.mark.e2e
@pytest.mark.parametrize("command", [["pytest"], ["pytest_opprof.cli", "baseline", "update"]],
                         ids=["pytest", "opprof-baseline-update"])
def test_sigterm_while_workers_children_count_leaves_no_child_and_no_folder(
        project, monkeypatch, tmp_path, command):
    """SIGTERM to the controller, or to ``opprof baseline update -n 2``: the workers'
    children kept counting, and their folders stayed."""
    monkeypatch.setenv("NAP", "60")
    proc = subprocess.Popen([sys.executable, "-m", *command, "-n", "2", *INNER],
                            cwd=project.path, env=dict(os.environ), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=ctrl_c_as_from_a_terminal)
    children = _started(tmp_path / "pids", 2, proc)
    time.sleep(0.5)  # at their nap
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0, output
    none_left(children)
    assert ours(tmp_path / "tmp") == []
    store = project.path / ".opprof"
    assert not store.exists() or [p.name for p in store.iterdir()] == []
