"""``--opprof-measure=instructions``: the profiled tests counted under callgrind.

The user runs plain ``pytest --opprof-measure=instructions``. Before the first test
runs, the session starts **one** child, ``valgrind --tool=callgrind --instr-atstart=no
python -m pytest NODEIDS``, for every profiled test it collected (under xdist, each
worker one child for its share of them: the profiled tests in collection order, every
n-th from the worker's number), and waits for it. In the child, instrumentation is off
through start-up and collection and on only inside each test's ``iterations()``
(:class:`~pytest_opprof.measure.timers.callgrind.CallgrindTimer`); its records come
back through the launcher's channel with every op's instruction counts.

The tests then run natively as usual (their outcome is their own), and each profiled
test is judged on the counts its child measured, not on its native times. A worker's
share is written to a file of the run's folder once counted, so that a test counted
by another worker's child is judged wherever xdist runs it.

Counts are deterministic where the code is: the child runs with ``PYTHONHASHSEED=0``
(unless the user set it) and BLAS and OpenMP pinned to one thread where the user set
no thread count (threads that spin while they wait count instructions by chance).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import OpprofError
from ..measure.timers.callgrind import DEVICE, OUT_VARIABLE, extension
from ..model.conditions import BLAS_PINNING
from .launcher import run_pytest
from .rerun import profiling, selection_free

if TYPE_CHECKING:
    from ..model.profile import Profile

#: The oldest valgrind this measure is tested with (Debian 11's is 3.16).
MIN_VALGRIND = (3, 16)
#: Iterations counted under this measure: counts are deterministic, so three show an
#: op's count and whether it repeats; more add valgrind's cost, not information.
COUNTED = 3
#: Set to a true value, a missing valgrind fails the tests that need it instead of
#: skipping them (``.ci/run`` sets it where valgrind is installed).
REQUIRE_VARIABLE = "OPPROF_REQUIRE_VALGRIND"
#: What the header says once: the measure, and what it cannot see.
CANNOT_SEE = ("cannot see memory-bound effects (no cache model), threading, or CPU-feature "
              "dispatch (valgrind's CPU has no AVX-512)")
INSTALL = ("install valgrind (Debian/Ubuntu: apt-get install valgrind; Fedora: dnf install "
           "valgrind; macOS: not supported)")
REBUILD = ("pip install --force-reinstall --no-deps --no-cache-dir SOURCE, SOURCE being what "
           "it was installed from (its checkout or its sdist; in a checkout, pip install -e .)")
#: How long a child may run, at most, per profiled test it counts (valgrind runs code
#: about 50 times slower than natively), and at least.
CHILD_SECONDS_PER_TEST = 600.0
CHILD_MIN_SECONDS = 900.0
#: How often a worker looks for another worker's share.
POLL_S = 0.2


@cache
def valgrind_version() -> tuple[int, ...] | None:
    """The installed valgrind's version (3, 19, 0), or None when there is none on PATH."""
    binary = shutil.which("valgrind")
    if binary is None:
        return None
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(g) for g in match.groups() if g is not None) if match else ()


def version_text(version: tuple[int, ...] | None) -> str:
    return ".".join(str(v) for v in version) if version else "unknown"


def problem() -> str | None:
    """Why this measure cannot run here (one line, with what to do), or None."""
    if sys.platform != "linux":
        return f"--opprof-measure=instructions needs valgrind on Linux, not {sys.platform}"
    version = valgrind_version()
    if version is None:
        return f"--opprof-measure=instructions needs valgrind on PATH: {INSTALL}"
    if version == ():
        return ("--opprof-measure=instructions: `valgrind --version` gave no version: check "
                "the valgrind on PATH")
    if version < MIN_VALGRIND:
        return (f"--opprof-measure=instructions needs valgrind {version_text(MIN_VALGRIND)} "
                f"or newer, found {version_text(version)}: {INSTALL}")
    if extension() is None:
        return ("--opprof-measure=instructions: pytest-opprof was built without valgrind's "
                "headers (valgrind/callgrind.h); install valgrind, which ships them, then "
                f"reinstall pytest-opprof: {REBUILD}")
    return None


def in_child() -> bool:
    """Whether this process is the child counting under callgrind."""
    requests = extension()
    return bool(os.environ.get(OUT_VARIABLE)) and requests is not None and requests.running()


def header_line() -> str:
    return (f"opprof: measure instructions (per-op instructions executed, counted by "
            f"callgrind, valgrind {version_text(valgrind_version())}, in one child process "
            f"per session or xdist worker; skip 1, count {COUNTED}); it {CANNOT_SEE}")


def child_environment(environ: dict[str, str] | os._Environ[str] = os.environ
                      ) -> dict[str, str]:
    """What the child's environment adds: a fixed hash seed and one BLAS thread, unless
    the user set them."""
    env = {}
    if not environ.get("PYTHONHASHSEED"):
        env["PYTHONHASHSEED"] = "0"
    if not any(environ.get(name) for name in BLAS_PINNING):
        env.update(dict.fromkeys(BLAS_PINNING, "1"))
    return env


