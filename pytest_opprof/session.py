"""Per-run state: the resolved backend, the profiles taken, the summary."""

from __future__ import annotations

import pytest

from .errors import OpprofError
from .options import Settings, test_settings
from .profile import Profile
from .profiler import Profiler
from .render.text import render
from .timers import BackendUnavailable, Timer, make_timer


class OpprofSession:
    """Collects one Profile per profiled test and reports them at the end."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        try:
            # resolved once: "auto" becomes "cuda" or "cpu" here, and a missing GPU is
            # a usage error before any test runs
            probe = make_timer(settings.backend)
        except BackendUnavailable as exc:
            raise pytest.UsageError(str(exc)) from None
        self.backend = probe.kind
        self.device = probe.device
        self.profiles: dict[str, Profile] = {}

    def new_timer(self) -> Timer:
        """A fresh timer of the resolved backend for one test."""
        return make_timer(self.backend)

    def header_lines(self) -> list[str]:
        s = self.settings
        return [f"opprof: backend {self.backend} ({self.device}), verbosity {s.verbosity}, "
                f"skip {s.skip}, iterations {s.iterations}"]

    def start(self, item: pytest.Item) -> Profiler:
        per_test = test_settings(item, self.settings)
        return Profiler(self.new_timer(), skip=per_test.skip,
                        iterations=per_test.iterations, nodeid=item.nodeid)

    def finish(self, profiler: Profiler) -> None:
        profiler.close()
        profile = profiler.profile
        if profile is not None:
            self.profiles[profile.nodeid] = profile

    def report(self, tr: pytest.TerminalReporter) -> None:
        verbosity = self.settings.verbosity
        if verbosity <= 0 or not self.profiles:
            return
        tr.write_sep("=", "opprof profile")
        for nodeid, profile in self.profiles.items():
            tr.write_sep("-", nodeid)
            tr.write_line(render(profile, verbosity))

    @staticmethod
    def one_line_error(report: pytest.TestReport, call: pytest.CallInfo) -> None:
        """Show an :class:`OpprofError` as its one line, not as a traceback."""
        if call.excinfo is not None and isinstance(call.excinfo.value, OpprofError):
            report.longrepr = f"opprof: {call.excinfo.value}"
