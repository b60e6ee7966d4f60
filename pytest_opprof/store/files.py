"""Files the plugin reads and writes: safe names, bounded reads, atomic writes.

Every file pytest-opprof touches goes through here, so that each rule holds once:

- reads are bounded (:func:`read_json`, the one parse path for files): at most
  ``jsontext.MAX_BYTES``, and only of a regular file (a FIFO is never opened blocking);
- writes are atomic (a reader sees the old file or the new one), honour the umask
  (baselines are committed and shared: 0644 under the usual umask, as JUnit's are),
  go through a symbolic link to the file it names (the link stays a link), and refuse
  a special file (``/dev/stdout``, a FIFO) instead of replacing it;
- an output path is checked before a run starts (:func:`output_problem`), so a bad
  ``--opprof-json`` is one line at start-up, not a failure after the whole run.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..model import jsontext


def safe_name(text: str, always_hash: bool = False, limit: int = 100) -> str:
    """A file name made of ``text``: safe characters kept, a hash when anything changed."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")[:limit] or "_"
    if always_hash or slug != text:
        slug += "-" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return slug


def machine_folders(root: Path) -> list[Path]:
    """The machine folders of the baseline directory ``root``: its folders, less those
    whose name starts with a dot (an update's staging folder is never a machine's)."""
    try:
        return sorted(p for p in Path(root).iterdir()
                      if p.is_dir() and not p.name.startswith("."))
    except OSError:  # no such folder, or not one
        return []


class FileTooLarge(OSError):
    """A file holds more than its reader accepts."""


class NotRegularFile(OSError):
    """A path names a FIFO, a device, a socket or a folder where a file was expected;
    its message says what to do (its ``filename``, when set, which path it was)."""

    def __str__(self) -> str:  # not OSError's "[Errno None] None: 'path'" once named
        return str(self.args[0])


def _kind(mode: int) -> str:
    return {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a device",
            stat.S_IFBLK: "a device", stat.S_IFSOCK: "a socket"}.get(stat.S_IFMT(mode),
                                                                   "not a regular file")


