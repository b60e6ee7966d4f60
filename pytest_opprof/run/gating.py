"""The per-test gate: a test's profile taken, then judged against its baseline or
recorded as one; its notes (what its figures cannot show), its JUnit properties and
pytest-benchmark's ``extra_info``. The judge and the renderers load with the first profile."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pytest

from ..measure.profiler import Profiler
from ..model import conditions as run_conditions
from ..model.verdict import TestResult, Verdict
from ..model.words import Unit
from ..store.baseline import BaselineError, BaselineRun
from .options import TestSettings, test_settings
from .session import RunState

if TYPE_CHECKING:
    from ..model.profile import Profile
    from ..model.verdict import OpVerdict
    from ..store.baseline import Baseline
    from .counting import Counting

PROFILER = pytest.StashKey[tuple[Profiler, TestSettings]]()
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


def _add_properties(item: pytest.Item, report: pytest.TestReport,
                    properties: Sequence[tuple[str, object]]) -> None:
    """``record_property``'s way: to ``--junitxml`` and, under xdist, the controller."""
    item.user_properties.extend(properties)
    report.user_properties = [*report.user_properties, *properties]


class Gate:
    """Each test's profiler, and after its call one outcome: nothing profiled, nothing
    counted, not gated, a failed call, or judged (or recorded as a baseline run)."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        #: Where a child takes the figures: what starts it and reads what it counted.
        self.counting: Counting | None = None
        m = state.measure
        if m.child_counts:
            from .child import counting

            if not counting(state.config):
                from .counting import Counting

                self.counting = Counting(state.config, state.settings.skip, m)
            elif not m.in_child:  # never a child of its own: that would nest without end
                raise pytest.UsageError(
                    f"--opprof-measure={m.name}: this process was started to take the figures "
                    f"under {m.child_tool}, but {m.child_tool} is not running it (is the tool "
                    "on PATH a wrapper that runs the program itself?); nothing is counted")
        #: The batch that keeps one update's repetitions of a test together.
        self.repeat_batch = state.settings.baseline_batch or f"repeat-{uuid.uuid4().hex[:12]}"

    def count_in_child(self, items: Sequence[pytest.Item]) -> None:
        """Before the first test: this process's child counts its share of the profiled
        tests (a measure a child takes, such as instructions; nothing otherwise)."""
        if self.counting is None:
            return
        reporter = self.state.config.pluginmanager.get_plugin("terminalreporter")
        say = None
        if reporter is not None and not self.state.is_worker:
            def say(line: str) -> None:
                reporter.ensure_newline()
                reporter.write_line(line)
        self.counting.count(items, say, self._refusal)

    def _refusal(self, item: pytest.Item) -> str | None:
        """Why the test's stored baseline cannot judge this run's figures, known before
        any is taken (its conditions differ: Python, numpy, the tool's version), or None."""
        state = self.state
        if state.settings.update_baseline or not state.settings.gate:
            return None
        try:
            baseline = state.store.load(baseline_key(item))
        except BaselineError:
            return None  # said when the test is judged
        return None if baseline is None else run_conditions.difference(
            baseline.conditions(), state.conditions, state.retake.of(item.nodeid))

    def start(self, item: pytest.Item) -> Profiler:
        per_test = test_settings(item, self.state.settings)
        m = self.state.measure
        # the child that takes the figures counts a few iterations
        cap = per_test.skip + m.child_counts if m.in_child else None
        profiler = Profiler(m.timer(per_test.skip), skip=per_test.skip,
                            iterations=per_test.iterations, nodeid=item.nodeid,
                            measure=m.name, unit=m.unit, cap=cap)
        item.stash[PROFILER] = (profiler, per_test)
        return profiler

    def finish(self, profiler: Profiler) -> None:
        profiler.close()
        profile = profiler.profile
        if profile is not None:
            self.state.profiles[profile.nodeid] = self._counted(profile)[0] or profile

    def _counted(self, profile: Profile) -> tuple[Profile | None, str]:
        """The profile the test is judged on: its own, or the one its child counted
        under a measure a child takes (None, and why there is none)."""
        if self.counting is None:
            return profile, ""
        return self.counting.profile(profile.nodeid)

    def after_call(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """A test that profiled nothing returns first: it imports nothing."""
        started = item.stash.get(PROFILER, None)
        if started is None:
            return
        profiler, per_test = started
        if report.passed:
            self.state.failed_calls.discard(item.nodeid)
            self._note(item, report, profiler)
        else:  # the loop was left by the exception: keep what finished
            profiler.drop_left()
            self.state.failed_calls.add(item.nodeid)
        profile = profiler.profile
        if profile is None or profile.counted == 0:
            return
        counted, why = self._counted(profile)
        if counted is None:  # a measure a child takes, and its child counted nothing
            self._nothing_counted(item, report, profile, why)
        elif not self.state.settings.gate:
            self._benchmark_extra_info(item, self._not_gated(item, counted))
        elif not report.passed:
            self.state.results[item.nodeid] = self._not_gated(item, counted)
        else:
            self._judge(item, report, counted, per_test)

    def _not_gated(self, item: pytest.Item, profile: Profile) -> TestResult:
        return TestResult(item.nodeid, Verdict.NOT_GATED, self.state.machine, profile)

    def _nothing_counted(self, item: pytest.Item, report: pytest.TestReport,
                         profile: Profile, why: str) -> None:
        """Its child counted nothing: unjudged, where it would have been judged."""
        if not (report.passed and self.state.settings.gate):
            return
        from ..render.verdicts import summary_line

        self.state.results[item.nodeid] = result = TestResult(
            item.nodeid, Verdict.UNJUDGED, self.state.machine, profile,
            reason=why)
        report.sections.append(("opprof", summary_line(result, self.state.retake)))

    def _judge(self, item: pytest.Item, report: pytest.TestReport, profile: Profile,
               per_test: TestSettings) -> None:
        """A passing test judged (or recorded): a failing verdict fails it."""
        from ..render.verdicts import failure_text, summary_line

        try:
            confirms = self.state.settings.confirm and self.state.measure.gate.confirms
            result = self._verdict(profile, baseline_key(item), per_test, TestEnvironment(
                self, item.nodeid, report.duration, confirms))
        except BaselineError as exc:
            report.outcome = "failed"
            report.longrepr = f"opprof: {exc}"
            return
        self.state.results[item.nodeid] = result
        if result.failed:  # its failure text says it all
            report.outcome = "failed"
            report.longrepr = failure_text(result, self.state.retake)
        elif result.comparison is not None or result.verdict == Verdict.UNJUDGED:
            report.sections.append(("opprof", summary_line(result, self.state.retake)))
        self._properties(item, report, result)
        self._benchmark_extra_info(item, result)

    def _note(self, item: pytest.Item, report: pytest.TestReport, profiler: Profiler) -> None:
        """What a passing test did that its figures do not show (no loop, ops outside
        it, a break), once each: a section, a property and the run's summary say it."""
        lines = []
        profile = profiler.profile
        if not profiler.started:
            why = "gpu_profiler was used without iterations(): nothing was profiled"
            self.state.unprofiled[item.nodeid] = why
            lines.append(why + " (ops record only inside its loop)")
        elif profile is None:
            why = "iterations() was called but its loop never ran: nothing was profiled"
            self.state.unprofiled[item.nodeid] = why
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
        self.state.notes[item.nodeid] = lines
        for line in lines:
            report.sections.append(("opprof", f"opprof: {line}"))
        _add_properties(item, report, [("opprof_note", line) for line in lines])

    @staticmethod
    def _properties(item: pytest.Item, report: pytest.TestReport, result: TestResult) -> None:
        """The verdict, each regressed op and each budget exceeded, as test properties."""
        from ..render.kernels import measure_of
        from ..render.verdicts import op_line

        # plain str values: xdist's serializer takes no str subclass (an enum)
        properties: list[tuple[str, object]] = [("opprof_verdict", result.verdict.value)]
        properties += [("opprof_regressed", op_line(v, measure_of(result.profile)))
                       for v in result.at_fault]
        properties += [("opprof_over_budget", b.name) for b in result.over_budget]
        _add_properties(item, report, properties)

    @staticmethod
    def _benchmark_extra_info(item: pytest.Item, result: TestResult) -> None:
        """pytest-benchmark's fixture in the same test: each op's statistics (its own
        Stats, in seconds) in ``benchmark.extra_info["opprof"]``."""
        benchmark = getattr(item, "funcargs", {}).get("benchmark")
        if benchmark is None:
            return
        from ..render.bench import extra_info

        benchmark.extra_info["opprof"] = extra_info(result)

    def _verdict(self, profile: Profile, key: str, per_test: TestSettings,
                 environment: TestEnvironment) -> TestResult:
        from ..judge.gate import check_budgets, gate_config, judge, updated

        state = self.state
        retake = state.retake.of(profile.nodeid)
        config = gate_config(state.measure.gate, per_test.tolerance, per_test.tolerances)
        # max_time budgets are durations: they cannot judge counts
        budgets = per_test.budgets if state.measure.unit is Unit.NANOSECONDS else {}
        if state.settings.update_baseline:
            if check_budgets(profile, budgets):  # the old baseline is kept
                return judge(profile, None, machine=state.machine, retake=retake, config=config,
                             budgets=budgets, strict_ops=False)
            # stored as a baseline run; pytest-repeat's repetitions of a test share one batch
            batch = state.settings.baseline_batch if key == profile.nodeid else self.repeat_batch
            path = state.store.record(key, BaselineRun.from_profile(profile, self.run_meta),
                                      batch, retake if state.settings.append_baseline else None)
            return updated(profile, machine=state.machine, baseline_path=str(path))
        stored = state.store.load(key)
        baseline = None if stored is None else stored.reference()
        if stored is not None and baseline is not None and len(baseline.runs) < len(stored.runs):
            state.notes.setdefault(environment.nodeid, []).append(_history_left_out(
                len(stored.runs) - len(baseline.runs), len(baseline.runs)))
        return judge(profile, baseline, machine=state.machine, retake=retake, config=config,
                     budgets=budgets, strict_ops=state.settings.strict_ops,
                     environment=environment,
                     refusal=None if baseline is None else run_conditions.difference(
                         baseline.conditions(), state.conditions, retake),  # why not judged
                     baseline_path=None if baseline is None else str(state.store.path_for(key)),
                     blocks_blind=state.settings.strict or not state.settings.ci)

    @cached_property
    def probe_ns(self) -> float | None:
        return self.state.measure.probe_ns()

    @cached_property
    def run_meta(self) -> dict[str, Any]:
        """Where, when and under what conditions a baseline run was taken."""
        info = self.state.run_info
        return {"date": info.date, "commit": None if info.commit is None else dict(info.commit),
                "versions": dict(info.versions),
                "probe_ns": self.probe_ns,
                "conditions": self.state.conditions}


def _history_left_out(left: int, kept: int) -> str:
    """Why a gate judged against fewer runs than its baseline holds."""
    return (f"judged against the {kept} baseline run(s) of one code; {left} run(s) appended "
            "at other commits (--opprof-update-baseline=append: a history for opprof history) "
            "are not its reference; keep a history under its own --opprof-machine-key")


@dataclass
class TestEnvironment:
    """What judging one test asks of the run (``judge.gate.Environment``)."""

    __test__ = False  # not a pytest test class
    gate: Gate
    nodeid: str
    duration: float
    confirms: bool  # figures that repeat (counts): a re-run would show the same

    def probe_drift(self, baseline: Baseline) -> float | None:
        """By the reference probe measured now, right after the test, where its time
        tracks the measure's (not counts', not a fake clock's)."""
        then = baseline.probe_ns()
        now = self.gate.state.measure.probe_ns() if then else None
        return now / then if now and then else None

    def rerun(self, suspects: Sequence[OpVerdict]) -> Profile | None:
        """This test profiled again in a new pytest process (nothing gated there)."""
        from . import rerun

        state = self.gate.state
        rerun.announce(state.config, self.nodeid, suspects)
        return rerun.profile_again(state.config, self.nodeid, measure=state.measure.name,
                                   skip=state.settings.skip,
                                   timeout=max(120.0, 10 * self.duration))
