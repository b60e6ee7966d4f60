"""Child processes and git under real signals (issue 20, class 7): SIGTERM or Ctrl-C to
an ``opprof`` command while its pytest runs with xdist workers, while ``--setup`` runs,
while ``git worktree add`` runs, leaves no process running, no worktree registered, no
temporary folder and no staging folder, and says only what is true.

Every process the scenario starts (each xdist worker's test, the ``--setup`` command's
grandchild, git's hook) writes its pid into ``pids/``; after the command has exited,
none of them may be running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .fakes import committed, ctrl_c_as_from_a_terminal, git
from .test_launcher import _alive

pytestmark = pytest.mark.e2e

#: A test that records its process and then takes long enough to be interrupted.
SLOW = """
import os, time
from pathlib import Path

import pytest

@pytest.mark.parametrize("k", range(4))
def test_slow(gpu_profiler, k):
    Path(os.environ["PIDS"], str(os.getpid())).write_text("worker")
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(3):
        with gpu_profiler.op("matmul"):
            dev.kernel(1000)
    time.sleep(float(os.environ.get("NAP", "30")))
"""


@pytest.fixture
def scenario(tmp_path):
    """A git repository of the slow test; ``pids/``; a TMPDIR of its own."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\nopprof_measure = fake\n")
    (project / "test_slow.py").write_text(SLOW)
    (project / ".gitignore").write_text(".opprof/\n")
    committed(project)
    (tmp_path / "pids").mkdir()
    (tmp_path / "tmp").mkdir()
    return tmp_path


def start(scenario: Path, *argv: str, nap: float = 30) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_ADDOPTS", "PYTEST_XDIST"))}
    env.update(PIDS=str(scenario / "pids"), TMPDIR=str(scenario / "tmp"), NAP=str(nap))
    return subprocess.Popen([sys.executable, "-m", "pytest_opprof.cli", *argv],
                            cwd=scenario / "project", env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=ctrl_c_as_from_a_terminal)


def wait_for_pids(scenario: Path, proc: subprocess.Popen[str], count: int) -> list[int]:
    deadline = time.monotonic() + 120
    while len(list((scenario / "pids").iterdir())) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the processes never started"
        time.sleep(0.05)
    time.sleep(0.2)  # the pid written, the process at its nap
    return pids(scenario)


def pids(scenario: Path) -> list[int]:
    return [int(p.name) for p in (scenario / "pids").iterdir()]


def none_left(found: list[int]) -> None:
    deadline = time.monotonic() + 10  # reparented, they are reaped by init
    while any(_alive(pid) for pid in found) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in found if _alive(pid)] == []


def ended(proc: subprocess.Popen[str], sig: int) -> tuple[str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    return out, err


def worktrees(project: Path) -> list[str]:
    return [line for line in git(project, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


def ours(scenario: Path) -> list[str]:
    """What pytest-opprof left in TMPDIR (pytest's own basetemp, of the workers, is not
    ours)."""
    return [p.name for p in (scenario / "tmp").iterdir() if p.name.startswith("opprof")]


def assert_clean(scenario: Path) -> None:
    project = scenario / "project"
    assert worktrees(project) == [f"worktree {project}"]
    assert ours(scenario) == []
    assert not (project / ".git" / "worktrees").exists() or \
        list((project / ".git" / "worktrees").iterdir()) == []


def ended_cleanly(scenario, proc, pids: int, sig) -> None:
    """``sig`` to a compare once its children wrote ``pids`` pid files: it says the
    worktree was removed, and nothing it started, no worktree, no folder is left."""
    found = wait_for_pids(scenario, proc, pids)
    _, err = ended(proc, sig)
    assert err.strip().splitlines()[-1] == \
        "opprof: interrupted; the temporary worktree was removed"
    none_left(found)
    assert_clean(scenario)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_to_compare_under_xdist_ends_every_worker(scenario, sig):
    proc = start(scenario, "compare", "HEAD", "--pairs", "2", "-n", "2",
                 "-p", "no:cacheprovider")
    ended_cleanly(scenario, proc, 2, sig)


def test_sigterm_during_setup_ends_what_the_setup_started(scenario):
    setup = 'sleep 60 & echo $! > "$PIDS/$!"; wait'
    proc = start(scenario, "compare", "HEAD", "--pairs", "1", "--setup", setup)
    ended_cleanly(scenario, proc, 1, signal.SIGTERM)


HOOK = """#!/bin/sh
sleep 60 &
echo $! > "$PIDS/$!"
echo $$ > "$PIDS/$$"
wait
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_during_git_worktree_add_leaves_no_worktree(scenario, sig):
    """git runs the post-checkout hook inside ``git worktree add`` (as it runs
    ``git reset --hard`` in some versions): interrupted there, the worktree was left
    registered and locked, its folder and the temporary folder behind."""
    hook = scenario / "project" / ".git" / "hooks" / "post-checkout"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    proc = start(scenario, "compare", "HEAD", "--pairs", "1")
    ended_cleanly(scenario, proc, 2, sig)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_to_an_update_under_xdist_ends_every_worker(scenario, sig):
    """It said "nothing was stored or removed", and 15 s later an orphaned worker wrote
    into ``.opprof/.staging-*``."""
    proc = start(scenario, "baseline", "update", "--runs", "2", "-n", "2",
                 "-p", "no:cacheprovider", nap=3)
    found = wait_for_pids(scenario, proc, 2)
    _, err = ended(proc, sig)
    assert err.strip().splitlines()[-1] == "opprof: interrupted; nothing was stored or removed"
    none_left(found)
    time.sleep(4)  # past the workers' nap: had one survived, it would write now
    store = scenario / "project" / ".opprof"
    assert not store.exists() or [p.name for p in store.iterdir()] == []
    assert ours(scenario) == []


STRAY = """
import os, subprocess, time
from pathlib import Path

def test_stray(gpu_profiler):
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    Path(os.environ["PIDS"], str(sleeper.pid)).write_text("stray")
    time.sleep(60)
"""


def test_a_process_that_left_the_childs_group_is_ended_too(scenario):
    """A test's helper in a session of its own (a server started with setsid) is not
    in the child's group; it is found as the child's descendant and ended with it."""
    (scenario / "project" / "test_slow.py").write_text(STRAY)
    proc = start(scenario, "baseline", "update", "--runs", "1", "-p", "no:cacheprovider")
    found = wait_for_pids(scenario, proc, 1)
    ended(proc, signal.SIGTERM)
    none_left(found)


SLOW_COLLECTION = """
import os, time
from pathlib import Path

def pytest_collection(session):
    Path(os.environ["PIDS"], str(os.getpid())).write_text("collecting")
    time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_while_prune_collects_is_an_interruption_not_an_error(scenario, sig):
    """pytest, run in the command's own process, catches the KeyboardInterrupt itself
    and returns its "interrupted" status: it was told as "could not collect the tests"."""
    (scenario / "project" / "conftest.py").write_text(SLOW_COLLECTION)
    proc = start(scenario, "baseline", "prune", "--apply", "-p", "no:cacheprovider")
    wait_for_pids(scenario, proc, 1)
    _, err = ended(proc, sig)
    assert err.strip().splitlines()[-1] == "opprof: interrupted; nothing was stored or removed"
