"""What the session's three parts (:mod:`.gating`, :mod:`.reporter`, :mod:`.channel`)
share: the settings, the measure started, the machine key, the store, and what the run
profiled, judged and noted. Made only when a run asks for opprof: numpy and the profiler
are paid only then."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import pytest

from ..errors import OpprofError
from ..measure import measures
from ..model import conditions as run_conditions
from . import outputs
from .options import Settings, retake, setting

if TYPE_CHECKING:
    from ..model.hints import Retake
    from ..model.profile import Profile
    from ..model.records import TestRecord
    from ..model.runinfo import RunInfo
    from ..model.verdict import TestResult
    from ..store.baseline import BaselineStore


def worker_number(config: pytest.Config) -> int | None:
    """This process's xdist worker number (gw3 -> 3), or None when it is no worker."""
    workerinput = getattr(config, "workerinput", None)
    if not isinstance(workerinput, dict):
        return None
    digits = str(workerinput.get("workerid", "")).removeprefix("gw")
    return int(digits) if digits.isdigit() else 0


def start_measure(config: pytest.Config, name: str, worker: int | None) -> measures.Measure:
    """The measure ``--opprof-measure`` (or the ini file, or ``-o``) names, started once
    (``auto`` resolved; one that cannot run here is a usage error before any test runs,
    naming where the setting came from)."""
    try:
        return measures.start(name, worker)
    except measures.Unavailable as exc:
        advice = f"; {exc.advice}" if exc.advice else ""
        given = setting(config, "opprof_measure", name) if name != measures.AUTO \
            else f"--opprof-measure={name}"
        raise pytest.UsageError(f"{given}: {exc}{advice}") from None


def this_machine(config: pytest.Config) -> str:
    """The machine key a profiled run with ``config`` stores its baselines under, found
    as the session finds it (``opprof baseline prune`` prunes this machine's folder);
    pytest.UsageError when the measure cannot start here."""
    settings = Settings.from_pytest_config(config)
    return settings.machine_key or start_measure(config, settings.measure, None).machine_key()


class RunState:
    """The gate writes it, the channel merges workers' into it, the reporter reads it."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        #: An xdist worker reports nothing itself: its records go to the controller.
        self.is_worker = hasattr(config, "workerinput")
        if not self.is_worker:  # every output path and what it needs, before any test
            try:
                outputs.check(settings)
            except OpprofError as exc:
                raise pytest.UsageError(f"opprof: {exc}") from None
        #: Started in this process: everything that differs between measures is its to say.
        self.measure = start_measure(config, settings.measure, worker_number(config))
        self.machine = settings.machine_key or self.measure.machine_key()
        self.profiles: dict[str, Profile] = {}
        self.results: dict[str, TestResult] = {}
        #: The profiled tests whose call did not pass (their records say so).
        self.failed_calls: set[str] = set()
        #: Records sent by xdist workers (on the controller).
        self.remote: list[TestRecord] = []
        self._records: tuple[tuple[int, int, int], list[TestRecord]] | None = None
        #: What a test did that the gate cannot see (no loop, ops outside it, a break):
        #: node id -> its lines, said once each; and the tests that used gpu_profiler,
        #: passed and profiled nothing (node id -> why), for strict mode.
        self.notes: dict[str, list[str]] = {}
        self.unprofiled: dict[str, str] = {}

    @cached_property
    def store(self) -> BaselineStore:
        from ..store.baseline import BaselineStore

        return BaselineStore(self.settings.baseline_dir, self.machine)

    @cached_property
    def run_info(self) -> RunInfo:
        """Where and when this run happened: asked of the system once, when a file or a
        baseline first needs it (git takes a moment)."""
        from ..model.runinfo import RunInfo

        return RunInfo.collect(self.machine, self.measure.name, self.measure.device)

    @cached_property
    def retake(self) -> Retake:
        """``opprof baseline update`` as this run takes its baselines: every command it
        prints is this one's (:mod:`pytest_opprof.model.hints`)."""
        return retake(self.config, self.settings, self.measure.name)

    @cached_property
    def conditions(self) -> run_conditions.Conditions:
        """The conditions this run's figures were taken under, as the measure says."""
        return self.measure.conditions(getattr(self.config, "workerinput", None))

    def records(self) -> list[TestRecord]:
        """Every profiled test of the run, this process's and the workers', once each.
        Made once at the end (the files and the terminal report both read them)."""
        from ..model.records import TestRecord

        key = (len(self.profiles), len(self.results), len(self.remote))
        if self._records is None or self._records[0] != key:
            local = [TestRecord(p, self.results.get(nodeid), nodeid not in self.failed_calls)
                     for nodeid, p in self.profiles.items()]
            records = local if not self.remote else sorted(  # local: in the order they ran
                local + self.remote, key=lambda r: r.nodeid)
            self._records = (key, records)
        return self._records[1]
