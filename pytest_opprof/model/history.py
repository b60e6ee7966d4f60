"""A test's history: each op's medians across its stored runs, and where they stepped.

Found by :mod:`pytest_opprof.judge.changepoints`, shown by :mod:`pytest_opprof.render.history`
(text and JSON) and :mod:`pytest_opprof.render.history_html`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .baseline import BaselineRun
from .words import display_name


@dataclass(frozen=True)
class Step:
    """A step of a series: ``run`` is the index (into the test's runs) of the first run
    after it; ``before`` and ``after`` the levels either side (an op's: drift-corrected
    ns; the machine drift's: a speed factor)."""

    run: int
    before: float
    after: float
    #: The smallest ratio that would have been reported, up or down.
    margin: float

    @property
    def ratio(self) -> float:
        return self.after / self.before


@dataclass(frozen=True)
class OpHistory:
    op_id: int
    name: str
    occurrence: int
    #: Indices into the test's runs of the runs that hold the op, oldest first.
    runs: list[int]
    #: The op's median in each of those runs, as measured.
    median_ns: list[float]
    #: The same with each run's machine drift taken out (what steps are found in).
    corrected_ns: list[float]
    noise: float
    steps: list[Step]


@dataclass(frozen=True)
class History:
    nodeid: str
    machine: str
    runs: list[BaselineRun]
    ops: list[OpHistory]
    #: Each run's speed factor shared by its ops (1: typical), and where it stepped;
    #: None when the test has fewer than DRIFT_MIN_OPS ops (nothing is corrected).
    drift: list[float] | None = None
    drift_steps: list[Step] = field(default_factory=list)

    def commit_id(self, run: int) -> str | None:
        """The run's commit id; None outside git (pytest-benchmark says ``unversioned``)."""
        commit = self.runs[run].meta.get("commit")
        found = commit.get("id") if isinstance(commit, dict) else None
        return str(found) if found and found != "unversioned" else None

    def date(self, run: int) -> str | None:
        date = self.runs[run].meta.get("date")
        return date if isinstance(date, str) and date else None

    def label(self, run: int) -> str:
        """The run as a person names it: its short commit, else its number."""
        commit = self.commit_id(run)
        return display_name(commit[:7]) if commit else f"run {run + 1}"

    def where(self, run: int) -> str:  # a1b2c3d (2026-11-30)
        date = self.date(run)
        return self.label(run) + (f" ({display_name(date[:10])})" if date else "")
