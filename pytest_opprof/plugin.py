"""The pytest plugin: hooks and the ``gpu_profiler`` fixture, each a few lines.

Installed but unused, the plugin is inert: it registers its options and marker and
nothing else. It prints, starts the measure, pins devices and imports numpy, the
profiler, the gate and the renderers only when an ``--opprof-*`` option or an
``opprof_*`` ini value is given (then at configure, with the header lines), or when a
test first uses the ``gpu_profiler`` fixture. State lives in
:class:`~pytest_opprof.run.session.OpprofSession`.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .errors import OpprofError
from .run.options import MARKER_HELP, Settings, add_options, refuse_conflicts, requested

if TYPE_CHECKING:
    from .measure.profiler import Profiler
    from .run.session import OpprofSession

SESSION = pytest.StashKey["OpprofSession"]()
#: Set by this plugin's pytest_configure: a config that never ran it (xdist's tests
#: make such configs) gets no session, whatever hook asks.
CONFIGURED = pytest.StashKey[bool]()
#: On an xdist controller: the run ids its workers had (their instruction-count files).
RUN_IDS = pytest.StashKey[set[str]]()
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


def session(config: pytest.Config) -> OpprofSession:
    """Made on first need: an option given, or the fixture used."""
    found = config.stash.get(SESSION, None)
    if found is None:
        from .run.session import OpprofSession

        found = OpprofSession(config, Settings.from_pytest_config(config))
        config.stash[SESSION] = found
    return found


def existing(config: pytest.Config) -> OpprofSession | None:
    """Hooks of an unused plugin do nothing."""
    return config.stash.get(SESSION, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    """Under a measure a child takes (``--opprof-measure=instructions``), the profiled
    tests are counted in that child before the first test runs (``run.counting``)."""
    opprof = existing(session.config)
    if opprof is not None and not session.config.option.collectonly:
        opprof.count_in_child(session.items)
    return (yield)


def pytest_report_header(config: pytest.Config) -> list[str]:
    opprof = existing(config)
    return opprof.header_lines() if opprof is not None else []


@pytest.fixture
def gpu_profiler(request: pytest.FixtureRequest) -> Iterator[Profiler]:
    """Times every named op of every iteration of the test's workload.

    ``for _ in gpu_profiler.iterations(20):`` runs the workload; inside it,
    ``gpu_profiler.phase("forward")`` and ``gpu_profiler.op("conv2d")`` name what
    runs; ``gpu_profiler.xp`` is cupy where the measure times a GPU, else numpy.
    """
    opprof = session(request.config)
    profiler = opprof.start(request.node)
    try:
        yield profiler
    finally:
        opprof.finish(profiler)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    opprof = existing(item.config)
    if opprof is not None and report.when == "call":
        opprof.after_call(item, report)
    if call.excinfo is not None and isinstance(call.excinfo.value, OpprofError):
        report.longrepr = f"opprof: {call.excinfo.value}"  # its one line, not a traceback
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    opprof = existing(terminalreporter.config)
    if opprof is not None:
        opprof.report(terminalreporter)


@pytest.hookimpl(tryfirst=True)  # before junitxml writes its file: strict's properties
def pytest_sessionfinish(session: pytest.Session) -> None:
    run_ids = session.config.stash.get(RUN_IDS, set())
    if run_ids:
        from .run.counting import remove_shares

        remove_shares(run_ids)
    opprof = existing(session.config)
    if opprof is None:
        return
    if opprof.is_worker:
        opprof.worker_output()
        return
    _judge_strictly(session, opprof)
    try:
        opprof.write_outputs()
    except OpprofError as exc:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(f"ERROR: opprof: {exc}", red=True)
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


def _judge_strictly(session: pytest.Session, opprof: OpprofSession) -> None:
    """Strict mode (``--opprof-strict``): a gated test that could not be judged fails the
    session (exit code 1; the tests' own outcomes stand), said in the summary, in
    ``--junitxml`` (one testsuite property per test) and in the results file."""
    failures = opprof.judge_strictly()
    if not failures:
        return
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    from _pytest.junitxml import xml_key

    xml = session.config.stash.get(xml_key, None)
    if xml is not None:
        for failure in failures:
            xml.add_global_property("opprof_strict_unjudged", f"{failure.nodeid}: {failure.why}")


# -- pytest-xdist (an optional hook: called only where xdist is installed) -------------

@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the controller: a worker's records join the report (a worker that profiled
    something makes the session here)."""
    workeroutput = getattr(node, "workeroutput", None) or {}
    workerinput = getattr(node, "workerinput", None) or {}
    opprof = existing(node.config)
    if opprof is not None and opprof.counting is not None and "testrunuid" in workerinput:
        # where its workers left what they counted (an unused plugin stays inert)
        node.config.stash.setdefault(RUN_IDS, set()).add(str(workerinput["testrunuid"]))
    ours = any(str(key).startswith(WORKER_PREFIX) for key in workeroutput)
    if ours and node.config.stash.get(CONFIGURED, False):
        session(node.config).add_worker_output(workeroutput)
