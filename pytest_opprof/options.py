"""Flags, their ini twins and the marker, resolved once into frozen settings.

Precedence: the per-test marker, then the command line, then the ini file,
then the defaults below.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from .errors import OpprofError
from .timers import BACKENDS

DEFAULT_VERBOSITY = 0
#: The first iteration pays for compilation, allocation and cold caches.
DEFAULT_SKIP = 1
DEFAULT_ITERATIONS = 20
DEFAULT_BACKEND = "auto"

HELP_VERBOSITY = (
    "opprof report: 0 none (profiles are still taken), 1 forward/backward time per "
    "iteration, 2 also every op in graph order and a per-op-type table "
    f"(default {DEFAULT_VERBOSITY})"
)
HELP_SKIP = ("leave the first N iterations of each profiled test out of every figure "
             f"(default {DEFAULT_SKIP})")
HELP_ITERATIONS = ("iterations run by gpu_profiler.iterations() when neither the call nor "
                   f"the marker gives a number (default {DEFAULT_ITERATIONS})")
HELP_BACKEND = ("timer: cuda (CUDA events through CuPy), cpu (perf_counter_ns), auto (cuda "
                "when CuPy finds a GPU, else cpu), fake (a virtual CUDA device, for testing "
                f"pytest-opprof itself) (default {DEFAULT_BACKEND})")


def whole_number(what: str, minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """A parser for a whole number in [minimum, maximum]; its errors name ``what``."""
    if maximum is None:
        expected = f"a whole number >= {minimum}"
    else:
        expected = ", ".join(str(v) for v in range(minimum, maximum)) + f" or {maximum}"

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be {expected}, not {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"{what} must be {expected}, not {text!r}")
        return value

    return parse


_verbosity = whole_number("the verbosity", 0, 2)
_skip = whole_number("the number of skipped iterations", 0)
_iterations = whole_number("the number of iterations", 1)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("opprof", "per-op profiling (pytest-opprof)")
    group.addoption("--opprof-verbosity", type=_verbosity, default=None, metavar="N",
                    help=HELP_VERBOSITY)
    group.addoption("--opprof-skip", type=_skip, default=None, metavar="N", help=HELP_SKIP)
    group.addoption("--opprof-backend", choices=BACKENDS, default=None, help=HELP_BACKEND)
    parser.addini("opprof_verbosity", HELP_VERBOSITY, default="")
    parser.addini("opprof_skip", HELP_SKIP, default="")
    parser.addini("opprof_iterations", HELP_ITERATIONS, default="")
    parser.addini("opprof_backend", HELP_BACKEND, default="")


def _resolve(config: pytest.Config, name: str, parse: Callable[[str], Any], default: Any) -> Any:
    """The flag if given, else its ini twin (validated here), else ``default``."""
    value = config.getoption(name, None)  # the flag --opprof-x has the dest opprof_x
    if value is not None:
        return value
    raw = str(config.getini(name) or "").strip()
    if not raw:
        return default
    try:
        return parse(raw)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option {name} = {raw!r}: {exc}") from None


def _backend(text: str) -> str:
    if text not in BACKENDS:
        raise argparse.ArgumentTypeError(f"the backend must be one of {', '.join(BACKENDS)}")
    return text


@dataclass(frozen=True)
class Settings:
    """The session-wide settings, resolved once."""

    verbosity: int = DEFAULT_VERBOSITY
    skip: int = DEFAULT_SKIP
    iterations: int = DEFAULT_ITERATIONS
    backend: str = DEFAULT_BACKEND

    @classmethod
    def from_pytest_config(cls, config: pytest.Config) -> Settings:
        return cls(
            verbosity=_resolve(config, "opprof_verbosity", _verbosity, DEFAULT_VERBOSITY),
            skip=_resolve(config, "opprof_skip", _skip, DEFAULT_SKIP),
            iterations=_resolve(config, "opprof_iterations", _iterations, DEFAULT_ITERATIONS),
            backend=_resolve(config, "opprof_backend", _backend, DEFAULT_BACKEND),
        )


@dataclass(frozen=True)
class TestSettings:
    """What applies to one test: the session's settings under its marker."""

    __test__ = False  # not a pytest test class

    skip: int
    iterations: int


MARKER_HELP = ("opprof(skip=N, iterations=N): per-test pytest-opprof settings: skipped "
               "iterations and the default iteration count of gpu_profiler.iterations()")

_MARKER_ARGS: dict[str, tuple[str, int]] = {
    # argument: (what it is, its minimum)
    "skip": ("the number of skipped iterations", 0),
    "iterations": ("the number of iterations", 1),
}


def test_settings(item: pytest.Item, settings: Settings) -> TestSettings:
    """The settings for ``item``; a bad ``opprof`` marker raises :class:`OpprofError`."""
    values: dict[str, int] = {}
    for mark in reversed(list(item.iter_markers("opprof"))):  # the closest marker wins
        where = f"@pytest.mark.opprof on {item.nodeid}"
        if mark.args:
            raise OpprofError(f"{where}: takes keyword arguments only "
                              f"({', '.join(sorted(_MARKER_ARGS))}), got {mark.args!r}")
        for key, value in mark.kwargs.items():
            if key not in _MARKER_ARGS:
                raise OpprofError(f"{where}: unknown argument {key!r}; "
                                  f"accepted: {', '.join(sorted(_MARKER_ARGS))}")
            what, minimum = _MARKER_ARGS[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise OpprofError(f"{where}: {key}={value!r}: {what} must be a whole number "
                                  f">= {minimum}")
            values[key] = value
    return TestSettings(skip=values.get("skip", settings.skip),
                        iterations=values.get("iterations", settings.iterations))
