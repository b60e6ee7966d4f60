"""Per-run state: the started measure, the profiles taken, the gate, the summary.

The plugin makes a session only when a run asks for opprof (an option, an ini value,
or the fixture's first use), so this module's imports (numpy, the profiler) are paid
only then. The gate's and the reports' modules are imported where they are first used.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import OpprofError
from ..measure import measures
from ..measure.profiler import Profiler
from ..model import conditions as run_conditions
from ..model.profile import Profile
from ..model.words import Unit
from .options import Settings, TestSettings, test_settings

if TYPE_CHECKING:
    from ..judge.strict import Unjudged
    from ..model.records import TestRecord
    from ..model.runinfo import RunInfo
    from ..model.verdict import OpVerdict, TestResult
    from ..store.baseline import Baseline, BaselineStore
    from .counting import Counting

PROFILER = pytest.StashKey[tuple[Profiler, TestSettings]]()
#: The key of a worker's notes in ``config.workeroutput`` (it starts with "opprof": the
#: plugin's controller hook takes it).
NOTES_KEY = "opprof_notes"
#: The parameter pytest-repeat adds to each repeated test; its id is "<step>-<count>".
REPEAT_PARAM = "__pytest_repeat_step_number"


def baseline_key(item: pytest.Item) -> str:
    """The node id a test's baseline is kept under: its own, less pytest-repeat's step
    id (``test_x[1-3]`` -> ``test_x``, ``test_y[a-2-3]`` -> ``test_y[a]``), so that each
    repetition is gated against, and an update adds to, the test's one baseline.
    Reruns of pytest-rerunfailures and flaky keep the node id: the last attempt's
    profile replaces the earlier ones'."""
    callspec = getattr(item, "callspec", None)
    params = getattr(callspec, "params", {})
    if REPEAT_PARAM not in params:
        return item.nodeid
    step = f"{int(params[REPEAT_PARAM]) + 1}-\\d+"
    without = re.sub(rf"\[{step}\]$", "", item.nodeid)  # the only parameter
    return without if without != item.nodeid else re.sub(rf"-{step}\]$", "]", item.nodeid)


def worker_number(config: pytest.Config) -> int | None:
    """This process's xdist worker number (gw3 -> 3), or None when it is no worker."""
    workerinput = getattr(config, "workerinput", None)
    if not isinstance(workerinput, dict):
        return None
    digits = str(workerinput.get("workerid", "")).removeprefix("gw")
    return int(digits) if digits.isdigit() else 0


def start_measure(name: str, worker: int | None) -> measures.Measure:
    """The measure ``--opprof-measure`` names, started once (``auto`` resolved; one that
    cannot run here is a usage error before any test runs)."""
    try:
        return measures.start(name, worker)
    except measures.Unavailable as exc:
        advice = f"; {exc.advice}" if exc.advice else ""
        raise pytest.UsageError(f"--opprof-measure={name}: {exc}{advice}") from None


def this_machine(config: pytest.Config) -> str:
    """The machine key a profiled run with ``config`` stores its baselines under, found
    as the session finds it (``opprof baseline prune`` prunes this machine's folder);
    pytest.UsageError when the measure cannot start here."""
    settings = Settings.from_pytest_config(config)
    return settings.machine_key or start_measure(settings.measure, None).machine_key()


