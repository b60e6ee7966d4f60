"""Every command the tool prints for the user to run carries the options of the run it
came from and, run as printed, does what it says (issue 28, "hints that work").

Before: "To accept: opprof baseline update TEST", strict mode's "take one with opprof
baseline update" and the conditions' "re-take the baseline with `opprof baseline
update`" dropped the run's ``--opprof-machine-key`` (and its measure, its baseline
folder): run literally, they wrote under ``cpu-AMD_EPYC_2_cores-...`` instead of
``gha-stored``, and the gate went on reading nothing. Now one builder
(``model.hints.Retake``, ``shlex.join``) makes every such command from the run's
settings, and each one is run here, as printed, from where the run was started.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_opprof.model.hints import Retake, stored
from pytest_opprof.store.files import safe_name

from .fakes import six_op_project

NETWORK = "test_net.py::test_net"
#: The run's options: each must reach the printed command.
KEY = "gha stored"  # a space: the command quotes it
FOLDER = "../ci base"


def run_as_printed(command: str, cwd: Path) -> None:
    """``command`` in a shell, from ``cwd``, with this environment's ``opprof`` first on
    PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PATH": path}, timeout=600)
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])


def quoted(line: str) -> str:
    """The command a line names between backticks, or after ``To accept: ``."""
    found = re.search(r"`(opprof baseline update [^`]*)`", line) or \
        re.search(r"To accept: (opprof baseline update .*)$", line)
    assert found, line
    return found[1]


def line_with(result: pytest.RunResult, words: str) -> str:
    (line,) = [line for line in result.stdout.lines if words in line]
    return line


@pytest.mark.e2e
def test_each_printed_command_run_as_printed_writes_where_the_run_reads(pytester, monkeypatch):
    suite = six_op_project(pytester, monkeypatch)
    below = suite.mkdir("below")  # started below the rootdir: node ids are the rootdir's
    monkeypatch.chdir(below)
    run = ["..", f"--opprof-machine-key={KEY}", f"--opprof-baseline-dir={FOLDER}",
           "-o", "opprof_skip=2", "-p", "no:randomly"]

    # strict mode, no baseline yet: its command takes one where the run reads
    result = suite.runpytest(*run, "--opprof-strict")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    command = quoted(line_with(result, "take one with"))
    assert shlex.split(command)[3] == f"../{NETWORK}"
    run_as_printed(command, below)
    result = suite.runpytest(*run, "--opprof-strict")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"{NETWORK}: passed; 6 ops compared*"])

    # a regression: "To accept" accepts it
    monkeypatch.setenv("SLOW", "relu:1.5")
    result = suite.runpytest(*run, "--opprof-no-confirm")
    result.assert_outcomes(failed=1)
    run_as_printed(quoted(line_with(result, "To accept: ")), below)
    result = suite.runpytest(*run)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"{NETWORK}: passed; 6 ops compared*"])

    # other run conditions: the re-take makes them this run's
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    result = suite.runpytest(*run)
    run_as_printed(quoted(line_with(result, "re-take the baseline with")), below)
    result = suite.runpytest(*run)
    result.stdout.fnmatch_lines([f"{NETWORK}: passed; 6 ops compared*"])

    # every baseline went where the run reads, none to the default folder or key
    assert not (suite.path / ".opprof").exists()
    assert [p.name for p in (suite.path / "ci base").iterdir()
            if not p.name.startswith(".")] == [safe_name(KEY)]


def test_a_command_is_quoted_for_the_shell_and_names_tests_from_where_the_run_began():
    hostile = "t.py::test_x[a b'c/$(rm)]"
    retake = Retake(("--opprof-machine-key=a b", "-n", "2"), where="sub/..").of(hostile)
    args = shlex.split(retake.command(runs=5))
    assert args == ["opprof", "baseline", "update", "--runs", "5", hostile,
                    "--opprof-machine-key=a b", "-n", "2"]
    assert Retake(where="..").of(hostile).test_path(hostile) == "../" + hostile
    assert shlex.split(stored("my dir", "k", "time").command()) == [
        "opprof", "baseline", "update", "--opprof-baseline-dir=my dir",
        "--opprof-machine-key=k", "--opprof-measure=time"]
