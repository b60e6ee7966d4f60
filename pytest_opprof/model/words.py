"""How a value is written, the same in every message of every layer: a name from user
code (escaped so it cannot forge a line), a figure in its unit (a duration, or a count
such as instructions), a percentage, a verdict's word.

It sits in the model layer, below everything that speaks: the gate's reasons and the
conditions' advice use it as the renderers do (:mod:`pytest_opprof.render` re-exports it).
"""

from __future__ import annotations

import enum
import math
import numbers
import unicodedata

#: Characters a name is never shown with raw: controls (newline, escape), format
#: characters (bidirectional overrides), lone surrogates, line and paragraph separators.
#: Any of them could forge a line of a report or make a file unwritable as UTF-8.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def display_name(name: str) -> str:
    """``name`` (an op name or test id from user code) safe to print on one line: the
    hidden characters as Python escapes (``\\n``, ``\\x1b``, ``\\u202e``, ``\\ud800``),
    everything else (backslashes, non-ASCII letters) as it is."""
    if name.isprintable() and name.isascii():
        return name
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in _HIDDEN else c for c in name)


def _scaled(value: float | None, units: tuple[tuple[str, float], ...], smallest: str) -> str:
    """``value`` in the largest of ``units`` (suffix, scale) it reaches, to three
    figures, else whole with ``smallest``; ``-`` for no value."""
    if value is None or not math.isfinite(value):
        return "-"
    for unit, scale in units:
        if abs(value) >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.0f}{smallest}"


def duration(ns: float | None) -> str:
    """812 ns, 25.1 us, 3.42 ms, 1.25 s; ``-`` for no value."""
    return _scaled(ns, ((" s", 1e9), (" ms", 1e6), (" us", 1e3)), " ns")


def count(n: float | None) -> str:
    """812, 25.1k, 3.42M, 1.25G; ``-`` for no value."""
    return _scaled(n, (("G", 1e9), ("M", 1e6), ("k", 1e3)), "")


class Unit(enum.Enum):
    """What a figure counts: a small closed set, each shown its own way. A measure (the
    objects of :mod:`pytest_opprof.measure.measures`) says which its figures are in, and
    names what its counts count; below it, a figure is known by its unit alone."""

    NANOSECONDS = "ns"
    COUNT = "count"


def amount(value: float | None, unit: Unit = Unit.NANOSECONDS, noun: str = "") -> str:
    """A figure in its unit: a duration (``25.1 us``), or a count followed by ``noun``
    where one is given (``3.42M instr``); ``-`` for no value."""
    if unit is Unit.NANOSECONDS:
        return duration(value)
    text = count(value)
    return f"{text} {noun}" if noun and text != "-" else text


def percent(ratio: float | None) -> str:
    """A ratio as a change: 1.85 -> ``+85.0%``; ``-`` for no value."""
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{(ratio - 1) * 100:+.1f}%"


def whole(value: object) -> int | None:
    """A whole number as user code may give one: an int or numpy's integers
    (``numbers.Integral``: ``np.int64(5)`` from a shape or a loop), as an int; None for
    anything else: a bool (``True`` is no count), a float, a string."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return None


def word(verdict: object) -> str:
    """A verdict as the plain word it stands for (``regressed``), whether it is a string
    or a ``str``-valued enum member (whose ``format`` would give ``Verdict.REGRESSED``)."""
    return str(getattr(verdict, "value", verdict))
