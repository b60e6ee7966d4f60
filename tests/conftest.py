from __future__ import annotations

import importlib
import importlib.util
import multiprocessing.util
import os
import sys

import hypothesis  # noqa: F401
import pytest

from pytest_opprof.measure import _pyscope

# pytester's in-process runs drop the modules first imported inside them (an inner run's
# or a pytester test's own), and some cannot be loaded twice in one process: numpy's
# C modules (numpy.fft refuses a second load, and scipy, under ruptures, loads it),
# and a half-dropped matplotlib breaks every later chart (two gridspec modules: "Single
# argument to subplot must be a three-digit integer"). So every third-party module the
# package imports, deferred or not, is loaded here, once, before any inner run
# (tests/test_imports.py checks the list against the package's imports).
PRELOADED = ("numpy", "numpy.fft", "ruptures", "matplotlib", "matplotlib.pyplot", "cupy",
             "cupti", "pytest_benchmark.plugin", "pytest_benchmark.stats",
             "pytest_benchmark.utils")


def _preload(name: str) -> None:
    if importlib.util.find_spec(name.split(".")[0]) is None:
        return  # an optional extra that is not installed: its tests skip
    try:
        if name == "matplotlib.pyplot":
            importlib.import_module("matplotlib").use("Agg")
        importlib.import_module(name)
    except (ImportError, OSError):  # installed but not loadable (cupy without CUDA's
        pass  # libraries): the tests of that backend say so themselves


for _name in PRELOADED:
    _preload(_name)

# hypothesis once, for the same reason: its pytest plugin imports it (all of it, through
# pytest's assertion rewriting, which caches nothing under PYTHONDONTWRITEBYTECODE) at the
# end of every run, and pytester's in-process runs dropped it again each time: 2.5-3.7 s
# an inner run when a file without hypothesis tests ran alone. Inner runs also leave the
# plugin out (``-p no:hypothesispytest``, below): no inner test uses hypothesis, and a
# subprocess run would pay the import again.

pytest_plugins = ["pytester"]

#: The tiers, one per test (``pytest -m unit``, ``-m "not e2e"``, ``-m e2e``), by what the
#: test does: ``unit`` runs in this process and starts none; ``pytester`` drives pytest
#: through pytester, or starts a short child process (a launcher, ``python -c``, git,
#: valgrind); ``e2e`` runs whole flows (the example suite, git repositories, the
#: ``opprof`` commands with their pytest children). A test marked e2e or pytester keeps
#: its mark; any other test is ``pytester`` when it takes the pytester fixture, else
#: ``unit``; and a ``unit`` test that starts a process fails, saying which to mark it.
TIERS = ("unit", "pytester", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(tier) for tier in TIERS):
            continue
        tier = "pytester" if "pytester" in getattr(item, "fixturenames", ()) else "unit"
        item.add_marker(tier)


#: The audit events of starting a process (``sys.addaudithook``): what a unit test may
#: not do. multiprocessing's spawn and forkserver start theirs through
#: ``_posixsubprocess`` with no event of their own: :func:`_audited_spawn` adds one.
PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.fork", "os.forkpty", "os.posix_spawn",
                  "os.spawn", "os.exec", "multiprocessing.spawn")
#: The processes the running ``unit`` test started (None while no unit test runs).
_started: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if _started is not None and event.startswith(PROCESS_EVENTS):
        what = args[0] if event == "os.system" else args[1] if len(args) > 1 else None
        _started.append(event if what is None else f"{event}({_shown(what)[:120]})")


def _shown(value: object) -> str:
    """A command as one line: ``python -c pass``, whether given as bytes, str or a list."""
    if isinstance(value, (list, tuple)):
        return " ".join(_shown(part) for part in value)
    return os.fsdecode(value) if isinstance(value, (bytes, str)) else str(value)


def _audited_spawn(original):
    def spawnv_passfds(path, args, passfds):
        sys.audit("multiprocessing.spawn", path, args)
        return original(path, args, passfds)
    return spawnv_passfds


