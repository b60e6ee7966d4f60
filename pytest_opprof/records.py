"""One profiled test's outcome as plain data: what every report is made from.

A :class:`TestRecord` holds the test's Profile and the gate's TestResult (None when the
gate did not look at the test). Every surface (the terminal report, ``--opprof-json``,
``--opprof-markdown``, ``--opprof-trace``, the HTML report) reads records only, so that
under xdist a worker sends its records to the controller (``config.workeroutput``) and
the controller reports every test exactly once. Records import no renderer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import OpprofError
from .profile import Profile

if TYPE_CHECKING:
    from .gate import TestResult

#: The key of a worker's records in ``config.workeroutput``.
WORKER_KEY = "opprof_records"


@dataclass(frozen=True)
class TestRecord:
    __test__ = False  # not a pytest test class

    profile: Profile
    #: What the gate concluded; None when it did not look at the test.
    result: TestResult | None = None

    @property
    def nodeid(self) -> str:
        return self.profile.nodeid

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile.to_dict(),
                "result": None if self.result is None else _result_to_dict(self.result)}

    @classmethod
    def from_dict(cls, data: Any) -> TestRecord:
        if not isinstance(data, dict):
            raise OpprofError("not a test record")
        profile = Profile.from_dict(data.get("profile"))
        result = data.get("result")
        return cls(profile, None if result is None else _result_from_dict(result, profile))


# The verdicts engineer's branch gives TestResult its own to_dict/from_dict; these two
# stand in for them until it is merged (workers ship records through them).
def _result_to_dict(result: TestResult) -> dict[str, Any]:
    from dataclasses import asdict

    c = result.comparison
    return {"nodeid": result.nodeid, "verdict": str(result.verdict),
            "machine": result.machine, "baseline_path": result.baseline_path,
            "comparison": None if c is None else asdict(c),
            "over_budget": [asdict(b) for b in result.over_budget],
            "at_fault": [asdict(v) for v in result.at_fault]}


def _result_from_dict(data: Any, profile: Profile) -> TestResult:
    from .gate import BudgetVerdict, TestResult
    from .regression import Comparison, OpVerdict

    try:
        c = data["comparison"]
        comparison = None if c is None else Comparison(
            **{**c, "ops": [OpVerdict(**v) for v in c["ops"]],
               "unconfirmed": [OpVerdict(**v) for v in c["unconfirmed"]]})
        return TestResult(data["nodeid"], data["verdict"], data["machine"], profile,
                          comparison=comparison,
                          over_budget=[BudgetVerdict(**b) for b in data["over_budget"]],
                          at_fault=[OpVerdict(**v) for v in data["at_fault"]],
                          baseline_path=data["baseline_path"])
    except (KeyError, TypeError) as exc:
        raise OpprofError(f"not a test result ({exc})") from None


def dumps(records: list[TestRecord]) -> str:
    return json.dumps([r.to_dict() for r in records])


def loads(text: str) -> list[TestRecord]:
    """A worker's records; OpprofError if they cannot be read."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError, TypeError) as exc:
        raise OpprofError(f"a worker's records are not JSON ({exc})") from None
    if not isinstance(data, list):
        raise OpprofError("a worker's records are not a list")
    return [TestRecord.from_dict(d) for d in data]
