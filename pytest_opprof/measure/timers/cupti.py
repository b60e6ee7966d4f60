"""Kernel time from CUPTI activity records: the thin layer over cupti-python.

:class:`KernelTracer` talks to a module with cupti-python's API (``from cupti import
cupti``, or the fake's :class:`~.fake_cupti.FakeCupti`): it pushes an external correlation
id at each op's entry and pops it at the exit (the timer's hooks), flushes once per
iteration, and hands back plain columns (:class:`RawActivities`). Linking them to OP_IDs,
the nesting sums and zero-instrumentation mode live in the profiler, tested on the fake.

External ids: 1 is the iteration itself (pushed at its start, so an activity with no
external id at all was launched outside any iteration and is dropped); 2 + j is the j-th
op entered in the iteration.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._extras import install
from ...model.profile import KERNEL, MEMCPY, MEMSET

#: The external id of the iteration scope; op entry j gets FIRST_OP_ID + j.
ITERATION_ID = 1
FIRST_OP_ID = 2
#: The size of each activity buffer handed to CUPTI.
BUFFER_BYTES = 8 * 1024 * 1024
INSTALL_HINT = install("cupti")

#: Why CUPTI refused, by cupti.Result name, in words a user can act on.
_REASONS = {
    "ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED":
        "another profiler (Nsight Systems, Nsight Compute, torch.profiler) holds CUPTI",
    "ERROR_INSUFFICIENT_PRIVILEGES": "CUPTI needs profiling permission on this machine",
    "ERROR_NOT_COMPATIBLE":
        "the CUPTI library does not match the CUDA driver (a version mismatch)",
    "ERROR_CUDA_COMPILER_NOT_COMPATIBLE":
        "the CUPTI library does not match the CUDA driver (a version mismatch)",
    "ERROR_NO_DEVICE": "CUPTI finds no CUDA device",
    "ERROR_INVALID_DEVICE": "CUPTI finds no usable CUDA device",
    "ERROR_NOT_INITIALIZED": "CUPTI could not initialise (no GPU or no CUDA driver)",
    "ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED": "CUPTI does not support this virtual GPU",
}


class CuptiUnavailable(Exception):
    """CUPTI cannot trace here; the message is the reason, in one line."""


def import_cupti() -> Any:
    """cupti-python's module, or :class:`CuptiUnavailable` saying why it cannot load."""
    try:
        from cupti import cupti  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        if getattr(exc, "name", "") in ("cupti", "cupti.cupti"):
            raise CuptiUnavailable(f"cupti-python is not installed ({INSTALL_HINT})") from None
        raise CuptiUnavailable(_one_line(f"cupti-python failed to load ({exc}): a version "
                                         "mismatch between cupti-python, nvidia-cuda-cupti "
                                         "and CUDA?")) from None
    except Exception as exc:  # a broken install raises many kinds of error
        raise CuptiUnavailable(_one_line(
            f"cupti-python failed to load: {type(exc).__name__}: {exc}")) from None
    return cupti


def _one_line(text: str) -> str:
    line = text.splitlines()[0] if text else text
    return line if len(line) <= 300 else line[:297] + "..."


def reason_of(api: Any, exc: BaseException) -> str:
    """A CUPTI error as one line: what it means, and its code."""
    status = getattr(exc, "status", None)
    name = ""
    if status is not None:
        try:
            name = api.Result(status).name
        except Exception:  # an unknown code: show the number
            name = f"CUPTI error {status}"
    name = name or f"{type(exc).__name__}: {exc}"
    words = _REASONS.get(name.removeprefix("CUPTI_"))
    return _one_line(f"{words} ({name})" if words else f"CUPTI cannot start: {name}")


@dataclass(frozen=True)
class RawActivities:
    """One iteration's activities as CUPTI gave them, in launch order. ``entry``: the
    index (in order of entry) of the innermost op open at its launch, -1 for none."""

    kind: np.ndarray
    names: list[str]
    stream: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    entry: np.ndarray

    def __len__(self) -> int:
        return int(self.kind.shape[0])


