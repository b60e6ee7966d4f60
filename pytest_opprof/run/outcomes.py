"""A pytest plugin for the children :mod:`pytest_opprof.run.launcher` starts: which
tests failed, by node id, written to the file named by :data:`OUTCOMES_VARIABLE`.

A test's profile says nothing of a test that failed before it profiled anything (in
its setup, before its loop), so a child's records alone cannot tell a test that failed
from one that does not exist there. Loaded by name (``-p pytest_opprof.run.outcomes``)
in the child; under xdist only the controller writes (it sees every worker's reports).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

#: The environment variable naming the file the outcomes are written to.
OUTCOMES_VARIABLE = "PYTEST_OPPROF_OUTCOMES"
#: The plugin's name, as ``-p`` takes it.
PLUGIN = "pytest_opprof.run.outcomes"

_failed: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A test failed in its setup, call or teardown: kept with pytest's one line."""
    if report.failed and report.nodeid not in _failed:
        _failed[report.nodeid] = _reason(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed and report.nodeid not in _failed:
        _failed[report.nodeid] = _reason(report)


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The failure's last "E   ..." line (the exception), else its last line."""
    lines = [line.strip() for line in str(report.longrepr or "").splitlines() if line.strip()]
    errors = [line.removeprefix("E").strip() for line in lines if line.startswith("E ")]
    when = getattr(report, "when", "collect")
    what = errors[-1] if errors else (lines[-1] if lines else "failed")
    return what if when == "call" else f"in its {when}: {what}"


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get(OUTCOMES_VARIABLE)
    if not path or hasattr(session.config, "workerinput"):
        return
    Path(path).write_text(json.dumps(_failed), encoding="utf-8")


def read(path: Path) -> dict[str, str]:
    """The failed tests (node id -> one line) a child wrote to ``path``; empty when it
    wrote none or the file cannot be read."""
    from ..errors import OpprofError
    from ..model.jsontext import Reader
    from ..store.files import read_json

    try:
        return read_json(path, Reader(lambda data: {str(k): str(v) for k, v in data.items()}))
    except OpprofError:
        return {}
