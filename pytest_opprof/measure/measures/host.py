"""``time``: the host's clock (:func:`time.perf_counter_ns`) around each op."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import GateSettings, Measure, register

if TYPE_CHECKING:
    from ..timers.base import Timer


@register
class Time(Measure):
    name = "time"
    help = "the host's perf_counter_ns around each op"
    figure = "host time"
    source = "perf_counter_ns"
    #: perf_counter_ns plus Python's dispatch jitter.
    gate = GateSettings(floor=500.0, tau_prior=0.025, tau_floor=0.005,
                        jitter=300.0)
    key = "cpu"
    formerly = (("cpu", "events"),)
    threads_matter = True

    def __init__(self, worker: int | None = None) -> None:
        from ..timers.cpu import cpu_name

        self.device = cpu_name()

    def timer(self, skip: int) -> Timer:
        from ..timers.cpu import CpuTimer

        return CpuTimer()
