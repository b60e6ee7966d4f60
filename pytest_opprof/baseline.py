"""Per-op baselines, one JSON file per test, namespaced by machine.

Layout: ``<baseline dir>/<machine key>/<test>.json``. File and folder names are
made from the machine key and the node id by keeping letters, digits, ``.``,
``_`` and ``-`` and adding a hash of the original, so every name stays inside
the baseline directory and distinct tests never share a file.

A file keeps the last :data:`MAX_RUNS` runs of its test: those of one
``opprof baseline update`` (each run a separate process), and any appended since
with ``--opprof-append-baseline``; for each op of
each run its summary statistics and up to :data:`MAX_SAMPLES` raw samples in
iteration order. Writes go to a temporary file that replaces the old one, under
an exclusive lock on the machine folder, so that a reader sees the old file or
the new one and concurrent writers lose nothing.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import OpprofError
from .profile import OpInfo, Profile
from .regression import Key

SCHEMA = "pytest-opprof/baseline/1"
MAX_SAMPLES = 100
MAX_RUNS = 20

try:  # POSIX: lock the machine folder while a file is read, changed and replaced
    import fcntl
except ImportError:  # pragma: no cover - Windows: atomic replace only
    fcntl = None  # type: ignore[assignment]


class BaselineError(OpprofError):
    """A stored baseline cannot be used; the message names the file and what to do."""


def safe_name(text: str, always_hash: bool = False, limit: int = 100) -> str:
    """A file name made of ``text``: safe characters kept, a hash when anything changed."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")[:limit] or "_"
    if always_hash or slug != text:
        slug += "-" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return slug


@dataclass
class BaselineRun:
    """One profiled run of a test, as stored."""

    ops: list[dict[str, Any]]
    wall_ns: list[int]
    op_time_ns: list[int]
    phases: list[str]
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_profile(cls, profile: Profile, meta: dict[str, Any]) -> BaselineRun:
        counted = profile.samples[profile.skip:]
        ops = []
        for info in profile.ops:
            column = counted[:, info.op_id]
            column = column[~np.isnan(column)]
            entry: dict[str, Any] = {
                "op_id": info.op_id, "name": info.name, "occurrence": info.occurrence,
                "depth": info.depth, "phase": info.phase, "n": int(column.size),
                "samples_ns": [round(x) for x in column[-MAX_SAMPLES:].tolist()],
            }
            if column.size:
                median = float(np.median(column))
                entry.update(
                    median_ns=median, mean_ns=float(column.mean()),
                    mad_ns=float(np.median(np.abs(column - median))),
                    min_ns=float(column.min()), max_ns=float(column.max()),
                )
            ops.append(entry)
        return cls(
            ops=ops,
            wall_ns=[round(x) for x in profile.wall[profile.skip:][-MAX_SAMPLES:].tolist()],
            op_time_ns=[round(x) for x in profile.op_time[profile.skip:][-MAX_SAMPLES:].tolist()],
            phases=list(profile.phases),
            meta={**meta, "iterations": profile.iterations, "skip": profile.skip,
                  "counted": profile.counted, "backend": profile.backend,
                  "device": profile.device},
        )

    def to_dict(self) -> dict[str, Any]:
        return {"meta": self.meta, "ops": self.ops, "wall_ns": self.wall_ns,
                "op_time_ns": self.op_time_ns, "phases": self.phases}


