"""Users' code that uses the fixture and ``op`` type-checks under ``mypy --strict``
(``py.typed`` and ``_cscope.pyi`` ship with the package)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_opprof

pytest.importorskip("mypy", reason="mypy is not installed (it is in the 'test' extra)")

USER_CODE = '''
from collections.abc import Callable

import numpy as np
import pytest_opprof
from pytest_opprof import Profiler


@pytest_opprof.op("scale")
def scale(x: np.ndarray, factor: float) -> np.ndarray:
    return x * factor


@pytest_opprof.op
def shift(x: np.ndarray) -> np.ndarray:
    return x + 1


def test_user(gpu_profiler: Profiler) -> None:
    @gpu_profiler.op
    def double(v: np.ndarray) -> np.ndarray:
        return 2 * v

    x = double(gpu_profiler.xp.ones(4))
    for _ in gpu_profiler.iterations(3):
        with gpu_profiler.op("add"), gpu_profiler.phase("forward"):
            x = x + 1
        with pytest_opprof.op("mul") as scope:
            name: str = scope.name
        y: np.ndarray = scale(shift(x), 2.0)
    keep: Callable[[np.ndarray, float], np.ndarray] = scale
    assert gpu_profiler.profile is not None and name and keep is scale and y is not None
'''

MISTAKES = '''
import pytest_opprof
from pytest_opprof import Profiler


@pytest_opprof.op("scale")
def scale(x: int) -> int:
    return x


def use() -> None:
    scale("not an int")
    with pytest_opprof.op(3):
        pass


def use_fixture(gpu_profiler: Profiler) -> None:
    with gpu_profiler.op(None):
        pass
'''


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module's runs: the second checks only the user's file."""
    return tmp_path_factory.mktemp("mypy_cache")


def _mypy(tmp_path: Path, cache: Path, code: str) -> subprocess.CompletedProcess[str]:
    """mypy --strict on ``code``. An editable install is an import hook mypy cannot follow,
    so the package is found through MYPYPATH, as an installed copy would be; only the
    user's file is reported on."""
    (tmp_path / "test_user.py").write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(cache), "test_user.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "MYPYPATH": str(Path(pytest_opprof.__file__).parent.parent)})


@pytest.mark.e2e
def test_user_code_with_the_fixture_and_op_is_clean_under_mypy_strict(tmp_path, mypy_cache):
    result = _mypy(tmp_path, mypy_cache, USER_CODE)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.e2e
def test_mypy_sees_a_decorated_functions_signature_and_a_wrong_op_name(tmp_path, mypy_cache):
    result = _mypy(tmp_path, mypy_cache, MISTAKES)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'Argument 1 to "scale" has incompatible type "str"; expected "int"' in result.stdout
    assert 'No overload variant of "op" matches argument type "int"' in result.stdout
    assert 'No overload variant of "op" of "Profiler" matches argument type "None"' in (
        result.stdout)
