"""``opprof compare``'s data: each op's change between two sides, each test's, the
report's. Made by judge/comparison.py (judge/paired.py judges each op), rendered by
render/compare.py."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from .verdict import OpStatus
from .words import Unit


@dataclass(frozen=True)
class OpChange:
    """One op's comparison. Ratios are head/base (1.10: 10% slower); times in ns."""

    base_ns: float
    head_ns: float
    #: ``head_ns / base_ns``, exactly.
    change: float
    #: The interval of :attr:`estimate`, the change the verdict is read from.
    low: float
    high: float
    #: The standard deviation of the op's log ratio per pair, less what the pair's ops
    #: moved by alike (after shrinkage); with one pair, the spread credited to it.
    sd: float
    verdict: OpStatus
    #: The slowdown (a fraction) this comparison would call regressed with probability
    #: :data:`pytest_opprof.judge.config.POWER`.
    detectable: float
    #: The op's change as the pairs show it: the mean over pairs of each pair's ratio
    #: (with pairs, each op's samples at its process's mean machine state). Never less
    #: what the other ops did: a change every op shares is each op's. NaN when not given.
    estimate: float = math.nan

    @property
    def own(self) -> float:
        """:attr:`estimate`, or :attr:`change` where none was given."""
        return self.estimate if math.isfinite(self.estimate) else self.change


@dataclass(frozen=True)
class Shared:
    """What a test's ops moved by together between the sides (head/base, the median
    op's), and its interval: a finding of its own, never taken out of the ops."""

    change: float
    low: float
    high: float

    def seen(self, tolerance: float = 0.0) -> bool:
        """Whether the interval lies wholly beyond ``tolerance`` either way."""
        return self.low > 1 + tolerance or self.high < 1 / (1 + tolerance)


@dataclass(frozen=True)
class PairedResult:
    ops: tuple[OpChange, ...]
    pairs: int
    #: Each pair's common component (head/base, what the pair's median op moved by):
    #: how far the pairs swung together. Only its swing around its mean is taken out
    #: of the ops' spread; its mean stays in every op's change.
    common: tuple[float, ...]
    #: What the ops moved by together, with its interval; None where the test has too
    #: few ops to tell, or its figures cannot move together but by the code (counts).
    shared: Shared | None
    #: The interval's degrees of freedom (inf: normal quantiles) and its quantile.
    dof: float
    quantile: float
    #: Sentences a reader needs to trust the verdicts (few ops, one pair).
    notes: tuple[str, ...]


@dataclass(frozen=True)
class OpRow:
    op_id: int
    name: str
    occurrence: int
    change: OpChange


@dataclass(frozen=True)
class TestComparison:
    nodeid: str
    result: PairedResult
    ops: tuple[OpRow, ...]
    #: Ops (``name#occurrence``) measured on one side only: listed, never failed.
    base_only_ops: tuple[str, ...]
    head_only_ops: tuple[str, ...]
    #: Ops measured on both sides but not in every pair (a branch some processes did not
    #: take): listed, not judged.
    partial_ops: tuple[str, ...] = ()
    #: The ``judge.config.SIZING_QUANTILE``-th percentile of the ops' detectable effects
    #: (NaN with no op judged).
    sees: float = math.nan


@dataclass(frozen=True)
class Environment:
    """One side's Python environment, as ``opprof compare --base-python`` found it."""

    #: The interpreter as given (a venv's ``bin/python``), made absolute.
    python: str
    #: Python's version (``3.11.7``).
    version: str
    #: Every installed distribution: its normalized name -> version.
    packages: Mapping[str, str] = field(default_factory=dict)
    #: numpy's BLAS (``scipy-openblas 0.3.27``), from numpy's build configuration; empty
    #: without numpy or where numpy does not say.
    blas: str = ""
    #: The CUDA runtime CuPy loads (``13.0``); empty without CuPy or CUDA.
    cuda: str = ""
    #: The virtual environment's folder (``sys.prefix``) when the interpreter is one's;
    #: empty for an interpreter of its own.
    venv: str = ""

    def summary(self) -> str:
        """One line: the interpreter and the versions that matter, where present."""
        parts = [f"Python {self.version}"]
        cupy = sorted(n for n in self.packages if n == "cupy" or n.startswith("cupy-cuda"))
        parts += [f"{name} {self.packages[name]}" for name in
                  ["numpy", *cupy] if name in self.packages]
        parts += [f"BLAS {self.blas}"] if self.blas else []
        parts += [f"CUDA {self.cuda}"] if self.cuda else []
        return f"{self.python}: {', '.join(parts)}"


def differences(base: Environment, head: Environment) -> tuple[tuple[str, str, str], ...]:
    """The packages (and Python, the BLAS, CUDA) whose version differs between the
    sides, as (name, base's, head's); ``absent`` where a side has none."""
    rows = [(name, b or "absent", h or "absent") for name, b, h in (
        ("python", base.version, head.version), ("blas", base.blas, head.blas),
        ("cuda", base.cuda, head.cuda)) if b != h]
    for name in sorted(base.packages.keys() | head.packages.keys()):
        b, h = base.packages.get(name, "absent"), head.packages.get(name, "absent")
        if b != h:
            rows.append((name, b, h))
    return tuple(rows)


@dataclass(frozen=True)
class Report:
    #: "pairs" (opprof compare REF) or "files" (two results files).
    mode: str
    base: str
    head: str
    tolerance: float
    alpha: float
    pairs: int
    tests: tuple[TestComparison, ...]
    base_only_tests: tuple[str, ...]
    head_only_tests: tuple[str, ...]
    #: The slowdown the run was sized to see (--detect).
    detect: float
    #: The measure every profile of the comparison was taken with ("": not one), and
    #: what its figures count.
    measure: str = ""
    unit: Unit = Unit.NANOSECONDS
    #: The sides' Python environments (base, head), when ``--base-python`` or
    #: ``--head-python`` chose them; None when both ran under this interpreter.
    environments: tuple[Environment, Environment] | None = None
    #: ``--strict-effect``: the slowdown every test had to be able to show, or the
    #: comparison fails; None when not asked.
    strict_effect: float | None = None

    def count(self, verdict: str) -> int:
        return sum(row.change.verdict == verdict for t in self.tests for row in t.ops)
