"""One profiled test as every report shows it: each op's figures beside its verdict.

A :class:`TestReport` is made once per record, just measured or read back from a results
file, by :func:`pytest_opprof.stats.reports.report_of`; the results JSON, the Markdown and
the HTML render from it, so each says the same number for the same op. The figures next
to a verdict are the verdict's own (:class:`OpVerdict`), never copied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .profile import Profile
from .records import TestRecord
from .verdict import OpStatus, OpVerdict, TestResult, Verdict
from .words import word

#: The results file's schema (pytest_opprof/schemas/results-2.schema.json; schema 1,
#: written before measures were objects, is read through ``store.results``).
RESULTS_SCHEMA = "pytest-opprof/results/2"
#: An op's word over budget (its OpStatus says how it compared with the baseline).
OVER_BUDGET = "over_budget"


@dataclass(frozen=True)
class KernelStats:
    """The activities of one name and kind (of one op, or the whole test) over the counted
    iterations."""

    name: str
    #: ``kernel``, ``memcpy`` or ``memset``.
    kind: str
    count: int
    total: float
    mean: float
    min: float
    max: float
    #: The OP_ID that launched them (innermost op); -1 outside any op; None for a row
    #: of the whole test.
    op_id: int | None = None


@dataclass(frozen=True)
class Figures:
    """One op's gated times over the counted iterations it ran in (None: it ran in none)."""

    median: float | None
    mean: float | None
    min: float | None
    max: float | None
    count: int


@dataclass(frozen=True)
class KernelFigures:
    """An op's kernel-time extras: its median activities per counted iteration (None:
    unknown) and the median of its event span."""

    count: float | None
    span_median: float | None


@dataclass(frozen=True)
class OpReport:
    op_id: int
    name: str
    occurrence: int
    #: ``phase`` and ``current`` are None for an op in the baseline only.
    phase: str | None
    #: An :class:`OpStatus` word, or :data:`OVER_BUDGET`.
    status: str
    current: Figures | None
    #: The gate's verdict on it; None when the gate did not compare the test.
    verdict: OpVerdict | None
    budget_ns: float | None = None
    kernel: KernelFigures | None = None
    #: The activities it launched itself, longest total first; None when none recorded.
    kernels: tuple[KernelStats, ...] | None = None

    @property
    def baseline(self) -> OpVerdict | None:
        """Its verdict when the baseline had it (not a new op): the baseline's figures."""
        v = self.verdict
        return None if v is None or v.verdict == OpStatus.NEW else v

    @property
    def median(self) -> float | None:
        return None if self.current is None else self.current.median

    @property
    def judged_median(self) -> float | None:
        """The current median the verdict compared with the baseline's (with a
        confirmation re-run, the geometric mean of both runs' medians)."""
        v = self.verdict
        if v is not None and math.isfinite(v.current_median):
            return float(v.current_median)
        return self.median


@dataclass(frozen=True)
class TestReport:
    __test__ = False  # not a pytest test class

    record: TestRecord
    #: The record's result, or NOT_GATED when the gate did not look at the test.
    result: TestResult
    ops: tuple[OpReport, ...]
    #: What the ops' figures are: ``kernel``, ``instructions`` or ``events``.
    measure: str
    #: Activities launched outside any op; None when none were recorded.
    outside_ops_kernels: tuple[KernelStats, ...] | None = None

    @property
    def profile(self) -> Profile:
        return self.record.profile

    @property
    def nodeid(self) -> str:
        return self.result.nodeid

    @property
    def verdict(self) -> str:
        return word(self.result.verdict)

    @property
    def failed(self) -> bool:
        return self.result.verdict == Verdict.FAILED

    @property
    def drift(self) -> float | None:
        c = self.result.comparison
        return None if c is None or not math.isfinite(c.drift) else float(c.drift)

    @property
    def baseline_runs(self) -> int:
        """The runs of its baseline: those compared, or those stored when the test could
        not be judged against them (0: none)."""
        c = self.result.comparison
        return self.result.baseline_runs if c is None else c.runs

    @property
    def zero_instrumentation(self) -> bool:
        return bool(self.profile.meta.get("zero_instrumentation"))

    def having(self, status: str) -> list[OpReport]:
        return [op for op in self.ops if op.status == status]
