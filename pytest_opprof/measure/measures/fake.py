"""The tests' measures (``fake``, ``fake-kernel``; no help, so not offered): the CUDA
timing logic, and CUPTI's, on a virtual device and clock (``timers.fake``)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from . import Measure, Unavailable, register
from .events import Events
from .kernel import Kernel

if TYPE_CHECKING:
    from ..timers.base import Timer
    from ..timers.cupti import KernelTracer


@register
class Fake(Events):
    name = "fake"
    help = ""
    source = "virtual CUDA events"
    gate = replace(Events.gate, floor=0.0)  # exact virtual times
    key = "fake"
    formerly = (("fake", "events"),)

    def __init__(self, worker: int | None = None) -> None:
        from ..timers.fake import FakeDevice

        self.device = FakeDevice.device

    xp = Measure.xp  # numpy, not Events' CuPy

    def probe_ns(self) -> float | None:
        """The virtual machine's probe: a fixed 100 us at its speed
        (``OPPROF_FAKE_MACHINE``, the factor all its work takes; 1 unless set)."""
        from ..timers.fake import machine_speed

        return 100_000 * machine_speed()

    def timer(self, skip: int) -> Timer:
        from ..timers.fake import FakeTimer

        return FakeTimer(tracer=self.tracer)


@register
class FakeKernel(Fake):
    """Kernel time from the fake CUPTI; ``OPPROF_FAKE_CUPTI`` makes it fail as CUPTI
    does (``missing``, ``no-gpu``, ``multiple-subscribers``, ``version``)."""

    name = "fake-kernel"
    figure = Kernel.figure
    source = "fake CUPTI activity records"
    gate = replace(Kernel.gate, floor=0.0)
    key = "fake-kernel"
    formerly = (("fake", "kernel"),)
    header = Kernel.header

    def __init__(self, worker: int | None = None) -> None:
        super().__init__(worker)
        self.tracer = fake_tracer()


def fake_tracer() -> KernelTracer:
    """A started tracer on the fake CUPTI, failing as ``OPPROF_FAKE_CUPTI`` says."""
    from ..timers.cupti import INSTALL_HINT, CuptiUnavailable, KernelTracer
    from ..timers.fake_cupti import FakeCupti, from_environment

    advice = "use --opprof-measure=fake"
    try:
        setting = from_environment()
    except ValueError as exc:
        raise Unavailable(str(exc), advice) from None
    if setting == "missing":
        raise Unavailable(f"cupti-python is not installed ({INSTALL_HINT})", advice)
    tracer = KernelTracer(FakeCupti(None if setting in (None, "ok") else setting))
    try:
        tracer.start()
    except CuptiUnavailable as exc:
        raise Unavailable(str(exc), advice) from None
    return tracer
