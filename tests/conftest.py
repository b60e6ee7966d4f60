from __future__ import annotations

import importlib
import importlib.util
import os

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

#: The tiers, one per test (``pytest -m unit``, ``-m "not e2e"``, ``-m e2e``). A test marked
#: e2e (or pytester) keeps its mark; any other test is ``pytester`` when it takes the
#: pytester fixture, else ``unit``.
TIERS = ("unit", "pytester", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(tier) for tier in TIERS):
            continue
        tier = "pytester" if "pytester" in getattr(item, "fixturenames", ()) else "unit"
        item.add_marker(tier)


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
