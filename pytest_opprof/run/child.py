"""The plugin of the pytest processes pytest-opprof starts (:mod:`.launcher`), loaded
in them by name (``-p pytest_opprof.run.child``), and only there: not in the
processes their tests start, which inherit the environment but not the command line.

:data:`~.options.CHILD_VARIABLE` names the child's folder. The child's session writes
its records there (``Settings.profile_out``); this plugin keeps the child's scratch state
there (its cache and temporary folders: whatever flags it inherits from the user,
``--lf``, ``--cache-clear``, ``--basetemp``, it cannot read, change or empty the user's),
and writes which tests failed, by node id: a test's profile says nothing of a test that
failed before it profiled anything, so the records alone cannot tell a test that failed
from one that does not exist there. Under xdist only the controller writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .options import CHILD_PLUGIN as PLUGIN
from .options import CHILD_VARIABLE

OUTCOMES = "outcomes.json"

_failed: dict[str, str] = {}


def folder(config: pytest.Config) -> Path | None:
    """The child's folder, when ``config`` is a child's."""
    found = os.environ.get(CHILD_VARIABLE)
    return Path(found) if found and config.pluginmanager.has_plugin(PLUGIN) else None


def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """The child's cache and temporary folders in its folder (the last word: after the
    user's, before a ``--``)."""
    found = folder(early_config)
    if found is None:
        return
    scratch = [f"--basetemp={found / 'tmp'}"]
    if not early_config.pluginmanager.is_blocked("cacheprovider"):
        scratch += ["-o", f"cache_dir={found / 'cache'}"]
    end = args.index("--") if "--" in args else len(args)
    args[end:end] = scratch


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
    found = folder(session.config)
    if found is not None and not hasattr(session.config, "workerinput"):
        (found / OUTCOMES).write_text(json.dumps(_failed), encoding="utf-8")


def read(path: Path) -> dict[str, str]:
    """The failed tests (node id -> one line) a child wrote into its folder ``path``;
    empty when it wrote none or the file cannot be read."""
    try:
        data = json.loads((path / OUTCOMES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
