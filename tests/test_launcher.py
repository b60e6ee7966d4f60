"""The one child launcher (run/launcher.py): real pytest child processes, small and fast.
Exit codes, output passed on or kept, the typed records back, a child killed or past its
timeout, and a signal to the parent ending the child's whole process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_opprof.model.records import TestRecord
from pytest_opprof.run.launcher import last_line, run_pytest

from .fakes import ctrl_c_as_from_a_terminal

PROFILED = """
def test_ok(gpu_profiler):
    for _ in gpu_profiler.iterations(3):
        with gpu_profiler.op("relu"):
            gpu_profiler.timer.device_model.kernel(1000)


def test_broken(gpu_profiler):
    for _ in gpu_profiler.iterations(3):
        with gpu_profiler.op("conv"):
            gpu_profiler.timer.device_model.kernel(2000)
    assert False, "broken on purpose"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\nopprof_measure = fake\n")
    return tmp_path


def write(project: Path, name: str, text: str) -> None:
    (project / name).write_text(textwrap.dedent(text))


@pytest.mark.pytester
def test_exit_codes_and_the_last_line(project):
    write(project, "test_a.py", "def test_a():\n    pass\n")
    write(project, "test_b.py", "def test_b():\n    assert False\n")
    assert run_pytest(["-q", "test_a.py"], cwd=project).code == 0
    failed = run_pytest(["-q", "test_b.py"], cwd=project)
    assert failed.code == 1 and "1 failed" in failed.last and "def test_b" in failed.output
    refused = run_pytest(["--no-such-flag"], cwd=project)
    assert refused.code == 4 and refused.last == "unrecognized arguments: --no-such-flag"
    assert run_pytest(["-q", "-k", "nothing"], cwd=project).code == 5


@pytest.mark.pytester
def test_the_environment_changes_reach_the_child(project):
    write(project, "test_env.py", """
        import os

        def test_env():
            assert os.environ["OPPROF_LAUNCHER_TEST"] == "yes"
            assert os.environ["PYTHONUNBUFFERED"] == "1"
    """)
    assert run_pytest(["-q"], cwd=project, env={"OPPROF_LAUNCHER_TEST": "yes"}).code == 0
    assert run_pytest(["-q"], cwd=project).code == 1


@pytest.mark.pytester
def test_echo_passes_the_output_on_and_keeps_only_the_last_line(project, capsys):
    write(project, "test_a.py", "def test_a():\n    pass\n")
    child = run_pytest(["-q"], cwd=project, echo=True)
    assert (child.code, child.output) == (0, "") and "1 passed" in child.last
    assert "1 passed" in capsys.readouterr().out


@pytest.mark.pytester
def test_the_records_come_back_typed_with_what_passed(project):
    write(project, "test_p.py", PROFILED)
    child = run_pytest(["-q", "--opprof-no-gate"], cwd=project, records=True)
    assert child.code == 1 and child.records_problem == ""
    assert child.records is not None and all(isinstance(r, TestRecord) for r in child.records)
    by_id = {r.nodeid: r for r in child.records}
    assert set(by_id) == {"test_p.py::test_ok", "test_p.py::test_broken"}
    assert by_id["test_p.py::test_ok"].passed and not by_id["test_p.py::test_broken"].passed
    assert [op.name for op in by_id["test_p.py::test_ok"].profile.ops] == ["relu"]


@pytest.mark.pytester
def test_no_records_asked_none_read(project):
    write(project, "test_p.py", PROFILED)
    assert run_pytest(["-q", "--opprof-no-gate"], cwd=project).records is None


@pytest.mark.pytester
def test_a_killed_child_is_its_signal_and_no_records(project):
    write(project, "test_k.py", """
        import os, signal

        def test_k(gpu_profiler):
            for _ in gpu_profiler.iterations(2):
                pass
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    child = run_pytest(["-q", "--opprof-no-gate"], cwd=project, records=True)
    assert child.code == -signal.SIGKILL
    assert child.records is None and child.records_problem == "" and not child.timed_out


@pytest.mark.pytester
def test_a_child_past_its_timeout_is_ended(project):
    write(project, "test_slow.py", "import time\n\ndef test_slow():\n    time.sleep(60)\n")
    started = time.monotonic()
    child = run_pytest(["-q"], cwd=project, timeout=2, records=True)
    assert child.timed_out and child.records is None and child.code != 0
    assert time.monotonic() - started < 30


#: A parent that launches a pytest child whose test starts a grandchild (``sleep``) and
#: writes the grandchild's pid, then waits; the parent says how it ended.
PARENT = """
import sys
from pytest_opprof.run.launcher import run_pytest

try:
    run_pytest(["-q", "-p", "no:cacheprovider", "test_hang.py"], cwd=sys.argv[1])
except KeyboardInterrupt as exc:
    print("interrupted:", type(exc).__name__, flush=True)
    sys.exit(130)
print("finished", flush=True)
"""

HANG = """
import subprocess, time
from pathlib import Path

def test_hang():
    grandchild = subprocess.Popen(["sleep", "120"])
    Path("pids").write_text(str(grandchild.pid))
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie no init reaps, as in some containers, has ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@pytest.mark.pytester
@pytest.mark.parametrize("sig, name", [(signal.SIGTERM, "Terminated"),
                                       (signal.SIGINT, "KeyboardInterrupt")],
                         ids=["sigterm", "sigint"])
def test_a_signal_to_the_parent_ends_the_childs_group_then_interrupts(project, sig, name):
    write(project, "test_hang.py", HANG)
    (project / "parent.py").write_text(PARENT)
    parent = subprocess.Popen([sys.executable, "parent.py", str(project)], cwd=project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=ctrl_c_as_from_a_terminal)
    pids = project / "pids"
    deadline = time.monotonic() + 60
    while not pids.exists() or not pids.read_text():
        assert time.monotonic() < deadline and parent.poll() is None, parent.communicate()
        time.sleep(0.05)
    grandchild = int(pids.read_text())
    parent.send_signal(sig)
    out, err = parent.communicate(timeout=30)
    assert parent.returncode == 130, (out, err)
    assert out.strip() == f"interrupted: {name}"
    deadline = time.monotonic() + 10  # the grandchild, reparented, is reaped by init
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_last_line_prefers_the_argparse_error():
    assert last_line("usage: pytest\npytest: error: unrecognized arguments: -x\n") == \
        "unrecognized arguments: -x"
    assert last_line("\nERROR: file or directory not found: t.py\n\n") == \
        "file or directory not found: t.py"
    assert last_line("") == "no output"
