"""The gate's conclusions as typed, immutable data: what the rule, the per-test judge,
the records, xdist workers and every renderer exchange.

Verdicts are ``str``-valued enums, so ``v.verdict == "regressed"`` and JSON both keep
working. ``from_dict`` validates what it is given (a worker's records, a results file):
anything malformed is one :class:`~pytest_opprof.errors.OpprofError` line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import OpprofError

if TYPE_CHECKING:
    from .profile import Profile

#: An op as the rule matches it across runs: (name, occurrence).
Key = tuple[str, int]

_E = TypeVar("_E", bound=Enum)
_T = TypeVar("_T")


class _Word(str, Enum):
    """A verdict that prints as the plain word it stands for."""

    def __str__(self) -> str:
        return str(self.value)


class Verdict(_Word):
    """What the gate concluded about one profiled test."""

    PASSED = "passed"
    FAILED = "failed"
    NO_BASELINE = "no baseline"
    UPDATED = "baseline updated"
    NOT_GATED = "not gated"
    #: Compared with a baseline it cannot be fairly judged against (absurd drift, other
    #: run conditions): neither failed nor passed; ``TestResult.reason`` says why.
    UNJUDGED = "unjudged"


class OpStatus(_Word):
    """What the rule concluded about one op against its baseline."""

    OK = "ok"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    #: Only in the current run.
    NEW = "new"
    #: Only in the baseline.
    MISSING = "missing"
    #: Too few samples to say.
    UNJUDGED = "unjudged"


#: The statuses the rule compared numbers for (the others have one side only).
COMPARED = (OpStatus.OK, OpStatus.REGRESSED, OpStatus.IMPROVED)


@dataclass(frozen=True)
class OpVerdict:
    name: str
    occurrence: int
    op_id: int
    verdict: OpStatus
    baseline_median: float = math.nan
    current_median: float = math.nan
    #: current / baseline median, and the same divided by the run's drift.
    ratio: float = math.nan
    corrected_ratio: float = math.nan
    #: The drift-corrected ratio the op had to pass: 1 + tolerance, or more where its
    #: spread between processes asks for more (computed for flagged ops only).
    margin: float = math.nan
    tolerance: float = math.nan
    #: The drift-corrected log ratio over its expected spread between processes.
    z: float = math.nan
    #: One-sided p-values, in the direction of the change: against the op's spread
    #: between processes, and the rank test on the samples.
    p_value: float = math.nan
    rank_p_value: float = math.nan
    n_current: int = 0
    n_baseline: int = 0
    runs: int = 0
    reason: str = ""
    #: Would regress at the looser ``trigger_alpha``: worth a confirmation re-run.
    suspect: bool = False
    #: The op's estimated spread between processes (relative sd of its median), and the
    #: smallest slowdown this comparison would catch with the rule's power (0.12: +12%).
    spread: float = math.nan
    detectable: float = math.nan
    #: Instructions measure, a regressed op: the functions whose instructions grew most,
    #: as (name, baseline count, current count) in its last iteration, nested ops included.
    grew: tuple[tuple[str, float, float], ...] = ()

    @property
    def key(self) -> Key:
        return (self.name, self.occurrence)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "occurrence": self.occurrence, "op_id": self.op_id,
            "verdict": self.verdict.value,
            **{name: _float_out(getattr(self, name)) for name in _OP_FLOATS + _OP_NEWER},
            "n_current": self.n_current, "n_baseline": self.n_baseline, "runs": self.runs,
            "reason": self.reason, "suspect": self.suspect,
            "grew": [[name, before, after] for name, before, after in self.grew],
        }

    @classmethod
    def from_dict(cls, data: Any) -> OpVerdict:
        d = _mapping(data, "op verdict")
        return cls(
            name=_str(d, "name"), occurrence=_int(d, "occurrence"), op_id=_int(d, "op_id"),
            verdict=_enum(d, "verdict", OpStatus),
            **{name: _float(d, name) for name in _OP_FLOATS},
            **{name: _float(d, name) if name in d else math.nan for name in _OP_NEWER},
            n_current=_int(d, "n_current"), n_baseline=_int(d, "n_baseline"),
            runs=_int(d, "runs"), reason=_str(d, "reason"),
            suspect=_field(d, "suspect", bool, "true or false"),
            grew=_grew(d.get("grew", [])),
        )


def _grew(value: Any) -> tuple[tuple[str, float, float], ...]:
    """A verdict's functions that grew, as stored: [name, before, after] triples."""
    if not isinstance(value, list) or len(value) > 100:
        raise OpprofError("malformed op verdict: grew is not a list of at most 100 functions")
    found = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                        for x in item[1:])):
            raise OpprofError("malformed op verdict: grew holds [name, before, after] triples")
        found.append((item[0], float(item[1]), float(item[2])))
    return tuple(found)