def read_bounded(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``path`` (links followed).

    FileNotFoundError when there is none; :class:`NotRegularFile` for a FIFO, device or
    folder (opened without blocking, so a FIFO cannot hang the caller);
    :class:`FileTooLarge` when it holds more than ``limit`` bytes, whatever its size
    says (``/proc`` files and growing files report another size than they hold).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"is {_kind(mode)}, not a regular file")
        claimed = os.fstat(fd).st_size
        if claimed > limit:  # refused unread
            raise FileTooLarge(f"is {claimed / 2**20:.0f} MB, more than the "
                               f"{limit / 2**20:g} MB read")
        # what it claims in one read (one buffer: joining one chunk copies nothing), then
        # whatever more it holds, up to one byte past the limit
        chunks, size, step = [], 0, max(claimed + 1, 1 << 20)
        while size <= limit and (chunk := os.read(fd, min(step, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise FileTooLarge(f"holds more than the {limit / 2**20:g} MB read")
        return b"".join(chunks)
    finally:
        os.close(fd)


T = TypeVar("T")


def read_json(path: Path, reader: jsontext.Reader[T]) -> T:
    """The file at ``path`` through the one parse path, at most
    :data:`jsontext.MAX_BYTES` of it read, or the reader's one line naming the file."""
    try:
        data = read_bounded(path, jsontext.MAX_BYTES)
    except OSError as exc:
        why = exc if isinstance(exc, (FileTooLarge, NotRegularFile)) else exc.strerror or exc
        raise reader.refusal(str(path), f"cannot be read ({why})") from None
    return reader.parse(data, str(path))


def _target(path: Path) -> Path:
    """Where a write to ``path`` lands: the file a symbolic link names (resolved), else
    ``path``; NotRegularFile when that is a special file or a folder. The kind is that
    of what ``path`` reaches (links followed by ``stat``): ``/dev/stdout`` on a pipe
    resolves to a name that does not exist (``pipe:[...]``) yet reaches a FIFO."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = stat.S_IFREG  # a new file (or a dangling link's new target)
    if not stat.S_ISREG(mode):
        raise NotRegularFile(f"is {_kind(mode)}, not a regular file; name a file to write")
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _mode_for(target: Path) -> int:
    """The mode a write to ``target`` gives: the old file's, else 0666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def _stage(target: Path, data: bytes) -> Path:
    """``data`` in a new temporary file beside ``target`` (same folder, so a rename
    replaces it), written whole (``os.write`` until done), its mode set and synced."""
    mode = _mode_for(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return Path(tmp)


def replace_all(files: Sequence[tuple[Path, str]]) -> None:
    """Write every file of ``files`` (path, text), or none: each text is staged beside
    its file first (all of them, and a hard link kept of each old file), and only then
    are the files replaced, one rename each. When anything fails (a full disk while
    staging, a rename refused), the files already replaced get their old content back,
    those that were new are removed, and every temporary file goes: each file is as it
    was. The OSError that stopped it is raised, its ``filename`` the file it was at."""
    # a folder or a FIFO where a file goes: refused before anything is written
    targets = [_with_name(Path(path), _target, Path(path)) for path, _ in files]
    staged: list[Path] = []
    kept: list[Path | None] = []
    done = 0
    try:
        for target, (_, text) in zip(targets, files, strict=True):
            staged.append(_with_name(target, _stage, target, text.encode("utf-8")))
        for target in targets:
            kept.append(_with_name(target, _keep, target))
        for target, tmp in zip(targets, staged, strict=True):
            _with_name(target, os.replace, tmp, target)
            done += 1
    except BaseException:
        for target, old in reversed(list(zip(targets[:done], kept, strict=False))):
            with contextlib.suppress(OSError):
                if old is None:
                    os.unlink(target)
                else:
                    os.replace(old, target)
        for path in [*staged[done:], *[k for k in kept[done:] if k is not None]]:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise
    for old in filter(None, kept):
        with contextlib.suppress(OSError):
            os.unlink(old)


def _keep(target: Path) -> Path | None:
    """A hard link to the file at ``target`` (its old content, to put back), or None
    when there is none; a copy where the file system has no hard links."""
    if not os.path.lexists(target):
        return None
    kept = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.old.tmp")
    try:
        os.link(target, kept)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        shutil.copy2(target, kept)
    return kept


def _with_name(path: Path, step: Callable[..., T], *args: Any) -> T:
    """``step(*args)``; an OSError it raises names ``path`` (its ``filename``), so the
    caller's line names the file it stopped at, not a temporary file."""
    try:
        return step(*args)
    except OSError as exc:
        exc.filename, exc.filename2 = str(path), None  # not a temporary file's name
        raise


_FULL = "the disk is full (or the quota reached): free some space and rerun"
_WRITABLE = "make the folder writable, or write elsewhere"
#: What to do about a write's OSError, by what it is: a full disk is not fixed by
#: permissions, nor a folder in the way by free space.
_ADVICE = {errno.ENOSPC: _FULL, getattr(errno, "EDQUOT", errno.ENOSPC): _FULL,
           errno.EACCES: _WRITABLE, errno.EPERM: _WRITABLE,
           errno.EROFS: "the file system is read-only: write to a writable folder",
           errno.EISDIR: "a folder stands where the file goes: move it away",
           errno.ENOTDIR: "a file stands where a folder of the path goes: move it away",
           errno.ENAMETOOLONG: "the path is too long: write to a shorter one"}


def write_problem(exc: OSError) -> str:
    """Why a write failed and what to do, for a line ``PATH: cannot write ...``:
    ``(No space left on device); the disk is full ...``."""
    if isinstance(exc, NotRegularFile):
        return f"({str(exc).split(';')[0]}); move what is there away"
    advice = _ADVICE.get(exc.errno or 0, "check the folder, or write elsewhere")
    return f"({exc.strerror or exc}); {advice}"


def output_problem(path: Path, *, folder: bool = False) -> str | None:
    """Why ``path`` cannot be written as an output (a file, or a folder of files when
    ``folder``), or None when it can. Nothing is created."""
    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            return "is a file, not a folder; name a folder"
        existing = path
        while not os.path.lexists(existing):  # a dangling link is there: mkdir fails on it
            existing = existing.parent
        if not existing.is_dir():
            what = "a file" if existing.exists() else "a link to nothing"
            return f"{existing} is {what}, not a folder"
        if not os.access(existing, os.W_OK | os.X_OK):
            return f"{existing} is not writable"
        return None
    try:
        target = _target(path)
    except NotRegularFile as exc:
        return str(exc)
    parent = target.parent
    if not parent.is_dir():
        return f"its folder {parent} does not exist" if not parent.exists() \
            else f"{parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"its folder {parent} is not writable"
    return None
