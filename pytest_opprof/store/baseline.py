"""Per-op baselines on disk, one JSON file per test, namespaced by machine.

Layout: ``<baseline dir>/<machine key>/<test>.json``. File and folder names are
made from the machine key and the node id by keeping letters, digits, ``.``,
``_`` and ``-`` and adding a hash of the original, so every name stays inside
the baseline directory and distinct tests never share a file.

Writes go to a temporary file that replaces the old one, under an exclusive lock on
the machine folder, so that a reader sees the old file or the new one and concurrent
writers lose nothing.

Every file is read by one loader, :func:`load_file`, for the gate, update mode and the
``opprof`` commands alike: at most :data:`MAX_FILE_BYTES` bytes of a regular file, then
:func:`pytest_opprof.model.baseline.parse`. The data types are re-exported here, since
whoever reads the store deals in them.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

try:  # POSIX: lock the machine folder while a file is read, changed and replaced
    import fcntl
except ImportError:  # pragma: no cover - Windows: atomic replace only
    fcntl = None  # type: ignore[assignment]

from ..measure.measures import former
from ..model import conditions as run_conditions
from ..model.baseline import (
    FIX,
    MAX_OPS,
    MAX_RUNS,
    MAX_SAMPLES,
    OUTLYING_OPS,
    SCHEMA,
    Baseline,
    BaselineError,
    BaselineRun,
    check_run,
    check_values,
    parse,
    within_bounds,
)
from .files import (
    FileTooLarge,
    machine_folders,
    read_bounded,
    replace_all,
    safe_name,
    write_problem,
)

__all__ = ["MAX_RUNS", "MAX_SAMPLES", "OUTLYING_OPS", "SCHEMA", "STAGING_PREFIX", "Baseline",
           "BaselineError", "BaselineRun", "BaselineStore", "load_file", "obstacle", "parse",
           "read_text"]


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
        """A store for each machine folder under ``root`` (named after its folder)."""
        return [cls(Path(root), p.name, folder=p) for p in machine_folders(Path(root))]

    @staticmethod
    def stale_staging_folders(root: Path, older_than_s: float = 3600) -> list[Path]:
        """Staging folders of ``opprof baseline update`` commands that were killed
        (SIGKILL, power loss): never read as baselines; prune removes them."""
        now = time.time()
        found = []
        for path in sorted(Path(root).glob(STAGING_PREFIX + "*")):
            with contextlib.suppress(OSError):
                if path.is_dir() and now - path.stat().st_mtime > older_than_s:
                    found.append(path)
        return found

    def path_for(self, nodeid: str) -> Path:
        return self.folder / (safe_name(nodeid, always_hash=True) + ".json")

    def load(self, nodeid: str) -> Baseline | None:
        """The test's baseline; None when it has none here."""
        path = self.path_for(nodeid)
        try:
            baseline = load_file(path)
        except FileNotFoundError:
            return None
        if baseline.nodeid != nodeid:
            raise BaselineError(f"{path}: holds the baseline of {baseline.nodeid!r}, "
                                f"not {nodeid!r}{FIX}")
        return baseline

    def record(self, nodeid: str, run: BaselineRun, batch: str, append: bool = False) -> Path:
        """Add ``run`` to the test's baseline: appended when ``batch`` is the stored
        one (runs of one ``opprof baseline update``) or ``append`` is set (a history
        grown run by run), else replacing what was there. The last
        :data:`MAX_RUNS` are kept."""
        path = self.path_for(nodeid)
        if run.n_ops > MAX_OPS:
            raise BaselineError(f"{nodeid}: {run.n_ops} ops; a baseline holds at most "
                                f"{MAX_OPS} (profile fewer ops in this test)")
        check_run(run, nodeid)  # what the loader refuses is not written
        with self.locked():
            runs = [run]
            try:
                old = self.load(nodeid)
            except BaselineError as exc:
                if append:  # a history it cannot read (a newer schema, a merge conflict)
                    # is the user's: appending would replace it by this one run
                    raise BaselineError(f"this run is not appended, and the file is kept "
                                        f"as it was: {_without_fix(str(exc))}; resolve it "
                                        "(a git merge conflict?), or delete it to start "
                                        "a new history") from None
                old = None  # an update is asked for: a broken file is replaced
            if old is not None and append:
                _check_append(nodeid, old, run)
            if old is not None and (append or (batch and old.batch == batch)):
                runs = within_bounds([*old.runs, run])
                batch = old.batch if append else batch
            baseline = Baseline(nodeid=nodeid, machine=self.machine, runs=runs, batch=batch)
            # within the reader's value count too (commas in op names count): oldest first
            self._write(path, baseline.dumps(fit=True))
        return path

    @staticmethod
    def commit(pairs: Sequence[tuple[BaselineStore, BaselineStore]]
               ) -> list[tuple[BaselineStore, Baseline]]:
        """Copy every baseline of each staged store into its store (``pairs`` of (store,
        staging store of the same machine)): all files or none (:func:`write_all`),
        under every store's lock, so that two commands committing at once each leave
        whole batches. A machine folder made for it and left empty by a failure is
        removed again. Returns what was copied, each with its store."""
        found = [(store, path, entry) for store, staged in pairs
                 for path, entry in staged.entries()]
        broken = [entry for *_, entry in found if isinstance(entry, BaselineError)]
        if broken:
            raise broken[0]
        copied = [(store, path.name, entry) for store, path, entry in found
                  if isinstance(entry, Baseline)]
        files = [(store.folder / name, entry) for store, name, entry in copied]
        stores = sorted({store.folder: store for store, _ in pairs}.items())
        made = [folder for folder, _ in stores if not folder.exists()]
        try:
            with contextlib.ExitStack() as locks:
                for _, store in stores:  # in one order: two commits cannot deadlock
                    locks.enter_context(store.locked())
                write_all(files)
        except BaseException:
            for folder in made:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only when empty
            raise
        return [(store, entry) for store, _, entry in copied]

    def save(self, baseline: Baseline) -> None:
        """Write ``baseline`` as its test's file here, replacing what was there."""
        with self.locked():
            self._write(self.path_for(baseline.nodeid), baseline)

    def _write(self, path: Path, baseline: Baseline | str) -> None:
        write_all([(path, baseline)])

    def entries(self) -> Iterator[tuple[Path, Baseline | BaselineError]]:
        """Every stored file of this machine, loaded or with the error that stops it."""
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*.json")):
            try:
                yield path, load_file(path)
            except (BaselineError, FileNotFoundError) as exc:
                yield path, BaselineError(str(exc))

    def stale_temporary_files(self, older_than_s: float = 3600) -> list[Path]:
        """Temporary files of writers that were killed mid-write (SIGKILL, power loss):
        never read as baselines; ``opprof baseline prune --apply`` removes them."""
        if not self.folder.is_dir():
            return []
        now = time.time()
        found = []
        for path in sorted(self.folder.glob(".*.json.*.tmp")):
            with contextlib.suppress(OSError):
                if now - path.stat().st_mtime > older_than_s:
                    found.append(path)
        return found

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