def conditions() -> dict[str, str | int | None]:
    """What instruction counts depend on besides the code, recorded with each baseline
    run and compared with its baseline's: not the machine's speed, nor its model, nor
    xdist's workers; valgrind's version, the architecture, Python's and numpy's versions
    and its BLAS, the hash seed and the thread counts the child runs with."""
    import numpy as np

    env = {**os.environ, **child_environment()}
    from ..model.conditions import THREAD_VARIABLES

    return {
        "backend": "cpu", "measure": "instructions",
        "device": DEVICE,
        "valgrind": version_text(valgrind_version()), "architecture": platform.machine(),
        "python": platform.python_version(), "numpy": np.__version__, "blas": _blas(),
        "PYTHONHASHSEED": env.get("PYTHONHASHSEED"),
        **{name: env.get(name) for name in THREAD_VARIABLES}}


def _blas() -> str:
    """numpy's BLAS as its build recorded it: ``scipy-openblas 0.3.30``."""
    try:
        import numpy as np

        config: Any = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '?')}"
    except Exception:  # an older numpy, another build: its version stands for it
        return "unknown"


#: Counts of one op that vary more than this share, and by more than this many
#: instructions, between counted iterations are not deterministic under callgrind
#: (threads, randomness): the summary says so. The smallest ops vary by a few hundred
#: instructions (the allocator's state: add_tiny counted 7,593 to 7,842 in one process).
UNSTEADY = 0.005
UNSTEADY_INSTRUCTIONS = 1000


def unsteady_line(profile: Profile) -> str | None:
    """One line when the test's ops counted different instructions in different counted
    iterations (beyond :data:`UNSTEADY`), or None: its margins widen with it."""
    from ..model.words import display_name, percent

    samples = profile.counted_matrix()
    if samples.shape[0] < 2:
        return None
    worst, name, over = 0.0, "", 0
    for info in profile.ops:
        column = samples[:, info.op_id]
        column = column[column > 0]
        if len(column) < 2:
            continue
        spread = float(column.max() / column.min() - 1)
        if column.max() - column.min() <= UNSTEADY_INSTRUCTIONS:
            continue
        over += spread > UNSTEADY
        if spread > worst:
            worst, name = spread, info.name
    if worst <= UNSTEADY:
        return None
    others = f" (and {over - 1} other op(s) over {UNSTEADY:.1%})" if over > 1 else ""
    return (f"opprof: {display_name(profile.nodeid)}: under callgrind op {display_name(name)} "
            f"counted {percent(1 + worst)} more instructions in one counted iteration than "
            f"in another{others}: not deterministic there (threads that spin, randomness "
            "seeded per run, caches filled on first use); its margins widen to match")


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

    def __init__(self, config: pytest.Config, skip: int) -> None:
        self.config = config
        self.skip = skip
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
            say(f"opprof: counting instructions of {len(mine)} profiled test(s) under "
                "callgrind in one child process ...")
        self.share = run_child(self.config, mine, self.skip) if mine else Share()
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
            nodeid, "the callgrind child gave no counts for it")

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
    return Path(tempfile.gettempdir(), f"opprof-instructions-{run_id}")


def remove_shares(run_ids: Iterable[str]) -> None:
    """On the controller, once its workers are done: their shares' folders."""
    for run_id in run_ids:
        shutil.rmtree(shares_folder(run_id), ignore_errors=True)


def child_timeout(tests: int) -> float:
    return max(CHILD_MIN_SECONDS, CHILD_SECONDS_PER_TEST * tests)


def valgrind_command(prefix: Path) -> list[str]:
    binary = shutil.which("valgrind") or "valgrind"
    return [binary, "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={prefix}",
            "--trace-children=no", "-q"]


def run_child(config: pytest.Config, nodeids: Sequence[str], skip: int) -> Share:
    """Counts ``nodeids`` in one child under callgrind; a child that fails is one line."""
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="opprof-callgrind-") as tmp:
            prefix = Path(tmp, "dump")
            env = {**child_environment(), **selection_free(config)[1],
                   OUT_VARIABLE: str(prefix)}
            child = run_pytest(profiling(config, nodeids, backend="cpu", skip=skip,
                                         measure="instructions"),
                               cwd=config.invocation_params.dir, env=env, records=True,
                               timeout=child_timeout(len(nodeids)),
                               wrapper=valgrind_command(prefix))
    except OSError as exc:  # no temporary folder to dump into, or no process to start
        return Share(problem=f"the callgrind child could not run: {exc}",
                     seconds=time.monotonic() - started)
    seconds = time.monotonic() - started
    if child.timed_out:
        limit = child_timeout(len(nodeids))
        return Share(problem=f"the callgrind child ran past its {limit:.0f} s and was ended",
                     seconds=seconds)
    if child.records is None:
        return Share(problem=_why_nothing(child.code, child.records_problem or child.last),
                     seconds=seconds)
    profiles: dict[str, Profile] = {}
    missing: dict[str, str] = {}
    for record in child.records:
        if record.profile.counted > 0 and record.profile.measure == "instructions":
            profiles[record.nodeid] = record.profile
        else:
            missing[record.nodeid] = "under callgrind it counted no iteration"
    for nodeid in nodeids:
        if nodeid not in profiles and nodeid not in missing:
            missing[nodeid] = ("under callgrind it profiled nothing (it failed or was "
                               f"skipped there: {child.last})")
    return Share(profiles, "", missing, seconds)


def _why_nothing(code: int, last: str) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            import signal

            name = signal.Signals(-code).name
            hint = " (out of memory?)" if name == "SIGKILL" else ""
            return f"the callgrind child was ended by {name}{hint}; nothing was counted"
    return f"the callgrind child counted nothing (exit {code}): {last}"
