"""The one way pytest-opprof runs pytest in a child process, and the one way back.

Each child runs in a process group of its own: Ctrl-C and SIGTERM here end the whole
group (pytest and what it started: xdist workers), wait for it, then raise
KeyboardInterrupt (:class:`Terminated` for SIGTERM), and a signal meant for this process
is not also delivered to the child half way through its write.
"""

from __future__ import annotations

import collections
import contextlib
import json
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
    """What pytest said was wrong, on one line, best first: its argparse ``error:``
    line, its ``ERROR:`` line (a path not found), the first test its short summary names
    as failed with the final count (``FAILED t.py::a - assert 0 ...; 1 failed in
    0.12s``), its last line (a banner without its ``=`` signs)."""
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
    """A conftest that could not be imported or a test file that could not be
    collected, as one line, when the output says so (exit status 4 is also a usage
    error's, so only the output can tell): ``ImportError while loading conftest
    '/p/conftest.py': ModuleNotFoundError: No module named 'x'``."""
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
    """SIGTERM raises :class:`Terminated` while the block runs, so that children are
    stopped and temporary folders removed (by default it ends Python at once, cleaning
    nothing). Off the main thread, or under a handler of someone else's, nothing changes."""
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
    last: str  # :func:`last_line`
    output: str = ""  # stdout and stderr together; empty when it was passed on
    #: With ``records``: None when it wrote none, then maybe why they could not be read.
    records: tuple[TestRecord, ...] | None = None
    records_problem: str = ""
    timed_out: bool = False
    failed: Mapping[str, str] = field(default_factory=dict)  # node id -> pytest's one line
    startup: str | None = None  # :func:`startup_error`


def scratch() -> Path | None:
    """Where this process makes its temporary folders: in the folder of the process
    that started it (:data:`~.options.SCRATCH_VARIABLE`), which removes it once this
    process's group has ended, whatever signal ended it; else in the system's."""
    from .options import SCRATCH_VARIABLE

    found = os.environ.get(SCRATCH_VARIABLE)
    return Path(found) if found else None


def run_pytest(args: Sequence[str], *, cwd: Path | str | None = None,
               env: Mapping[str, str] | None = None, echo: bool = False,
               records: bool = False, timeout: float | None = None,
               wrapper: Sequence[str] = (), python: str | None = None,
               nodeids: Sequence[str] = (), folder: Path | None = None) -> ChildResult:
    """``python -m pytest -p opprof ARGS``, its output passed on as it comes (``echo``)
    or kept. With ``records``, the child plugin (:mod:`.child`) is given a temporary
    folder and what it wrote there is read back; ``nodeids`` go there too, and the
    child runs only those of the tests ARGS collect. That folder is made in ``folder``
    (else :func:`scratch`). ``timeout`` applies to kept output
    only; ``python`` is another environment's (``opprof compare --base-python``).
    OSError when it cannot be started."""
    from .child import read as read_child
    from .options import (
        CHILD_NODEIDS,
        CHILD_PLUGIN,
        CHILD_VARIABLE,
        COUNTING_VARIABLE,
        SCRATCH_VARIABLE,
    )

    with deferred():  # the folder made and known, or not made
        tmp = Path(tempfile.mkdtemp(prefix="opprof-child-", dir=folder or scratch()))
    try:
        environment = {**{k: v for k, v in os.environ.items() if k != COUNTING_VARIABLE},
                       "PYTHONUNBUFFERED": "1", SCRATCH_VARIABLE: str(tmp), **(env or {})}
        if records:
            args, environment[CHILD_VARIABLE] = ["-p", CHILD_PLUGIN, *args], str(tmp)
            if nodeids:
                (tmp / CHILD_NODEIDS).write_text(json.dumps(list(nodeids)), encoding="utf-8")
        command = [*wrapper, python or sys.executable, "-m", "pytest", *PLUGIN_ARGS, *args]
        code, output, timed_out = run_group(command, cwd=cwd, env=environment, echo=echo,
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
    """Any other child (git, a ``--setup`` command), in a group of its own as pytest
    is (a git that started another git, a shell's children): its exit status and
    output. OSError when it cannot be started."""
    environment = None if env is None else {**os.environ, **env}
    code, output, _ = run_group(list(command), cwd=cwd, env=environment, echo=False,
                                timeout=timeout)
    return code, output


def run_group(command: list[str], *, cwd: Path | str | None, env: Mapping[str, str] | None,
              echo: bool, timeout: float | None) -> tuple[int, str, bool]:
    """(exit status, output, whether it timed out). A signal that arrives while it
    starts is held until its pid is known, so that nothing it started is left running.
    A child whose output is kept reads no input (``--pdb`` cannot stop it for a person
    who does not see it)."""
    proc: subprocess.Popen[str] | None = None
    timed_out = False
    with sigterm_as_ctrl_c():
        try:
            with deferred():  # the pid, the group's id, known before Ctrl-C can act
                proc = subprocess.Popen(command, cwd=cwd, env=env, text=True,
                                        errors="replace", stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True,
                                        stdin=None if echo else subprocess.DEVNULL)
            if echo:  # passed on as it comes; the last lines kept for last_line
                tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
                for line in proc.stdout or ():
                    sys.stdout.write(line)
                    sys.stdout.flush()
                    tail.append(line)
                output = "".join(tail)
                proc.wait()
            else:
                try:
                    output = proc.communicate(timeout=timeout)[0]
                except subprocess.TimeoutExpired:
                    end_group(proc)
                    output, timed_out = proc.communicate()[0], True
        except BaseException:  # Ctrl-C, SIGTERM, a closed stdout: the whole group
            if proc is not None:
                end_group(proc)
            raise
        finally:
            if proc is not None and proc.stdout is not None:
                proc.stdout.close()
    return proc.returncode, output, timed_out


def end_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the child's group, then SIGKILL to what is left (workers, a hang) once
    the child has exited or after :data:`GRACE_S`. Groups its descendants made of their
    own (setsid) are found first, while they are still its descendants, and ended with
    it. The child is reaped only after the SIGKILL, so that its pid, the group's id,
    cannot meanwhile name another process. Ctrl-C and SIGTERM wait until it is done."""
    with held():
        if not hasattr(os, "killpg"):  # no process groups (Windows): the child alone
            proc.kill()
            proc.wait()
            return
        groups = [proc.pid, *_strays(proc.pid)]
        _signal(groups, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        while proc.returncode is None and not _exited(proc.pid) \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        _signal(groups, signal.SIGKILL)
        proc.wait()


def _strays(pid: int) -> list[int]:
    """The process groups of ``pid``'s descendants outside its own, from /proc."""
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


def _signal(groups: list[int], sig: signal.Signals) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

