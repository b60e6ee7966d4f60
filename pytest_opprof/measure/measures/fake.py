"""The fakes the tests measure with (``--opprof-measure=fake`` and ``fake-kernel``): the
CUDA timing logic, and CUPTI's, on a virtual device and clock (``timers.fake``). Not
offered to users: they have no help."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from . import TOLERANCE, GateSettings, Unavailable, register
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
    #: Exact virtual times: no floor.
    gate = GateSettings(tolerance=TOLERANCE, floor=0.0, tau_prior=0.025, tau_floor=0.005,
                        jitter=300.0)
    key = "fake"
    formerly = (("fake", "events"),)
    #: A virtual clock: no machine speed for the reference probe to measure.
    probed = False

    def __init__(self, worker: int | None = None) -> None:
        from ..timers.fake import FakeDevice

        self.device = FakeDevice.device

    @property
    def xp(self) -> ModuleType:
        import numpy

        return numpy

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
    gate = GateSettings(tolerance=TOLERANCE, floor=0.0, tau_prior=Kernel.gate.tau_prior,
                        tau_floor=Kernel.gate.tau_floor, jitter=Kernel.gate.jitter)
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