@dataclass
class Baseline:
    nodeid: str
    machine: str
    runs: list[BaselineRun]
    #: Runs made by one ``opprof baseline update`` share a batch; a new batch replaces them.
    batch: str = ""

    def samples(self) -> dict[Key, list[np.ndarray]]:
        """Each op's samples, one array per run that has it."""
        found: dict[Key, list[np.ndarray]] = {}
        for run in self.runs:
            for op in run.ops:
                found.setdefault((op["name"], op["occurrence"]), []).append(
                    np.asarray(op["samples_ns"], dtype=float))
        return found

    def op_ids(self) -> dict[Key, int]:
        """OP_IDs as the latest run numbered them."""
        ids: dict[Key, int] = {}
        for run in self.runs:
            ids.update({(op["name"], op["occurrence"]): op["op_id"] for op in run.ops})
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
        """The mean reference-probe time of the runs that recorded one."""
        values = [r.meta.get("probe_ns") for r in self.runs]
        values = [v for v in values if isinstance(v, (int, float)) and v > 0]
        return float(np.mean(values)) if values else None

    def to_profile(self, run: int = -1) -> Profile:
        """One stored run as a Profile (its counted samples; nothing skipped)."""
        r = self.runs[run]
        width = max([len(op["samples_ns"]) for op in r.ops] + [len(r.wall_ns)])
        samples = np.full((width, len(r.ops)), np.nan)
        for k, op in enumerate(r.ops):
            values = op["samples_ns"]
            samples[width - len(values):, k] = values
        return Profile(
            nodeid=self.nodeid, backend=str(r.meta.get("backend", "?")),
            device=str(r.meta.get("device", "?")), skip=0,
            ops=[OpInfo(k, op["name"], op["occurrence"], op.get("depth", 0), op.get("phase"))
                 for k, op in enumerate(r.ops)],
            samples=samples, phase_samples=np.full((width, 0), np.nan), phases=[],
            wall=_right_aligned(r.wall_ns, width), op_time=_right_aligned(r.op_time_ns, width),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "nodeid": self.nodeid, "machine": self.machine,
                "batch": self.batch, "runs": [r.to_dict() for r in self.runs]}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Baseline:
        """Validated data only: anything else raises :class:`BaselineError`."""
        if not isinstance(data, dict):
            raise BaselineError(f"{where}: not a baseline (a JSON object was expected)")
        schema = data.get("schema")
        if schema != SCHEMA:
            raise BaselineError(f"{where}: schema {schema!r} is not {SCHEMA!r}")
        try:
            runs = [_parse_run(r) for r in data["runs"]]
            if not runs:
                raise ValueError("no runs")
            return cls(nodeid=_str(data["nodeid"]), machine=_str(data["machine"]),
                       runs=runs, batch=_str(data.get("batch", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise BaselineError(f"{where}: malformed baseline ({type(exc).__name__}: {exc})") \
                from None


def _right_aligned(values: list[int], width: int) -> np.ndarray:
    out = np.full(width, np.nan)
    if values:
        out[width - len(values):] = values
    return out


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _number_list(values: Any, what: str) -> list[float]:
    if not isinstance(values, list):
        raise TypeError(f"{what} is not a list")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v < 0:
            raise ValueError(f"{what} holds {v!r}; times are finite numbers >= 0")
    return values


def _parse_run(data: Any) -> BaselineRun:
    if not isinstance(data, dict):
        raise TypeError("a run is not an object")
    ops = data["ops"]
    if not isinstance(ops, list):
        raise TypeError("ops is not a list")
    for op in ops:
        if not isinstance(op, dict):
            raise TypeError("an op is not an object")
        _str(op["name"])
        for key in ("op_id", "occurrence"):
            if isinstance(op[key], bool) or not isinstance(op[key], int) or op[key] < 0:
                raise ValueError(f"{key} {op[key]!r} is not a whole number >= 0")
        _number_list(op["samples_ns"], f"samples of {op['name']!r}")
        if op.get("phase") is not None:
            _str(op["phase"])
        if isinstance(op.get("depth", 0), bool) or not isinstance(op.get("depth", 0), int):
            raise TypeError(f"depth {op.get('depth')!r} is not a whole number")
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise TypeError("meta is not an object")
    phases = data.get("phases", [])
    return BaselineRun(ops=ops, wall_ns=_number_list(data.get("wall_ns", []), "wall_ns"),
                       op_time_ns=_number_list(data.get("op_time_ns", []), "op_time_ns"),
                       phases=[_str(p) for p in phases], meta=meta)


class BaselineStore:
    """The baselines of one machine under ``root``."""

    def __init__(self, root: Path, machine: str, folder: Path | None = None) -> None:
        self.root = Path(root)
        self.machine = machine
        self.folder = folder or self.root / safe_name(machine)

    @classmethod
    def every_machine(cls, root: Path) -> list[BaselineStore]:
        """A store for each machine folder under ``root`` (named after its folder)."""
        root = Path(root)
        if not root.is_dir():
            return []
        return [cls(root, p.name, folder=p) for p in sorted(root.iterdir()) if p.is_dir()]

    def path_for(self, nodeid: str) -> Path:
        return self.folder / (safe_name(nodeid, always_hash=True) + ".json")

    def load(self, nodeid: str) -> Baseline | None:
        """The test's baseline; None when it has none here."""
        path = self.path_for(nodeid)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise BaselineError(f"{path}: cannot be read ({exc}){_FIX}") from None
        baseline = parse(text, path)
        if baseline.nodeid != nodeid:
            raise BaselineError(f"{path}: holds the baseline of {baseline.nodeid!r}, "
                                f"not {nodeid!r}{_FIX}")
        return baseline

    def record(self, nodeid: str, run: BaselineRun, batch: str, append: bool = False) -> Path:
        """Add ``run`` to the test's baseline: appended when ``batch`` is the stored
        one (runs of one ``opprof baseline update``) or ``append`` is set (a history
        grown run by run), else replacing what was there. The last
        :data:`MAX_RUNS` are kept."""
        path = self.path_for(nodeid)
        with self._locked():
            runs = [run]
            try:
                old = self.load(nodeid)
            except BaselineError:
                old = None  # an update is asked for: a broken file is replaced
            if old is not None and (append or (batch and old.batch == batch)):
                runs = [*old.runs, run][-MAX_RUNS:]
                batch = old.batch if append else batch
            baseline = Baseline(nodeid=nodeid, machine=self.machine, runs=runs, batch=batch)
            try:
                atomic_write(path, json.dumps(baseline.to_dict(), sort_keys=True, indent=1)
                             + "\n")
            except OSError as exc:
                raise BaselineError(f"{path}: cannot write the baseline ({exc}); make the "
                                    "folder writable or choose another with "
                                    "--opprof-baseline-dir") from None
        return path

    def entries(self) -> Iterator[tuple[Path, Baseline | BaselineError]]:
        """Every stored file of this machine, loaded or with the error that stops it."""
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*.json")):
            try:
                yield path, parse(path.read_text(encoding="utf-8"), path)
            except BaselineError as exc:
                yield path, exc
            except (OSError, UnicodeDecodeError) as exc:
                yield path, BaselineError(f"{path}: cannot be read ({exc})")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BaselineError(f"{self.folder}: cannot create the baseline folder ({exc}); "
                                "choose another with --opprof-baseline-dir") from None
        if fcntl is None:  # pragma: no cover
            yield
            return
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock


_FIX = ("; delete it, or rerun with --opprof-update-baseline "
        "(opprof baseline update) to write a new one")


def parse(text: str, path: Path | str) -> Baseline:
    if not text.strip():
        raise BaselineError(f"{path}: empty file{_FIX}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}: not JSON ({exc}){_FIX}") from None
    try:
        return Baseline.from_dict(data, str(path))
    except BaselineError as exc:
        raise BaselineError(f"{exc}{_FIX}") from None


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
