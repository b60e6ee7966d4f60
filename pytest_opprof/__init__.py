"""pytest-opprof: per-op profiling and a per-op regression gate for array code.

In tests, use the ``gpu_profiler`` fixture. In library code, name ops with
:func:`op`; it records into whichever profiler is active and costs a global
lookup when none is.
"""

from __future__ import annotations

from .errors import OpprofError
from .profile import OpInfo, Profile
from .profiler import OpScope, PhaseScope, Profiler, is_recording, op

__version__ = "0.1.0"

__all__ = ["OpInfo", "OpScope", "OpprofError", "PhaseScope", "Profile", "Profiler",
           "__version__", "is_recording", "op"]
