"""Per-op baselines on disk: ``<baseline dir>/<machine key>/<test>.json``.

Names are made safe with a hash of the original (:func:`.files.safe_name`), so every
name stays inside the baseline directory and distinct tests never share a file. Writes
replace a file atomically under an exclusive lock on the machine folder, so that a
reader sees the old file or the new one and concurrent writers lose nothing. Every file
is read by :func:`load_file` (the one parse path), for the gate, update mode and the
``opprof`` commands alike, so what one accepts, all accept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

try:  # POSIX: lock the machine folder while a file is read, changed and replaced
    import fcntl
except ImportError:  # pragma: no cover - Windows: atomic replace only
    fcntl = None  # type: ignore[assignment]

from ..measure.measures import former
from ..model import conditions as run_conditions
from ..model.baseline import (
    APPENDED,
    FIX,
    MAX_RUNS,
    MAX_SAMPLES,
    OUTLYING_OPS,
    SCHEMA,
    Baseline,
    BaselineError,
    BaselineRun,
    check_run,
    reader,
)
from .files import machine_folders, read_json, replace_all, safe_name, write_problem

__all__ = ["APPENDED", "MAX_RUNS", "MAX_SAMPLES", "OUTLYING_OPS", "SCHEMA", "STAGING_PREFIX",
           "Baseline", "BaselineError", "BaselineRun", "BaselineStore", "load_file", "obstacle"]


#: ``opprof baseline update`` stages its runs in ``<baseline dir>/.staging-<batch>/``
#: (a machine folder never starts with a dot).
STAGING_PREFIX = ".staging-"


class BaselineStore:
    """The baselines of one machine under ``root``."""

    def __init__(self, root: Path, machine: str, folder: Path | None = None) -> None:
        self.root = Path(root)
        self.machine = machine
        self.folder = folder or self.root / safe_name(machine)

    @classmethod
    def every_machine(cls, root: Path) -> list[BaselineStore]:
        return [cls(Path(root), p.name, folder=p) for p in machine_folders(Path(root))]

    def path_for(self, nodeid: str) -> Path:
        return self.folder / (safe_name(nodeid, always_hash=True) + ".json")

    def load(self, nodeid: str) -> Baseline | None:
        """The test's baseline; None when it has none here."""
        path = self.path_for(nodeid)
        if not os.path.lexists(path):
            problem = obstacle(path)  # a file where a folder of the path goes
            if problem is not None:
                raise BaselineError(problem)
            return None
        baseline = load_file(path)
        if baseline.nodeid != nodeid:
            raise BaselineError(f"{path}: holds the baseline of {baseline.nodeid!r}, "
                                f"not {nodeid!r}; {FIX}")
        return baseline

    def record(self, nodeid: str, run: BaselineRun, batch: str, append: bool = False) -> Path:
        """Add ``run`` to the test's baseline: appended when ``batch`` is the stored
        one (runs of one ``opprof baseline update``) or ``append`` is set (a history
        grown run by run, each run marked :data:`APPENDED`: the gate judges against the
        runs of one code, ``Baseline.reference``), else replacing what was there. The last
        :data:`MAX_RUNS` are kept."""
        path = self.path_for(nodeid)
        if append:
            run = dataclasses.replace(run, meta={**run.meta, APPENDED: True})
        check_run(run, nodeid)  # what the loader refuses is not written
        with self.locked():
            runs = [run]
            try:
                old = self.load(nodeid)
            except BaselineError as exc:
                if append:  # a history it cannot read (a newer schema, a merge conflict)
                    # is the user's: appending would replace it by this one run
                    raise BaselineError("this run is not appended, and the file is kept as "
                                        f"it was: {str(exc).replace(f'; {FIX}', '')}; resolve "
                                        "it (a git merge conflict?), or delete it to start a "
                                        "new history") from None
                old = None  # an update is asked for: a broken file is replaced
            if old is not None and append:  # a history of mixed conditions judges no run fairly
                now = run.meta.get("conditions")
                problem = run_conditions.difference(old.conditions(), now) if now else None
                if problem:
                    raise BaselineError(f"{nodeid}: this run is not appended to its baseline: "
                                        f"{problem}")
            if old is not None and (append or (batch and old.batch == batch)):
                runs = [*old.runs, run][-MAX_RUNS:]
                batch = old.batch if append else batch
            baseline = Baseline(nodeid=nodeid, machine=self.machine, runs=runs, batch=batch)
            # within what a reader reads: the oldest runs dropped first
            write_all([(path, baseline.dumps(fit=True))])
        return path

    def save(self, baseline: Baseline) -> None:
        """Write ``baseline`` as its test's file here, replacing what was there."""
        with self.locked():
            write_all([(self.path_for(baseline.nodeid), baseline.dumps())])

    def entries(self) -> Iterator[tuple[Path, Baseline | BaselineError]]:
        """Every stored file of this machine, loaded or with the error that stops it."""
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*.json")):
            try:
                yield path, load_file(path)
            except BaselineError as exc:
                yield path, exc

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BaselineError(obstacle(self.folder / "_") or (
                f"{self.folder}: cannot create the baseline folder ({exc}); "
                "choose another with --opprof-baseline-dir")) from None
        if fcntl is None:  # pragma: no cover
            yield
            return
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock


def write_all(files: Sequence[tuple[Path, str]]) -> None:
    """Every baseline's text written to its path, or none (:func:`.files.replace_all`);
    one BaselineError line naming the file and the fix that fits the error."""
    try:
        replace_all(files)
    except OSError as exc:
        path = exc.filename or (files[0][0] if files else "?")
        raise BaselineError(f"{path}: cannot write the baseline {write_problem(exc)} (or "
                            "choose another folder with --opprof-baseline-dir)"
                            + ("; no baseline was changed" if len(files) > 1 else "")) from None


def obstacle(path: Path) -> str | None:
    """What stands where a folder of ``path`` should be: the nearest existing ancestor
    that is not a folder, named with what to do; None when there is none."""
    for parent in Path(path).parents:
        if parent.exists() or parent.is_symlink():
            if parent.is_dir():
                return None
            return (f"{parent}: is a file where a baseline folder should be; move it away, "
                    "or choose another folder with --opprof-baseline-dir (opprof: --dir)")
    return None


def load_file(path: Path) -> Baseline:
    """The stored file at ``path``, or one :class:`BaselineError` line naming the file,
    what is wrong and what to do."""
    return read_json(path, reader(former))  # schema 2 too
