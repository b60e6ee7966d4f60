"""``--opprof-trace=DIR``: one Chrome trace per profiled test (Trace Event format).

Perfetto (ui.perfetto.dev) and chrome://tracing open the files. One process per test;
its tracks: ``CPU`` (the host: on the CPU the ops themselves, under CUDA each op's
dispatch) and, on CUDA, ``GPU stream N`` for each stream the ops ran on (their device
times). Iterations are enclosing slices on every track, named ``iteration N`` or
``iteration N (skipped)`` (greyed, ``args.skipped``); phases enclose their ops on the
primary track (the GPU's on CUDA); an instant event marks each iteration's start.

With kernel time (CUPTI), every GPU activity (kernel, memcpy, memset) is a slice on the
track of its stream, inside the slice of the op that launched it (the op's span on the
device), with ``args`` naming it, its kind, its op and iteration. An activity that would
cross a slice's edge there (the event clock and CUPTI's differ by a little; an activity
can outlast its op's span) goes to ``GPU stream N (outside op spans)`` instead, since a
trace viewer drops slices that are not properly nested.

With counts (``Profile.unit`` COUNT: instructions, by callgrind) the time axis counts:
one instruction is drawn as one ns of trace time (a slice of 1.57 ms is 1.57M
instructions). The CPU track's name and ``otherData`` say so, and each op's slice has its
count in ``args``, named for what is counted (``args.instructions``).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..model.profile import ACTIVITY_KINDS, Profile
from ..model.words import Unit
from ..store.files import safe_name
from .kernels import measure_of

if TYPE_CHECKING:
    from ..model.records import TestRecord

CPU_TID = 1
GPU_TID0 = 100
#: Tracks of activities that do not nest in the slices of their stream's track.
LOOSE_TID0 = 10_000


def counted_axis(profile: Profile) -> str | None:
    """What the time axis is for counts (``time axis: instructions executed, 1 ns = 1
    instruction``); None for times."""
    if profile.unit is Unit.NANOSECONDS:
        return None
    measure = measure_of(profile)
    noun = measure.counts[0] or "counts"
    return f"time axis: {measure.figure}, 1 ns = 1 {noun.removesuffix('s')}"


def _us(ns: float) -> float:
    return round(float(ns) / 1e3, 3)


def events(profile: Profile) -> list[dict[str, Any]]:
    """The trace events of one profile (needs its timeline: a profile just measured)."""
    if profile.starts is None or profile.iteration_starts is None:
        return []
    cuda = profile.host_samples is not None or profile.activities is not None
    acts = profile.activities
    act_streams = set() if acts is None else set(acts.stream.tolist())
    streams = sorted(set(profile.op_streams or [0]) | act_streams) if cuda else []
    gpu_tid = {s: GPU_TID0 + k for k, s in enumerate(streams)}
    axis = counted_axis(profile)
    counted = measure_of(profile).counts[0] or "counts"
    cpu_name = ("CPU (host dispatch)" if cuda else "CPU") + ("" if axis is None else f" ({axis})")
    tracks = {CPU_TID: cpu_name, **{tid: f"GPU stream {s}" for s, tid in gpu_tid.items()}}
    out: list[dict[str, Any]] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": profile.nodeid}},
        *(_thread(tid, name) for tid, name in tracks.items())]
    loose = _Lanes(sorted(gpu_tid))
    primary = gpu_tid[streams[0]] if cuda else CPU_TID
    every_track = [CPU_TID, *gpu_tid.values()]
    # each op's slices: under CUDA its dispatch on the CPU track, its device time on its
    # stream's; else its time on the CPU track
    host = ([(CPU_TID, profile.host_starts, profile.host_samples)] if cuda
            and profile.host_starts is not None and profile.host_samples is not None else [])
    op_tids = ([gpu_tid[s] for s in profile.op_streams or [streams[0]] * len(profile.ops)]
               if cuda else [CPU_TID] * len(profile.ops))

    #: (tid, start, end) in whole ns of an iteration's slices: what its activities nest in.
    slices: list[tuple[int, int, int]] = []

    def add(tid: int, name: str, cat: str, start: float, dur: float, **args: Any) -> None:
        if math.isfinite(start) and math.isfinite(dur):  # NaN: the op did not run
            out.append({"ph": "X", "pid": 1, "tid": tid, "name": name, "cat": cat,
                        "ts": _us(start), "dur": _us(dur), **args})
            slices.append((tid, _ns(start), _ns(start) + _ns(dur)))

    by_iteration = _activities_by_iteration(profile) if acts is not None else {}
    for i in range(profile.iterations):
        slices.clear()
        t0 = float(profile.iteration_starts[i])
        skipped = i < profile.skip
        name = f"iteration {i}" + (" (skipped)" if skipped else "")
        slice_ = {"ph": "X", "pid": 1, "name": name, "cat": "iteration", "ts": _us(t0),
                  "dur": _us(profile.wall[i]), "args": {"iteration": i, "skipped": skipped}}
        if skipped:
            slice_["cname"] = "grey"
        out += [{**slice_, "tid": tid} for tid in every_track]
        slices += [(tid, _ns(t0), _ns(t0) + _ns(profile.wall[i])) for tid in every_track]
        out.append({"ph": "i", "pid": 1, "tid": primary, "s": "p", "name": name,
                    "ts": _us(t0), "cat": "iteration"})
        if profile.phase_starts is not None:
            for j, phase in enumerate(profile.phases):
                add(primary, phase, "phase", t0 + profile.phase_starts[i, j],
                    profile.phase_samples[i, j])
        for info in profile.ops:
            k = info.op_id
            for tid, starts, durations in [*host, (op_tids[k], profile.starts, profile.samples)]:
                args = {"op_id": k, "occurrence": info.occurrence, "phase": info.phase,
                        "skipped": skipped}
                if axis is not None and math.isfinite(durations[i, k]):
                    args[counted] = _ns(durations[i, k])
                add(tid, info.name, "op", t0 + starts[i, k], durations[i, k], args=args)
        if i in by_iteration:
            out += _activity_events(profile, by_iteration[i], t0, gpu_tid, slices, loose)
    return out + [_thread(tid, name) for tid, name in sorted(loose.names.items())]


def _thread(tid: int, name: str) -> dict[str, Any]:
    return {"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": name}}


class _Lanes:
    """Tracks for the activities that do not nest on their stream's track: per stream,
    as many as it takes for none of them to overlap another on its track."""

    def __init__(self, streams: list[int]) -> None:
        self.streams = streams
        self.ends: dict[int, list[int]] = {}
        self.names: dict[int, str] = {}

    def place(self, stream: int, start: int, end: int) -> int:
        ends = self.ends.setdefault(stream, [])
        lane = next((k for k, e in enumerate(ends) if e <= start), len(ends))
        if lane == len(ends):
            ends.append(end)
        else:
            ends[lane] = end
        tid = LOOSE_TID0 + 1000 * self.streams.index(stream) + lane
        self.names[tid] = f"GPU stream {stream} (outside op spans)" + (
            f" {lane + 1}" if lane else "")
        return tid


def _ns(x: float) -> int:
    return round(float(x))


def _activities_by_iteration(profile: Profile) -> dict[int, list[int]]:
    """Each iteration's activity indices, by start (longest first at equal starts)."""
    acts = profile.activities
    if acts is None or len(acts) == 0:
        return {}
    order = np.lexsort((acts.start_ns - acts.end_ns, acts.start_ns, acts.iteration))
    out: dict[int, list[int]] = {}
    for j in order.tolist():
        out.setdefault(int(acts.iteration[j]), []).append(j)
    return out


