"""The store's policy for the commands that change it.

``opprof baseline update`` takes its runs into a staging folder (never read as
baselines), replaces the runs that disagree with their test's others by runs taken
again, then commits every staged baseline at once (under
:func:`pytest_opprof.signals.held`): the command completes or changes nothing.
``opprof baseline prune`` removes only what is provably stale. Every error is one
:class:`~pytest_opprof.errors.OpprofError` line that says what to do.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    write_all,
)

# -- update: staging, replacing runs, committing ----------------------------------------

def open_staging(root: Path, batch: str) -> Path:
    """The staging folder of ``batch``, made (with the store's folders)."""
    folder = Path(root) / f"{STAGING_PREFIX}{batch}"
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
    """Where the runs taken again are stored: a dot folder, so neither a machine folder
    nor ever committed."""
    return staging / ".again"


def runs_taken_again(folder: Path, store: BaselineStore, nodeid: str) -> list[BaselineRun]:
    """The runs of ``nodeid`` that the extra runs into ``folder`` stored for ``store``'s
    machine (none when it did not run again: skipped, or deselected by chance)."""
    try:
        found = BaselineStore(folder, store.machine, folder=folder / store.folder.name
                              ).load(nodeid)
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
    disk or a folder in the way partway leaves each file as it was: :func:`write_all`),
    under every store's lock, so that two commands committing at once each leave whole
    batches; a machine folder made for it and left empty by a failure is removed again.
    Returns the number of tests whose stored baseline now holds this batch (read back,
    not assumed)."""
    pairs = [(BaselineStore(root, staged.machine, folder=root / staged.folder.name), staged)
             for staged in BaselineStore.every_machine(staging)]
    found = [(store, path, entry) for store, staged in pairs for path, entry in staged.entries()]
    broken = [entry for *_, entry in found if isinstance(entry, BaselineError)]
    if broken:
        raise broken[0]
    copied = [(store, path.name, entry) for store, path, entry in found
              if isinstance(entry, Baseline)]
    stores = sorted({store.folder: store for store, _ in pairs}.items())
    made = [folder for folder, _ in stores if not folder.exists()]
    try:
        with contextlib.ExitStack() as locks:
            for _, store in stores:  # in one order: two commits cannot deadlock
                locks.enter_context(store.locked())
            write_all([(store.folder / name, entry.dumps()) for store, name, entry in copied])
    except BaseException:
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty
        raise
    stored = 0
    for store, _, baseline in copied:
        with contextlib.suppress(BaselineError):
            kept = store.load(baseline.nodeid)
            stored += kept is not None and kept.batch == batch
    return stored


def discard(staging: Path) -> None:
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
    """What prune removes, each with what it is: the baselines of tests gone, and an
    hour on, the temporary files of writers and the staging folders of updates that
    were killed (SIGKILL, power loss), which are never read as baselines."""
    found = [(path, entry.nodeid) for store in stores for path, entry in store.entries()
             if isinstance(entry, Baseline) and is_gone(entry.nodeid)]
    found += [(path, "temporary file of an interrupted write")
              for store in stores for path in _older(store.folder.glob(".*.json.*.tmp"))]
    found += [(path, "staging folder of an interrupted update")
              for path in _older(Path(root).glob(STAGING_PREFIX + "*")) if path.is_dir()]
    return found


def _older(paths: Iterable[Path], seconds: float = 3600) -> list[Path]:
    found = []
    for path in sorted(paths):
        with contextlib.suppress(OSError):
            if time.time() - path.stat().st_mtime > seconds:
                found.append(path)
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