class KernelTracer:
    """CUPTI activity tracing for one process: start once, then per iteration
    ``begin_iteration``, the hooks, ``end_iteration`` after the device synchronised, and
    ``take``."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self._kinds: list[Any] = []
        self._records: list[Any] = []
        self._entered = 0
        self._depth = 0
        self._t0 = 0
        #: The flags of a timer that shares one event per boundary (``CudaTimer``).
        self._after_exit = False
        self._share_next = False
        self.started = False
        self._custom = api.ExternalCorrelationKind.CUSTOM0
        self.push: Callable[[Any, int], Any] = api.activity_push_external_correlation_id
        self.pop: Callable[[Any], Any] = api.activity_pop_external_correlation_id

    def start(self) -> None:
        """Enable the activity kinds and register the buffers; raises
        :class:`CuptiUnavailable` with the reason when CUPTI refuses."""
        api = self.api
        kinds = api.ActivityKind
        wanted = [kinds.CONCURRENT_KERNEL, kinds.MEMCPY, kinds.MEMSET,
                  kinds.EXTERNAL_CORRELATION, kinds.RUNTIME, kinds.DRIVER]
        try:
            # RUNTIME and DRIVER too: without them no external correlation record comes
            # back (seen on an H200, CUDA 13)
            for kind in wanted:
                api.activity_enable(kind)
                self._kinds.append(kind)
            api.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
            api.activity_flush_all(1)
        except Exception as exc:
            self.stop()
            raise CuptiUnavailable(reason_of(api, exc)) from None
        self._records = []
        self.started = True

    def stop(self) -> None:
        """Disable what was enabled (also after a failed start); never raises."""
        for kind in reversed(self._kinds):
            with contextlib.suppress(Exception):
                self.api.activity_disable(kind)
        self._kinds = []
        self.started = False

    def _buffer_requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def _buffer_completed(self, activities: list[Any]) -> None:
        self._records.extend(activities)

    def begin_iteration(self) -> None:
        self.api.activity_flush_all(1)  # what ran before the iteration is not its
        self._records = []
        self._entered = 0
        self._depth = 0
        self._t0 = int(self.api.get_timestamp())
        self.push(self._custom, ITERATION_ID)

    def enter(self, name: str) -> None:
        self.push(self._custom, FIRST_OP_ID + self._entered)
        self._entered += 1
        self._depth += 1
        self._share_next = self._after_exit

    def exit(self) -> None:  # an exit with no op open this iteration pops nothing
        self._after_exit = True
        if self._depth:
            self._depth -= 1
            self.pop(self._custom)

    def end_iteration(self) -> None:
        for _ in range(self._depth + 1):
            self.pop(self._custom)
        self._depth = 0
        self.api.activity_flush_all(1)

    def take(self) -> RawActivities:
        records, self._records = self._records, []
        return self.link(records)

    def link(self, records: list[Any]) -> RawActivities:
        """The kernels, copies and memsets of ``records`` in launch order, each with the op
        entry of its launch (the EXTERNAL_CORRELATION records); those launched outside
        any iteration are dropped."""
        kinds = self.api.ActivityKind
        kernel, memcpy, memset = kinds.CONCURRENT_KERNEL, kinds.MEMCPY, kinds.MEMSET
        external, custom = kinds.EXTERNAL_CORRELATION, self._custom
        ext: dict[int, int] = {}
        rows: list[tuple[int, str, int, int, int, int]] = []  # kind, name, stream, ...
        for r in records:
            k = r.kind
            if k == external:
                if r.external_kind == custom:
                    ext[r.correlation_id] = r.external_id
                continue
            if k == kernel:
                found = (KERNEL, r.name)
            elif k == memcpy:
                found = (MEMCPY, self._copy_name(r.copy_kind))
            elif k == memset:
                found = (MEMSET, "[memset]")
            else:
                continue
            rows.append((*found, r.stream_id, r.start, r.end, r.correlation_id))
        corr = np.array([row[5] for row in rows], dtype=np.int64)
        ids = np.array([ext.get(c, 0) for c in corr.tolist()], dtype=np.int64)
        order = np.argsort(corr, kind="stable")
        order = order[ids[order] >= ITERATION_ID]

        def column(k: int) -> np.ndarray:
            return np.array([row[k] for row in rows], dtype=np.int64)[order]

        return RawActivities(
            kind=column(0), names=[str(rows[i][1]) for i in order.tolist()],
            stream=column(2), start_ns=(column(3) - self._t0).astype(float),
            end_ns=(column(4) - self._t0).astype(float),
            entry=np.maximum(ids[order] - FIRST_OP_ID, -1),
        )

    def _copy_name(self, copy_kind: Any) -> str:
        try:
            kind = self.api.ActivityMemcpyKind(copy_kind).name
        except Exception:  # a kind this table does not know
            kind = str(copy_kind)
        if len(kind) == 4 and kind[1:3] == "TO":  # HTOD as the tools write it: HtoD
            kind = f"{kind[0]}to{kind[3]}"
        return f"[memcpy {kind}]"


def cuda_tracer() -> KernelTracer:
    tracer = KernelTracer(import_cupti())
    tracer.start()
    return tracer
