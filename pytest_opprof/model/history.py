"""A test's history: each op's medians across its stored runs, and where they stepped.

Found by :mod:`pytest_opprof.judge.changepoints`, shown by :mod:`pytest_opprof.render.history`
(text and JSON) and :mod:`pytest_opprof.render.history_html`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .baseline import BaselineRun
from .words import display_name

#: What pytest-benchmark's commit info says where it has no commit: outside git
#: (``unversioned``) and where ``git describe`` failed (``unknown``).
NO_COMMIT = ("unversioned", "unknown")


@dataclass(frozen=True)
class Step:
    """A step of a series: ``run`` is the index (into the test's runs) of the first run
    after it; ``before`` and ``after`` the levels either side (an op's: in its unit; the
    factor its ops shared: a ratio to the typical run)."""

    run: int
    before: float
    after: float
    #: The smallest ratio that would have been reported, up or down.
    margin: float
    #: The runs after ``run`` (up to the next step) that sit nearer the new level than the
    #: old one: a step is reported only when at least ``CONFIRM`` of them agree.
    confirmed: int

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
    #: The same less the factor taken out of each run (the series steps are found in).
    corrected_ns: list[float]
    #: The spread of one run's log median; None with fewer than 3 runs (not measured).
    noise: float | None
    steps: list[Step]
    #: The level of each run's segment (between steps), in the op's unit.
    levels: list[float]


@dataclass(frozen=True)
class History:
    nodeid: str
    machine: str
    runs: list[BaselineRun]
    ops: list[OpHistory]
    #: The smallest step reported (the measure's tolerance unless one was given).
    tolerance: float
    #: Each run's factor shared by its ops (1: typical), and where it stepped (the ops
    #: moved together there); None when the test has fewer than DRIFT_MIN_OPS ops.
    shared: list[float] | None = None
    shared_steps: list[Step] = field(default_factory=list)
    #: The factor taken out of each run's ops: the shared factor's passing part (a run
    #: or two off the level it holds, the machine's), never a step of it; None where
    #: nothing is taken out (counts, which no machine moves, or too few ops).
    taken_out: list[float] | None = None

    def commit_id(self, run: int) -> str | None:
        """The run's commit id; None where pytest-benchmark knew none (:data:`NO_COMMIT`)."""
        commit = self.runs[run].meta.get("commit")
        found = commit.get("id") if isinstance(commit, dict) else None
        return str(found) if found and found not in NO_COMMIT else None

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
