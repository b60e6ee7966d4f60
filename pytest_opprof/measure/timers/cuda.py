"""CUDA events on the current stream, one sync per iteration (``events`` and ``kernel``).
:class:`CudaTimer` talks to the device only through :class:`EventAPI`, so that the same
code runs on CuPy (:class:`CupyEvents`) and on the fake measures' virtual device.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .base import Timer

if TYPE_CHECKING:
    from .cupti import KernelTracer, RawActivities


class EventAPI(Protocol):
    device: str
    xp: ModuleType

    def new_event(self) -> Any: ...
    def record(self, event: Any) -> int: ...  # on the current stream: its id
    def range_push(self, name: str) -> None: ...
    def range_pop(self) -> None: ...
    def synchronize(self, event: Any) -> None: ...
    def elapsed_ns(self, start: Any, end: Any) -> float: ...
    def host_ns(self) -> int: ...


class CudaTimer(Timer):
    """Marks are CUDA events from a pool that grows to the largest iteration (no event is
    created per op per iteration), read after the iteration's one synchronisation; each
    mark's host time is kept as the op's CPU dispatch time.

    With ``share_boundaries`` (the default under the kernel measure), an op's entry
    that comes right after an op's exit (the next op at the same nesting level) records
    no event: it takes the exit's. One event per boundary instead of two; the price is
    that GPU work launched between the two ops (outside both) joins the second op's
    span, as does the device's wait for the host between them. Kernel time, linked by
    correlation, is not affected.
    """

    measure = "events"
    #: The measure of its figures when it traces kernel time.
    traced_measure = "kernel"

    def __init__(self, api: EventAPI, tracer: KernelTracer | None = None, *,
                 share_boundaries: bool | None = None) -> None:
        self.api = api
        self.device = api.device
        self.tracer = tracer
        self._pool: list[Any] = []
        self._host: list[int] = []
        self._streams: list[int] = []
        if tracer is None:
            self.enter_hook, self.exit_hook = api.range_push, api.range_pop
        else:  # the op's external correlation id instead of its NVTX range
            self.measure = self.traced_measure
            self.traces_kernels = True
            self.enter_hook, self.exit_hook = tracer.enter, tracer.exit
        self.share_boundaries = (tracer is not None if share_boundaries is None
                                 else share_boundaries)
        #: Under share_boundaries: the event slot of each mark, and who keeps the flags
        #: (an exit was the last boundary; the next mark is an entry right after it): the
        #: tracer, whose hooks set them (one call per hook), or this timer.
        self._slots: list[int] = []
        self._after_exit = False
        self._share_next = False
        self._flags: Any = self
        if self.share_boundaries:
            if tracer is not None:
                self._flags = tracer
            else:
                self._inner_enter, self._inner_exit = self.enter_hook, self.exit_hook
                self.enter_hook, self.exit_hook = self._enter_shared, self._exit_shared
            self.mark = self._mark_shared  # type: ignore[method-assign]
        self._used = 0
        self._device_ns = np.zeros(0, dtype=np.int64)
        self._host_ns = np.zeros(0, dtype=np.int64)

    @property
    def xp(self) -> ModuleType:
        return self.api.xp

    def begin_iteration(self) -> None:
        self._used = 0
        self._host = []
        self._streams = []
        self._slots = []
        if self.tracer is not None:
            self.tracer.begin_iteration()
        self._flags._after_exit = self._flags._share_next = False

    def _enter_shared(self, name: str) -> None:
        self._share_next = self._after_exit
        self._inner_enter(name)

    def _exit_shared(self) -> None:
        self._after_exit = True
        self._inner_exit()

    def _mark_shared(self) -> int:
        """A mark; an entry right after an exit takes the exit's event."""
        flags = self._flags
        if flags._share_next:
            self._slots.append(self._used - 1)
            self._streams.append(self._streams[-1])
        else:
            i = self._used
            if i == len(self._pool):
                self._pool.append(self.api.new_event())
            self._streams.append(self.api.record(self._pool[i]))
            self._slots.append(i)
            self._used = i + 1
        self._host.append(self.api.host_ns())
        flags._after_exit = flags._share_next = False
        return len(self._slots) - 1

    def mark(self) -> int:
        i = self._used
        if i == len(self._pool):
            self._pool.append(self.api.new_event())
        self._streams.append(self.api.record(self._pool[i]))
        self._host.append(self.api.host_ns())
        self._used = i + 1
        return i

    def end_iteration(self) -> None:
        """The iteration's one synchronisation, then every event's time at once."""
        self._host_ns = np.array(self._host, dtype=np.int64)
        if not self._used:
            self._device_ns = np.zeros(0, dtype=np.int64)
        else:
            pool, elapsed = self._pool, self.api.elapsed_ns
            self.api.synchronize(pool[self._used - 1])
            first = pool[0]
            times = [elapsed(first, pool[i]) for i in range(self._used)]
            self._device_ns = np.rint(np.array(times)).astype(np.int64)
            if self.share_boundaries:  # per mark, from per event
                self._device_ns = self._device_ns[np.array(self._slots, dtype=np.intp)]
        if self.tracer is not None:
            self.tracer.end_iteration()

    def activities(self) -> RawActivities | None:
        return None if self.tracer is None else self.tracer.take()

    def streams(self, marks: Sequence[int]) -> list[int]:
        return [self._streams[i] for i in marks]

    def resolve(self, marks: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        index = np.asarray(marks, dtype=np.intp)
        return self._device_ns[index], self._host_ns[index]


class CupyEvents:
    """:class:`EventAPI` on CuPy (imported when constructed)."""

    def __init__(self) -> None:
        import cupy

        self.xp = cupy
        self._cuda = cupy.cuda
        self._nvtx = cupy.cuda.nvtx
        dev = cupy.cuda.Device()
        name = cupy.cuda.runtime.getDeviceProperties(dev.id)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        self.device = f"{name} (device {dev.id})"
        self.host_ns = time.perf_counter_ns

    def new_event(self) -> Any:
        return self._cuda.Event()

    def record(self, event: Any) -> int:
        stream = self._cuda.get_current_stream()
        event.record(stream)
        return int(stream.ptr)

    def range_push(self, name: str) -> None:
        """An NVTX range per op, so Nsight Systems shows the ops under their names."""
        self._nvtx.RangePush(name)

    def range_pop(self) -> None:
        self._nvtx.RangePop()

    def synchronize(self, event: Any) -> None:
        event.synchronize()

    def elapsed_ns(self, start: Any, end: Any) -> float:
        return float(self._cuda.get_elapsed_time(start, end)) * 1e6


def worker_device(worker_number: int, device_count: int) -> int | None:
    """Xdist workers take the visible devices round robin; None with one or none."""
    if device_count < 2:
        return None
    return worker_number % device_count


def pin_worker(worker_number: int) -> None:
    """Make this xdist worker's device CuPy's current one (CUDA_VISIBLE_DEVICES is left
    as the user set it)."""
    import cupy

    device = worker_device(worker_number, cupy.cuda.runtime.getDeviceCount())
    if device is not None:
        cupy.cuda.Device(device).use()
