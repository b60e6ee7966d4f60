"""Every ``opprof`` command through a pipe closed early (``opprof history | head``), and
every command with the plugin turned off in the ini file's addopts (``-p no:opprof``),
in real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .fakes import committed

SUITE = """
import pytest

@pytest.mark.parametrize("k", range(2))
def test_op(gpu_profiler, k):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(4):
        with gpu_profiler.op("matmul"):
            dev.kernel(1000 * (k + 1))
        with gpu_profiler.op("relu"):
            dev.kernel(300)
"""


def opprof(*args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_ADDOPTS", "PYTEST_XDIST"))}
    for role in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{role}_NAME"] = "opprof"
        env[f"GIT_{role}_EMAIL"] = "opprof@example.com"
    return subprocess.run([sys.executable, "-m", "pytest_opprof.cli", *args], cwd=cwd,
                          text=True, env=env, timeout=300, check=False, **kwargs)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A git repository of a fake-backend suite, its baselines taken, two results files."""
    path = tmp_path_factory.mktemp("pipes")
    (path / "pytest.ini").write_text("[pytest]\nopprof_measure = fake\n")
    (path / "test_suite.py").write_text(SUITE)
    (path / ".gitignore").write_text(".opprof/\n*.json\n*.html\n")
    committed(path)
    done = opprof("baseline", "update", "--runs", "2", "-q", "-p", "no:cacheprovider",
                  cwd=path, capture_output=True)
    assert done.returncode == 0, done
    for name in ("a.json", "b.json"):
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--opprof-no-gate", f"--opprof-json={name}"], cwd=path, check=True,
                       capture_output=True)
    return path


#: Each command, as a user pipes it into ``head``.
COMMANDS = {
    "help": ["--help"],
    "baseline show": ["baseline", "show"],
    "baseline show TEST": ["baseline", "show", "test_op"],
    "baseline prune": ["baseline", "prune", "-q"],
    "baseline update": ["baseline", "update", "--runs", "1", "-q", "-p", "no:cacheprovider"],
    "history": ["history"],
    "report": ["report", "a.json", "-o", "r.html"],
    "compare files": ["compare", "a.json", "b.json"],
    "compare ref": ["compare", "HEAD", "--pairs", "1", "-p", "no:cacheprovider"],
}


@pytest.mark.e2e
@pytest.mark.parametrize("argv", list(COMMANDS.values()), ids=list(COMMANDS))
def test_every_command_ends_quietly_when_its_output_is_closed(project, argv):
    """The reader is gone before the first line (``| head -0``; ``| head`` once its
    lines are read): exit 141 as a process ended by SIGPIPE, nothing on stderr, no
    worktree left, the store as it was."""
    before = sorted(p.name for p in (project / ".opprof").rglob("*"))
    read, write = os.pipe()
    os.close(read)
    try:
        done = opprof(*argv, cwd=project, stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    # argparse's own help swallows the error and exits 0; every command's output: 141
    assert done.returncode == (0 if argv == ["--help"] else 141), done.stderr
    assert done.stderr == ""
    assert sorted(p.name for p in (project / ".opprof").rglob("*")) == before
    listed = subprocess.run(["git", "worktree", "list"], cwd=project, capture_output=True,
                            text=True, check=True).stdout
    assert len(listed.splitlines()) == 1, listed


@pytest.mark.e2e
def test_head_reads_the_first_lines_and_the_command_ends_quietly(project):
    """A real ``| head -1`` on a command writing more than a pipe holds."""
    many = "\n".join(SUITE.replace("test_op", f"test_op{i}") for i in range(60))
    (project / "test_many.py").write_text(many)
    try:
        done = subprocess.run(
            f"{sys.executable} -m pytest_opprof.cli baseline prune -q | head -1; "
            "exit ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", cwd=project,
            capture_output=True, text=True, timeout=300, check=False)
    finally:
        (project / "test_many.py").unlink()
    assert done.returncode in (0, 141), done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert len(done.stdout.splitlines()) <= 1


@pytest.mark.e2e
@pytest.mark.parametrize("argv, says", [
    (["baseline", "show"], "test_suite.py::test_op[0]"),
    (["history"], "test_suite.py::test_op[0]"),
    (["baseline", "prune", "-q"], "opprof: no stale baselines"),
    (["baseline", "update", "--runs", "1", "-q", "-p", "no:cacheprovider"],
     "opprof: baselines of 2 test(s) stored, from 1 run(s)"),
    (["compare", "HEAD", "--pairs", "1", "-p", "no:cacheprovider"], "of 4 op(s) in 2 test(s)"),
], ids=["show", "history", "prune", "update", "compare"])
def test_every_command_works_with_the_plugin_off_in_addopts(project, tmp_path, argv, says):
    """``addopts = -p no:opprof`` turns the plugin off for plain pytest runs; the
    commands still read its settings and run their pytest processes with it."""
    ini = project / "pytest.ini"
    text = ini.read_text()
    ini.write_text(text + "addopts = -p no:opprof\n")
    try:
        done = opprof(*argv, cwd=project, capture_output=True)
    finally:
        ini.write_text(text)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert says in done.stdout
    assert "Traceback" not in done.stderr and "unknown configuration value" not in done.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("argv", [
    ["baseline", "show"], ["history"], ["baseline", "prune", "-q"],
    ["baseline", "update", "--runs", "1", "-q"], ["compare", "HEAD", "--pairs", "1"]],
    ids=["show", "history", "prune", "update", "compare"])
def test_a_conftest_that_cannot_be_imported_is_named_by_every_command(project, argv):
    """It was "pytest refused the arguments" (exit 2): the arguments were fine."""
    conftest = project / "conftest.py"
    conftest.write_text("import no_such_module_here\n")
    try:
        done = opprof(*argv, cwd=project, capture_output=True)
    finally:
        conftest.unlink()
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.splitlines() == [
        f"opprof: pytest could not start: ImportError while loading conftest '{conftest}': "
        "ModuleNotFoundError: No module named 'no_such_module_here'"]


@pytest.mark.e2e
def test_a_collection_error_in_an_update_names_the_error(project):
    broken = project / "test_broken.py"
    broken.write_text("import no_such_module_here\n")
    try:
        done = opprof("baseline", "update", "--runs", "1", "-q", cwd=project,
                      capture_output=True)
    finally:
        broken.unlink()
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.splitlines() == [
        "opprof: baseline run 1 of 1: pytest ran no test (test_broken.py: "
        "ModuleNotFoundError: No module named 'no_such_module_here'); nothing was stored: "
        "fix the error and rerun"]


def test_library_warnings_do_not_reach_the_commands_output(monkeypatch):
    """numpy's "Mean of empty slice" and matplotlib's notices leaked into `report` and
    `compare`: not the user's to act on."""
    import warnings

    import numpy as np

    from pytest_opprof.cli import main
    from pytest_opprof.commands import report

    def noisy(args, extra):
        np.mean(np.array([]))
        warnings.warn("a matplotlib notice", UserWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(report, "run", noisy)
    monkeypatch.setattr(sys, "warnoptions", [])
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        assert main(["report", "r.json"]) == 0
    assert [str(w.message) for w in shown] == []
