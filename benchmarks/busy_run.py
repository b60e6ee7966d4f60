"""A run taken on a busy machine, on purpose: a pytest plugin for measuring
``opprof baseline update``'s agreement check (benchmarks/agreement_runs.sh).

Loaded with ``-p benchmarks.busy_run``. Each pytest process counts itself in the file
``OPPROF_BUSY_COUNTER``; in the processes that ``OPPROF_BUSY_RUNS`` names (``2,4``) it
keeps ``OPPROF_BUSY_PROCS`` (default 2) busy-loop processes running for the whole
session, as a neighbour's job would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_hogs: list[subprocess.Popen[bytes]] = []


def _this_run() -> int:
    counter = Path(os.environ["OPPROF_BUSY_COUNTER"])
    run = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(run))
    return run


def pytest_sessionstart(session: pytest.Session) -> None:
    busy = {int(n) for n in os.environ.get("OPPROF_BUSY_RUNS", "").split(",") if n}
    if _this_run() in busy:
        for _ in range(int(os.environ.get("OPPROF_BUSY_PROCS", "2"))):
            _hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))


def pytest_sessionfinish(session: pytest.Session) -> None:
    for hog in _hogs:
        hog.kill()
        hog.wait()
