"""One profiled test's outcome as plain data: what every report is made from.

A :class:`TestRecord` holds the test's Profile, its entry in the results JSON (schema
``pytest-opprof/results/1``: verdicts and numbers per op) and its gate summary line.
Every surface (the terminal report, ``--opprof-json``, ``--opprof-markdown``,
``--opprof-trace``, the HTML report) reads records only, so that under xdist a worker
sends its records to the controller (``config.workeroutput``) and the controller
reports every test exactly once.
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


@dataclass
class TestRecord:
    __test__ = False  # not a pytest test class

    profile: Profile
    #: The test's entry in the results JSON.
    entry: dict[str, Any]
    #: Its line in the gate summary; None when the gate did not look at it.
    summary: str | None = None

    @property
    def nodeid(self) -> str:
        return self.profile.nodeid

    @classmethod
    def of(cls, profile: Profile, result: TestResult | None) -> TestRecord:
        from .gate import NOT_GATED, TestResult
        from .render.gate import summary_line
        from .render.results_json import test_entry

        gated = result is not None
        if result is None:
            result = TestResult(profile.nodeid, NOT_GATED, "", profile)
        return cls(profile, test_entry(result), summary_line(result) if gated else None)

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile.to_dict(), "entry": self.entry, "summary": self.summary}

    @classmethod
    def from_dict(cls, data: Any) -> TestRecord:
        if not isinstance(data, dict) or not isinstance(data.get("entry"), dict):
            raise OpprofError("not a test record")
        summary = data.get("summary")
        return cls(Profile.from_dict(data.get("profile")), data["entry"],
                   summary if isinstance(summary, str) else None)


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
