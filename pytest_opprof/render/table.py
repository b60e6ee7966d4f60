"""The one table aligner of the terminal reports: columns padded to their display width.

A column's width is what a terminal shows, not ``len``: East Asian wide and fullwidth
characters (CJK, most emoji) take two columns, combining marks and zero-width
characters none. Every table the terminal prints (PaddlePaddle's ``Stat=`` table, the
per-kernel table, the gate's verdict table, ``opprof compare``'s, ``opprof baseline
show``'s and ``opprof history``'s trend lines) goes through :func:`align`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Mapping, Sequence

__all__ = ["align", "cut", "width"]

#: Zero-width: nonspacing and enclosing marks (combining accents, variation selectors).
_ZERO = frozenset({"Mn", "Me"})


def width(text: str) -> int:
    """The columns ``text`` takes on a terminal: 2 for an East Asian wide or fullwidth
    character, 0 for a combining mark or a zero-width character, else 1."""
    if text.isascii():
        return len(text)
    columns = 0
    for char in text:
        if unicodedata.category(char) in _ZERO or char in "\u200b\u200c\u200d\u2060\ufeff":
            continue
        columns += 2 if unicodedata.east_asian_width(char) in "WF" else 1
    return columns


def cut(text: str, columns: int, mark: str = "...") -> str:
    """``text`` if it takes at most ``columns`` on a terminal, else its longest start
    that fits with ``mark`` after it (a wide character is not split, a combining mark
    stays with its character)."""
    if width(text) <= columns:
        return text
    room = columns - width(mark)
    taken, used = [], 0
    for char in text:
        w = width(char)
        if used + w > room:
            break
        taken.append(char)
        used += w
    return "".join(taken) + mark


def align(rows: Sequence[Sequence[str]], right: Collection[int] = (),
          sep: str | Sequence[str] = "  ", minimum: Mapping[int, int] | None = None
          ) -> list[str]:
    """``rows`` as lines with their columns lined up, by display width (:func:`width`).

    Column ``k`` is as wide as its widest cell (at least ``minimum[k]``); the columns in
    ``right`` are right-aligned, the others left-aligned. ``sep`` goes between two
    columns (one string for every gap, or one per gap). Rows may be shorter than others;
    a row's last cell is not padded on its right, and no line ends in spaces.
    """
    columns = max((len(row) for row in rows), default=0)
    widths = [(minimum or {}).get(k, 0) for k in range(columns)]
    for row in rows:
        for k, cell in enumerate(row):
            widths[k] = max(widths[k], width(cell))
    gaps = [sep] * max(columns - 1, 0) if isinstance(sep, str) else list(sep)
    if len(gaps) < columns - 1:
        raise ValueError(f"{len(gaps)} separators for {columns} columns")
    lines = []
    for row in rows:
        parts = []
        for k, cell in enumerate(row):
            fill = " " * (widths[k] - width(cell))
            last = k == len(row) - 1
            parts.append(fill + cell if k in right else cell if last else cell + fill)
            if not last:
                parts.append(gaps[k])
        lines.append("".join(parts).rstrip(" "))
    return lines
