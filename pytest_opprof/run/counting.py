"""A measure whose figures a child process takes (``Measure.child_counts``; the
instructions measure's callgrind child): the parent's side.

The user runs plain ``pytest --opprof-measure=instructions``. Before the first test runs,
the session starts **one** child, the measure's wrapper around ``python -m pytest
NODEIDS`` (``valgrind --tool=callgrind --instr-atstart=no``), for every profiled test it
collected (under xdist, each worker one child for its share of them: the profiled tests
in collection order, every n-th from the worker's number), and waits for it. In the child
the measure's timer takes the figures (callgrind's counts, inside each test's
``iterations()`` only); its records come back through the launcher's channel.

The tests then run natively as usual (their outcome is their own), and each profiled
test is judged on the figures its child took, not on its native times. A test whose
stored baseline was taken under other conditions, known before the child starts
(Python, numpy, valgrind ...), is not counted: it is refused at once.

The channel between workers is a private folder that the xdist controller makes fresh
(``mkdtemp``, never a name from the command line) and hands to its workers in
``workerinput`` (:data:`FOLDER_KEY`). Each worker says there that it lives (its pid)
and leaves its share there once counted, so that a test counted by another worker's
child is judged wherever xdist runs it; a worker that waits for a share stops waiting
as soon as the worker that owes it is gone. The children's temporary folders lie in
that folder (or in the folder of the process that started this one,
``launcher.scratch``), which its owner removes once the whole group has ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import OpprofError
from .launcher import run_pytest, scratch
from .options import COUNTING_VARIABLE as COUNTING
from .rerun import profiling, selection_free

if TYPE_CHECKING:
    from ..measure.measures import Measure
    from ..model.profile import Profile

#: How long a child may run, at most, per profiled test it counts (valgrind runs code
#: about 50 times slower than natively), and at least.
CHILD_SECONDS_PER_TEST = 600.0
CHILD_MIN_SECONDS = 900.0
#: How often a worker looks for another worker's share.
POLL_S = 0.2
#: How long a worker waits for another to say it lives (they start together).
START_S = 120.0
#: The key of ``workerinput`` that names the run's private folder.
FOLDER_KEY = "opprof_counts"


# -- the parent ----------------------------------------------------------------------------

@dataclass
class Share:
    """What one child counted: each test's profile, and why a test has none."""

    profiles: dict[str, Profile] = field(default_factory=dict)
    #: Why the child gave nothing (one line), for every test it was to count.
    problem: str = ""
    #: Per test that the child ran but did not count: why.
    missing: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    #: Per test not counted, as its baseline's conditions differ from this run's: the line.
    refused: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"problem": self.problem, "missing": self.missing,
                           "seconds": self.seconds, "refused": self.refused,
                           "profiles": [p.to_dict() for p in self.profiles.values()]})

    @classmethod
    def read(cls, path: Path) -> Share:
        """A worker's share as :meth:`to_json` wrote it, through the one parse path; when
        it cannot be read, a share whose problem is the parse path's one line."""
        from ..model.jsontext import Reader
        from ..store.files import read_json

        try:
            return read_json(path, Reader(cls._from_dict, "share", "run the tests again"))
        except OpprofError as exc:
            return cls(problem=str(exc))

    @classmethod
    def _from_dict(cls, data: Any) -> Share:
        from ..model.profile import Profile

        def lines(found: Any) -> dict[str, str]:
            return {str(k): str(v) for k, v in found.items()}

        profiles = [Profile.from_dict(p) for p in data["profiles"]]
        return cls({p.nodeid: p for p in profiles}, str(data["problem"]),
                   lines(data["missing"]), float(data["seconds"]), lines(data["refused"]))


def profiled(items: Iterable[pytest.Item]) -> list[str]:
    """The node ids of the tests that use the profiler, in collection order."""
    return [item.nodeid for item in items if "gpu_profiler" in getattr(item, "fixturenames", ())]


def make_folder() -> Path:
    """On the xdist controller: the run's private folder, made fresh."""
    return Path(tempfile.mkdtemp(prefix="opprof-counts-", dir=scratch()))


