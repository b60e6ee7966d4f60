from __future__ import annotations

import importlib
import os

import numpy  # noqa: F401
import pytest

from pytest_opprof import _pyscope

# The plugin imports numpy only when a run profiles. pytester's in-process runs drop
# the modules imported inside them, and numpy cannot be loaded twice in one process:
# it is loaded here, once, for every inner run.

pytest_plugins = ["pytester"]


def load_cscope():
    """The C hot path; CI sets OPPROF_REQUIRE_CSCOPE=1 so that a failed build fails."""
    try:
        return importlib.import_module("pytest_opprof._cscope")
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
