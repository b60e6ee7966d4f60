"""The instruction-count timer of the instructions measure's child, under valgrind.

A mark is :func:`_callgrind.mark`: it dumps the instructions executed since the previous
mark and returns the mark's number. Once the test's loop has ended, :meth:`CallgrindTimer.final`
maps each number to the instructions executed from the test's first mark up to it,
reading the dumps in a native process (:mod:`pytest_opprof.measure.callgrind`): from there
an op's figure is a difference of two marks, as a time is.

Instrumentation is on only from the first counted iteration's start to the end of the
loop: start-up, collection, set-up and the skipped iterations run several times faster
(their marks are numbered but not dumped: their figures are 0).
"""

from __future__ import annotations

import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from ...errors import OpprofError
from ...model import jsontext
from ...model.words import Unit
from .. import callgrind as reader
from .base import Timer, Times

#: Where the child's dumps go: set by the process that starts it under valgrind.
OUT_VARIABLE = "OPPROF_CALLGRIND_OUT"
#: The device counts are taken on: counts depend on the architecture, not on the
#: machine's speed or model.
DEVICE = f"callgrind ({platform.machine()})"
#: The longest the dumps of one test may take to read (a native process).
READ_TIMEOUT_S = 600.0


def extension() -> ModuleType | None:
    """The client requests (``_callgrind``), or None where they were not built."""
    try:
        from .. import _callgrind
    except ImportError:
        return None
    return _callgrind


class CallgrindTimer(Timer):
    measure = "instructions"
    unit = Unit.COUNT
    names_functions = True

    def __init__(self, prefix: str, skip: int = 0) -> None:
        requests = extension()
        if requests is None:
            raise OpprofError("pytest-opprof was built without valgrind's headers")
        self._requests = requests
        self.device = DEVICE
        self.mark = requests.mark
        self.prefix = prefix
        self.skip = skip
        self._iteration = -1
        self._on = False
        self._opening = False
        self._first: int | None = None
        self._last_iteration: int | None = None
        self._counts: dict[int, int] | None = None
        #: Per mark (from the last iteration's first on): its costliest functions.
        self._functions: dict[int, list[tuple[str, int]]] = {}

    def begin_iteration(self) -> None:
        self._iteration += 1
        if self._iteration == self.skip and self._counts is None:
            self._requests.start()  # the first counted iteration
            self._on = True
        self._opening = self._on  # the next marks resolved are this iteration's ops'

    def close(self) -> None:
        if self._on:
            self._requests.stop()
            self._on = False

    def resolve(self, marks: Sequence[int]) -> tuple[Sequence[int], None]:
        if self._opening and marks:  # not a phase list: the iteration's own marks
            self._opening = False
            if self._first is None:
                self._first = int(marks[0])
            self._last_iteration = int(marks[0])
        return marks, None

    def final(self, times: Times) -> Times:
        counts = self._cumulative()  # every mark from the first counted one on
        first = self._first if self._first is not None else float("inf")
        # a skipped iteration's marks were not dumped: 0
        return [counts[int(k)] if k >= first else 0 for k in times]

    def _cumulative(self) -> dict[int, int]:
        """Each mark of the test -> the instructions from its first mark up to it."""
        if self._counts is not None:
            return self._counts
        self.close()
        first, last = self._first, self._requests.last()
        if first is None:
            self._counts = {}
            return self._counts
        found = read(self.prefix, first, last, self._last_iteration or first)
        counts, total = {first: 0}, 0
        for k in range(first + 1, last + 1):
            if k not in found.summary:
                raise OpprofError(f"callgrind wrote no dump for mark {k} under {self.prefix}")
            total += found.summary[k]
            counts[k] = total
        self._counts = counts
        self._functions = found.functions
        return counts

    def mark_functions(self) -> dict[int, list[tuple[str, int]]]:
        return self._functions


class Dumps(NamedTuple):
    """What :func:`read` found: per mark, its interval count and costliest functions."""

    summary: dict[int, int]
    functions: dict[int, list[tuple[str, int]]]


def read(prefix: str, first: int, last: int, functions_from: int) -> Dumps:
    """Marks ``first``..``last`` read back by the reader in a native process (valgrind
    does not follow it), or an OpprofError naming what went wrong."""
    command = [sys.executable, "-I", str(Path(reader.__file__)), prefix, str(first),
               str(last), str(functions_from)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=READ_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OpprofError(f"cannot read callgrind's dumps under {prefix}: {exc}") from None
    said = (done.stderr.strip().splitlines() or ["nothing"])[-1]
    answer = jsontext.Reader(_dumps, "answer", f"its reader said {said}" if done.returncode else "")
    return answer.parse(done.stdout, f"callgrind's dumps under {prefix}")


def _dumps(data: Any) -> Dumps:
    if "error" in data:
        raise OpprofError(str(data["error"]))
    return Dumps({int(k): int(v) for k, v in data["summary"].items()},
                 {int(k): [(str(n), int(c)) for n, c in v]
                  for k, v in data["functions"].items()})