class Counting:
    """The parent's side: starts this process's child, and finds each test's counts."""

    def __init__(self, config: pytest.Config, skip: int, measure: Measure) -> None:
        self.config = config
        self.skip = skip
        self.measure = measure
        workerinput = getattr(config, "workerinput", None)
        self.worker, self.workers = 0, 1
        #: The run's private folder (xdist), from the controller; None when serial.
        self.folder: Path | None = None
        if isinstance(workerinput, dict):
            self.worker = int(str(workerinput.get("workerid", "gw0")).removeprefix("gw") or 0)
            self.workers = int(workerinput.get("workercount", 1) or 1)
            found = workerinput.get(FOLDER_KEY)
            self.folder = Path(found) if isinstance(found, str) and found else None
            if self.folder is not None:
                with contextlib.suppress(OSError):  # then the others hear it is gone
                    (self.folder / f"worker-{self.worker}").write_text(
                        _identity(os.getpid()), encoding="ascii")
        #: The profiled tests of the collection, each with its place in it.
        self._index: dict[str, int] = {}
        self.share: Share | None = None
        self.others: dict[int, Share | None] = {}

    def shard_of(self, nodeid: str) -> int:
        return self._index[nodeid] % self.workers

    def count(self, items: Sequence[pytest.Item], say: Any = None,
              refusal: Callable[[pytest.Item], str | None] = lambda item: None) -> None:
        """Runs this process's child over its share of the profiled tests, less those
        whose baseline ``refusal`` refuses (said at once, never counted)."""
        order = profiled(items)
        self._index = {nodeid: k for k, nodeid in enumerate(order)}
        # a worker xdist started in place of a lost one counts nothing: its number is new
        mine = set(order[self.worker::self.workers] if self.worker < self.workers else ())
        refused = {item.nodeid: line for item in items if item.nodeid in mine
                   for line in [refusal(item)] if line}
        counted = [nodeid for nodeid in order if nodeid in mine and nodeid not in refused]
        if say is not None and refused:
            say(f"opprof: {len(refused)} profiled test(s) not counted: their baselines were "
                "taken under other conditions (each test's line says which)")
        if say is not None and counted:
            say(f"opprof: counting {self.measure.counts[0]} of {len(counted)} profiled test(s) "
                f"under {self.measure.child_tool} in one child process ...")
        self.share = run_child(self.config, counted, self.skip, self.measure,
                               self.folder) if counted else Share()
        self.share.refused = refused
        if say is not None and counted:
            say(f"opprof: counted in {self.share.seconds:.1f} s"
                + (f"; {self.share.problem}" if self.share.problem else ""))
        if self.folder is not None:
            from ..store.files import replace_all

            with contextlib.suppress(OSError):  # the others hear this worker is gone
                replace_all([(self.folder / f"share-{self.worker}.json", self.share.to_json())])

    def profile(self, nodeid: str) -> tuple[Profile | None, str]:
        """The test's counted profile, or None and why there is none (its whole line)."""
        nothing = f"no {self.measure.counts[0]} counted: "
        if nodeid not in self._index:
            return None, nothing + "it was not collected before the run started"
        shard = self.shard_of(nodeid)
        share = self.share if shard == self.worker else self._other(shard)
        if share is None:
            return None, nothing + "this xdist worker was given no folder to share counts in"
        if nodeid in share.refused:
            return None, share.refused[nodeid]
        found = share.profiles.get(nodeid)
        if found is not None:
            return found, ""
        return None, nothing + (share.problem or share.missing.get(
            nodeid, f"the {self.measure.child_tool} child gave no counts for it"))

    def _other(self, shard: int) -> Share | None:
        """Another worker's share, waited for while that worker lives (its child started
        with this one's), and no longer."""
        if shard in self.others:
            return self.others[shard]
        if self.folder is None:
            return None
        owed = len(range(shard, len(self._index), self.workers))
        self.others[shard] = found = wait_for_share(self.folder, shard, child_timeout(owed),
                                                    self.measure.child_tool)
        return found


