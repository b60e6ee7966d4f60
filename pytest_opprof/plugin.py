"""The pytest plugin: hooks and the ``gpu_profiler`` fixture, each a few lines.

Installed but unused, the plugin is inert: it registers its options and marker and
nothing else. It prints, starts the measure, pins devices and imports numpy, the
profiler, the gate and the renderers only when an ``--opprof-*`` option or an
``opprof_*`` ini value is given (then at configure, with the header lines), or when a
test first uses the ``gpu_profiler`` fixture. Each hook hands its moment to one part
of the session (:class:`Opprof`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from .errors import OpprofError
from .run.options import MARKER_HELP, Settings, add_options, refuse_conflicts, requested

if TYPE_CHECKING:
    from .measure.profiler import Profiler
    from .run.channel import WorkerChannel
    from .run.gating import Gate
    from .run.reporter import Reporter
    from .run.session import RunState


class Opprof(NamedTuple):
    """The session: the per-test gate, the reporter, the xdist channel, and their state."""

    state: RunState
    gate: Gate
    reporter: Reporter
    channel: WorkerChannel


#: The session, once made: the hooks of an unused plugin find none and do nothing.
SESSION = pytest.StashKey[Opprof]()
#: Set by this plugin's pytest_configure: a config that never ran it (xdist's tests
#: make such configs) gets no session, whatever hook asks.
CONFIGURED = pytest.StashKey[bool]()
#: What the keys of a worker's records start with (``records.WORKER_KEY``), checked
#: here without importing the records module.
WORKER_PREFIX = "opprof"


pytest_addoption = add_options


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    config.stash[CONFIGURED] = True
    if requested(config):
        refuse_conflicts(config)
        session(config)  # a bad setting or a missing GPU is a usage error before any test


def session(config: pytest.Config) -> Opprof:
    """Made on first need: an option given, or the fixture used."""
    found = config.stash.get(SESSION, None)
    if found is None:
        from .run.channel import WorkerChannel
        from .run.gating import Gate
        from .run.reporter import Reporter
        from .run.session import RunState

        state = RunState(config, Settings.from_pytest_config(config))
        found = Opprof(state, Gate(state), Reporter(state), WorkerChannel(state))
        config.stash[SESSION] = found
    return found


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    """Under a measure a child takes (``--opprof-measure=instructions``), the profiled
    tests are counted in that child before the first test runs (``run.counting``)."""
    opprof = session.config.stash.get(SESSION, None)
    if opprof is not None and not session.config.option.collectonly:
        opprof.gate.count_in_child(session.items)
    return (yield)


def pytest_report_header(config: pytest.Config) -> list[str]:
    opprof = config.stash.get(SESSION, None)
    return opprof.reporter.header_lines() if opprof is not None else []


@pytest.fixture
def gpu_profiler(request: pytest.FixtureRequest) -> Iterator[Profiler]:
    """Times every named op of every iteration of the test's workload.

    ``for _ in gpu_profiler.iterations(20):`` runs the workload; inside it,
    ``gpu_profiler.phase("forward")`` and ``gpu_profiler.op("conv2d")`` name what
    runs; ``gpu_profiler.xp`` is cupy where the measure times a GPU, else numpy.
    """
    gate = session(request.config).gate
    profiler = gate.start(request.node)
    try:
        yield profiler
    finally:
        gate.finish(profiler)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    opprof = item.config.stash.get(SESSION, None)
    if opprof is not None and report.when == "call":
        opprof.gate.after_call(item, report)
    if call.excinfo is not None and isinstance(call.excinfo.value, OpprofError):
        report.longrepr = f"opprof: {call.excinfo.value}"  # its one line, not a traceback
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    opprof = terminalreporter.config.stash.get(SESSION, None)
    if opprof is not None:
        opprof.reporter.summary(terminalreporter)


@pytest.hookimpl(tryfirst=True)  # before junitxml writes its file: strict's properties
def pytest_sessionfinish(session: pytest.Session) -> None:
    opprof = session.config.stash.get(SESSION, None)
    if opprof is None:
        return
    opprof.channel.finish()
    if not opprof.state.is_worker:
        opprof.reporter.finish(session)


def pytest_unconfigure(config: pytest.Config) -> None:
    """After the session, xdist's workers down: what the channel made, removed."""
    opprof = config.stash.get(SESSION, None)
    if opprof is not None:
        opprof.channel.close()


# -- pytest-xdist (an optional hook: called only where xdist is installed) -------------

@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """On the controller, for each worker: what the worker's side of the channel needs."""
    opprof = node.config.stash.get(SESSION, None)
    if opprof is not None:
        opprof.channel.configure_node(node)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the controller: a worker's records join the report (a worker that profiled
    something makes the session here)."""
    ours = any(str(key).startswith(WORKER_PREFIX)
               for key in getattr(node, "workeroutput", None) or {})
    configured = node.config.stash.get(CONFIGURED, False)  # an unused plugin stays inert
    opprof = session(node.config) if ours and configured else node.config.stash.get(SESSION, None)
    if opprof is not None:
        opprof.channel.receive(node)
