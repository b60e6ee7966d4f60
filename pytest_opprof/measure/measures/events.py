"""``events``: each op's CUDA event span, on the device's timeline (CuPy)."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import TYPE_CHECKING

from ..._extras import install
from . import GateSettings, Measure, Unavailable, register

if TYPE_CHECKING:
    from ..timers.base import Timer
    from ..timers.cupti import KernelTracer


def cuda_problem() -> str | None:
    """Why CUDA cannot be timed here, or None when it can. Only this probes CuPy."""
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


@register
class Events(Measure):
    name = "events"
    help = "its CUDA event span, through CuPy"
    figure = "event span"
    source = "CUDA events"
    #: CUDA event resolution (about 0.5 us) plus launch jitter.
    gate = GateSettings(floor=1000.0, tau_prior=0.025, tau_floor=0.005,
                        jitter=300.0)
    key = "cuda"
    formerly = (("cuda", "events"),)
    #: The kernel tracer of this process, started once (kernel time), or None.
    tracer: KernelTracer | None = None

    def __init__(self, worker: int | None = None) -> None:
        problem = cuda_problem()
        if problem is not None:  # no GPU here: auto goes on to the CPU without a word
            raise Unavailable(problem, "use --opprof-measure=auto", said=False)
        from ..timers.cuda import CupyEvents, pin_worker

        if worker is not None:  # an xdist worker takes its own device first
            pin_worker(worker)
        self.device = CupyEvents().device

    @property
    def xp(self) -> ModuleType:
        import cupy

        module: ModuleType = cupy
        return module

    def timer(self, skip: int) -> Timer:
        from ..timers.cuda import CudaTimer, CupyEvents

        return CudaTimer(CupyEvents(), self.tracer)
