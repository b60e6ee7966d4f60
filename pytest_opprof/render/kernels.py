"""The measure in the reports (the renderers ask its object for the words and the unit),
and kernel names cut to a width. The figures themselves are in
:mod:`pytest_opprof.stats.kernels`.
"""

from __future__ import annotations

from ..measure import measures
from ..model.profile import Profile
from . import display_name
from .table import cut

#: The widest kernel name the terminal report prints; longer ones end in ``...`` there
#: (the results JSON keeps them whole).
NAME_WIDTH = 72


def measure_of(profile: Profile) -> type[measures.Measure]:
    return measures.of(profile.measure, profile.unit)


def zero_instrumentation(profile: Profile) -> bool:
    """Whether the test named no op and got one op per kernel name (its ops are its
    kernels: no span of their own, no kernels under them)."""
    return bool(profile.meta.get("zero_instrumentation"))


def op_name(profile: Profile, name: str) -> str:
    """An op name for the terminal: kernel names (zero instrumentation) cut to a width."""
    return abbreviate(name) if zero_instrumentation(profile) else display_name(name)


def abbreviate(name: str, width: int = NAME_WIDTH) -> str:
    """``name`` on one line, cut to ``width`` terminal columns with ``...``."""
    return cut(display_name(name), width)
