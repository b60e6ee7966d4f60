"""The interface every measure's timer implements. A timer hands out *marks*, opaque
tokens taken on the hot path; nothing is converted to time until the iteration ends, then
:meth:`Timer.end_iteration` synchronises at most once and :meth:`Timer.resolve` turns
the marks into nanoseconds on one timeline.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from ...model.words import Unit

if TYPE_CHECKING:
    from .cupti import RawActivities

#: A timeline of an iteration's marks in integer nanoseconds: a list or an int64 array.
Times = Sequence[int] | np.ndarray

class Timer(ABC):
    """A clock for op boundaries. ``mark`` is an attribute, not a method, so that the CPU
    timer binds it to :func:`time.perf_counter_ns` and the hot path pays for one call."""

    #: The measure whose figures it takes (``pytest_opprof.measure.measures``), as a
    #: profile of it records, and their unit; "": the session's measure, whatever it is.
    measure: str = ""
    unit: Unit = Unit.NANOSECONDS
    device: str
    mark: Callable[[], Any]
    #: Whether it traces the GPU activities each op launched (:meth:`activities`), and
    #: names each interval's costliest functions (:meth:`mark_functions`).
    traces_kernels: bool = False
    names_functions: bool = False

    @property
    def xp(self) -> ModuleType:
        """The array module of the timer's device: numpy but on a GPU."""
        return np

    def begin_iteration(self) -> None:  # noqa: B027 - optional hook
        """Before the first mark of an iteration."""

    def end_iteration(self) -> None:  # noqa: B027 - optional hook
        """After the last mark of an iteration; may synchronise once."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Once the test's loop has ended (or was abandoned)."""

    def final(self, times: Times) -> Times:
        """An iteration's resolved times as the profile keeps them: identity, but where a
        mark's value is known only after the loop (callgrind's dumps)."""
        return times

    #: Called with the op's name as it is entered, and with nothing as it is left (NVTX
    #: ranges); None: nothing to call.
    enter_hook: Callable[[str], Any] | None = None
    exit_hook: Callable[[], Any] | None = None

    def mark_functions(self) -> Mapping[int, Sequence[tuple[str, int]]]:
        """Per mark, the costliest functions of the interval it ended, as (name, count)
        (the instructions measure, for its test's last iteration); empty elsewhere."""
        return {}

    def activities(self) -> RawActivities | None:
        """The GPU activities of the iteration that just ended (kernel measure), linked
        to op entries; None when this timer does not trace them."""
        return None

    def streams(self, marks: Sequence[Any]) -> Sequence[int] | None:
        """The stream each mark was recorded on (CUDA), or None where there are none."""
        return None

    @abstractmethod
    def resolve(self, marks: Sequence[Any]) -> tuple[Times, Times | None]:
        """The iteration's marks as integer nanoseconds on the primary timeline (the
        device's for CUDA) and, where it differs, the host's (CPU dispatch); else None."""