sys.addaudithook(_audit)  # process-wide and for good: it does nothing outside unit tests
multiprocessing.util.spawnv_passfds = _audited_spawn(multiprocessing.util.spawnv_passfds)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """A ``unit`` test that starts a process (in its set-up, call or teardown) fails,
    with one line saying which process and which tier to mark it."""
    global _started
    if item.get_closest_marker("unit") is None:
        return (yield)
    _started = []
    try:
        return (yield)
    finally:
        _started = None


def _check_unit() -> None:
    global _started
    if _started:
        started, _started = _started, []
        pytest.fail(f"tier 'unit' starts no process, and this test started "
                    f"{len(started)}: {started[0]}{' ...' if len(started) > 1 else ''}; "
                    f"mark it @pytest.mark.pytester (a short child) or "
                    f"@pytest.mark.e2e (whole flows)", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    result = yield
    _check_unit()
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    result = yield
    _check_unit()
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    result = yield
    _check_unit()
    return result


def load_cscope():
    """The C hot path; CI sets OPPROF_REQUIRE_CSCOPE=1 so that a failed build fails."""
    try:
        return importlib.import_module("pytest_opprof.measure._cscope")
    except ImportError as exc:
        if os.environ.get("OPPROF_REQUIRE_CSCOPE") == "1":
            pytest.fail(f"the C extension was not built: {exc}")
        pytest.skip("the C extension is not built here (the pure-Python reference is tested)")


@pytest.fixture(params=["c", "python"])
def scope_impl(request):
    """The C hot path and its pure-Python reference, each with a clean sink after."""
    impl = load_cscope() if request.param == "c" else _pyscope
    yield impl
    impl.set_sink(None)


@pytest.fixture
def pytester(pytester: pytest.Pytester, request: pytest.FixtureRequest,
             monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester whose inner runs share the outer run's pytest-randomly seed, never take
    the outer run's xdist worker environment for their own, skip the confirmation re-run
    unless the test is marked ``rerun`` or ``no_opprof_flags``, and leave hypothesis's
    plugin out.

    pytester clears PYTEST_ADDOPTS, so inner runs would shuffle with a seed of their own
    and a failure seen under ``--randomly-seed=N`` would not come back with it; here
    ``-p randomly --randomly-seed=N`` reaches every inner run (in-process and subprocess,
    and the pytest processes the ``opprof`` commands start), and so do
    ``--opprof-no-confirm`` (a regression would otherwise be re-run in a new process, a
    second or more each time) and ``-p no:hypothesispytest``."""
    # an outer run under xdist must not make inner runs look like xdist workers
    # (pytest-benchmark disables itself and warns, an error under -W error)
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    addopts = ["-p", "no:hypothesispytest"]
    if not any(request.node.get_closest_marker(name) for name in ("rerun", "no_opprof_flags")):
        addopts.append("--opprof-no-confirm")
    seed = getattr(request.config.option, "randomly_seed", None)
    if isinstance(seed, int) and request.config.pluginmanager.hasplugin("randomly"):
        addopts += ["-p", "randomly", f"--randomly-seed={seed}"]
    monkeypatch.setenv("PYTEST_ADDOPTS", " ".join(addopts))
    return pytester


@pytest.fixture(autouse=True)
def _not_the_outer_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests run alike in CI and here: ``CI`` (which makes a blind time gate hold its
    regressions) and the fake machine's speed are each test's to set, in every process
    it starts."""
    for name in ("CI", "OPPROF_FAKE_MACHINE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _measures_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-process inner run's conftest.py registers its measure in this process (as
    tests/test_own_measure.py's does): each test gets a copy of the registry, so none
    leaks into the tests that run after it, in any order."""
    from pytest_opprof.measure import measures

    monkeypatch.setattr(measures, "_REGISTRY", dict(measures._REGISTRY))
