"""Kernel time in the reports, in words: which measure an op's figures are (and in which
unit), and kernel names cut to a width. The figures themselves (the GPU activities grouped
by name, per op or for the whole test) are in :mod:`pytest_opprof.stats.kernels`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.profile import Profile, unit_of
from . import display_name
from .table import cut

if TYPE_CHECKING:
    from ..model.history import History

#: How each measure is named in a report.
MEASURE_WORDS = {"kernel": "kernel time", "events": "event span",
                 "instructions": "instructions executed"}
#: The widest kernel name the terminal report prints; longer ones end in ``...`` there
#: (the results JSON keeps them whole).
NAME_WIDTH = 72


def measure_word(measure: str) -> str:
    """``kernel`` -> ``kernel time``, ``events`` -> ``event span``."""
    return MEASURE_WORDS.get(measure, display_name(str(measure)))


def history_unit(test: History) -> str:
    """The unit of a history's figures: that of the measure its latest run recorded in
    its run conditions (``ns`` for runs that recorded none)."""
    for run in reversed(test.runs):
        conditions = run.meta.get("conditions")
        if isinstance(conditions, dict) and conditions.get("measure") is not None:
            return unit_of(str(conditions["measure"]))
    return "ns"


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
