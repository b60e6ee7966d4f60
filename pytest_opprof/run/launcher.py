"""The one way pytest-opprof runs pytest in a child process, and the one way back.

:func:`run_pytest` starts ``python -m pytest ARGS`` in a process group of its own, its
output passed on (``opprof baseline update``) or kept (the re-run, ``opprof compare``),
and returns a :class:`ChildResult`: the exit code, what went wrong (:func:`last_line`)
and, with ``records=True``, the typed records and failed tests the child wrote into a
folder named here (:mod:`.child`). Ctrl-C and SIGTERM here end the child's whole group
(pytest and what it started: xdist workers), wait for it, then raise KeyboardInterrupt
(:class:`Terminated` for SIGTERM); a signal meant for this process is not also delivered
to the child half way through its write.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..signals import deferred, held

if TYPE_CHECKING:
    from ..model.records import TestRecord

#: The lines of output kept to find the last meaningful one when output is passed on.
TAIL_LINES = 20
#: How long a child group has to end after SIGTERM before it is killed.
GRACE_S = 5.0
#: The plugin asked for by name, first: a ``-p no:opprof`` in the user's addopts does not
#: turn it off in the processes pytest-opprof starts (one on the command line still does).
PLUGIN_ARGS = ("-p", "opprof")


#: pytest's banner lines: ``===== 1 failed in 0.12s =====``, ``!!!! Interrupted: ... !!!!``.
_BANNER = re.compile(r"[=!_-]{3,} ?(.*?) ?[=!_-]{3,}")
#: The short test summary's lines (``-r``): what failed, and why.
_SUMMARY = ("FAILED ", "ERROR ")


def last_line(text: str) -> str:
    """What pytest said was wrong, on one line: its argparse ``error:`` line; else its
    ``ERROR:`` line (a path not found, a usage error); else the first test its short
    summary names as failed, with the final count (``FAILED t.py::a - assert 0 ...; 1
    failed in 0.12s``); else its last line, a banner's text without its ``=`` signs."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line.split("error: ", 1)[1] for line in lines if "error: " in line]
    if errors:
        return errors[-1]
    said = [line.removeprefix("ERROR: ") for line in lines if line.startswith("ERROR: ")]
    if said:
        return said[-1]
    if not lines:
        return "no output"
    banner = _BANNER.fullmatch(lines[-1])
    final = banner.group(1) if banner and banner.group(1) else lines[-1]
    failed = [line for line in lines if line.startswith(_SUMMARY)]
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return failed[0] + more + ("" if final == failed[-1] else f"; {final}")
    return final


