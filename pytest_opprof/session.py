"""Per-run state: the resolved backend, the profiles taken, the gate, the summary.

The gate's and the reports' modules are imported where they are first used, not at
start-up: `pytest --collect-only` does not pay for them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .errors import OpprofError
from .options import Settings, TestSettings, test_settings
from .profile import Profile
from .profiler import Profiler
from .timers import BackendUnavailable, Timer, build_timer, make_timer

if TYPE_CHECKING:
    from .baseline import Baseline, BaselineStore
    from .records import TestRecord
    from .runinfo import RunInfo
    from .verdict import TestResult

PROFILER = pytest.StashKey[tuple[Profiler, TestSettings]]()
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: The key of the CUDA devices workers share, in an xdist worker's ``workerinput``.
DEVICES_KEY = "opprof_cuda_devices"


def visible_cuda_devices() -> list[str]:
    """The devices CUDA_VISIBLE_DEVICES names, else every device CuPy counts."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip()]
    import cupy

    return [str(i) for i in range(cupy.cuda.runtime.getDeviceCount())]


def pin_worker_device(config: pytest.Config) -> None:
    """On an xdist worker given several CUDA devices: one device per worker, round
    robin by worker number (gw0 the first device, gw1 the second, ...)."""
    workerinput = getattr(config, "workerinput", None)
    devices = workerinput.get(DEVICES_KEY) if workerinput else None
    if not devices or len(devices) < 2:
        return
    number = int(str(workerinput.get("workerid", "gw0")).lstrip("gw") or 0)
    os.environ["CUDA_VISIBLE_DEVICES"] = str(devices[number % len(devices)])


