"""A fake of the part of cupti-python that :class:`~.cupti.KernelTracer` uses, so that the
real layer's code runs in CI: the external correlation stack, buffers handed back through
the callbacks on ``activity_flush_all``, ``cuptiError`` with a ``status``. The
:class:`~.fake.FakeDevice` it is attached to reports each launch, which gets its records
as CUPTI emits them. Told to fail (``OPPROF_FAKE_CUPTI``), it fails as cupti-python does.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The environment variable that turns the fake CUPTI on for ``--opprof-measure=auto`` on
#: the fake device (``ok``) or makes it fail one way.
ENV = "OPPROF_FAKE_CUPTI"
FAILURES = ("missing", "no-gpu", "multiple-subscribers", "version")


class ActivityKind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    KERNEL = 3
    DRIVER = 4
    RUNTIME = 5
    CONCURRENT_KERNEL = 10
    EXTERNAL_CORRELATION = 39


# cupti-python's enums: the members the fake uses, with CUPTI's values
class ExternalCorrelationKind(enum.IntEnum):
    CUSTOM0 = 3


class ActivityMemcpyKind(enum.IntEnum):
    UNKNOWN = 0
    HTOD = 1
    DTOH = 2
    DTOD = 8
    HTOH = 9
    PTOP = 10


class Result(enum.IntEnum):
    ERROR_NOT_INITIALIZED = 15
    ERROR_QUEUE_EMPTY = 19
    ERROR_NOT_COMPATIBLE = 29
    ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39


class cuptiError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"{Result(status).name}")
        self.status = status


@dataclass
class Record:

    kind: int
    correlation_id: int
    name: str = ""
    start: int = 0
    end: int = 0
    stream_id: int = 0
    copy_kind: int = 0
    external_kind: int = 0
    external_id: int = 0




class FakeCupti:
    """The fake module. ``fail``: one of :data:`FAILURES`, or None to work."""

    ActivityKind = ActivityKind
    ExternalCorrelationKind = ExternalCorrelationKind
    ActivityMemcpyKind = ActivityMemcpyKind
    Result = Result
    cuptiError = cuptiError

    def __init__(self, fail: str | None = None) -> None:
        self.fail = fail
        self.enabled: set[int] = set()
        self.stack: dict[int, list[int]] = {}
        self.pending: list[Record] = []
        self.correlation = 0
        self.now: Callable[[], int] = lambda: 0
        self._requested: Callable[[], Any] | None = None
        self._completed: Callable[[list[Any]], Any] | None = None
        #: Calls made, for tests that hold the hot path to its promises.
        self.pushes = 0
        self.pops = 0
        self.flushes = 0

    def activity_enable(self, kind: int) -> None:
        failure = {"no-gpu": Result.ERROR_NOT_INITIALIZED, "version": Result.ERROR_NOT_COMPATIBLE,
                   "multiple-subscribers": Result.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED}
        if self.fail in failure:
            raise cuptiError(failure[self.fail])
        self.enabled.add(int(kind))

    def activity_disable(self, kind: int) -> None:
        self.enabled.discard(int(kind))

    def activity_register_callbacks(self, requested: Callable[[], Any],
                                    completed: Callable[[list[Any]], Any]) -> None:
        self._requested, self._completed = requested, completed

    def activity_push_external_correlation_id(self, kind: int, id: int) -> None:
        self.pushes += 1
        self.stack.setdefault(int(kind), []).append(int(id))

    def activity_pop_external_correlation_id(self, kind: int) -> int:
        self.pops += 1
        stack = self.stack.get(int(kind))
        if not stack:
            raise cuptiError(Result.ERROR_QUEUE_EMPTY)
        return stack.pop()

    def activity_flush_all(self, flag: int) -> None:
        self.flushes += 1
        if self._completed is not None and self.pending:
            assert self._requested is not None
            self._requested()
            records, self.pending = self.pending, []
            self._completed(records)

    def get_timestamp(self) -> int:
        return self.now()

    def launch(self, kind: str, name: str, start: int, end: int, stream: int) -> None:
        """A kernel (``kind`` "kernel"), copy ("memcpy", ``name`` its direction) or memset
        ran from ``start`` to ``end``: its records, as CUPTI would write them."""
        activity = {"kernel": ActivityKind.CONCURRENT_KERNEL, "memcpy": ActivityKind.MEMCPY,
                    "memset": ActivityKind.MEMSET}[kind]
        self.correlation += 1
        if int(activity) not in self.enabled:
            return
        corr = self.correlation
        stack = self.stack.get(int(ExternalCorrelationKind.CUSTOM0))
        if stack and ActivityKind.EXTERNAL_CORRELATION in self.enabled \
                and ActivityKind.RUNTIME in self.enabled:
            self.pending.append(Record(ActivityKind.EXTERNAL_CORRELATION, corr,
                                       external_kind=ExternalCorrelationKind.CUSTOM0,
                                       external_id=stack[-1]))
        record = Record(activity, corr, start=start, end=end, stream_id=stream)
        if kind == "kernel":
            record.name = name
        elif kind == "memcpy":
            record.copy_kind = ActivityMemcpyKind.__members__.get(name.upper(), 0)
        self.pending.append(record)


def from_environment() -> str | None:
    """``OPPROF_FAKE_CUPTI`` as set: None (unset), ``ok`` or one of :data:`FAILURES`;
    an unknown value raises ValueError with the one line to show."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    if value != "ok" and value not in FAILURES:
        raise ValueError(f"{ENV}={value!r}: use ok or one of {', '.join(FAILURES)}")
    return value