class OpprofSession:
    """Collects one Profile per profiled test, gates it, and reports at the end."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        #: An xdist worker reports nothing itself: its records go to the controller.
        self.is_worker = hasattr(config, "workerinput")
        if not self.is_worker:
            self._check_outputs()
        #: What an op's figure is, started in this process: everything that differs
        #: between measures is its to say.
        self.measure = start_measure(settings.measure, worker_number(config))
        self.machine = settings.machine_key or self.measure.machine_key()
        #: Where a child takes the figures (in the process the user started): what starts
        #: it and reads what it counted (run.counting, imported only then).
        self.counting: Counting | None = None
        if self.measure.child_counts and not self.measure.in_child:
            from .counting import Counting

            self.counting = Counting(config, settings.skip, self.measure)
        self.profiles: dict[str, Profile] = {}
        self.results: dict[str, TestResult] = {}
        #: The profiled tests whose call did not pass (their records say so).
        self.failed_calls: set[str] = set()
        #: Records sent by xdist workers (on the controller).
        self.remote: list[TestRecord] = []
        self._records: tuple[tuple[int, int, int], list[TestRecord]] | None = None
        #: Node id -> baseline key, for the tests whose ids a plugin decorated.
        self.baseline_keys: dict[str, str] = {}
        #: The batch that keeps one update's repetitions of a test together.
        self.repeat_batch = settings.baseline_batch or f"repeat-{uuid.uuid4().hex[:12]}"
        #: What a test did that the gate cannot see (no loop, ops outside it, a break):
        #: node id -> its lines, said once each; and the tests that used gpu_profiler,
        #: passed and profiled nothing (node id -> why), for strict mode.
        self.notes: dict[str, list[str]] = {}
        self.unprofiled: dict[str, str] = {}
        #: Strict mode's verdict on the run, decided once at its end (None: not decided).
        self.strict_failures: list[Unjudged] | None = None

    @cached_property
    def store(self) -> BaselineStore:
        from ..store.baseline import BaselineStore

        return BaselineStore(self.settings.baseline_dir, self.machine)

    def count_in_child(self, items: Sequence[pytest.Item]) -> None:
        """Before the first test: this process's child counts its share of the profiled
        tests (a measure a child takes, such as instructions; nothing otherwise)."""
        if self.counting is None:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        say = None
        if reporter is not None and not self.is_worker:
            def say(line: str) -> None:
                reporter.ensure_newline()
                reporter.write_line(line)
        self.counting.count(items, say)

    def header_lines(self) -> list[str]:
        s = self.settings
        mode = "updating baselines" if s.update_baseline else f"tolerance {s.tolerance:.0%}"
        if s.strict_applies:
            from ..judge.strict import effect_words

            mode += f", {effect_words(s.strict_effect)}"
        m = self.measure
        counted = (f" natively, {s.skip} + {m.child_counts} under {m.child_tool}"
                   if m.child_counts else "")
        lines = [f"opprof: device {m.device}, verbosity {s.verbosity}, skip {s.skip}, "
                 f"iterations {s.iterations}{counted}",
                 f"opprof: machine {self.machine!r}, baselines in {self.store.folder} ({mode})",
                 m.header()]
        if m.threads_matter and s.gate and self.store.root.is_dir() and \
                not run_conditions.pinned():
            lines.append("opprof: BLAS threads are not pinned: on a shared runner, contention "
                         "can slow multi-threaded ops for minutes; set OPENBLAS_NUM_THREADS=1 "
                         "OMP_NUM_THREADS=1 for baselines and checks (docs/reference.md: "
                         "'On shared CPU runners')")
        return lines

    # -- one test ----------------------------------------------------------------------
    def start(self, item: pytest.Item) -> Profiler:
        per_test = test_settings(item, self.settings)
        m = self.measure
        # the child that takes the figures counts a few iterations
        cap = per_test.skip + m.child_counts if m.in_child else None
        profiler = Profiler(m.timer(per_test.skip), skip=per_test.skip,
                            iterations=per_test.iterations, nodeid=item.nodeid,
                            measure=m.name, unit=m.unit, cap=cap)
        item.stash[PROFILER] = (profiler, per_test)
        key = baseline_key(item)
        if key != item.nodeid:
            self.baseline_keys[item.nodeid] = key
        return profiler

    def finish(self, profiler: Profiler) -> None:
        profiler.close()
        profile = profiler.profile
        if profile is not None:
            self.profiles[profile.nodeid] = self._counted(profile)[0] or profile

    def _counted(self, profile: Profile) -> tuple[Profile | None, str]:
        """The profile the test is judged on: its own, or the one its child counted
        under a measure a child takes (None, and why there is none)."""
        if self.counting is None:
            return profile, ""
        return self.counting.profile(profile.nodeid)

    def after_call(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """Gate the test, or record its baseline; a failing verdict fails this test only.
        A test that profiled nothing returns first: it imports nothing."""
        started = item.stash.get(PROFILER, None)
        if started is None:
            return
        profiler, per_test = started
        if not report.passed:  # the loop was left by the exception: keep what finished
            profiler.drop_left()
        profile = profiler.profile
        if report.passed:
            self.failed_calls.discard(item.nodeid)
            self._note(item, report, profiler)
        else:
            self.failed_calls.add(item.nodeid)
        if profile is None or profile.counted == 0:
            return
        from ..model.verdict import TestResult, Verdict
        from ..render.verdicts import failure_text, summary_line
        from ..store.baseline import BaselineError

        counted, why = self._counted(profile)
        if counted is None:  # a measure a child takes, and its child counted nothing
            if report.passed and self.settings.gate:
                self.results[item.nodeid] = result = TestResult(
                    item.nodeid, Verdict.UNJUDGED, self.machine, profile,
                    reason=f"no {self.measure.counts[0]} counted: {why}")
                report.sections.append(("opprof", summary_line(result)))
            return
        profile = counted

        not_gated = TestResult(item.nodeid, Verdict.NOT_GATED, self.machine, profile)
        if not self.settings.gate:
            self._benchmark_extra_info(item, not_gated)
            return
        if not report.passed:
            self.results[item.nodeid] = not_gated
            return
        try:
            result = self._verdict(profile, per_test,
                                   TestEnvironment(self, item.nodeid, report.duration))
        except BaselineError as exc:
            report.outcome = "failed"
            report.longrepr = f"opprof: {exc}"
            return
        self.results[item.nodeid] = result
        if result.failed:  # its failure text says it all
            report.outcome = "failed"
            report.longrepr = failure_text(result)
        elif result.comparison is not None or result.verdict == Verdict.UNJUDGED:
            report.sections.append(("opprof", summary_line(result)))
        self._properties(item, report, result)
        self._benchmark_extra_info(item, result)

    def _note(self, item: pytest.Item, report: pytest.TestReport, profiler: Profiler) -> None:
        """Say, once each, what a passing test did that its figures do not show: the
        fixture used without a loop, ops run outside the loop, the loop left early. Each
        line goes into the test's report (a section, and a property for JUnit) and the
        run's summary."""
        lines = []
        profile = profiler.profile
        if not profiler.started:
            why = "gpu_profiler was used without iterations(): nothing was profiled"
            self.unprofiled[item.nodeid] = why
            lines.append(why + " (ops record only inside its loop)")
        elif profile is None:
            why = "iterations() was called but its loop never ran: nothing was profiled"
            self.unprofiled[item.nodeid] = why
            lines.append(why)
        outside = profiler.untimed_outside()
        if outside and profiler.started:
            lines.append(f"{outside} op call(s) ran outside the iterations() loop and were not "
                         "timed (ops record only inside it)")
        left = profiler.left_early
        if left is not None and profile is not None:
            lines.append(f"the loop was left in iteration {left[0]} of {left[1]} (a break): "
                         f"the iterations that ran are kept, {profile.counted} counted "
                         f"(skip {profile.skip})")
        if not lines:
            return
        self.notes[item.nodeid] = lines
        for line in lines:
            report.sections.append(("opprof", f"opprof: {line}"))
        properties = [("opprof_note", line) for line in lines]
        item.user_properties.extend(properties)
        report.user_properties = [*report.user_properties, *properties]

    @staticmethod
    def _properties(item: pytest.Item, report: pytest.TestReport, result: TestResult) -> None:
        """The verdict and each regressed op as test properties (``record_property``'s
        mechanism: they reach ``--junitxml`` and, under xdist, the controller)."""
        from ..render.kernels import measure_of
        from ..render.verdicts import op_line

        # plain str values: xdist's serializer takes no str subclass (an enum)
        properties = [("opprof_verdict", result.verdict.value)]
        properties += [("opprof_regressed", op_line(v, measure_of(result.profile)))
                       for v in result.at_fault]
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
        from ..render.bench import extra_info

        benchmark.extra_info["opprof"] = extra_info(result)

    def _verdict(self, profile: Profile, per_test: TestSettings,
                 environment: TestEnvironment) -> TestResult:
        from ..judge.gate import check_budgets, gate_config, judge, updated

        config = gate_config(self.measure.gate, per_test.tolerance, per_test.tolerances)
        # max_time budgets are durations: they cannot judge counts
        budgets = per_test.budgets if self.measure.unit is Unit.NANOSECONDS else {}
        if self.settings.update_baseline:
            if check_budgets(profile, budgets):  # the old baseline is kept
                return judge(profile, None, machine=self.machine, config=config,
                             budgets=budgets, strict_ops=False)
            return updated(profile, machine=self.machine,
                           baseline_path=self._record_baseline(profile))
        key = self.baseline_keys.get(profile.nodeid, profile.nodeid)
        baseline = self.store.load(key)
        return judge(profile, baseline, machine=self.machine, config=config,
                     budgets=budgets, strict_ops=self.settings.strict_ops,
                     environment=environment,
                     refusal=None if baseline is None else self._conditions_differ(baseline),
                     baseline_path=None if baseline is None else str(self.store.path_for(key)))

    def _record_baseline(self, profile: Profile) -> str:
        """Store the test's run as a baseline run, and say where; called only for a test
        within its budgets (an op over its budget keeps the old baseline). Repetitions
        of one test (pytest-repeat) share its baseline key and one batch."""
        from ..store.baseline import BaselineRun

        run = BaselineRun.from_profile(profile, self.run_meta)
        key = self.baseline_keys.get(profile.nodeid)
        batch = self.settings.baseline_batch if key is None else self.repeat_batch
        return str(self.store.record(key or profile.nodeid, run, batch,
                                     append=self.settings.append_baseline))

    def rerun(self, nodeid: str, duration: float,
              suspects: Sequence[OpVerdict]) -> Profile | None:
        """Profile ``nodeid`` again in a new pytest process with the user's arguments
        (nothing gated there), saying so first."""
        from . import rerun

        rerun.announce(self.config, nodeid, suspects)
        return rerun.profile_again(self.config, nodeid, measure=self.measure.name,
                                   skip=self.settings.skip, timeout=max(120.0, 10 * duration))

    # -- machine facts, measured once and only when needed -------------------------------
    @cached_property
    def probe_ns(self) -> float:
        from ..measure.probe import reference_probe

        return reference_probe(self.measure.xp)

    def probe_drift(self, baseline: Baseline) -> float | None:
        """The machine's speed now against the baseline's, by the reference probe (where
        the probe's time tracks the measure's: not a virtual clock's, nor counts')."""
        then = baseline.probe_ns()
        if not then or not self.measure.probed:
            return None
        return self.probe_ns / then

    @cached_property
    def run_info(self) -> RunInfo:
        """Where and when this run happened: asked of the system once, when a file or a
        baseline first needs it (git takes a moment)."""
        from ..model.runinfo import RunInfo

        return RunInfo.collect(self.machine, self.measure.name, self.measure.device)

    @cached_property
    def conditions(self) -> run_conditions.Conditions:
        """The conditions this run's figures were taken under, as the measure says."""
        return self.measure.conditions(getattr(self.config, "workerinput", None))

    def _conditions_differ(self, baseline: Baseline) -> str | None:
        """Why ``baseline`` cannot judge this run: its conditions differ (one line)."""
        return run_conditions.difference(baseline.conditions(), self.conditions)

    @cached_property
    def run_meta(self) -> dict[str, Any]:
        """What a baseline run records about where, when and under what conditions it
        was taken."""
        info = self.run_info
        return {"date": info.date, "commit": None if info.commit is None else dict(info.commit),
                "versions": dict(info.versions),
                "probe_ns": self.probe_ns if self.measure.probed else None,
                "conditions": self.conditions}

    # -- the end -----------------------------------------------------------------------
    def records(self) -> list[TestRecord]:
        """Every profiled test of the run, this process's and the workers', once each.
        Made once at the end (the files and the terminal report both read them)."""
        from ..model.records import TestRecord

        key = (len(self.profiles), len(self.results), len(self.remote))
        if self._records is None or self._records[0] != key:
            local = [TestRecord(p, self.results.get(nodeid), nodeid not in self.failed_calls)
                     for nodeid, p in self.profiles.items()]
            records = local if not self.remote else sorted(  # local: in the order they ran
                local + self.remote, key=lambda r: r.nodeid)
            self._records = (key, records)
        return self._records[1]

    def worker_output(self) -> None:
        """On an xdist worker: hand this worker's records (and notes) to the controller."""
        import json

        from ..model.records import WORKER_KEY, dumps

        output = self.config.workeroutput  # type: ignore[attr-defined]
        output[WORKER_KEY] = dumps(self.records())
        output[NOTES_KEY] = json.dumps({"notes": self.notes, "unprofiled": self.unprofiled})

    def add_worker_output(self, workeroutput: dict[str, Any]) -> None:
        """On the controller: a finished worker's records and notes."""
        from ..model.records import WORKER_KEY, loads

        text = workeroutput.get(WORKER_KEY)
        if text is not None:
            self.remote.extend(loads(text))
        notes = workeroutput.get(NOTES_KEY)
        if isinstance(notes, str):
            self._add_notes(notes)

    def _add_notes(self, text: str) -> None:
        """A worker's notes, as :meth:`worker_output` wrote them (anything else: none)."""
        from ..model import jsontext

        try:
            data = jsontext.Reader(dict).parse(text, "a worker's notes")
        except jsontext.Unreadable:
            return
        notes, unprofiled = data.get("notes"), data.get("unprofiled")
        if isinstance(notes, dict):
            self.notes.update({str(k): [str(x) for x in v] for k, v in notes.items()
                               if isinstance(v, list)})
        if isinstance(unprofiled, dict):
            self.unprofiled.update({str(k): str(v) for k, v in unprofiled.items()})

    # -- strict mode ---------------------------------------------------------------------
    def judge_strictly(self) -> list[Unjudged]:
        """Strict mode's verdict on the run (``--opprof-strict``): the gated tests that
        could not be judged, decided once, where the run reports (the xdist controller,
        with every worker's records); none where strict mode does not apply."""
        if self.strict_failures is None:
            if not self.settings.strict_applies or self.is_worker:
                self.strict_failures = []
            else:
                from ..judge.strict import unjudged

                self.strict_failures = unjudged(self.records(), self.unprofiled,
                                                self.settings.strict_effect)
        return self.strict_failures

    def strict_lines(self) -> list[str]:
        """The summary's strict lines: a head, then one line per test it fails for."""
        from ..render import display_name

        failures = self.judge_strictly()
        if not failures:
            return []
        head = (f"opprof: strict: {len(failures)} gated test(s) could not be judged: the "
                "session fails (--opprof-strict); their own outcomes stand")
        return [head, *(f"  {display_name(f.nodeid)}: {display_name(f.why)}"
                        for f in failures)]

    def report(self, tr: pytest.TerminalReporter) -> None:
        """The terminal report: each profile at the verbosity asked, then the gate's
        line per test and the run's counts, the tests' notes and strict mode's lines."""
        if self.is_worker:
            return
        self._report_profiles(tr)
        if not (self.notes or self.strict_failures):
            return
        from ..render import display_name

        if not any(r.result is not None for r in self.records()):
            tr.write_sep("=", f"opprof gate: machine {display_name(self.machine)}")
        for nodeid in sorted(self.notes):
            for line in self.notes[nodeid]:
                tr.write_line(f"opprof: {display_name(nodeid)}: {display_name(line)}",
                              yellow=True)
        for line in self.strict_lines():
            tr.write_line(line, red=True)

    def _report_profiles(self, tr: pytest.TerminalReporter) -> None:
        if not (self.profiles or self.remote):
            return  # nothing was profiled: nothing to say, nothing to import
        from ..render import display_name
        from ..render.text import render
        from ..render.verdicts import blind_line, counts_line, summary_line, verdict_table

        records = self.records()
        verbosity = self.settings.verbosity
        if verbosity > 0 and records:
            tr.write_sep("=", "opprof profile")
            for record in records:
                tr.write_sep("-", display_name(record.nodeid))
                tr.write_line(render(record.profile, verbosity))
                if verbosity > 1 and record.result is not None and record.result.comparison:
                    tr.write_line(verdict_table(record.result))
        results = [r.result for r in records if r.result is not None]
        if results:
            tr.write_sep("=", f"opprof gate: machine {display_name(self.machine)}")
            conditions = self.conditions  # the thread settings the report advises on
            for result in results:
                tr.write_line(summary_line(result))
                blind = blind_line(result, conditions)
                if blind is not None:
                    tr.write_line(blind)
                unsteady = self.measure.unsteady(result.profile)
                if unsteady is not None:
                    tr.write_line(unsteady)
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
        """The files asked for (``--opprof-json``, ``-markdown``, ``-trace``, ``-html``),
        and the records for the process that started this one (``Settings.profile_out``,
        see :mod:`pytest_opprof.run.launcher`: no run info, no machine info); on the
        controller only. An unwritable path is one OpprofError naming its flag."""
        from .outputs import wanted, write, write_all

        if self.is_worker:
            return
        if self.settings.profile_out is not None:
            from ..model.records import dumps

            write("records", self.settings.profile_out, dumps(self.records()))
        if wanted(self.settings):
            strict = self.judge_strictly() if self.settings.strict_applies else None
            write_all(self.settings, self.records(), self.run_info, strict)


class TestEnvironment:
    """What the gate asks of the run while it judges one test (``judge.gate.Environment``):
    the session's reference probe, and a confirmation re-run of this test."""

    __test__ = False  # not a pytest test class

    def __init__(self, session: OpprofSession, nodeid: str, duration: float) -> None:
        self.session = session
        self.nodeid = nodeid
        self.duration = duration
        # figures that repeat (counts): a re-run would cost its time and show the same
        self.confirms = session.settings.confirm and session.measure.gate.confirms

    def probe_drift(self, baseline: Baseline) -> float | None:
        return self.session.probe_drift(baseline)

    def rerun(self, suspects: Sequence[OpVerdict]) -> Profile | None:
        return self.session.rerun(self.nodeid, self.duration, suspects)
