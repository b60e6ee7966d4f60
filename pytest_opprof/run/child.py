"""The plugin of the pytest processes :mod:`.launcher` starts, loaded by name there
(``-p pytest_opprof.run.child``) and only there: the processes their tests start inherit
the environment, not the command line.

In the folder :data:`~.options.CHILD_VARIABLE` names, the child's session writes its
records; this plugin keeps the child's cache and temporary folders there (whatever flags
it inherits, ``--lf``, ``--basetemp``, it cannot read or empty the user's) and writes the
tests that failed (the records cannot tell a test that failed before profiling from one
that does not exist there). Under xdist only the controller writes. The node ids it
is to run come in a file there (:data:`~.options.CHILD_NODEIDS`; a command line holds
some thousands at most), the test files that hold them on its command line.

The child that takes a measure's figures for its parent knows it is that child by the
variable its parent set (:data:`~.options.COUNTING_VARIABLE`) with this plugin loaded,
which the processes its tests start do not inherit: never by what runs it (a
``valgrind`` on PATH may be a wrapper that runs the program as it is).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..errors import OpprofError
from .options import CHILD_NODEIDS as NODEIDS
from .options import CHILD_PLUGIN as PLUGIN
from .options import CHILD_RECORDS as RECORDS
from .options import CHILD_VARIABLE, COUNTING_VARIABLE

if TYPE_CHECKING:
    from ..model.records import TestRecord

OUTCOMES = "outcomes.json"

_failed: dict[str, str] = {}


def folder(config: pytest.Config) -> Path | None:
    found = os.environ.get(CHILD_VARIABLE)
    return Path(found) if found and config.pluginmanager.has_plugin(PLUGIN) else None


def counting(config: pytest.Config) -> bool:
    """Whether this process is the child that takes a measure's figures for its parent."""
    return folder(config) is not None and os.environ.get(COUNTING_VARIABLE) == "1"


def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """The child's cache and temporary folders in its folder: after the user's flags
    (the last word), before a ``--``."""
    found = folder(early_config)
    if found is None:
        return
    scratch = [f"--basetemp={found / 'tmp'}"]
    if not early_config.pluginmanager.is_blocked("cacheprovider"):
        scratch += ["-o", f"cache_dir={found / 'cache'}"]
    end = args.index("--") if "--" in args else len(args)
    args[end:end] = scratch


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Only the node ids its parent listed, when it listed them (in collection order)."""
    found = folder(config)
    if found is None or not (found / NODEIDS).exists():
        return
    from ..model.jsontext import Reader
    from ..store.files import read_json

    wanted = set(read_json(found / NODEIDS, Reader(lambda data: [str(n) for n in data])))
    dropped = [item for item in items if item.nodeid not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item.nodeid in wanted]


def pytest_runtest_logreport(report: pytest.TestReport | pytest.CollectReport) -> None:
    """The first failure of each test (its collection, setup, call or teardown): its
    last "E   ..." line (the exception), else its last line."""
    if not report.failed or report.nodeid in _failed:
        return
    lines = [line.strip() for line in str(report.longrepr or "").splitlines() if line.strip()]
    errors = [line.removeprefix("E").strip() for line in lines if line.startswith("E ")]
    when = getattr(report, "when", "collect")
    what = errors[-1] if errors else (lines[-1] if lines else "failed")
    _failed[report.nodeid] = what if when == "call" else f"in its {when}: {what}"


pytest_collectreport = pytest_runtest_logreport


def pytest_sessionfinish(session: pytest.Session) -> None:
    found = folder(session.config)
    if found is not None and not hasattr(session.config, "workerinput"):
        (found / OUTCOMES).write_text(json.dumps(_failed), encoding="utf-8")


def read(path: Path) -> tuple[tuple[TestRecord, ...] | None, str, dict[str, str]]:
    """(records, why they cannot be read, failed tests: node id -> one line); records
    None when it wrote none or they cannot be read."""
    from ..model.jsontext import Reader
    from ..model.records import READER
    from ..store.files import read_json

    try:
        failed = read_json(path / OUTCOMES,
                           Reader(lambda data: {str(k): str(v) for k, v in data.items()}))
    except OpprofError:
        failed = {}
    if not os.path.lexists(path / RECORDS):
        return None, "", failed
    try:
        records = read_json(path / RECORDS, READER)
        return tuple(records), "", failed
    except OpprofError as exc:
        return None, str(exc), failed
