"""The reporter: the header, the terminal summary at each verbosity (the profiles, the
gate's lines, the tests' notes), strict mode's lines and verdict on the run, and the
output files; where the run reports (never on an xdist worker), rendering lazily."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import pytest

from ..errors import OpprofError
from ..measure import measures
from ..model import conditions as run_conditions
from ..render import display_name, percent
from .outputs import wanted, write, write_all
from .session import RunState

if TYPE_CHECKING:
    from ..judge.strict import Unjudged


class Reporter:
    """Says what the run found, in the terminal and in the files asked for."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def header_lines(self) -> list[str]:
        s, m, store = self.state.settings, self.state.measure, self.state.store
        mode = "updating baselines" if s.update_baseline else f"tolerance {s.tolerance:.0%}"
        if s.strict_applies:
            from ..judge.strict import effect_words

            mode += f", {effect_words(s.strict_effect)}"
        elif s.ci and s.gate and not s.update_baseline and m.gate.drift:
            from ..judge.config import BLIND

            mode += (f", CI: a test blind beyond {percent(1 + BLIND)} reports its "
                     "regressions, fails none")
        counted = (f" natively, {s.skip} + {m.child_counts} under {m.child_tool}"
                   if m.child_counts else "")
        lines = [f"opprof: device {m.device}, verbosity {s.verbosity}, skip {s.skip}, "
                 f"iterations {s.iterations}{counted}",
                 f"opprof: machine {self.state.machine!r}, baselines in {store.folder} ({mode})",
                 m.header()]
        if m.threads_matter and s.gate and store.root.is_dir() and not run_conditions.pinned():
            lines.append("opprof: BLAS threads are not pinned: on a shared runner, contention "
                         "can slow multi-threaded ops for minutes; set OPENBLAS_NUM_THREADS=1 "
                         "OMP_NUM_THREADS=1 for baselines and checks (docs/reference.md: "
                         "'On shared CPU runners')")
        return lines

    def summary(self, tr: pytest.TerminalReporter) -> None:
        """Each profile at the verbosity asked, the gate's line per test and the run's
        counts, the tests' notes, strict mode's lines."""
        if self.state.is_worker:
            return
        self._profiles(tr)
        notes = self.state.notes
        if not (notes or self.unjudged):
            return
        if not any(r.result is not None for r in self.state.records()):
            tr.write_sep("=", f"opprof gate: machine {display_name(self.state.machine)}")
        for nodeid in sorted(notes):
            for line in notes[nodeid]:
                tr.write_line(f"opprof: {display_name(nodeid)}: {display_name(line)}",
                              yellow=True)
        if self.unjudged:
            tr.write_line(f"opprof: strict: {len(self.unjudged)} gated test(s) could not be "
                          "judged: the session fails (--opprof-strict); their own outcomes "
                          "stand", red=True)
        for failure in self.unjudged:
            tr.write_line(f"  {display_name(failure.nodeid)}: {display_name(failure.why)}",
                          red=True)

    def _profiles(self, tr: pytest.TerminalReporter) -> None:
        state = self.state
        if not (state.profiles or state.remote):
            return  # nothing was profiled: nothing to say, nothing to import
        from ..render.text import render
        from ..render.verdicts import blind_line, counts_line, summary_line, verdict_table

        records = state.records()
        verbosity = state.settings.verbosity
        if verbosity > 0 and records:
            tr.write_sep("=", "opprof profile")
            for record in records:
                tr.write_sep("-", display_name(record.nodeid))
                tr.write_line(render(record.profile, verbosity))
                if verbosity > 1 and record.result is not None and record.result.comparison:
                    tr.write_line(verdict_table(record.result))
        results = [r.result for r in records if r.result is not None]
        if not results:
            return
        tr.write_sep("=", f"opprof gate: machine {display_name(state.machine)}")
        for result in results:
            profile = result.profile  # its own measure's words (native times are no counts)
            lines = [summary_line(result, state.retake),
                     measures.of(profile.measure, profile.unit).unsteady(profile)]
            for line in lines:
                if line is not None:
                    tr.write_line(line)
        blind = blind_line(results, state.retake, state.conditions)
        if blind is not None:
            tr.write_line(blind)
        if not state.settings.update_baseline:
            tr.write_line(counts_line(results))
        elif self.not_stored:
            tr.write_line(f"opprof: {len(self.not_stored)} profiled test(s) passed but their "
                          "baselines were not stored (each line above says why): the session "
                          "fails", red=True)

    @cached_property
    def not_stored(self) -> list[str]:
        """Under ``--opprof-update-baseline``: the passing profiled tests whose baseline
        run was not stored (their figures could not be taken: nothing counted)."""
        from ..model.verdict import Verdict

        if not self.state.settings.update_baseline or self.state.is_worker:
            return []
        return [r.nodeid for r in self.state.records()
                if r.result is not None and r.result.verdict is Verdict.UNJUDGED]

    @cached_property
    def unjudged(self) -> list[Unjudged]:
        """Strict mode's verdict on the run (``--opprof-strict``): the gated tests that
        could not be judged, decided once at the end, where the run reports (the xdist
        controller, with every worker's records); none where strict mode does not apply."""
        state = self.state
        if not state.settings.strict_applies or state.is_worker:
            return []
        from ..judge.strict import unjudged

        return unjudged(state.records(), state.unprofiled, state.settings.strict_effect,
                        state.retake)

    def finish(self, session: pytest.Session) -> None:
        """Strict mode's verdict on the run, then the files asked for; an unwritable path
        is one line and a usage error."""
        self._fail_strictly(session)
        if self.not_stored and session.exitstatus in (pytest.ExitCode.OK,
                                                      pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        try:
            self._write_outputs()
        except OpprofError as exc:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.ensure_newline()
                reporter.write_line(f"ERROR: opprof: {exc}", red=True)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def _fail_strictly(self, session: pytest.Session) -> None:
        """Strict mode (``--opprof-strict``): a gated test that could not be judged fails
        the session (exit code 1; the tests' own outcomes stand), said in the summary, in
        ``--junitxml`` (one testsuite property per test) and in the results file."""
        failures = self.unjudged
        if not failures:
            return
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        from _pytest.junitxml import xml_key

        xml = session.config.stash.get(xml_key, None)
        if xml is not None:
            for failure in failures:
                xml.add_global_property("opprof_strict_unjudged",
                                        f"{failure.nodeid}: {failure.why}")

    def _write_outputs(self) -> None:
        """The files asked for (``outputs.RUN_OUTPUTS``), and the records for the process
        that started this one (``Settings.profile_out``, :mod:`.launcher`: no run info).
        An unwritable path is one OpprofError naming its flag."""
        state = self.state
        if state.settings.profile_out is not None:
            from ..model.records import dumps

            write("records", state.settings.profile_out, dumps(state.records()))
        if wanted(state.settings):
            strict = self.unjudged if state.settings.strict_applies else None
            write_all(state.settings, state.records(), state.run_info, strict)
