"""The pytest plugin: hooks and the ``gpu_profiler`` fixture, each a few lines.

State lives in :class:`~pytest_opprof.session.OpprofSession`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .errors import OpprofError
from .options import MARKER_HELP, Settings, add_options
from .profiler import Profiler
from .session import OpprofSession, pin_worker_device

SESSION = pytest.StashKey[OpprofSession]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    pin_worker_device(config)  # before the backend is probed: CUDA reads it once
    config.stash[SESSION] = OpprofSession(config, Settings.from_pytest_config(config))


def pytest_report_header(config: pytest.Config) -> list[str]:
    return config.stash[SESSION].header_lines()


@pytest.fixture
def gpu_profiler(request: pytest.FixtureRequest) -> Iterator[Profiler]:
    """Times every named op of every iteration of the test's workload.

    ``for _ in gpu_profiler.iterations(20):`` runs the workload; inside it,
    ``gpu_profiler.phase("forward")`` and ``gpu_profiler.op("conv2d")`` name what
    runs; ``gpu_profiler.xp`` is cupy on the CUDA backend, else numpy.
    """
    session = request.config.stash[SESSION]
    profiler = session.start(request.node)
    try:
        yield profiler
    finally:
        session.finish(profiler)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo
) -> Iterator[None]:
    report = yield
    if report.when == "call":
        item.config.stash[SESSION].after_call(item, report)
    OpprofSession.one_line_error(report, call)
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.config.stash[SESSION].report(terminalreporter)


def pytest_sessionfinish(session: pytest.Session) -> None:
    opprof = session.config.stash.get(SESSION, None)
    if opprof is None:
        return
    if opprof.is_worker:
        opprof.worker_output()
        return
    try:
        opprof.write_outputs()
    except OpprofError as exc:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(f"ERROR: opprof: {exc}", red=True)
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


# -- pytest-xdist (optional hooks: called only where xdist is installed) -------------

@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """On the controller, for each worker: the CUDA devices to spread workers over."""
    node.config.stash[SESSION].configure_worker(node.workerinput)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the controller: a worker finished; its records join the report."""
    node.config.stash[SESSION].add_worker_output(getattr(node, "workeroutput", {}))
