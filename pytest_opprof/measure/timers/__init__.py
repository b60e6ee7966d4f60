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

from ..._extras import install

if TYPE_CHECKING:
    from .base import Timer
    from .cpu import CpuTimer
    from .cupti import KernelTracer
    from .fake import FakeDevice, FakeTimer

BACKENDS = ("auto", "cpu", "cuda", "fake")
#: --opprof-measure: kernel time from CUPTI, CUDA event spans, or kernel where it can run;
#: on the CPU, instructions counted by callgrind.
MEASURE_CHOICES = ("auto", "kernel", "events", "instructions")

def __getattr__(name: str) -> Any:
    """``from pytest_opprof.measure.timers import CpuTimer`` loads the cpu backend then."""
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
        return (f"CuPy is not installed ({install('cuda12')} for CUDA 12, or "
                f"{install('cuda13')} for CUDA 13)")
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


def build_timer(kind: str, tracer: KernelTracer | None = None) -> Timer:
    """A new timer of a resolved backend (``cpu``, ``cuda`` or ``fake``); with ``tracer``
    (CUDA or fake), one that measures kernel time."""
    if kind == "cuda":
        from .cuda import CudaTimer, CupyEvents

        return CudaTimer(CupyEvents(), tracer)
    if kind == "fake":
        from .fake import FakeTimer

        return FakeTimer(tracer=tracer)
    from .cpu import CpuTimer

    return CpuTimer()


def start_tracer(kind: str, measure: str) -> tuple[KernelTracer | None, str | None]:
    """The kernel tracer for backend ``kind`` (resolved) under ``--opprof-measure``, and
    the header line saying what is gated on (None on the CPU, where nothing is chosen).

    ``kernel`` where CUPTI cannot start raises :class:`BackendUnavailable` (one line,
    the reason); ``auto`` falls back to events and the line says why. On the fake
    backend, ``auto`` tries the fake CUPTI only when ``OPPROF_FAKE_CUPTI`` is set.
    """
    from .cupti import CuptiUnavailable

    events = ("CUDA event spans" if kind == "cuda" else "fake device event spans")
    if kind == "cpu" or measure == "events":
        if kind != "cpu":
            return None, f"opprof: measure events ({events}; --opprof-measure=events)"
        if measure == "kernel":
            raise BackendUnavailable("--opprof-measure=kernel: kernel time needs the CUDA "
                                     "backend; use --opprof-measure=auto or events on the CPU")
        return None, None
    tracer: KernelTracer | None
    try:
        if kind == "cuda":
            from .cupti import cuda_tracer

            tracer = cuda_tracer()
        else:
            tracer = _fake_tracer(measure)
            if tracer is None:
                return None, f"opprof: measure events ({events})"
    except CuptiUnavailable as exc:
        if measure == "kernel":
            raise BackendUnavailable(f"--opprof-measure=kernel: {exc}; use "
                                     "--opprof-measure=auto or events") from None
        return None, f"opprof: measure events ({events}): kernel time unavailable: {exc}"
    source = "CUPTI" if kind == "cuda" else "fake CUPTI"
    return tracer, (f"opprof: measure kernel (per-op GPU time from {source} activity "
                    "records; event spans kept as the second figure)")


def _fake_tracer(measure: str) -> KernelTracer | None:
    from .cupti import INSTALL_HINT, CuptiUnavailable, KernelTracer
    from .fake_cupti import FakeCupti, from_environment

    try:
        setting = from_environment()
    except ValueError as exc:
        raise BackendUnavailable(str(exc)) from None
    if setting is None and measure == "auto":
        return None
    if setting == "missing":
        raise CuptiUnavailable(f"cupti-python is not installed ({INSTALL_HINT})")
    tracer = KernelTracer(FakeCupti(None if setting in (None, "ok") else setting))
    tracer.start()
    return tracer


def make_timer(backend: str) -> Timer:
    """The timer for ``backend``: one of :data:`BACKENDS`."""
    return build_timer(resolve_backend(backend))


__all__ = ["BACKENDS", "MEASURE_CHOICES", "BackendUnavailable", "CpuTimer", "FakeDevice",
           "FakeTimer", "Timer", "build_timer", "make_timer", "resolve_backend", "start_tracer"]
