"""Reading a results file back (``opprof report``, ``opprof compare BASE.json HEAD.json``):
each test made into the same :class:`~pytest_opprof.model.reports.TestReport` a run
renders from (:func:`pytest_opprof.stats.reports.report_of`), from the typed profile and
result the file carries. :mod:`pytest_opprof.render.results_json` writes the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import OpprofError
from ..model import jsontext
from ..model.profile import Profile
from ..model.records import TestRecord
from ..model.reports import RESULTS_SCHEMA, TestReport
from ..model.runinfo import RunInfo
from ..model.verdict import TestResult
from ..stats.reports import report_of
from .files import read_json

SCHEMA = RESULTS_SCHEMA


def load(path: Path) -> tuple[RunInfo, list[TestReport]]:
    """A results file's run info and its tests as the reports render them."""
    run_info, records = load_records(path)
    return run_info, [report_of(record) for record in records]


def load_records(path: Path) -> tuple[RunInfo, list[TestRecord]]:
    """A results file's run info and its tests' typed records, or one OpprofError line
    naming the file."""
    return read_json(Path(path), READER)


def _results(data: Any) -> tuple[RunInfo, list[TestRecord]]:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise OpprofError(f"not a results file of schema {SCHEMA!r} "
                          "(pytest --opprof-json=PATH writes one)")
    tests, machine = data["tests"], data["machine"]
    if not isinstance(tests, list) or not isinstance(machine, dict):
        raise TypeError("tests is not a list or machine not an object")
    return RunInfo.from_dict(data), [_record(test) for test in tests]


READER = jsontext.Reader(_results, "results", "write it again with pytest --opprof-json=PATH")


def _record(test: dict[str, Any]) -> TestRecord:
    """A test of a results file; one without a ``result`` was not gated."""
    profile = Profile.from_dict(test["profile"])
    result = test.get("result")
    return TestRecord(profile, None if result is None else TestResult.from_dict(result, profile))
