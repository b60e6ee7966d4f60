"""Timer backends and the factory that picks one.

Importing this package is cheap: the backends (and numpy with them) load when a timer
is first built or one of their classes is first named, so that the plugin's options
module can read :data:`BACKENDS` in sessions that profile nothing. Only
:func:`make_timer` with ``cuda`` (or ``auto`` on a machine with CuPy installed)
imports CuPy.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Timer
    from .cpu import CpuTimer
    from .fake import FakeDevice, FakeTimer

BACKENDS = ("auto", "cpu", "cuda", "fake")

def __getattr__(name: str) -> Any:
    """``from pytest_opprof.timers import CpuTimer`` loads the cpu backend then."""
    if name == "Timer":
        from . import base as module
    elif name == "CpuTimer":
        from . import cpu as module  # type: ignore[no-redef]
    elif name in ("FakeDevice", "FakeTimer"):
        from . import fake as module  # type: ignore[no-redef]
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


class BackendUnavailable(Exception):
    """The backend asked for cannot run here; the message says what to do."""


def _cuda_problem() -> str | None:
    """Why the CUDA backend cannot run here, or None when it can."""
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (pip install 'pytest-opprof[cuda12]' or '[cuda13]')"
    try:
        import cupy

        if not cupy.cuda.is_available():
            return "CuPy is installed but finds no CUDA device"
    except Exception as exc:  # a broken CuPy install raises many kinds of error
        return f"CuPy failed to load: {type(exc).__name__}: {exc}".splitlines()[0]
    return None


def resolve_backend(backend: str) -> str:
    """``auto`` becomes ``cuda`` or ``cpu``; ``cuda`` where it cannot run raises
    :class:`BackendUnavailable`. Only this probes CuPy."""
    if backend in ("cpu", "fake"):
        return backend
    if backend not in ("auto", "cuda"):
        raise BackendUnavailable(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    problem = _cuda_problem()
    if problem is None:
        return "cuda"
    if backend == "cuda":
        raise BackendUnavailable(f"--opprof-backend=cuda: {problem}; use --opprof-backend=auto")
    return "cpu"


def build_timer(kind: str) -> Timer:
    """A new timer of a resolved backend (``cpu``, ``cuda`` or ``fake``)."""
    if kind == "cuda":
        from .cuda import CudaTimer, CupyEvents

        return CudaTimer(CupyEvents())
    if kind == "fake":
        from .fake import FakeTimer

        return FakeTimer()
    from .cpu import CpuTimer

    return CpuTimer()


def make_timer(backend: str) -> Timer:
    """The timer for ``backend``: one of :data:`BACKENDS`."""
    return build_timer(resolve_backend(backend))


__all__ = ["BACKENDS", "BackendUnavailable", "CpuTimer", "FakeDevice", "FakeTimer", "Timer",
           "build_timer", "make_timer", "resolve_backend"]
