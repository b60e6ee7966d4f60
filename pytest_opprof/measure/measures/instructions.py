"""``instructions``: the instructions each op executed, counted by valgrind's callgrind in
one child process per session or xdist worker (``run.counting`` starts it and reads what
it counted; in the child the timer is :class:`~..timers.callgrind.CallgrindTimer`).

Counts are deterministic where the code is: the child runs with ``PYTHONHASHSEED=0``
(unless the user set it) and BLAS and OpenMP pinned to one thread where the user set no
thread count (threads that spin while they wait count instructions by chance).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ...model import conditions as run_conditions
from ...model.words import Unit, display_name, percent
from . import GateSettings, Measure, Unavailable, register

if TYPE_CHECKING:
    from ...model.profile import Profile
    from ..timers.base import Timer

#: The oldest valgrind this measure is tested with (Debian 11's is 3.16).
MIN_VALGRIND = (3, 16)
#: Iterations counted: counts are deterministic, so three show an op's count and whether
#: it repeats; more add valgrind's cost, not information.
COUNTED = 3
#: Set to a true value, a missing valgrind fails the tests that need it instead of
#: skipping them (``.ci/run`` sets it where valgrind is installed).
REQUIRE_VARIABLE = "OPPROF_REQUIRE_VALGRIND"
#: What the header says once: what it cannot see.
CANNOT_SEE = ("cannot see memory-bound effects (no cache model), threading, or CPU-feature "
              "dispatch (valgrind's CPU has no AVX-512)")
INSTALL = ("install valgrind (Debian/Ubuntu: apt-get install valgrind; Fedora: dnf install "
           "valgrind; macOS: not supported)")
REBUILD = ("pip install --force-reinstall --no-deps --no-cache-dir SOURCE, SOURCE being what "
           "it was installed from (its checkout or its sdist; in a checkout, pip install -e .)")
#: Counts of one op that vary more than this share, and by more than this many
#: instructions, between counted iterations are not deterministic under callgrind
#: (threads, randomness): the summary says so. The smallest ops vary by a few hundred
#: instructions (the allocator's state: add_tiny counted 7,593 to 7,842 in one process).
UNSTEADY = 0.005
UNSTEADY_INSTRUCTIONS = 1000


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


def extension() -> ModuleType | None:
    from ..timers import callgrind  # deferred: it loads numpy

    return callgrind.extension()


def problem() -> str | None:
    """Why this measure cannot run here (one line, with what to do), or None."""
    if sys.platform != "linux":
        return f"needs valgrind on Linux, not {sys.platform}"
    version = valgrind_version()
    if version is None:
        return f"needs valgrind on PATH: {INSTALL}"
    if version == ():
        return "`valgrind --version` gave no version: check the valgrind on PATH"
    if version < MIN_VALGRIND:
        return (f"needs valgrind {version_text(MIN_VALGRIND)} or newer, found "
                f"{version_text(version)}: {INSTALL}")
    if extension() is None:
        return ("pytest-opprof was built without valgrind's headers (valgrind/callgrind.h); "
                f"install valgrind, which ships them, then reinstall pytest-opprof: {REBUILD}")
    return None


def in_child() -> bool:
    from ..timers.callgrind import OUT_VARIABLE

    requests = extension()
    return bool(os.environ.get(OUT_VARIABLE)) and requests is not None and requests.running()


def child_environment(environ: dict[str, str] | os._Environ[str] = os.environ
                      ) -> dict[str, str]:
    """A fixed hash seed and one BLAS thread, unless the user set them."""
    env = {}
    if not environ.get("PYTHONHASHSEED"):
        env["PYTHONHASHSEED"] = "0"
    if not any(environ.get(name) for name in run_conditions.BLAS_PINNING):
        env.update(dict.fromkeys(run_conditions.BLAS_PINNING, "1"))
    return env


def _blas() -> str:
    """numpy's BLAS as its build recorded it: ``scipy-openblas 0.3.30``."""
    try:
        import numpy as np

        config: Any = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '?')}"
    except Exception:  # an older numpy, another build: its version stands for it
        return "unknown"


