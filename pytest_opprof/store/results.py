"""Reading a results file back (``opprof report``, ``opprof compare BASE.json HEAD.json``):
each test made into the same :class:`~pytest_opprof.model.reports.TestReport` a run
renders from (:func:`pytest_opprof.stats.reports.report_of`), from the typed profile and
result the file carries. :mod:`pytest_opprof.render.results_json` writes the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import OpprofError
from ..measure.measures import former
from ..model import jsontext
from ..model.profile import SCHEMA as PROFILE_SCHEMA
from ..model.profile import Profile
from ..model.records import TestRecord
from ..model.reports import RESULTS_SCHEMA, TestReport
from ..model.runinfo import RunInfo
from ..model.verdict import TestResult
from ..stats.reports import report_of
from .files import read_json

SCHEMA = RESULTS_SCHEMA
#: The schemas before measures were objects: a results file's, and its profiles'.
SCHEMA_1 = "pytest-opprof/results/1"
PROFILE_SCHEMA_1 = "pytest-opprof/profile/1"


def load(path: Path) -> tuple[RunInfo, list[TestReport]]:
    """A results file's run info and its tests as the reports render them."""
    run_info, records = load_records(path)
    return run_info, [report_of(record) for record in records]


def load_records(path: Path) -> tuple[RunInfo, list[TestRecord]]:
    """A results file's run info and its tests' typed records, or one OpprofError line
    naming the file."""
    return read_json(Path(path), READER)


def _results(data: Any) -> tuple[RunInfo, list[TestRecord]]:
    if isinstance(data, dict) and data.get("schema") == SCHEMA_1:
        data = update_to_2(data)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise OpprofError(f"not a results file of schema {SCHEMA!r} "
                          "(pytest --opprof-json=PATH writes one)")
    tests, machine = data["tests"], data["machine"]
    if not isinstance(tests, list) or not isinstance(machine, dict):
        raise TypeError("tests is not a list or machine not an object")
    return RunInfo.from_dict(data), [_record(test) for test in tests]


READER = jsontext.Reader(_results, "results", "write it again with pytest --opprof-json=PATH")


def update_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """A results file of schema 1 as schema 2: the backend and measure each profile (and
    the machine) recorded, as the one measure they stand for (its name and unit:
    :func:`~pytest_opprof.measure.measures.former`). What is not a profile is left for
    the reader to refuse."""
    def measure(fields: dict[str, Any]) -> dict[str, Any]:
        recorded = fields.get("measure")
        name, unit = former(str(fields.get("backend")),
                            recorded if isinstance(recorded, str) else None)
        kept = {k: v for k, v in fields.items() if k != "backend"}
        return {**kept, "measure": name, "unit": unit.value}

    tests = data.get("tests")
    if isinstance(tests, list):
        tests = [{**t, "profile": {**measure(t["profile"]), "schema": PROFILE_SCHEMA}}
                 if isinstance(t, dict) and isinstance(t.get("profile"), dict)
                 and t["profile"].get("schema") == PROFILE_SCHEMA_1 else t for t in tests]
    machine = data.get("machine")
    if isinstance(machine, dict):
        machine = {k: v for k, v in measure(machine).items() if k != "unit"}
    return {**data, "schema": SCHEMA, "tests": tests, "machine": machine}


def _record(test: dict[str, Any]) -> TestRecord:
    """A test of a results file; one without a ``result`` was not gated."""
    profile = Profile.from_dict(test["profile"])
    result = test.get("result")
    return TestRecord(profile, None if result is None else TestResult.from_dict(result, profile))