_OP_FLOATS = ("baseline_median", "current_median", "ratio", "corrected_ratio", "margin",
              "tolerance", "z", "p_value", "rank_p_value")
#: Fields a results file written before they existed lacks (read as NaN).
_OP_NEWER = ("spread", "detectable")


@dataclass(frozen=True)
class Comparison:
    ops: tuple[OpVerdict, ...]
    #: Machine-wide speed factor of this run (1.02: everything 2% slower), and its source:
    #: "ops" (median ratio over the test's ops), "probe" or "none".
    drift: float
    drift_source: str
    runs: int
    #: Current runs judged together: 2 when a re-run in a new process confirmed a suspect.
    current_runs: int = 1
    #: Ops the first run alone flagged that the re-run did not confirm.
    unconfirmed: tuple[OpVerdict, ...] = ()
    #: What the judged ops moved by together beyond the drift taken out (no reference
    #: showed the machine move so): a change they share, each op's own; NaN when none.
    shared: float = math.nan

    def having(self, *verdicts: OpStatus) -> list[OpVerdict]:
        return [v for v in self.ops if v.verdict in verdicts]

    def to_dict(self) -> dict[str, Any]:
        return {"ops": [v.to_dict() for v in self.ops], "drift": _float_out(self.drift),
                "drift_source": self.drift_source, "runs": self.runs,
                "current_runs": self.current_runs,
                "unconfirmed": [v.to_dict() for v in self.unconfirmed],
                "shared": _float_out(self.shared)}

    @classmethod
    def from_dict(cls, data: Any) -> Comparison:
        d = _mapping(data, "comparison")
        source = _str(d, "drift_source")
        if source not in DRIFT_SOURCES:
            raise OpprofError(f"malformed comparison: drift_source {source!r} is not one of "
                              f"{', '.join(DRIFT_SOURCES)}")
        return cls(ops=_list(d, "ops", OpVerdict.from_dict), drift=_float(d, "drift"),
                   drift_source=source, runs=_int(d, "runs"),
                   current_runs=_int(d, "current_runs"),
                   unconfirmed=_list(d, "unconfirmed", OpVerdict.from_dict),
                   shared=_float(d, "shared") if "shared" in d else math.nan)


DRIFT_SOURCES = ("ops", "probe", "none")


@dataclass(frozen=True)
class BudgetVerdict:
    """An op over its ``max_time``; ``median_ns`` is NaN when no op of that name ran."""

    op_id: int
    name: str
    median_ns: float
    budget_ns: float

    def to_dict(self) -> dict[str, Any]:
        return {"op_id": self.op_id, "name": self.name,
                "median_ns": _float_out(self.median_ns), "budget_ns": self.budget_ns}

    @classmethod
    def from_dict(cls, data: Any) -> BudgetVerdict:
        d = _mapping(data, "budget verdict")
        return cls(_int(d, "op_id"), _str(d, "name"), _float(d, "median_ns"),
                   _float(d, "budget_ns"))


