"""What every ``opprof`` command shares: its two ways to end, and argument types.

A command ends with :class:`CommandError` (its message, exit status 1) or
:class:`UsageProblem` (the arguments are wrong: exit status 2); :mod:`pytest_opprof.cli`
prints either as one line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


class CommandError(Exception):
    """Ends the command with its message and exit status 1."""


class UsageProblem(CommandError):
    """Ends the command with its message and exit status 2: the arguments are wrong."""


def whole_number(flag: str) -> Callable[[str], int]:
    """An argparse type for ``flag``: a whole number >= 1, else one usage line."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be a whole number >= 1, not {text!r}")
        return value
    return parse


def last_line(text: str) -> str:
    """What pytest said was wrong: its argparse "error:" line, else its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line.split("error: ", 1)[1] for line in lines if "error: " in line]
    if errors:
        return errors[-1]
    return lines[-1].removeprefix("ERROR: ") if lines else "no output"
