"""``--opprof-trace=DIR``: one Chrome trace per profiled test (Trace Event format).

Perfetto (ui.perfetto.dev) and chrome://tracing open the files. One process per test;
its tracks: ``CPU`` (the host: on the CPU backend the ops themselves, on CUDA each op's
dispatch) and, on CUDA, ``GPU stream N`` for each stream the ops ran on (their device
times). Iterations are enclosing slices on every track, named ``iteration N`` or
``iteration N (skipped)`` (greyed, ``args.skipped``); phases enclose their ops on the
primary track (the GPU's on CUDA); an instant event marks each iteration's start.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..files import safe_name
from ..profile import Profile

if TYPE_CHECKING:
    from ..records import TestRecord

CPU_TID = 1
GPU_TID0 = 100


def _us(ns: float) -> float:
    return round(float(ns) / 1e3, 3)


def events(profile: Profile) -> list[dict[str, Any]]:
    """The trace events of one profile (needs its timeline: a profile just measured)."""
    if profile.starts is None or profile.iteration_starts is None:
        return []
    cuda = profile.host_samples is not None
    streams = sorted(set(profile.op_streams or [0])) if cuda else []
    gpu_tid = {s: GPU_TID0 + k for k, s in enumerate(streams)}
    out: list[dict[str, Any]] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": profile.nodeid}},
        {"ph": "M", "pid": 1, "tid": CPU_TID, "name": "thread_name",
         "args": {"name": "CPU (host dispatch)" if cuda else "CPU"}},
    ]
    out += [{"ph": "M", "pid": 1, "tid": tid, "name": "thread_name",
             "args": {"name": f"GPU stream {s}"}} for s, tid in gpu_tid.items()]
    primary = [gpu_tid[streams[0]]] if cuda else [CPU_TID]
    every_track = [CPU_TID, *gpu_tid.values()]

    starts, samples = profile.starts, profile.samples
    host_starts, host_samples = profile.host_starts, profile.host_samples

    def op_tracks(k: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        if not cuda:
            return [(CPU_TID, starts, samples)]
        stream = (profile.op_streams or [streams[0]] * len(profile.ops))[k]
        host = [] if host_starts is None or host_samples is None else [
            (CPU_TID, host_starts, host_samples)]
        return [*host, (gpu_tid[stream], starts, samples)]

    for i in range(profile.iterations):
        t0 = float(profile.iteration_starts[i])
        skipped = i < profile.skip
        name = f"iteration {i}" + (" (skipped)" if skipped else "")
        slice_ = {"ph": "X", "pid": 1, "name": name, "cat": "iteration", "ts": _us(t0),
                  "dur": _us(profile.wall[i]), "args": {"iteration": i, "skipped": skipped}}
        if skipped:
            slice_["cname"] = "grey"
        out += [{**slice_, "tid": tid} for tid in every_track]
        out.append({"ph": "i", "pid": 1, "tid": primary[0], "s": "p", "name": name,
                    "ts": _us(t0), "cat": "iteration"})
        if profile.phase_starts is not None:
            for j, phase in enumerate(profile.phases):
                start, dur = profile.phase_starts[i, j], profile.phase_samples[i, j]
                if math.isfinite(start) and math.isfinite(dur):
                    out.append({"ph": "X", "pid": 1, "tid": primary[0], "name": phase,
                                "cat": "phase", "ts": _us(t0 + start), "dur": _us(dur)})
        for info in profile.ops:
            k = info.op_id
            for tid, starts, durations in op_tracks(k):
                start, dur = starts[i, k], durations[i, k]
                if math.isfinite(start) and math.isfinite(dur):
                    out.append({"ph": "X", "pid": 1, "tid": tid, "name": info.name,
                                "cat": "op", "ts": _us(t0 + start), "dur": _us(dur),
                                "args": {"op_id": k, "occurrence": info.occurrence,
                                         "phase": info.phase, "skipped": skipped}})
    return out


def trace(profile: Profile) -> dict[str, Any]:
    return {"traceEvents": events(profile), "displayTimeUnit": "ns",
            "otherData": {"nodeid": profile.nodeid, "backend": profile.backend,
                          "device": profile.device, "skip": profile.skip}}


def render(record: TestRecord) -> str:
    """The Chrome trace of one record, as its file holds it."""
    return json.dumps(trace(record.profile))


def file_name(nodeid: str) -> str:
    """A file per test, named like its baseline: safe characters and a hash."""
    return safe_name(nodeid, always_hash=True) + ".trace.json"