@dataclass(frozen=True)
class TestResult:
    """What the gate concluded about one profiled test; made once, with its final values
    (by :func:`pytest_opprof.judge.gate.judge` or ``gate.updated``), never rebuilt."""

    __test__ = False  # not a pytest test class

    nodeid: str
    verdict: Verdict
    machine: str
    profile: Profile
    comparison: Comparison | None = None
    over_budget: tuple[BudgetVerdict, ...] = ()
    #: The ops that fail the test: regressed ones, and new or missing ones when strict.
    at_fault: tuple[OpVerdict, ...] = ()
    baseline_path: str | None = None
    #: Why the gate did not judge the test (``Verdict.UNJUDGED``); empty otherwise.
    reason: str = ""
    #: The runs of the baseline stored for the test (0: none), whether or not it could
    #: judge this run (its conditions may differ: then there is no comparison).
    baseline_runs: int = 0

    @property
    def failed(self) -> bool:
        return self.verdict == Verdict.FAILED

    def at_fault_by_verdict(self) -> dict[OpStatus, list[OpVerdict]]:
        """The ops at fault grouped by what happened to them (regressed, new, missing), in
        that order: a failure names each group by its verdict."""
        groups = {status: [v for v in self.at_fault if v.verdict == status]
                  for status in (OpStatus.REGRESSED, OpStatus.NEW, OpStatus.MISSING)}
        return {status: ops for status, ops in groups.items() if ops}

    def to_dict(self) -> dict[str, Any]:
        """Everything but the profile, which travels beside it (records.TestRecord)."""
        return {
            "nodeid": self.nodeid, "verdict": self.verdict.value, "machine": self.machine,
            "comparison": None if self.comparison is None else self.comparison.to_dict(),
            "over_budget": [b.to_dict() for b in self.over_budget],
            "at_fault": [v.to_dict() for v in self.at_fault],
            "baseline_path": self.baseline_path, "reason": self.reason,
            "baseline_runs": self.baseline_runs,
        }

    @classmethod
    def from_dict(cls, data: Any, profile: Profile) -> TestResult:
        d = _mapping(data, "test result")
        nodeid = _str(d, "nodeid")
        if nodeid != profile.nodeid:
            raise OpprofError(f"malformed test result: it names {nodeid!r}, its profile "
                              f"{profile.nodeid!r}")
        comparison = d.get("comparison")
        path, reason = d.get("baseline_path"), d.get("reason", "")  # older files lack reason
        for key, value in (("baseline_path", "" if path is None else path), ("reason", reason)):
            if not isinstance(value, str):
                raise OpprofError(f"malformed test result: {key!r} is not a string")
        return cls(
            nodeid=nodeid, verdict=_enum(d, "verdict", Verdict), machine=_str(d, "machine"),
            profile=profile,
            comparison=None if comparison is None else Comparison.from_dict(comparison),
            over_budget=_list(d, "over_budget", BudgetVerdict.from_dict),
            at_fault=_list(d, "at_fault", OpVerdict.from_dict), baseline_path=path,
            reason=reason,
            # results files written before it existed lack it: the comparison's runs
            baseline_runs=_int(d, "baseline_runs") if "baseline_runs" in d
            else (0 if comparison is None else _int(_mapping(comparison, "comparison"), "runs")),
        )


# -- reading dicts: one line naming the field, whatever is wrong ------------------------
def _mapping(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise OpprofError(f"malformed {what}: expected an object, found {type(data).__name__}")
    return data


def _field(d: Mapping[str, Any], key: str, kind: type[_T], words: str) -> _T:
    if key not in d:
        raise OpprofError(f"malformed verdict data: {key!r} is missing")
    if not isinstance(d[key], kind):
        raise OpprofError(f"malformed verdict data: {key!r} is not {words}")
    return d[key]  # type: ignore[no-any-return]


def _str(d: Mapping[str, Any], key: str) -> str:
    return _field(d, key, str, "a string")


def _int(d: Mapping[str, Any], key: str) -> int:
    value = _field(d, key, int, "an integer")
    if isinstance(value, bool):
        raise OpprofError(f"malformed verdict data: {key!r} is not an integer")
    return value


def _float(d: Mapping[str, Any], key: str) -> float:
    """A number; ``null`` is NaN (as :func:`_float_out` writes it)."""
    value = _field(d, key, object, "")
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OpprofError(f"malformed verdict data: {key!r} is not a number")
    return float(value)


def _float_out(x: float) -> float | None:
    """NaN as ``null`` (JSON has no NaN)."""
    return None if math.isnan(x) else float(x)


def _enum(d: Mapping[str, Any], key: str, kind: type[_E]) -> _E:
    value = _field(d, key, object, "")
    try:
        return kind(value)
    except (ValueError, TypeError):
        allowed = ", ".join(repr(e.value) for e in kind)
        found = repr(value[:40]) if isinstance(value, str) else type(value).__name__
        raise OpprofError(f"malformed verdict data: {key!r} is {found}, not one of "
                          f"{allowed}") from None


def _list(d: Mapping[str, Any], key: str, read: Callable[[Any], _T]) -> tuple[_T, ...]:
    return tuple(read(item) for item in _field(d, key, list, "a list"))