def write_all(files: Sequence[tuple[Path, Baseline | str]]) -> None:
    """Every baseline written to its path, or none (:func:`replace_all`): a full disk or
    a folder in the way leaves each file as it was; one BaselineError line naming the file
    and the fix that fits the error (free space, permissions, what is in the way)."""
    try:
        replace_all([(path, baseline if isinstance(baseline, str) else baseline.dumps())
                     for path, baseline in files])
    except OSError as exc:
        path = exc.filename or (files[0][0] if files else "?")
        raise BaselineError(f"{path}: cannot write the baseline {write_problem(exc)} (or "
                            "choose another folder with --opprof-baseline-dir)"
                            + ("; no baseline was changed" if len(files) > 1 else "")) from None


def _without_fix(line: str) -> str:
    """A refusal's line without the advice every refusal ends with (:data:`FIX`)."""
    return line.replace(FIX, "")


def _check_append(nodeid: str, old: Baseline, run: BaselineRun) -> None:
    """``--opprof-append-baseline`` adds a run to a history only under the conditions of
    the runs already there: a history of mixed conditions judges no run fairly."""
    now = run.meta.get("conditions")
    problem = run_conditions.difference(old.conditions(), now) if now else None
    if problem:
        raise BaselineError(f"{nodeid}: this run is not appended to its baseline: {problem}")


#: A baseline file larger than this is refused unread (20 runs of 10,000 ops with 100
#: samples each stay well under it).
MAX_FILE_BYTES = 256 * 2**20


def read_text(path: Path) -> str:
    """The file's text; FileNotFoundError when there is none, else BaselineError for
    anything that stops it being read (not a regular file, unreadable, too large, not
    UTF-8, more values than a baseline holds). At most :data:`MAX_FILE_BYTES` are read,
    whatever the file claims, and the values are counted before the bytes become text."""
    try:
        data = read_bounded(path, MAX_FILE_BYTES)
        check_values(data.count(b","), path)
        return data.decode("utf-8")
    except FileNotFoundError:
        raise
    except NotADirectoryError:
        raise BaselineError(obstacle(path) or f"{path}: cannot be read") from None
    except FileTooLarge as exc:
        raise BaselineError(f"{path}: {exc}, more than a baseline can be "
                            f"({MAX_FILE_BYTES // 2**20} MB){FIX}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: cannot be read ({exc}){FIX}") from None


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
    """The one loader: the stored file at ``path`` read (bounded) and validated.

    The gate, update mode and every ``opprof baseline`` command read through it, so
    what one accepts, all accept. FileNotFoundError when there is no file, else
    :class:`BaselineError` with one line naming the file and what to do.
    """
    return parse(read_text(path), path, former)  # schema 2 too


