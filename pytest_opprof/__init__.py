"""pytest-opprof: per-op profiling and a per-op regression gate for array code.

In tests, use the ``gpu_profiler`` fixture. In library code, name ops with
:func:`op`; it records into whichever profiler is active and costs a global
lookup when none is.

The names below load on first use, so that pytest, which imports this package for
its plugin in every session, pays nothing (no numpy) where no test profiles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import OpprofError

if TYPE_CHECKING:
    from .measure.profiler import OpScope, PhaseScope, Profiler, is_recording, op
    from .model.profile import OpInfo, Profile

_PROFILE_NAMES = ("OpInfo", "Profile")
_PROFILER_NAMES = ("OpScope", "PhaseScope", "Profiler", "is_recording", "op")


def __getattr__(name: str) -> Any:
    """``pytest_opprof.op`` loads the profiler then, once (the name is cached here)."""
    if name in _PROFILE_NAMES:
        from .model import profile as module
    elif name in _PROFILER_NAMES:
        from .measure import profiler as module  # type: ignore[no-redef]
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


__all__ = ["OpInfo", "OpScope", "OpprofError", "PhaseScope", "Profile", "Profiler",
           "__version__", "is_recording", "op"]
