"""The store's policy for the commands that change it: which run replaces which, what a
staged update commits, and what pruning may remove.

``opprof baseline update`` takes its runs into a staging folder (:func:`open_staging`,
never read as baselines), replaces the runs that disagree with their test's others by
runs taken again (:func:`replace_runs`), then commits every staged baseline at once
(:func:`commit`, under :func:`pytest_opprof.signals.held`): the command completes or changes
nothing. ``opprof baseline prune`` removes what is provably stale (:func:`gone`,
:func:`stale`, :func:`remove`). Every error is one :class:`~pytest_opprof.errors.OpprofError`
line that says what to do.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..errors import OpprofError
from .baseline import (
    OUTLYING_OPS,
    STAGING_PREFIX,
    Baseline,
    BaselineError,
    BaselineRun,
    BaselineStore,
    obstacle,
)

#: Where the runs taken again go, inside the staging folder: a dot folder, so neither
#: a machine folder nor ever committed.
AGAIN = ".again"


# -- update: staging, replacing runs, committing ----------------------------------------

def staging_folder(root: Path, batch: str) -> Path:
    """The staging folder of the update ``batch`` under the store ``root``."""
    return Path(root) / f"{STAGING_PREFIX}{batch}"


def open_staging(root: Path, batch: str) -> Path:
    """The staging folder of ``batch``, made (with the store's folders); OpprofError
    when it cannot be."""
    folder = staging_folder(root, batch)
    try:
        folder.mkdir(parents=True)
    except OSError as exc:
        raise OpprofError(obstacle(folder) or f"{folder}: cannot create ({exc}); make its "
                          "folder writable or choose another with --opprof-baseline-dir") \
            from None
    return folder


def staged(staging: Path) -> list[tuple[BaselineStore, Baseline]]:
    """Every readable baseline staged under ``staging``, with its machine's store."""
    return [(store, baseline) for store in BaselineStore.every_machine(staging)
            for _, baseline in store.entries() if isinstance(baseline, Baseline)]


def again_folder(staging: Path) -> Path:
    """Where the runs taken again are stored, inside the staging folder."""
    return staging / AGAIN


def runs_taken_again(folder: Path, store: BaselineStore, nodeid: str) -> list[BaselineRun]:
    """The runs of ``nodeid`` that the extra runs into ``folder`` stored for ``store``'s
    machine (none when it did not run again: skipped, or deselected by chance)."""
    again = BaselineStore(folder, store.machine, folder=folder / store.folder.name)
    try:
        found = again.load(nodeid)
    except BaselineError:
        return []
    return found.runs if found is not None else []


def replace_runs(baseline: Baseline, outliers: Sequence[int],
                 again: Sequence[BaselineRun]) -> None:
    """The runs at ``outliers`` (indices into ``baseline.runs``, in order) replaced, one
    for one, by the runs taken again; those with none taken again stay."""
    for j, run in zip(outliers, again, strict=False):
        baseline.runs[j] = run


def mark_outlying(baseline: Baseline, outlying: Mapping[int, Sequence[tuple[str, int]]]) -> None:
    """Each run that still sits far from the others names its ops in its meta
    (``opprof baseline show`` says so)."""
    for j, keys in outlying.items():
        baseline.runs[j].meta[OUTLYING_OPS] = sorted({name for name, _ in keys})


def commit(staging: Path, root: Path, batch: str) -> int:
    """Every staged machine folder copied into the store, every file or none (a full
    disk or a folder in the way partway leaves each file as it was); the number of tests
    whose stored baseline now holds this batch (read back, not assumed)."""
    pairs = [(BaselineStore(root, staged_store.machine, folder=root / staged_store.folder.name),
              staged_store) for staged_store in BaselineStore.every_machine(staging)]
    stored = 0
    for store, baseline in BaselineStore.commit(pairs):  # every machine's files, or none
        with contextlib.suppress(BaselineError):
            kept = store.load(baseline.nodeid)
            stored += kept is not None and kept.batch == batch
    return stored


def discard(staging: Path) -> None:
    """The staging folder removed, whatever it holds."""
    shutil.rmtree(staging, ignore_errors=True)


# -- prune: what is provably stale ---------------------------------------------------

def function_of(nodeid: str) -> str:
    """The test function a node id is of: its parameters left out
    (``t.py::test_step[cuda]`` -> ``t.py::test_step``)."""
    module, sep, rest = nodeid.partition("::")
    return module + sep + rest.split("[", 1)[0]


def gone(nodeid: str, rootdir: Path, collected: set[str], files: set[str],
         narrowed: frozenset[str], functions: set[str] | None = None) -> bool:
    """Provably gone: its file no longer exists under the rootdir, or its file was
    collected in full (in ``files``, not ``narrowed`` by ``file.py::test``) without any
    test of its function (``functions``: those of ``collected``). A test merely
    deselected (-k, -m) or outside the paths given is kept, and so is a parameter this
    collection cannot see while its function is there (``test_step[cuda]`` on a machine
    without CUDA parametrizes ``test_step[cpu]`` only: another machine's live baseline)."""
    if nodeid in collected:
        return False
    module = nodeid.split("::", 1)[0]
    if not (rootdir / module).exists():
        return True
    if module not in files or module in narrowed:
        return False
    if functions is None:
        functions = {function_of(c) for c in collected}
    return function_of(nodeid) not in functions


def stale(stores: Sequence[BaselineStore], root: Path,
          is_gone: Callable[[str], bool]) -> list[tuple[Path, str]]:
    """What prune removes, each with what it is: the baselines of tests gone, the
    temporary files of interrupted writes, the staging folders of interrupted updates."""
    found = [(path, entry.nodeid) for store in stores for path, entry in store.entries()
             if isinstance(entry, Baseline) and is_gone(entry.nodeid)]
    found += [(path, "temporary file of an interrupted write")
              for store in stores for path in store.stale_temporary_files()]
    found += [(path, "staging folder of an interrupted update")
              for path in BaselineStore.stale_staging_folders(root)]
    return found


def remove(paths: Sequence[Path], root: Path) -> None:
    """Every path removed (a folder with what it holds), or none: each is first moved
    into one folder under the store ``root`` (a staging folder: never read as a machine,
    and pruned itself if this is killed), and only when all are there is it deleted; when
    one cannot be moved, those moved go back. OpprofError, one line, when one cannot be."""
    trash = Path(root) / f"{STAGING_PREFIX}prune-{uuid.uuid4().hex[:12]}"
    moved: list[tuple[Path, Path]] = []
    path = trash
    try:
        trash.mkdir()
        for k, path in enumerate(paths):
            try:
                os.replace(path, trash / str(k))
            except FileNotFoundError:
                continue  # removed meanwhile: what was asked holds
            moved.append((path, trash / str(k)))
    except OSError as exc:
        for back, there in reversed(moved):
            with contextlib.suppress(OSError):
                os.replace(there, back)
        with contextlib.suppress(OSError):
            trash.rmdir()
        raise OpprofError(f"{path}: cannot remove ({exc.strerror or exc}); nothing was "
                          "removed") from None
    shutil.rmtree(trash, ignore_errors=True)