@register
class Instructions(Measure):
    name = "instructions"
    help = ("the instructions it executed, counted by valgrind's callgrind in a child "
            "process: steady on a shared runner")
    unit = Unit.COUNT
    counts = ("instructions", "instr")
    figure = "instructions executed"
    source = "callgrind"
    #: Counts agree between processes to a median of 0.005% (benchmarks/RESULTS.md,
    #: "Instruction counts") and differ by a few instructions per op where hash seeds or
    #: allocators differ: a floor of instructions per call, a tiny prior spread and an
    #: absolute jitter in instructions. No drift: no machine speed moves a count, so a
    #: change shared by every op (a slower common helper) is a change of the code. No
    #: rank test, no re-run: three counted iterations of a count that repeats say what
    #: thirty would.
    gate = GateSettings(tolerance=0.01, floor=50.0, tau_prior=0.0005, tau_floor=0.0001,
                        jitter=20.0, min_samples=1, rank_test=False, drift=False,
                        spread_inflation=1.0, confirms=False)
    #: Counts repeat: two runs show what five would.
    baseline_runs = 2
    key = "callgrind"
    formerly = (("cpu", "instructions"),)
    probed = False
    repeats = True
    child_counts = COUNTED
    child_tool = "callgrind"

    def __init__(self, worker: int | None = None) -> None:
        from ..timers.callgrind import DEVICE

        self.in_child = in_child()
        if not self.in_child:
            found = problem()
            if found is not None:
                raise Unavailable(found)
        self.device = DEVICE

    def timer(self, skip: int) -> Timer:
        """Callgrind's dumps in the child; the tests' own processes run on the host's clock."""
        if self.in_child:
            from ..timers.callgrind import OUT_VARIABLE, CallgrindTimer

            return CallgrindTimer(os.environ[OUT_VARIABLE], skip)
        from ..timers.cpu import CpuTimer

        return CpuTimer()

    def header(self) -> str:
        return (f"opprof: measure instructions (per-op instructions executed, counted by "
                f"callgrind, valgrind {version_text(valgrind_version())}, in one child "
                f"process per session or xdist worker; the skipped iterations, then "
                f"{COUNTED} counted); it {CANNOT_SEE}")

    def machine_key(self) -> str:  # counts depend on the architecture, not the machine
        return f"{self.key}-{platform.machine()}"

    def conditions(self, workerinput: Any) -> run_conditions.Conditions:
        """What counts depend on besides the code (not the machine's speed, model or
        workers): valgrind, the architecture, Python, numpy and its BLAS, the hash seed and
        the thread counts the child runs with."""
        import numpy as np

        env = {**os.environ, **child_environment()}
        return {
            "measure": self.name, "device": self.device,
            "valgrind": version_text(valgrind_version()), "architecture": platform.machine(),
            "python": platform.python_version(), "numpy": np.__version__, "blas": _blas(),
            "PYTHONHASHSEED": env.get("PYTHONHASHSEED"),
            **{name: env.get(name) for name in run_conditions.THREAD_VARIABLES}}

    def child_command(self, out: Path) -> tuple[list[str], dict[str, str]]:
        from ..timers.callgrind import OUT_VARIABLE

        binary = shutil.which("valgrind") or "valgrind"
        return ([binary, "--tool=callgrind", "--instr-atstart=no",
                 f"--callgrind-out-file={out}", "--trace-children=no", "-q"],
                {**child_environment(), OUT_VARIABLE: str(out)})

    @classmethod
    def unsteady(cls, profile: Profile) -> str | None:
        """What varied when an op's counts differ between counted iterations beyond
        :data:`UNSTEADY` (its margins widen), or None."""
        samples = profile.counted_matrix()
        if samples.shape[0] < 2:
            return None
        worst, name, over = 0.0, "", 0
        for info in profile.ops:
            column = samples[:, info.op_id]
            column = column[column > 0]
            if len(column) < 2 or column.max() - column.min() <= UNSTEADY_INSTRUCTIONS:
                continue
            spread = float(column.max() / column.min() - 1)
            over += spread > UNSTEADY
            if spread > worst:
                worst, name = spread, info.name
        if worst <= UNSTEADY:
            return None
        others = f" (and {over - 1} other op(s) over {UNSTEADY:.1%})" if over > 1 else ""
        return (f"op {display_name(name)} counted {percent(1 + worst)} more instructions in "
                f"one counted iteration than in another{others}")

    #: What the tests :meth:`unsteady` names have in common, said once for the run.
    unsteady_words = ("under callgrind, ops counted differently between counted iterations, "
                      "not deterministic there (threads that spin, randomness seeded per run, "
                      "inputs changed in place, caches filled on first use); their margins "
                      "widen to match")
