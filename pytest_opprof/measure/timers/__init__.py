"""The timers: how each measure (:mod:`pytest_opprof.measure.measures`) takes its marks.

Importing this package is cheap: a timer's module (and numpy with it) loads when one of
its classes is first named (``from pytest_opprof.measure.timers import FakeTimer``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Timer
    from .cpu import CpuTimer
    from .fake import FakeDevice, FakeTimer

_MODULES = {"Timer": "base", "CpuTimer": "cpu", "FakeDevice": "fake", "FakeTimer": "fake"}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f".{_MODULES[name]}", __name__)
    globals()[name] = value = getattr(module, name)
    return value


__all__ = ["CpuTimer", "FakeDevice", "FakeTimer", "Timer"]
