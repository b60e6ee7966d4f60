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
from ..model.reports import RESULTS_MAX_BYTES, RESULTS_SCHEMA, TestReport
from ..model.runinfo import RunInfo
from ..model.verdict import TestResult
from ..stats.reports import report_of
from .files import read_bounded

SCHEMA = RESULTS_SCHEMA
#: The schemas before measures were objects: a results file's, and its profiles'.
SCHEMA_1 = "pytest-opprof/results/1"
PROFILE_SCHEMA_1 = "pytest-opprof/profile/1"
#: A results file larger than this is refused unread (the writer's bound too).
MAX_BYTES = RESULTS_MAX_BYTES


def load(path: Path) -> tuple[RunInfo, list[TestReport]]:
    """A results file's run info and its tests as the reports render them; OpprofError
    naming the file when it cannot be read (see :func:`load_records`)."""
    run_info, records = load_records(path)
    reports = []
    for record in records:
        try:
            reports.append(report_of(record))
        except OpprofError as exc:
            raise OpprofError(f"{path}: {record.profile.nodeid!r}: {exc}") from None
    return run_info, reports


def load_records(path: Path) -> tuple[RunInfo, list[TestRecord]]:
    """A results file's run info and its tests' typed records; OpprofError naming the
    file when it cannot be read (JSON into validated data only, at most MAX_BYTES read)."""
    try:
        data = jsontext.loads(read_bounded(Path(path), MAX_BYTES))
    except OSError as exc:
        raise OpprofError(f"{path}: cannot be read ({exc})") from None
    except jsontext.JSONProblem as exc:  # the one parse path of every reader
        raise OpprofError(f"{path}: {exc}; write it again with pytest "
                          "--opprof-json=PATH") from None
    if isinstance(data, dict) and data.get("schema") == SCHEMA_1:
        data = update_to_2(data)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise OpprofError(f"{path}: not a results file of schema {SCHEMA!r} "
                          "(pytest --opprof-json=PATH writes one)")
    tests, machine = data.get("tests"), data.get("machine")
    if not isinstance(tests, list) or not isinstance(machine, dict):
        raise OpprofError(f"{path}: malformed results (tests or machine missing)")
    records = []
    for test in tests:
        if not isinstance(test, dict) or not isinstance(test.get("ops"), list):
            raise OpprofError(f"{path}: malformed results (a test without ops)")
        try:
            records.append(_record(test))
        except OpprofError as exc:
            raise OpprofError(f"{path}: {test.get('nodeid')!r}: {exc}") from None
    return RunInfo.from_dict(data), records


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
    """One test of a results file as its typed record: its profile and the gate's
    ``result`` (validated); a test without one was not gated."""
    profile = Profile.from_dict(test.get("profile"))
    result = test.get("result")
    return TestRecord(profile, None if result is None else TestResult.from_dict(result, profile))
