"""A test's baseline as data: the runs of one test that the gate judges against, and
the JSON they are stored as (schema ``pytest-opprof/baseline/3``; a file of schema 2 is
read through :func:`update_to_3`).

A baseline keeps the last :data:`MAX_RUNS` runs of its test: those of one
``opprof baseline update`` (each run a separate process), and any appended since.
:data:`READER` reads the JSON (the one parse path, :mod:`.jsontext`): a damaged file is
one :class:`BaselineError` line. Where the files live is :mod:`pytest_opprof.store.baseline`.
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ..errors import OpprofError
from . import conditions as run_conditions
from . import jsontext
from .profile import OpInfo, Profile, read_functions
from .verdict import Key
from .words import Unit

SCHEMA = "pytest-opprof/baseline/3"
#: The schema before measures were objects: its runs recorded a backend and a measure,
#: and its columns were named ``*_ns`` whatever they held (:func:`update_to_3`).
SCHEMA_2 = "pytest-opprof/baseline/2"
#: What a schema-2 run's (backend, measure) stand for now: a measure's name and unit.
Former = Callable[[str, "str | None"], "tuple[str, Unit]"]
#: Samples kept per op per run (and of the wall and op times per run).
MAX_SAMPLES = 100
#: Runs kept per test.
MAX_RUNS = 20


class BaselineError(OpprofError):
    """A stored baseline cannot be used; the message names the file and what to do."""


#: The columns of a run's ``ops``: one list each, one entry per op (OP_ID order).
OP_COLUMNS = ("op_id", "name", "occurrence", "depth", "phase", "n", "median", "samples")


@dataclass
class BaselineRun:
    """One profiled run of a test, as stored, every figure in the unit its meta records.

    ``ops`` is by column (:data:`OP_COLUMNS`): each field's name is stored once per run,
    not once per op, which halves the file and the time to load it. ``median`` is for
    readers (None where an op has no sample); ``samples``: the last :data:`MAX_SAMPLES`.
    """

    ops: dict[str, list[Any]]
    wall: list[int]
    op_time: list[int]
    phases: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    #: Per op (column order), its costliest functions as (name, instructions) under the
    #: instructions measure; None otherwise.
    functions: list[list[tuple[str, int]]] | None = None

    @property
    def n_ops(self) -> int:
        return len(self.ops["name"])

    def keys(self) -> list[Key]:
        return list(zip(self.ops["name"], self.ops["occurrence"], strict=True))

    def samples(self) -> dict[Key, np.ndarray]:
        return {key: np.asarray(values, dtype=float)
                for key, values in zip(self.keys(), self.ops["samples"], strict=True)}

    @classmethod
    def from_profile(cls, profile: Profile, meta: dict[str, Any]) -> BaselineRun:
        counted = profile.counted_samples()
        ops: dict[str, list[Any]] = {key: [] for key in OP_COLUMNS}
        for info in profile.ops:
            column = counted[info.op_id]
            for key, value in (("op_id", info.op_id), ("name", info.name),
                               ("occurrence", info.occurrence), ("depth", info.depth),
                               ("phase", info.phase), ("n", int(column.size)),
                               ("median", float(np.median(column)) if column.size else None),
                               ("samples", [round(x) for x in column[-MAX_SAMPLES:].tolist()])):
                ops[key].append(value)
        return cls(
            functions=None if profile.op_functions is None
            else [list(profile.op_functions[info.op_id]) for info in profile.ops],
            ops=ops,
            wall=[round(x) for x in profile.wall[profile.skip:][-MAX_SAMPLES:].tolist()],
            op_time=[round(x) for x in profile.op_time[profile.skip:][-MAX_SAMPLES:].tolist()],
            phases=list(profile.phases),
            meta={**meta, "iterations": profile.iterations, "skip": profile.skip,
                  "counted": profile.counted, "measure": profile.measure,
                  "unit": profile.unit.value, "device": profile.device},
        )

    def to_dict(self) -> dict[str, Any]:
        data = {"meta": self.meta, "ops": self.ops, "wall": self.wall,
                "op_time": self.op_time, "phases": self.phases}
        if self.functions is not None:
            data["functions"] = [[[name, n] for name, n in op] for op in self.functions]
        return data


@dataclass
class Baseline:
    nodeid: str
    machine: str
    runs: list[BaselineRun]
    #: Runs made by one ``opprof baseline update`` share a batch; a new batch replaces them.
    batch: str = ""

    def samples(self) -> dict[Key, list[np.ndarray]]:
        found: dict[Key, list[np.ndarray]] = {}
        for run in self.runs:
            for key, values in run.samples().items():
                found.setdefault(key, []).append(values)
        return found

    def reference(self) -> Baseline:
        """The runs the gate judges against: runs of one code. Those of the last update
        (one ``opprof baseline update``, or ``--opprof-update-baseline``) and the runs
        appended since at its clean commit; in a history grown by appending alone, the
        newest run and the runs of its clean commit. Appended runs of other commits
        measured other code: pooled with the rest, an op's step between them reads as
        its spread between processes, which widens its margin until the step passes."""
        updates = [run for run in self.runs if not run.meta.get(APPENDED)]
        anchor = (updates or self.runs)[-1]
        code = code_of(anchor)
        runs = [run for run in self.runs
                if run is anchor or (bool(updates) and not run.meta.get(APPENDED))
                or (code is not None and code_of(run) == code)]
        return Baseline(self.nodeid, self.machine, runs, self.batch)

    def functions(self) -> dict[Key, dict[str, int]]:
        """Each op's costliest functions (instructions measure) in the latest run that
        recorded them; empty when none did."""
        for run in reversed(self.runs):
            if run.functions is not None:
                return {key: dict(f) for key, f in zip(run.keys(), run.functions, strict=True)}
        return {}

    def op_ids(self) -> dict[Key, int]:
        ids: dict[Key, int] = {}
        for run in self.runs:
            ids.update(zip(run.keys(), run.ops["op_id"], strict=True))
        return ids

    def span_seconds(self) -> float:
        """How much time the runs' dates span (0 when unknown): runs taken over hours
        have seen how the machine varies; runs taken back to back have not."""
        dates = []
        for run in self.runs:
            try:
                dates.append(datetime.datetime.fromisoformat(str(run.meta.get("date"))))
            except ValueError:
                continue
        try:
            return (max(dates) - min(dates)).total_seconds() if dates else 0.0
        except TypeError:  # naive and aware dates mixed
            return 0.0

    def probe_ns(self) -> float | None:
        """The median reference-probe time of the runs: one whose probe met a busy machine
        must not move the machine's speed (a mean did). Runs without run conditions timed
        another probe (a 96x96 matmul, not 48x48): not comparable, left out."""
        found = [r.meta.get("probe_ns") for r in self.runs if r.meta.get("conditions")]
        values = [float(v) for v in found if isinstance(v, (int, float)) and v > 0]
        return float(np.median(values)) if values else None

    def conditions(self) -> dict[str, Any] | None:
        found = [r.meta["conditions"] for r in self.runs if r.meta.get("conditions")]
        return found[-1] if found else None

    def to_profile(self, run: int = -1) -> Profile:
        """One stored run as a Profile (its counted samples; nothing skipped)."""
        r = self.runs[run]
        ops = r.ops
        width = max([len(values) for values in ops["samples"]] + [len(r.wall), len(r.op_time)])
        samples = np.full((width, r.n_ops), np.nan)
        for k, values in enumerate(ops["samples"]):
            samples[width - len(values):, k] = values
        return Profile(
            nodeid=self.nodeid, measure=self.measure(), unit=self.unit(),
            device=str(r.meta.get("device", "?")), skip=0,
            ops=[OpInfo(k, *info) for k, info in enumerate(zip(
                ops["name"], ops["occurrence"], ops["depth"], ops["phase"], strict=True))],
            samples=samples, phase_samples=np.full((width, 0), np.nan), phases=[],
            wall=_right_aligned(r.wall, width), op_time=_right_aligned(r.op_time, width),
        )

    def measure(self) -> str:
        """The measure its latest run was taken with, and its unit."""
        return str(self.runs[-1].meta["measure"])

    def unit(self) -> Unit:
        return Unit(self.runs[-1].meta["unit"])

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "nodeid": self.nodeid, "machine": self.machine,
                "batch": self.batch, "runs": [r.to_dict() for r in self.runs]}

    def dumps(self, fit: bool = False) -> str:
        """JSON with one line per run: a thousand tests' baselines load in well under a
        second, and a diff of a committed baseline shows runs added and dropped. With
        ``fit``, the oldest runs are dropped (from ``runs`` too) until the text is within
        :data:`jsontext.MAX_BYTES`; BaselineError when the latest run alone is not."""
        data = self.to_dict()
        runs = data.pop("runs")
        head = json.dumps(data, sort_keys=True)[:-1]
        lines = [json.dumps(r, sort_keys=True, separators=(",", ":")) for r in runs]

        def size() -> int:  # in bytes: json.dumps writes ASCII
            return len(head) + sum(len(line) + 2 for line in lines) + 16

        while fit and len(lines) > 1 and size() > jsontext.MAX_BYTES:
            lines.pop(0)
            self.runs.pop(0)
        if fit and size() > jsontext.MAX_BYTES:
            raise BaselineError(f"{self.nodeid}: this run cannot be stored: it is "
                                f"{size() / 2**20:.0f} MB, more than a reader reads")
        text = ",\n".join(lines)
        return f'{head}, "runs": [\n{text}\n]}}\n'

    @classmethod
    def from_dict(cls, data: Any, former: Former | None = None) -> Baseline:
        """The check of :func:`reader`; a file of schema 2 is updated with ``former``."""
        if not isinstance(data, dict):
            raise BaselineError("not a baseline (a JSON object was expected)")
        schema = data.get("schema")
        if schema == SCHEMA_2 and former is not None:
            data, schema = update_to_3(data, former), SCHEMA
        if schema != SCHEMA:
            raise BaselineError(f"schema {schema!r} is not {SCHEMA!r}")
        runs = data["runs"]
        if not isinstance(runs, list):
            raise TypeError("runs is not a list")
        if not runs:
            raise ValueError("no runs")
        return cls(nodeid=_str(data["nodeid"]), machine=_str(data["machine"]),
                   runs=[_parse_run(r) for r in runs], batch=_str(data.get("batch", "")))


def code_of(run: BaselineRun) -> str | None:
    """The code a run measured, as far as its meta tells: the id of its commit when the
    tree had no uncommitted change; None when unknown."""
    commit = run.meta.get("commit")
    if not isinstance(commit, dict) or commit.get("dirty") is not False:
        return None
    found = commit.get("id")
    return found if isinstance(found, str) and found not in ("", "unknown", "unversioned") \
        else None


def update_to_3(data: dict[str, Any], former: Former) -> dict[str, Any]:
    """A baseline of schema 2 as schema 3: each run's ``*_ns`` figures renamed for any unit,
    and the backend and measure it recorded (meta and conditions) as the one measure they
    stand for, ``former(backend, measure)``. What is not a run is left for the reader."""
    renamed = {"median_ns": "median", "samples_ns": "samples", "wall_ns": "wall",
               "op_time_ns": "op_time"}

    def rename(fields: Mapping[str, Any]) -> dict[str, Any]:
        return {renamed.get(key, key): value for key, value in fields.items()}

    runs = data.get("runs")
    if not isinstance(runs, list):
        return {**data, "schema": SCHEMA}
    updated = []
    for run in runs:
        if not isinstance(run, dict) or not isinstance(run.get("meta", {}), dict):
            updated.append(run)
            continue
        meta = dict(run.get("meta", {}))
        conditions = meta.get("conditions")
        recorded = conditions.get("measure") if isinstance(conditions, dict) else None
        name, unit = former(str(meta.pop("backend", "cpu")),
                            recorded if isinstance(recorded, str) else None)
        meta.update(measure=name, unit=unit.value)
        if isinstance(conditions, dict):
            meta["conditions"] = {**{k: v for k, v in conditions.items() if k != "backend"},
                                  "measure": name}
        ops = run.get("ops")
        updated.append({**rename(run), "meta": meta,
                        "ops": rename(ops) if isinstance(ops, dict) else ops})
    return {**data, "schema": SCHEMA, "runs": updated}


def _right_aligned(values: list[int], width: int) -> np.ndarray:
    out = np.full(width, np.nan)
    out[width - len(values):] = values
    return out


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


_NUMBER_TYPES = frozenset({int, float})
_LONGEST_NS = 1e15  # 11 days: beyond it a "time" is a corrupt number


def _check_numbers(lists: list[Any], label: Callable[[int], str]) -> None:
    """Each of ``lists`` is a list of numbers from 0 to 10^15, checked in bulk (a store
    holds millions of samples); the culprit is searched for, and named with ``label(its
    index)``, only when that fails."""
    if set(map(type, lists)) <= {list}:
        everything = list(itertools.chain.from_iterable(lists))
        types = set(map(type, everything))
        # whole numbers (what is written) are finite; with floats, a NaN or an infinity
        # makes the sum NaN or infinite (min and max may miss a NaN)
        if types <= _NUMBER_TYPES and (not everything or (
                min(everything) >= 0 and max(everything) < _LONGEST_NS
                and (float not in types or math.isfinite(sum(everything))))):
            return
    for i, values in enumerate(lists):
        if not isinstance(values, list):
            raise TypeError(f"{label(i)} is not a list")
        for v in values:
            if type(v) not in _NUMBER_TYPES or not (0 <= v < _LONGEST_NS):  # NaN fails too
                raise ValueError(f"{label(i)} holds {v!r}; figures are numbers from 0 "
                                 "to 10^15")


#: The run meta that marks a run appended to its test's runs (``--opprof-update-baseline=
#: append``: a history), not taken by an update.
APPENDED = "appended"
#: The run meta that names the ops on which a run sat far from the test's other runs,
#: when ``opprof baseline update`` could not re-take it into agreement (agreement.py).
OUTLYING_OPS = "outlying_ops"

def _check_meta(meta: Any) -> dict[str, Any]:
    """The meta fields the plugin reads are of their type and in range, or None."""
    if not isinstance(meta, dict):
        raise TypeError("meta is not an object")
    for key in ("probe_ns", "iterations", "skip", "counted"):
        value, kinds = meta.get(key), _NUMBER_TYPES if key == "probe_ns" else {int}
        if value is not None and (type(value) not in kinds or not 0 <= value < _LONGEST_NS):
            raise ValueError(f"meta {key} is {value!r}; it must be a number from 0 to 1e+15")
    for key in ("date", "measure", "device"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise TypeError(f"meta {key} is not a string")
    if not meta.get("measure") or meta.get("unit") not in {u.value for u in Unit}:
        raise ValueError("meta names no measure and unit")
    if meta.get("conditions") is not None:
        run_conditions.check(meta["conditions"])
    if not isinstance(meta.get(APPENDED, False), bool):
        raise TypeError(f"meta {APPENDED} is not true or false")
    outlying = meta.get(OUTLYING_OPS)
    if outlying is not None and (not isinstance(outlying, list)
                                 or not all(isinstance(name, str) for name in outlying)):
        raise TypeError(f"meta {OUTLYING_OPS} is not a list of op names")
    return meta


def check_run(run: BaselineRun, nodeid: str) -> None:
    """The reader's checks on a run about to be stored, so that no run writes a baseline
    that makes every later run fail."""
    try:
        _parse_run(run.to_dict())
    except (KeyError, TypeError, ValueError) as exc:
        raise BaselineError(f"{nodeid}: this run cannot be stored: a baseline reader would "
                            f"refuse it ({exc})") from None


def _parse_run(data: Any) -> BaselineRun:
    if not isinstance(data, dict):
        raise TypeError("a run is not an object")
    ops = data["ops"]
    if not isinstance(ops, dict):
        raise TypeError("ops is not an object of columns")
    columns = [ops[key] for key in OP_COLUMNS]
    if not set(map(type, columns)) <= {list} or len(set(map(len, columns))) > 1:
        raise ValueError(f"the op columns {', '.join(OP_COLUMNS)} are lists of one length")
    # each column at once: a store holds hundreds of thousands of ops
    names, phases, medians = ops["name"], ops["phase"], ops["median"]
    if not set(map(type, names)) <= {str} or not set(map(type, phases)) <= {str, type(None)}:
        raise TypeError("op names are strings, and phases strings or null")
    if not all(names):
        raise ValueError("an op name is empty")
    for key in ("op_id", "occurrence", "depth", "n"):  # whole numbers
        values = ops[key]
        if values and (not set(map(type, values)) <= {int} or min(values) < 0):
            bad = next(v for v in values if type(v) is not int or v < 0)
            raise ValueError(f"{key} {bad!r} is not a whole number")
    wall, op_time = data.get("wall", []), data.get("op_time", [])

    def label(i: int) -> str:
        return ("wall", "op_time")[i] if i < 2 else f"samples of {names[i - 2]!r}"

    _check_numbers([[m for m in medians if m is not None]], lambda i: "median")
    _check_numbers([wall, op_time, *ops["samples"]], label)
    meta = _check_meta(data.get("meta", {}))
    phases = data.get("phases", [])
    if not isinstance(phases, list):
        raise TypeError("phases is not a list")
    functions = data.get("functions")
    if functions is not None:
        if not isinstance(functions, list) or len(functions) != len(names):
            raise ValueError("functions is a list of one entry per op")
        functions = [read_functions(f, f"functions of {names[i]!r}")
                     for i, f in enumerate(functions)]
    return BaselineRun(ops={key: ops[key] for key in OP_COLUMNS}, wall=wall,
                       op_time=op_time, phases=[_str(p) for p in phases], meta=meta,
                       functions=functions)


#: What every refusal of a stored file advises.
FIX = ("delete it, or rerun with --opprof-update-baseline "
       "(opprof baseline update) to write a new one")
def reader(former: Former | None = None) -> jsontext.Reader[Baseline]:
    """How a stored baseline is read (the one parse path): ``reader().parse(text, path)``;
    with ``former``, a file of schema 2 too (``store.baseline`` passes the measures')."""
    return jsontext.Reader(partial(Baseline.from_dict, former=former), "baseline", FIX,
                           BaselineError)


READER = reader()