def startup_error(output: str) -> str | None:
    """What stopped pytest before it ran a test, as one line, when its output says: a
    conftest that could not be imported (pytest's exit status 4, which is also its
    usage error's), or a test file that could not be collected (exit status 2):
    ``ImportError while loading conftest '/p/conftest.py': ModuleNotFoundError: No
    module named 'x'``; None when it says neither."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        conftest = "while loading conftest" in line
        collecting = line.startswith("_") and " ERROR collecting " in line
        if not (conftest or collecting):
            continue
        what = line.rstrip(".") if conftest else line.strip("_ ").removeprefix("ERROR collecting ")
        error = next((x.removeprefix("E").strip() for x in lines[i + 1:]
                      if x.startswith("E ")), None)
        return f"{what}: {error}" if error else what
    return None


class Terminated(KeyboardInterrupt):
    """SIGTERM: a cancelled CI job, a kill."""


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM is handled as Ctrl-C (raises :class:`Terminated`, a KeyboardInterrupt)
    while the block runs, so that child processes are stopped and temporary folders
    removed (by default SIGTERM ends Python at once, cleaning nothing). Off the main
    thread, or where a handler other than the default is set, nothing changes."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def terminated(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True)
class ChildResult:
    """What a child pytest process did."""

    code: int  # pytest's ExitCode; negative: ended by that signal
    last: str  # what it said last (:func:`last_line`)
    output: str = ""  # stdout and stderr together; empty when it was passed on
    #: With ``records``: its records (None: it wrote none), why they could not be read,
    #: and the tests that failed (node id -> pytest's one line).
    records: tuple[TestRecord, ...] | None = None
    records_problem: str = ""
    timed_out: bool = False  # it ran past its timeout, and was ended
    failed: Mapping[str, str] = field(default_factory=dict)
    #: What stopped pytest before any test ran (:func:`startup_error`), if its output says.
    startup: str | None = None


def pytest_command(args: Sequence[str], python: str | None = None) -> list[str]:
    """``python -m pytest -p opprof ARGS`` (:data:`PLUGIN_ARGS`) with ``python``, this
    interpreter by default."""
    return [python or sys.executable, "-m", "pytest", *PLUGIN_ARGS, *args]


def run_pytest(args: Sequence[str], *, cwd: Path | str | None = None,
               env: Mapping[str, str] | None = None, echo: bool = False,
               records: bool = False, timeout: float | None = None,
               wrapper: Sequence[str] = (), python: str | None = None) -> ChildResult:
    """``python -m pytest ARGS`` in ``cwd``, the environment changed by ``env``, in a
    process group of its own; its output passed on as it comes (``echo``) or kept.
    With ``records``, the child plugin is loaded and given a temporary folder, and the
    child's records and failed tests are read back from it. ``timeout`` (seconds;
    output kept only) ends the child's group when it runs longer. ``python``: the
    interpreter (another environment's, ``opprof compare --base-python``); this one by
    default. OSError when it cannot be started."""
    from .child import read as read_child
    from .options import CHILD_PLUGIN, CHILD_VARIABLE

    with deferred():  # the folder made and known, or not made
        tmp = Path(tempfile.mkdtemp(prefix="opprof-child-"))
    try:
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        if records:
            args, environment[CHILD_VARIABLE] = ["-p", CHILD_PLUGIN, *args], str(tmp)
        code, output, timed_out = run_group([*wrapper, *pytest_command(args, python)],
                                            cwd=cwd, env=environment, echo=echo,
                                            timeout=timeout)
        last, startup = last_line(output), startup_error(output)
        output = "" if echo else output
        if not records or timed_out:
            return ChildResult(code, last, output, timed_out=timed_out, startup=startup)
        found, problem, failed = read_child(tmp)
        return ChildResult(code, last, output, found, problem, failed=failed, startup=startup)
    finally:
        with deferred():  # removed whole: a second Ctrl-C is delivered after
            shutil.rmtree(tmp, ignore_errors=True)


def run_command(command: Sequence[str], *, cwd: Path | str | None = None,
                env: Mapping[str, str] | None = None,
                timeout: float | None = None) -> tuple[int, str]:
    """Any other child (git, a ``--setup`` command): run as pytest is, in a process
    group of its own that Ctrl-C, SIGTERM or an error ends as a whole (a git that
    started another git, a shell's children); its exit status and output (stdout and
    stderr together). OSError when it cannot be started."""
    environment = None if env is None else {**os.environ, **env}
    code, output, _ = run_group(list(command), cwd=cwd, env=environment, echo=False,
                                timeout=timeout)
    return code, output


def run_group(command: list[str], *, cwd: Path | str | None, env: Mapping[str, str] | None,
              echo: bool, timeout: float | None) -> tuple[int, str, bool]:
    """``command`` in a new process group: (exit status, output, whether it timed out).
    A signal that arrives while it starts is held until its pid is known, so that the
    group is always ended: nothing it started is left running. A child whose output is
    kept reads no input (``--pdb`` cannot stop it for a person who does not see it)."""
    proc: subprocess.Popen[str] | None = None
    with sigterm_as_ctrl_c():
        try:
            with deferred():  # the pid, the group's id, known before Ctrl-C can act
                proc = subprocess.Popen(command, cwd=cwd, env=env, text=True,
                                        errors="replace", stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True,
                                        stdin=None if echo else subprocess.DEVNULL)
            output, timed_out = _passed_on(proc) if echo else _kept(proc, timeout)
        except BaseException:  # Ctrl-C, SIGTERM, a closed stdout: the whole group
            if proc is not None:
                end_group(proc)
            raise
        finally:
            if proc is not None and proc.stdout is not None:
                proc.stdout.close()
    return proc.returncode, output, timed_out


def _passed_on(proc: subprocess.Popen[str]) -> tuple[str, bool]:
    """The child's output written to this process's stdout line by line; its last
    lines returned."""
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        tail.append(line)
    proc.wait()
    return "".join(tail), False


def _kept(proc: subprocess.Popen[str], timeout: float | None) -> tuple[str, bool]:
    """The child's whole output, and whether it ran past ``timeout`` (then its group
    is ended)."""
    try:
        output, _ = proc.communicate(timeout=timeout)
        return output, False
    except subprocess.TimeoutExpired:
        end_group(proc)
        output, _ = proc.communicate()
        return output, True


def end_group(proc: subprocess.Popen[str]) -> None:
    """The child's process group ended: SIGTERM, then SIGKILL to what is left (workers,
    a hang) once the child has exited or after :data:`GRACE_S`; waited for. Processes
    the child started that left its group (a session of their own) are found first,
    while they are still its descendants, and ended with it. The child is reaped only
    after the SIGKILL, so that its pid, the group's id, cannot meanwhile name another
    process. Ctrl-C and SIGTERM are ignored until it is done."""
    with held():
        if not hasattr(os, "killpg"):  # no process groups (Windows): the child alone
            proc.kill()
            proc.wait()
            return
        strays = _strays(proc.pid)
        _signal_group(proc.pid, signal.SIGTERM)
        for pgid in strays:
            _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        while proc.returncode is None and not _exited(proc.pid) \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        _signal_group(proc.pid, signal.SIGKILL)
        for pgid in strays:
            _signal_group(pgid, signal.SIGKILL)
        proc.wait()


def _strays(pid: int) -> list[int]:
    """The process groups of ``pid``'s descendants that are not in its group (they
    called setsid), read from /proc; none where there is no /proc."""
    parents: dict[int, list[int]] = {}
    groups: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents.setdefault(int(fields[1]), []).append(int(name))
        groups[int(name)] = int(fields[2])
    found: set[int] = set()
    todo = list(parents.get(pid, []))
    while todo:
        child = todo.pop()
        if groups.get(child, pid) not in (pid, 0):
            found.add(groups[child])
        todo += parents.get(child, [])
    found.discard(os.getpgrp())  # never this process's own group
    return sorted(found)


def _exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (its pid stays taken)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)

