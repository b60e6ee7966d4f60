"""The fake device: the CUDA timing logic on a virtual device and clock (the tests'
``fake`` and ``fake-kernel`` measures).

:class:`FakeDevice` models one stream as CUDA does: kernels run back to back on the
device timeline while the host goes on; an event's time can be read only once the host
has synchronised past it (earlier raises, as ``cudaErrorNotReady`` would). It counts
event creations, records and synchronisations for tests to hold the timer to its promises.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from .cuda import CudaTimer

if TYPE_CHECKING:
    from .cupti import KernelTracer
    from .fake_cupti import FakeCupti


class EventNotReady(RuntimeError):
    """An event's time was read before the host synchronised past it."""


@dataclass
class FakeEvent:
    time_ns: int | None = None


def machine_speed() -> float:
    """How much longer all work takes on the virtual machine than it says:
    ``OPPROF_FAKE_MACHINE`` (a busy or slower machine, which the fake measure's probe
    sees too), 1 unless set."""
    return float(os.environ.get("OPPROF_FAKE_MACHINE") or 1.0)


@dataclass
class FakeDevice:
    """A virtual GPU with one stream, driven by the test; all its work takes
    :func:`machine_speed` times what it says."""

    #: Host time each kernel launch costs (CPU dispatch).
    launch_ns: int = 0
    host_now: int = 0
    stream_free_at: int = 0
    events_created: int = 0
    records: int = 0
    syncs: int = 0
    kernels: list[int] = field(default_factory=list)
    #: The stream kernels and events go to (a label: the model has one queue).
    stream: int = 0
    #: NVTX ranges as pushed and popped: ("push", name) and ("pop", None).
    ranges: list[tuple[str, str | None]] = field(default_factory=list)

    device: str = "fake CUDA device"
    xp: ModuleType = np
    #: The fake CUPTI that sees this device's work (kernel measure), if any.
    cupti: FakeCupti | None = None
    speed: float = field(default_factory=machine_speed)

    def kernel(self, ns: int, name: str = "kernel") -> None:
        """Queue a kernel called ``name`` that runs ``ns`` on the device."""
        self._launch("kernel", name, ns)
        self.kernels.append(int(ns))

    def memcpy(self, ns: int, direction: str = "HtoD") -> None:
        """Queue a copy (``HtoD``, ``DtoH``, ``DtoD``, ``HtoH``, ``PtoP``) of ``ns``."""
        self._launch("memcpy", direction, ns)

    def memset(self, ns: int) -> None:
        self._launch("memset", "", ns)

    def _launch(self, kind: str, name: str, ns: int) -> None:
        start = max(self.host_now, self.stream_free_at)
        self.stream_free_at = start + int(ns * self.speed)
        self.host_now += self.launch_ns
        if self.cupti is not None:
            self.cupti.launch(kind, name, start, self.stream_free_at, self.stream)

    def cpu(self, ns: int) -> None:
        """Spend ``ns`` of host time (Python overhead, host-side work)."""
        self.host_now += int(ns * self.speed)

    # the EventAPI
    def new_event(self) -> FakeEvent:
        self.events_created += 1
        return FakeEvent()

    def record(self, event: FakeEvent) -> int:
        self.records += 1
        event.time_ns = max(self.host_now, self.stream_free_at)
        self.stream_free_at = event.time_ns
        return self.stream

    def range_push(self, name: str) -> None:
        self.ranges.append(("push", name))

    def range_pop(self) -> None:
        self.ranges.append(("pop", None))

    def synchronize(self, event: FakeEvent) -> None:
        self.syncs += 1
        assert event.time_ns is not None, "synchronize on an event never recorded"
        self.host_now = max(self.host_now, event.time_ns)

    def elapsed_ns(self, start: FakeEvent, end: FakeEvent) -> float:
        if (start.time_ns is None or end.time_ns is None
                or max(start.time_ns, end.time_ns) > self.host_now):
            raise EventNotReady("event time read before the host synchronised past it")
        return float(end.time_ns - start.time_ns)

    def host_ns(self) -> int:
        return self.host_now


class FakeTimer(CudaTimer):
    """:class:`CudaTimer` on a :class:`FakeDevice` (``--opprof-measure=fake``)."""

    measure = "fake"
    traced_measure = "fake-kernel"

    def __init__(self, device: FakeDevice | None = None,
                 tracer: KernelTracer | None = None, *,
                 share_boundaries: bool | None = None) -> None:
        device = device or FakeDevice()
        if tracer is not None:
            from .fake_cupti import FakeCupti

            assert isinstance(tracer.api, FakeCupti), "the fake device needs the fake CUPTI"
            device.cupti = tracer.api
            tracer.api.now = lambda: device.host_now
        super().__init__(device, tracer, share_boundaries=share_boundaries)

    @property
    def device_model(self) -> FakeDevice:
        """The virtual device, for tests to queue kernels and spend host time on."""
        assert isinstance(self.api, FakeDevice)  # what __init__ was given
        return self.api
