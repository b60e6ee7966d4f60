"""The timers: how each measure (:mod:`pytest_opprof.measure.measures`) takes its marks.

Importing this package is cheap: a timer's module (and numpy with it) loads when one of
its classes is first named (``from pytest_opprof.measure.timers import FakeTimer``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Timer
    from .cpu import CpuTimer
    from .fake import FakeDevice, FakeTimer


def __getattr__(name: str) -> Any:
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


__all__ = ["CpuTimer", "FakeDevice", "FakeTimer", "Timer"]