def _activity_events(profile: Profile, indices: list[int], t0: float,
                     gpu_tid: dict[int, int], slices: list[tuple[int, int, int]],
                     loose: _Lanes) -> list[dict[str, Any]]:
    """The slices of one iteration's activities (``indices``, by start). Each goes on its
    stream's track when it nests in the slices there and overlaps no activity before it,
    else on a track of the stream's loose activities (``loose``)."""
    acts = profile.activities
    assert acts is not None
    idx = np.array(indices, dtype=np.int64)
    start = t0 + acts.start_ns[idx]
    dur = acts.end_ns[idx] - acts.start_ns[idx]
    a = np.round(start).astype(np.int64)
    b = a + np.round(dur).astype(np.int64)
    tids = np.array([gpu_tid[int(x)] for x in acts.stream[idx].tolist()], dtype=np.int64)
    fits = np.ones(idx.size, dtype=bool)
    for tid in set(tids.tolist()):
        on = np.flatnonzero(tids == tid)
        bounds = np.array([(lo, hi) for track, lo, hi in slices if track == tid],
                          dtype=np.int64).reshape(-1, 2)
        lo, hi = bounds[:, 0], bounds[:, 1]
        step = max(1, 2**22 // max(len(lo), 1))
        for c in range(0, on.size, step):
            part = on[c:c + step]
            x, y = a[part, None], b[part, None]
            fits[part] = ((y <= lo) | (x >= hi) | ((lo <= x) & (y <= hi))).all(axis=1)
        last_end = None
        for j in on[fits[on]].tolist():  # by start: one activity at a time per stream
            if last_end is not None and a[j] < last_end:
                fits[j] = False
            else:
                last_end = int(b[j])
    names, kinds = acts.names, acts.kind[idx].tolist()
    out = []
    for n, j in enumerate(idx.tolist()):
        stream = int(acts.stream[j])
        tid = int(tids[n])
        if not fits[n]:
            tid = loose.place(stream, int(a[n]), int(b[n]))
        kind, name = ACTIVITY_KINDS[kinds[n]], names[int(acts.name_id[j])]
        op_id = int(acts.op_id[j])
        out.append({"ph": "X", "pid": 1, "tid": tid, "name": name, "cat": kind,
                    "ts": _us(start[n]), "dur": _us(dur[n]),
                    "args": {"name": name, "kind": kind, "op_id": op_id,
                             "op": profile.ops[op_id].name if op_id >= 0 else None,
                             "iteration": int(acts.iteration[j]), "stream": stream,
                             "skipped": int(acts.iteration[j]) < profile.skip}})
    return out


def trace(profile: Profile) -> dict[str, Any]:
    other: dict[str, Any] = {"nodeid": profile.nodeid, "measure": profile.measure,
                             "device": profile.device, "skip": profile.skip}
    axis = counted_axis(profile)
    if axis is not None:
        other.update(unit=profile.unit.value, axis=axis)
    return {"traceEvents": events(profile), "displayTimeUnit": "ns", "otherData": other}


def render(record: TestRecord) -> str:
    """The Chrome trace of one record, as its file holds it."""
    return json.dumps(trace(record.profile))


def file_name(nodeid: str) -> str:
    """A file per test, named like its baseline: safe characters and a hash."""
    return safe_name(nodeid, always_hash=True) + ".trace.json"
