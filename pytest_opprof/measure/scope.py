"""The scope loader: which module records ops, chosen once per process.

The C hot path (``_cscope``) when it was built, unless ``OPPROF_PURE_PYTHON=1`` asks for
the pure-Python reference (``_pyscope``); both have one API, which ``_cscope.pyi`` states.
The profiler and the instrumented namespace both take their scopes from here.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING

from . import _pyscope


def load() -> ModuleType:
    """The C hot path when it was built, unless OPPROF_PURE_PYTHON=1 asks for the reference."""
    if os.environ.get("OPPROF_PURE_PYTHON", "") not in ("", "0"):
        return _pyscope
    try:
        from . import _cscope
    except ImportError:
        return _pyscope
    return _cscope


#: The module recording ops: ``_cscope`` (C) or ``_pyscope`` (its pure-Python reference).
impl: ModuleType = load()
if TYPE_CHECKING:  # both modules have one API; _cscope.pyi states it
    from ._cscope import OpScope as OpScope
else:
    OpScope = impl.OpScope


__all__ = ["OpScope", "impl", "load"]