class OpprofSession:
    """Collects one Profile per profiled test, gates it, and reports at the end."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        #: An xdist worker reports nothing itself: its records go to the controller.
        self.is_worker = hasattr(config, "workerinput")
        if not self.is_worker:
            self._check_outputs()
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
        #: Records sent by xdist workers (on the controller).
        self.remote: list[TestRecord] = []
        self._records: tuple[tuple[int, int, int], list[TestRecord]] | None = None

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
        started = item.stash.get(PROFILER, None)
        if started is None:
            return
        profile, per_test = started[0].profile, started[1]
        if profile is None or profile.counted == 0:
            return
        from .baseline import BaselineError
        from .render.gate import failure_text, summary_line
        from .verdict import TestResult, Verdict

        self._write_profile(profile, report)
        not_gated = TestResult(item.nodeid, Verdict.NOT_GATED, self.machine, profile)
        if not self.settings.gate:
            self._benchmark_extra_info(item, not_gated)
            return
        if not report.passed:
            self.results[item.nodeid] = not_gated
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
        elif result.comparison is not None:  # a failure's text already says it all
            report.sections.append(("opprof", summary_line(result)))
        self._properties(item, report, result)
        self._benchmark_extra_info(item, result)

    def _write_profile(self, profile: Profile, report: pytest.TestReport) -> None:
        """``--opprof-profile-out``: the profile of a passing test, for the re-run."""
        if self.settings.profile_out is None or not report.passed:
            return
        from .files import atomic_write

        try:
            atomic_write(self.settings.profile_out, profile.to_json())
        except OSError as exc:
            report.outcome = "failed"
            report.longrepr = f"opprof: --opprof-profile-out: cannot write ({exc})"

    @staticmethod
    def _properties(item: pytest.Item, report: pytest.TestReport, result: TestResult) -> None:
        """The verdict and each regressed op as test properties (``record_property``'s
        mechanism: they reach ``--junitxml`` and, under xdist, the controller)."""
        from .render.gate import op_line

        # plain str values: xdist's serializer takes no str subclass (an enum)
        properties = [("opprof_verdict", result.verdict.value)]
        properties += [("opprof_regressed", op_line(v)) for v in result.at_fault]
        properties += [("opprof_over_budget", b.name) for b in result.over_budget]
        item.user_properties.extend(properties)
        report.user_properties = [*report.user_properties, *properties]

    @staticmethod
    def _benchmark_extra_info(item: pytest.Item, result: TestResult) -> None:
        """With pytest-benchmark's fixture in the same test, each op's statistics (its
        own Stats, in seconds) go into ``benchmark.extra_info["opprof"]``."""
        benchmark = getattr(item, "funcargs", {}).get("benchmark")
        if benchmark is None:
            return
        from .render.bench import extra_info

        benchmark.extra_info["opprof"] = extra_info(result)

    def _verdict(self, profile: Profile, per_test: TestSettings,
                 rerun: Callable[[], Profile | None] | None) -> TestResult:
        from .gate import gate_config, judge

        config = gate_config(self.backend, per_test.tolerance, per_test.tolerances)
        if self.settings.update_baseline:
            result = judge(profile, None, machine=self.machine, config=config,
                           budgets=per_test.budgets, strict_ops=False)
            return result if result.failed else self._record_baseline(result)
        baseline = self.store.load(profile.nodeid)
        result = judge(profile, baseline, machine=self.machine, config=config,
                       budgets=per_test.budgets, strict_ops=self.settings.strict_ops,
                       probe_drift=self._probe_drift, rerun=rerun)
        if baseline is None:
            return result
        return replace(result, baseline_path=str(self.store.path_for(profile.nodeid)))

    def _record_baseline(self, result: TestResult) -> TestResult:
        """Store the test's run as a baseline run; called only for a test within its
        budgets (an op over its budget keeps the old baseline)."""
        from .baseline import BaselineRun
        from .verdict import Verdict

        run = BaselineRun.from_profile(result.profile, self.run_meta)
        path = self.store.record(result.nodeid, run, self.settings.baseline_batch,
                                 append=self.settings.append_baseline)
        return replace(result, verdict=Verdict.UPDATED, baseline_path=str(path))

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
    def run_info(self) -> RunInfo:
        """Where and when this run happened: asked of the system once, when a file or a
        baseline first needs it (git takes a moment)."""
        from .runinfo import RunInfo

        return RunInfo.collect(self.machine, self.backend, self.device)

    @cached_property
    def run_meta(self) -> dict[str, Any]:
        """What a baseline run records about where and when it was taken."""
        info = self.run_info
        return {"date": info.date, "commit": None if info.commit is None else dict(info.commit),
                "versions": dict(info.versions),
                "probe_ns": None if self.backend == "fake" else self.probe_ns}

    # -- the end -----------------------------------------------------------------------
    def records(self) -> list[TestRecord]:
        """Every profiled test of the run, this process's and the workers', once each.
        Made once at the end (the files and the terminal report both read them)."""
        from .records import TestRecord

        key = (len(self.profiles), len(self.results), len(self.remote))
        if self._records is None or self._records[0] != key:
            local = [TestRecord(p, self.results.get(nodeid))
                     for nodeid, p in self.profiles.items()]
            records = local if not self.remote else sorted(  # local: in the order they ran
                local + self.remote, key=lambda r: r.nodeid)
            self._records = (key, records)
        return self._records[1]

    def configure_worker(self, workerinput: dict[str, Any]) -> None:
        """On the controller, for each xdist worker: the CUDA devices to pin it to."""
        if self.backend == "cuda":
            workerinput[DEVICES_KEY] = visible_cuda_devices()

    def worker_output(self) -> None:
        """On an xdist worker: hand this worker's records to the controller."""
        from .records import WORKER_KEY, dumps

        self.config.workeroutput[WORKER_KEY] = dumps(self.records())  # type: ignore[attr-defined]

    def add_worker_output(self, workeroutput: dict[str, Any]) -> None:
        """On the controller: a finished worker's records."""
        from .records import WORKER_KEY, loads

        text = workeroutput.get(WORKER_KEY)
        if text is not None:
            self.remote.extend(loads(text))

    def report(self, tr: pytest.TerminalReporter) -> None:
        """The terminal report: each profile at the verbosity asked, then the gate's
        line per test and the run's counts."""
        from .render import display_name
        from .render.gate import counts_line, summary_line
        from .render.text import render

        if self.is_worker:
            return
        records = self.records()
        verbosity = self.settings.verbosity
        if verbosity > 0 and records:
            tr.write_sep("=", "opprof profile")
            for record in records:
                tr.write_sep("-", display_name(record.nodeid))
                tr.write_line(render(record.profile, verbosity))
        results = [r.result for r in records if r.result is not None]
        if results:
            tr.write_sep("=", f"opprof gate: machine {display_name(self.machine)}")
            for result in results:
                tr.write_line(summary_line(result))
            if not self.settings.update_baseline:
                tr.write_line(counts_line(results))

    def _check_outputs(self) -> None:
        """Every output path and what it needs, before any test runs."""
        from .outputs import check

        try:
            check(self.settings)
        except OpprofError as exc:
            raise pytest.UsageError(f"opprof: {exc}") from None

    def write_outputs(self) -> None:
        """The files asked for (``--opprof-json``, ``-markdown``, ``-trace``, ``-html``);
        on the controller only. An unwritable path is one OpprofError naming its flag."""
        from .outputs import wanted, write_all

        if self.is_worker or not wanted(self.settings):
            return
        write_all(self.settings, self.records(), self.run_info)

    @staticmethod
    def one_line_error(report: pytest.TestReport, call: pytest.CallInfo) -> None:
        """Show an :class:`OpprofError` as its one line, not as a traceback."""
        if call.excinfo is not None and isinstance(call.excinfo.value, OpprofError):
            report.longrepr = f"opprof: {call.excinfo.value}"
