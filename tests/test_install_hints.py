"""Every install hint the package prints names what installs: pytest-opprof is on no
package index, so ``pip install 'pytest-opprof[report]'`` fails where a user runs it;
a hint names the extra's own packages, at pyproject.toml's versions."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

import pytest_opprof
from pytest_opprof._extras import EXTRAS, install

ROOT = Path(pytest_opprof.__file__).resolve().parent.parent


def pyproject_extras() -> dict[str, tuple[str, ...]]:
    tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else None
    if tomllib is None:
        pytest.skip("tomllib is Python 3.11's")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = data["project"]["optional-dependencies"]
    return {name: tuple(reqs) for name, reqs in extras.items() if name != "test"}


def test_the_hints_extras_are_pyprojects():
    assert EXTRAS == pyproject_extras()


def test_the_hints_extras_are_the_installed_metadatas():
    """What pip installed (the metadata built from pyproject.toml) says the same."""
    found: dict[str, list[str]] = {}
    for line in importlib.metadata.requires("pytest-opprof") or []:
        match = re.fullmatch(r"(.+?)\s*;\s*extra\s*==\s*['\"]([^'\"]+)['\"]", line)
        if match and match[2] != "test":
            found.setdefault(match[2], []).append(match[1].replace(" ", ""))
    assert {k: tuple(v) for k, v in found.items()} == EXTRAS


def test_install_names_the_packages_and_the_extra():
    assert install("report") == "pip install 'matplotlib>=3.7' (the report extra)"
    assert install("cuda13", "cupti") == ("pip install 'cupy-cuda13x>=13.6' 'cupti-python>=13' "
                                          "'cuda-bindings>=13' (the cuda13 and cupti extras)")


def test_every_printed_hint_uses_install():
    """The messages that say what to install: each is install()'s command."""
    from pytest_opprof.judge.changepoints import NEEDS_RUPTURES
    from pytest_opprof.measure.timers.cupti import INSTALL_HINT
    from pytest_opprof.render.charts import NEEDS_MATPLOTLIB
    from pytest_opprof.run.options import HELP_MEASURE

    assert NEEDS_MATPLOTLIB.endswith(install("report"))
    assert NEEDS_RUPTURES.endswith(install("history"))
    assert INSTALL_HINT == install("cupti")
    assert install("cupti") in HELP_MEASURE


def test_no_message_installs_pytest_opprof_from_an_index():
    """No string in the package tells a user to pip install pytest-opprof[...] (or a bare
    ``pip install pytest-opprof``): every literal, in every module."""
    bad = re.compile(r"pip install[^\"']*?['\"]?pytest-opprof(\[|['\"]|\s*$)")
    found = []
    for path in (ROOT / "pytest_opprof").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    bad.search(node.value):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == []
