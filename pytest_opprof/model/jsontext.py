"""The one parse path: how every file pytest-opprof reads, and every answer a child
gives it, becomes data.

The threat model (docs/reliability.md): what is read was written by this package, git
or the user, and is trusted; what happens to it is damage (cut short, merge-conflicted,
another version's, flipped bytes, two writers). So there is one path and one error
path: whatever stops :meth:`Reader.parse` or the reader's own ``check`` (not UTF-8, not
JSON, a field missing, a number out of range) is one line, ``WHERE: what is wrong; what
to do``, never a traceback. Files are read with one bound on their size
(:data:`MAX_BYTES`, ``store.files.read_json``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import OpprofError

#: The most bytes of one file that are read (a results file of thousands of tests is
#: tens of MB); the writers of baselines and results files stay within it.
MAX_BYTES = 512 * 2**20

T = TypeVar("T")


class Unreadable(OpprofError):
    """What was read cannot be used: ``WHERE: what is wrong; what to do``, one line."""


@dataclass(frozen=True)
class Reader(Generic[T]):
    """How one kind of data is read: ``check`` builds it from JSON data (or raises),
    ``what`` names it, ``fix`` says what to do when it cannot be read."""

    check: Callable[[Any], T]
    what: str = "data"
    fix: str = ""
    error: type[OpprofError] = Unreadable

    def parse(self, text: str | bytes, where: str) -> T:
        """``check(data)`` of the JSON ``text`` (UTF-8 when bytes), or the one line."""
        try:
            data = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, too deep, too long
            raise self.refusal(where, "empty" if not text.strip() else (
                f"not UTF-8 text ({exc.reason} at byte {exc.start})"
                if isinstance(exc, UnicodeDecodeError) else f"not JSON ({exc})")) from None
        try:
            return self.check(data)
        except OpprofError as exc:
            raise self.refusal(where, str(exc)) from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
                RecursionError) as exc:
            raise self.refusal(where, f"malformed {self.what} ({type(exc).__name__}: "
                                      f"{exc})") from None

    def refusal(self, where: str, problem: str) -> OpprofError:
        return self.error(f"{where}: {problem}" + (f"; {self.fix}" if self.fix else ""))
