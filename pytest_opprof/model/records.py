"""One profiled test's outcome as plain typed data: what every report is made from.

A :class:`TestRecord` holds the test's Profile and the gate's :class:`TestResult` (None
when the gate did not look at the test). Every surface (the terminal report,
``--opprof-json``, ``--opprof-markdown``, ``--opprof-trace``, the HTML report) reads
records only, so that under xdist a worker sends its records to the controller
(``config.workeroutput``) and the controller reports every test exactly once, from the
same typed objects, and a child process that pytest-opprof starts writes its records to
its launcher's folder (:mod:`pytest_opprof.run.launcher`). Nothing here renders:
renderers read records, not the reverse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import OpprofError
from . import jsontext
from .profile import Profile
from .verdict import TestResult

#: The key of a worker's records in ``config.workeroutput``.
WORKER_KEY = "opprof_records"
#: The key of a record's pytest outcome (the test's call passed): not a verdict.
PASSED_KEY = "call_passed"


@dataclass(frozen=True)
class TestRecord:
    __test__ = False  # not a pytest test class

    profile: Profile
    #: The gate's verdict; None when the gate did not look at the test.
    result: TestResult | None = None
    #: Whether the test itself passed (its call); a re-run trusts only such a profile.
    passed: bool = True

    @property
    def nodeid(self) -> str:
        return self.profile.nodeid

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile.to_dict(),
                "result": None if self.result is None else self.result.to_dict(),
                PASSED_KEY: self.passed}

    @classmethod
    def from_dict(cls, data: Any) -> TestRecord:
        """A record as :meth:`to_dict` wrote it; OpprofError (one line) if it is not one."""
        if not isinstance(data, dict) or "result" not in data:
            raise OpprofError("not a test record")
        profile = Profile.from_dict(data.get("profile"))
        result = data["result"]
        passed = data.get(PASSED_KEY, True)
        if not isinstance(passed, bool):
            raise OpprofError(f"malformed test record: {PASSED_KEY!r} is not true or false")
        return cls(profile, None if result is None else TestResult.from_dict(result, profile),
                   passed)


def dumps(records: list[TestRecord]) -> str:
    return json.dumps([r.to_dict() for r in records])


def loads(text: str) -> list[TestRecord]:
    """Records as :func:`dumps` wrote them (an xdist worker's, or a child process's
    records file); OpprofError if they cannot be read."""
    try:
        data = jsontext.loads(text)
    except jsontext.JSONProblem as exc:
        raise OpprofError(f"a worker's records: {exc}") from None
    if not isinstance(data, list):
        raise OpprofError("a worker's records are not a list")
    return [TestRecord.from_dict(d) for d in data]
