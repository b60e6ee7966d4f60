"""The one way a file's text becomes JSON data: a baseline, a results file, a profile, a
worker's or a child's records. Whatever stops the text being JSON is one
:class:`JSONProblem` line (its reader adds the file and what to do), never a traceback:
bytes that are not UTF-8, text that is not JSON, nesting deeper than Python's recursion
limit, or an integer of more digits than Python converts (``int`` refuses 4,300 and more:
a ``ValueError`` that is no ``JSONDecodeError``).
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import OpprofError


class JSONProblem(OpprofError):
    """Text that is not JSON data; the message says why, without the file's name."""


def loads(text: str | bytes) -> Any:
    """``text`` (or UTF-8 bytes) as JSON data; :class:`JSONProblem` when it is none."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONProblem(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONProblem(f"not JSON ({exc})") from None
    except RecursionError:
        raise JSONProblem("not JSON (nested too deeply)") from None
    except ValueError:  # int() of more digits than sys.get_int_max_str_digits()
        raise JSONProblem("holds an integer of thousands of digits, which no count or time "
                          "is") from None
