"""One profiled test's outcome as plain typed data: what every report is made from.

Every surface reads records only, so that an xdist worker sends its records to the
controller (``config.workeroutput``), which reports every test exactly once from the
same typed objects, and a child process writes its records to its launcher's folder
(:mod:`pytest_opprof.run.launcher`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import jsontext
from .profile import Profile
from .verdict import TestResult

WORKER_KEY = "opprof_records"  # in config.workeroutput
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
        profile = Profile.from_dict(data["profile"])
        result, passed = data["result"], data.get(PASSED_KEY, True)
        if not isinstance(passed, bool):
            raise TypeError(f"{PASSED_KEY!r} is not true or false")
        return cls(profile, None if result is None else TestResult.from_dict(result, profile),
                   passed)


def dumps(records: list[TestRecord]) -> str:
    return json.dumps([r.to_dict() for r in records])


def loads(text: str | bytes, where: str = "a worker's records") -> list[TestRecord]:
    """Records as :func:`dumps` wrote them, or one OpprofError line naming ``where``."""
    return READER.parse(text, where)


def _from_list(data: Any) -> list[TestRecord]:
    if not isinstance(data, list):
        raise TypeError("records are not a list")
    return [TestRecord.from_dict(d) for d in data]


READER = jsontext.Reader(_from_list, "records", "run the tests again")
