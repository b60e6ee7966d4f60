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
test is judged on the figures its child took, not on its native times. A worker's
share is written to a file of the run's folder once counted, so that a test counted
by another worker's child is judged wherever xdist runs it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import OpprofError
from .launcher import run_pytest
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

    def to_json(self) -> str:
        return json.dumps({"problem": self.problem, "missing": self.missing,
                           "seconds": self.seconds,
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

        profiles = [Profile.from_dict(p) for p in data["profiles"]]
        return cls({p.nodeid: p for p in profiles}, str(data["problem"]),
                   {str(k): str(v) for k, v in data["missing"].items()},
                   float(data["seconds"]))


def profiled(items: Iterable[pytest.Item]) -> list[str]:
    """The node ids of the tests that use the profiler, in collection order."""
    return [item.nodeid for item in items if "gpu_profiler" in getattr(item, "fixturenames", ())]


class Counting:
    """The parent's side: starts this process's child, and finds each test's counts."""

    def __init__(self, config: pytest.Config, skip: int, measure: Measure) -> None:
        self.config = config
        self.skip = skip
        self.measure = measure
        workerinput = getattr(config, "workerinput", None)
        self.worker, self.workers = 0, 1
        self.folder: Path | None = None
        if isinstance(workerinput, dict):
            self.worker = int(str(workerinput.get("workerid", "gw0")).removeprefix("gw") or 0)
            self.workers = int(workerinput.get("workercount", 1) or 1)
            self.folder = shares_folder(str(workerinput.get("testrunuid", "run")))
        #: The profiled tests of the collection, each with its place in it.
        self._index: dict[str, int] = {}
        self.share: Share | None = None
        self.others: dict[int, Share | None] = {}

    def shard_of(self, nodeid: str) -> int:
        return self._index[nodeid] % self.workers

    def count(self, items: Sequence[pytest.Item], say: Any = None) -> None:
        """Runs this process's child over its share of the profiled tests."""
        order = profiled(items)
        self._index = {nodeid: k for k, nodeid in enumerate(order)}
        mine = order[self.worker::self.workers]
        if say is not None and mine:
            say(f"opprof: counting {self.measure.counts[0]} of {len(mine)} profiled test(s) "
                f"under {self.measure.child_tool} in one child process ...")
        self.share = run_child(self.config, mine, self.skip, self.measure) if mine else Share()
        if say is not None and mine:
            say(f"opprof: counted in {self.share.seconds:.1f} s"
                + (f"; {self.share.problem}" if self.share.problem else ""))
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            from ..store.files import replace_all

            replace_all([(self.folder / f"share-{self.worker}.json", self.share.to_json())])

    def profile(self, nodeid: str) -> tuple[Profile | None, str]:
        """The test's counted profile, or None and why there is none."""
        if nodeid not in self._index:
            return None, "it was not collected before the run started; not counted"
        shard = self.shard_of(nodeid)
        share = self.share if shard == self.worker else self._other(shard)
        if share is None:
            return None, f"xdist worker gw{shard}'s child gave no counts"
        found = share.profiles.get(nodeid)
        if found is not None:
            return found, ""
        return None, share.problem or share.missing.get(
            nodeid, f"the {self.measure.child_tool} child gave no counts for it")

    def _other(self, shard: int) -> Share | None:
        """Another worker's share, waited for (its child started with this one's)."""
        if shard in self.others:
            return self.others[shard]
        if self.folder is None:
            return None
        path = self.folder / f"share-{shard}.json"
        deadline = time.monotonic() + child_timeout(len(self._index))
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        self.others[shard] = found = Share.read(path)  # its problem said for each of its tests
        return found


def shares_folder(run_id: str) -> Path:
    """Where the workers of xdist run ``run_id`` leave what their children counted."""
    return Path(tempfile.gettempdir(), f"opprof-counts-{run_id}")


def remove_shares(run_ids: Iterable[str]) -> None:
    """On the controller, once its workers are done: their shares' folders."""
    for run_id in run_ids:
        shutil.rmtree(shares_folder(run_id), ignore_errors=True)


def child_timeout(tests: int) -> float:
    return max(CHILD_MIN_SECONDS, CHILD_SECONDS_PER_TEST * tests)


def run_child(config: pytest.Config, nodeids: Sequence[str], skip: int,
              measure: Measure) -> Share:
    """Counts ``nodeids`` in one child under the measure's wrapper; a child that fails is
    one line."""
    started = time.monotonic()
    tool = measure.child_tool
    try:
        with tempfile.TemporaryDirectory(prefix=f"opprof-{tool}-") as tmp:
            wrapper, env = measure.child_command(Path(tmp, "dump"))
            child = run_pytest(profiling(config, nodeids, measure=measure.name, skip=skip),
                               cwd=config.invocation_params.dir,
                               env={**env, **selection_free(config)[1]}, records=True,
                               timeout=child_timeout(len(nodeids)), wrapper=wrapper)
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
        if record.profile.counted > 0 and record.profile.measure == measure.name:
            profiles[record.nodeid] = record.profile
        else:
            missing[record.nodeid] = f"under {tool} it counted no iteration"
    for nodeid in nodeids:
        if nodeid not in profiles and nodeid not in missing:
            missing[nodeid] = (f"under {tool} it profiled nothing (it failed or was "
                               f"skipped there: {child.last})")
    return Share(profiles, "", missing, seconds)


def _why_nothing(tool: str, code: int, last: str) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            import signal

            name = signal.Signals(-code).name
            hint = " (out of memory?)" if name == "SIGKILL" else ""
            return f"the {tool} child was ended by {name}{hint}; nothing was counted"
    return f"the {tool} child counted nothing (exit {code}): {last}"
