"""Moved to :mod:`pytest_opprof.measure.profiler` (the profiler and the op scopes).

This alias is removed in 0.3. ``import pytest_opprof.profiler`` still gives the moved
module itself (the same object, so patching it patches the real one), with a
DeprecationWarning.
"""

import sys
import warnings

from .measure import profiler as _moved

warnings.warn("pytest_opprof.profiler moved to pytest_opprof.measure.profiler; "
              "the old path goes in 0.3", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
