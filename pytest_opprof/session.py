"""Per-run state: the resolved backend, the profiles taken, the gate, the summary.

The gate's and the reports' modules are imported where they are first used, not at
start-up: `pytest --collect-only` does not pay for them.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from . import __version__
from .errors import OpprofError
from .options import Settings, TestSettings, test_settings
from .profile import Profile
from .profiler import Profiler
from .timers import BackendUnavailable, Timer, build_timer, make_timer

if TYPE_CHECKING:
    from .baseline import Baseline, BaselineStore
    from .gate import TestResult

PROFILER = pytest.StashKey[tuple[Profiler, TestSettings]]()
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class OpprofSession:
    """Collects one Profile per profiled test, gates it, and reports at the end."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        try:
            # resolved once: "auto" becomes "cuda" or "cpu" here, and a missing GPU is
            # a usage error before any test runs
            probe = make_timer(settings.backend)
        except BackendUnavailable as exc:
            raise pytest.UsageError(str(exc)) from None
        self.backend = probe.kind
        self.device = probe.device
        self.xp = probe.xp
        self.machine = settings.machine_key or f"{self.backend}-{self.device}"
        self.profiles: dict[str, Profile] = {}
        self.results: dict[str, TestResult] = {}

    @cached_property
    def store(self) -> BaselineStore:
        from .baseline import BaselineStore

        return BaselineStore(self.settings.baseline_dir, self.machine)

    def new_timer(self) -> Timer:
        """A fresh timer of the resolved backend for one test (CuPy is not probed again)."""
        return build_timer(self.backend)

    def header_lines(self) -> list[str]:
        s = self.settings
        mode = "updating baselines" if s.update_baseline else f"tolerance {s.tolerance:.0%}"
        lines = [f"opprof: backend {self.backend} ({self.device}), verbosity {s.verbosity}, "
                 f"skip {s.skip}, iterations {s.iterations}",
                 f"opprof: machine {self.machine!r}, baselines in {self.store.folder} ({mode})"]
        if self.backend == "cpu" and s.gate and self.store.root.is_dir() and not any(
                os.environ.get(v) for v in BLAS_THREAD_VARIABLES):
            lines.append("opprof: BLAS threads are not pinned: on a shared runner, contention "
                         "can slow multi-threaded ops for minutes; set OPENBLAS_NUM_THREADS=1 "
                         "OMP_NUM_THREADS=1 for baselines and checks (README: 'On shared CPU "
                         "runners')")
        return lines

    # -- one test ----------------------------------------------------------------------
    def start(self, item: pytest.Item) -> Profiler:
        per_test = test_settings(item, self.settings)
        profiler = Profiler(self.new_timer(), skip=per_test.skip,
                            iterations=per_test.iterations, nodeid=item.nodeid)
        item.stash[PROFILER] = (profiler, per_test)
        return profiler

    def finish(self, profiler: Profiler) -> None:
        profiler.close()
        profile = profiler.profile
        if profile is not None:
            self.profiles[profile.nodeid] = profile

    def after_call(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """Gate the test, or record its baseline; a failing verdict fails this test only."""
        from .baseline import BaselineError, atomic_write
        from .gate import NOT_GATED, TestResult
        from .render.gate import failure_text, summary_line

        started = item.stash.get(PROFILER, None)
        profile = started[0].profile if started else None
        if profile is None or profile.counted == 0:
            return
        per_test = started[1]
        if self.settings.profile_out is not None and report.passed:
            try:
                atomic_write(self.settings.profile_out, profile.to_json())
            except OSError as exc:
                report.outcome = "failed"
                report.longrepr = f"opprof: --opprof-profile-out: cannot write ({exc})"
        if not self.settings.gate:
            return
        if not report.passed:
            self.results[item.nodeid] = TestResult(item.nodeid, NOT_GATED, self.machine, profile)
            return
        rerun = (lambda: self._rerun(item.nodeid, report.duration)) \
            if self.settings.confirm else None
        try:
            result = self._verdict(profile, per_test, rerun)
        except BaselineError as exc:
            report.outcome = "failed"
            report.longrepr = f"opprof: {exc}"
            return
        self.results[item.nodeid] = result
        if result.failed:
            report.outcome = "failed"
            report.longrepr = failure_text(result)
        if result.comparison is not None:
            report.sections.append(("opprof", summary_line(result)))

    def _verdict(self, profile: Profile, per_test: TestSettings,
                 rerun: Callable[[], Profile | None] | None) -> TestResult:
        from .baseline import BaselineRun
        from .gate import UPDATED, gate_config, judge

        config = gate_config(self.backend, per_test.tolerance, per_test.tolerances)
        if self.settings.update_baseline:
            result = judge(profile, None, machine=self.machine, config=config,
                           budgets=per_test.budgets, strict_ops=False)
            if not result.failed:  # an op over its budget keeps the old baseline
                run = BaselineRun.from_profile(profile, self.run_meta)
                path = self.store.record(profile.nodeid, run, self.settings.baseline_batch,
                                         append=self.settings.append_baseline)
                result.verdict, result.baseline_path = UPDATED, str(path)
            return result
        baseline = self.store.load(profile.nodeid)
        result = judge(profile, baseline, machine=self.machine, config=config,
                       budgets=per_test.budgets, strict_ops=self.settings.strict_ops,
                       probe_drift=self._probe_drift, rerun=rerun)
        if baseline is not None:
            result.baseline_path = str(self.store.path_for(profile.nodeid))
        return result

    def _rerun(self, nodeid: str, duration: float) -> Profile | None:
        """Profile ``nodeid`` again in a new pytest process (nothing gated there)."""
        config = self.config
        with tempfile.TemporaryDirectory(prefix="opprof-rerun-") as tmp:
            out = Path(tmp, "profile.json")
            args = [sys.executable, "-m", "pytest", nodeid, "-q", "-p", "no:cacheprovider",
                    f"--rootdir={config.rootpath}", f"--opprof-backend={self.backend}",
                    f"--opprof-skip={self.settings.skip}", "--opprof-verbosity=0",
                    "--opprof-no-gate", f"--opprof-profile-out={out}"]
            if config.inipath is not None:
                args += ["-c", str(config.inipath)]
            if config.pluginmanager.hasplugin("xdist"):
                args += ["-n", "0"]  # one test: no workers, whatever addopts say
            try:
                subprocess.run(args, cwd=config.rootpath, capture_output=True, check=False,
                               timeout=max(120.0, 10 * duration))
                return Profile.from_json(out.read_text(encoding="utf-8"))
            except (subprocess.TimeoutExpired, OSError, OpprofError):
                return None  # no confirmation: the first run's verdict stands

    # -- machine facts, measured once and only when needed -------------------------------
    @cached_property
    def probe_ns(self) -> float:
        from .probe import reference_probe

        return reference_probe(self.xp)

    def _probe_drift(self, baseline: Baseline) -> float | None:
        """The machine's speed now against the baseline's, by the reference probe (the
        fake backend's virtual clock has no machine speed to measure)."""
        then = baseline.probe_ns()
        if not then or self.backend == "fake":
            return None
        return self.probe_ns / then

    @cached_property
    def run_meta(self) -> dict[str, Any]:
        """What a baseline run records about where and when it was taken."""
        from pytest_benchmark.utils import get_commit_info

        return {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": get_commit_info(),
            "versions": self.versions,
            "probe_ns": None if self.backend == "fake" else self.probe_ns,
        }

    @cached_property
    def versions(self) -> dict[str, str]:
        found = {"python": platform.python_version(), "numpy": np.__version__,
                 "pytest-opprof": __version__, "platform": platform.platform()}
        if "cupy" in sys.modules:
            found["cupy"] = sys.modules["cupy"].__version__
        return found

    # -- the end -----------------------------------------------------------------------
    def report(self, tr: pytest.TerminalReporter) -> None:
        from .render.gate import summary_line
        from .render.text import render

        verbosity = self.settings.verbosity
        if verbosity > 0 and self.profiles:
            tr.write_sep("=", "opprof profile")
            for nodeid, profile in self.profiles.items():
                tr.write_sep("-", nodeid)
                tr.write_line(render(profile, verbosity))
        if self.results:
            tr.write_sep("=", f"opprof gate: machine {self.machine}")
            for result in self.results.values():
                tr.write_line(summary_line(result))

    def write_json(self) -> None:
        path = self.settings.json_path
        if path is None:
            return
        from .render import results_json

        try:
            results_json.write(path, self)
        except OSError as exc:
            raise OpprofError(f"--opprof-json={path}: cannot write ({exc})") from None

    @staticmethod
    def one_line_error(report: pytest.TestReport, call: pytest.CallInfo) -> None:
        """Show an :class:`OpprofError` as its one line, not as a traceback."""
        if call.excinfo is not None and isinstance(call.excinfo.value, OpprofError):
            report.longrepr = f"opprof: {call.excinfo.value}"
