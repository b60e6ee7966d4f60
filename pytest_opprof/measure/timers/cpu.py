"""The host's clock: :func:`time.perf_counter_ns` around each op (the ``time`` measure)."""

from __future__ import annotations

import contextlib
import os
import platform
import time
from collections.abc import Sequence
from functools import cache

from .base import Timer


@cache
def cpu_name() -> str:
    """The CPU model and the number of cores this process may use."""
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8",
                                            errors="replace") as f:
        model = next((line.split(":", 1)[1].strip() for line in f
                      if line.startswith("model name")), "")
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return f"{model} ({cores} cores)"


class CpuTimer(Timer):
    measure = "time"

    def __init__(self) -> None:
        self.device = cpu_name()
        self.mark = time.perf_counter_ns

    def resolve(self, marks: Sequence[int]) -> tuple[Sequence[int], None]:
        # the marks are already nanoseconds; they become arrays in bulk at the end
        return marks, None
