"""Which module records ops, chosen once per process: the C hot path (``_cscope``) when it
was built, unless ``OPPROF_PURE_PYTHON=1`` asks for the pure-Python reference
(``_pyscope``); both have one API, which ``_cscope.pyi`` states.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING

from . import _pyscope


def load() -> ModuleType:
    if os.environ.get("OPPROF_PURE_PYTHON", "") not in ("", "0"):
        return _pyscope
    try:
        from . import _cscope
    except ImportError:
        return _pyscope
    return _cscope


impl: ModuleType = load()
if TYPE_CHECKING:  # both modules have one API; _cscope.pyi states it
    from ._cscope import OpScope as OpScope
else:
    OpScope = impl.OpScope


__all__ = ["OpScope", "impl", "load"]
