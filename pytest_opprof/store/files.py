"""Files the plugin reads and writes: safe names, bounded reads, atomic writes.

Every file pytest-opprof touches goes through here, so that each rule holds once:

- reads are bounded: at most ``limit`` bytes are read whatever ``fstat`` says, and only
  from a regular file (a FIFO, a device or a folder is refused, never opened blocking);
- writes are atomic (a reader sees the old file or the new one), honour the umask
  (baselines are committed and shared: 0644 under the usual umask, as JUnit's are),
  go through a symbolic link to the file it names (the link stays a link), and refuse
  a special file (``/dev/stdout``, a FIFO) instead of replacing it;
- an output path is checked before a run starts (:func:`output_problem`), so a bad
  ``--opprof-json`` is one line at start-up, not a failure after the whole run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
from pathlib import Path


def safe_name(text: str, always_hash: bool = False, limit: int = 100) -> str:
    """A file name made of ``text``: safe characters kept, a hash when anything changed."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")[:limit] or "_"
    if always_hash or slug != text:
        slug += "-" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return slug


class FileTooLarge(OSError):
    """A file holds more than its reader accepts."""


class NotRegularFile(OSError):
    """A path names a FIFO, a device, a socket or a folder where a file was expected."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


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
            raise FileTooLarge(f"is {claimed / 2**20:.0f} MB")
        # what it claims in one read (one buffer: joining one chunk copies nothing), then
        # whatever more it holds, up to one byte past the limit
        chunks, size, step = [], 0, max(claimed + 1, 1 << 20)
        while size <= limit:
            chunk = os.read(fd, min(step, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise FileTooLarge(f"holds more than {limit / 2**20:g} MB")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one.

    The new file gets the mode a plain ``open(path, "w")`` would give it (0666 less the
    umask), or the old file's mode when it replaces one. A symbolic link is written
    through; a special file is refused with :class:`NotRegularFile`.
    """
    target = _target(Path(path))
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
