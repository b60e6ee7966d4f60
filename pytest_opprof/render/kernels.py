"""The measure in the reports: which measure an op's figures are (the renderers ask its
object for the words and the unit), and kernel names cut to a width. The figures
themselves (the GPU activities grouped by name, per op or for the whole test) are in
:mod:`pytest_opprof.stats.kernels`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..measure import measures
from ..model.profile import Profile
from ..model.words import Unit
from . import display_name
from .table import cut

#: The widest kernel name the terminal report prints; longer ones end in ``...`` there
#: (the results JSON keeps them whole).
NAME_WIDTH = 72


def measure_of(profile: Profile) -> type[measures.Measure]:
    """The measure that took the profile's figures: its words, its unit, its gate."""
    return measures.of(profile.measure, profile.unit)


def run_measure(meta: Mapping[str, Any]) -> type[measures.Measure]:
    """The measure a stored baseline run was taken with (its meta says)."""
    return measures.of(str(meta["measure"]), Unit(meta["unit"]))


def has_kernel_time(profile: Profile) -> bool:
    """Whether the op figures are kernel time (CUPTI) with the event span second (as the
    gate's ``Profile.gated_samples`` decides)."""
    return profile.kernel_samples is not None


def zero_instrumentation(profile: Profile) -> bool:
    """Whether the test named no op and got one op per kernel name (its ops are its
    kernels: no span of their own, no kernels under them)."""
    return bool(profile.meta.get("zero_instrumentation"))


def op_name(profile: Profile, name: str) -> str:
    """An op name for the terminal: kernel names (zero instrumentation) cut to a width."""
    return abbreviate(name) if zero_instrumentation(profile) else display_name(name)


def abbreviate(name: str, width: int = NAME_WIDTH) -> str:
    """``name`` shown on one line (:func:`display_name`), cut to ``width`` terminal
    columns with ``...`` (:func:`~pytest_opprof.render.table.cut`: by display width)."""
    return cut(display_name(name), width)