def wait_for_share(folder: Path, shard: int, timeout: float, tool: str) -> Share:
    """Worker ``gw<shard>``'s share from ``folder``; once that worker is gone (or never
    said it lives, or outlived its child's ``timeout``), a share whose problem says so."""
    path, owner = folder / f"share-{shard}.json", folder / f"worker-{shard}"
    started = time.monotonic()
    while not path.exists():
        waited = time.monotonic() - started
        try:
            identity = owner.read_text(encoding="ascii")
        except OSError:  # not yet said, or the folder is gone
            identity = None
        if identity is not None and not _lives(identity) and not path.exists():
            return Share(problem=f"xdist worker gw{shard} ended before it shared what its "
                                 f"{tool} child counted (it crashed or was killed)")
        if identity is None and waited > START_S:
            return Share(problem=f"xdist worker gw{shard} never said it started ({START_S:.0f} "
                                 "s); its tests' counts cannot be found")
        if waited > timeout + START_S:
            return Share(problem=f"xdist worker gw{shard}'s {tool} child gave no counts in "
                                 f"{waited:.0f} s")
        time.sleep(POLL_S)
    return Share.read(path)


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name, or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _identity(pid: int) -> str:
    """A process as ``PID START``: its start time in clock ticks since boot (from /proc,
    "" where there is none) tells it from a later process given the same pid."""
    fields = _stat(pid)
    return f"{pid} {fields[19] if fields and len(fields) > 19 else ''}"


def _lives(identity: str) -> bool:
    """Whether the process :func:`_identity` wrote still runs (a zombie, killed and not
    yet reaped by xdist, does not)."""
    pid = identity.partition(" ")[0]
    if not pid.isdigit():
        return False
    fields = _stat(int(pid))
    if fields is None and not os.path.exists("/proc/self/stat"):  # no /proc to ask
        try:
            os.kill(int(pid), 0)
        except OSError:
            return False
        return True
    return fields is not None and fields[0] != "Z" and _identity(int(pid)) == identity


def child_timeout(tests: int) -> float:
    return max(CHILD_MIN_SECONDS, CHILD_SECONDS_PER_TEST * tests)


def run_child(config: pytest.Config, nodeids: Sequence[str], skip: int,
              measure: Measure, folder: Path | None = None) -> Share:
    """Counts ``nodeids`` in one child under the measure's wrapper, its temporary
    folders in ``folder`` (or :func:`.launcher.scratch`); a child that fails is one
    line, and each test it failed names its failure."""
    started = time.monotonic()
    tool = measure.child_tool
    files = list(dict.fromkeys(nodeid.partition("::")[0] for nodeid in nodeids))
    try:
        with tempfile.TemporaryDirectory(prefix=f"opprof-{tool}-",
                                         dir=folder or scratch()) as tmp:
            wrapper, env = measure.child_command(Path(tmp, "dump"))
            child = run_pytest(profiling(config, files, measure=measure.name, skip=skip),
                               cwd=config.invocation_params.dir,
                               env={**env, **selection_free(config)[1], COUNTING: "1"},
                               records=True, timeout=child_timeout(len(nodeids)),
                               wrapper=wrapper, nodeids=nodeids, folder=folder)
    except OSError as exc:  # no temporary folder to dump into, or no process to start
        return Share(problem=f"the {tool} child could not run: {exc}",
                     seconds=time.monotonic() - started)
    seconds = time.monotonic() - started
    if child.timed_out:
        limit = child_timeout(len(nodeids))
        return Share(problem=f"the {tool} child ran past its {limit:.0f} s and was ended",
                     seconds=seconds)
    if child.records is None:
        return Share(problem=_why_nothing(tool, child.code,
                                          child.records_problem or child.last),
                     seconds=seconds)
    profiles: dict[str, Profile] = {}
    missing: dict[str, str] = {}
    for record in child.records:
        if not record.passed:
            missing[record.nodeid] = _failed(tool, child.failed.get(record.nodeid))
        elif record.profile.counted > 0 and record.profile.measure == measure.name:
            profiles[record.nodeid] = record.profile
        else:
            missing[record.nodeid] = f"under {tool} it counted no iteration"
    for nodeid in nodeids:
        if nodeid in profiles or nodeid in missing:
            continue
        failed = child.failed.get(nodeid)
        missing[nodeid] = _failed(tool, failed) if failed else (
            f"under {tool} it profiled nothing (it was skipped or not collected there: "
            f"{child.last})")
    return Share(profiles, "", missing, seconds)


def _failed(tool: str, line: str | None) -> str:
    return f"it failed under {tool}: {line or 'see its output there'}"


def _why_nothing(tool: str, code: int, last: str) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            import signal

            name = signal.Signals(-code).name
            hint = " (out of memory?)" if name == "SIGKILL" else ""
            return f"the {tool} child was ended by {name}{hint}; nothing was counted"
    return f"the {tool} child counted nothing (exit {code}): {last}"
