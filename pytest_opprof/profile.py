"""Moved to :mod:`pytest_opprof.model.profile` (the profile data, Profile and OpInfo).

This alias is removed in 0.3. ``import pytest_opprof.profile`` still gives the moved
module itself (the same object, so patching it patches the real one), with a
DeprecationWarning.
"""

import sys
import warnings

from .model import profile as _moved

warnings.warn("pytest_opprof.profile moved to pytest_opprof.model.profile; "
              "the old path goes in 0.3", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
