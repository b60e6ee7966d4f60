"""Where and when a run happened: made once per session, read by every renderer.

Plain data (no pytest, no session), so that a renderer is a pure function of the
records and this, and ``opprof report`` can rebuild one from a results file. Building it
asks git for the commit, which takes a moment: the session builds it only when needed.
"""

from __future__ import annotations

import datetime
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .._version import __version__


@dataclass(frozen=True)
class RunInfo:
    #: The machine key baselines are stored under (``cuda-NVIDIA H200``, or the user's).
    machine: str
    #: The name of the measure its figures were taken with.
    measure: str
    device: str
    #: python, numpy, pytest-opprof, platform, and cupy when it is loaded.
    versions: Mapping[str, str] = field(default_factory=dict)
    #: pytest-benchmark's commit info (id, time, dirty, branch, ...), if any.
    commit: Mapping[str, Any] | None = None
    #: ISO 8601, UTC, to the second.
    date: str = ""
    #: pytest-benchmark's machine info (node, processor, cpu, ...).
    benchmark_machine_info: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def collect(cls, machine: str, measure: str, device: str) -> RunInfo:
        """This run's facts, asked of the system now; pytest-benchmark's machine info
        (over half a second: it asks the CPU) is left to :meth:`with_machine_info`."""
        from pytest_benchmark.utils import get_commit_info

        # pytest-benchmark is untyped: its helpers are called as they are documented
        commit = get_commit_info()  # type: ignore[no-untyped-call]
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        return cls(machine=machine, measure=measure, device=device, versions=versions(),
                   commit=commit, date=now)

    def with_machine_info(self) -> RunInfo:
        from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info

        if self.benchmark_machine_info:
            return self
        info = pytest_benchmark_generate_machine_info()  # type: ignore[no-untyped-call]
        return replace(self, benchmark_machine_info=info)

    def to_dict(self) -> dict[str, Any]:
        """The results file's ``machine`` object (key, measure, device, the versions, flat
        as the results schema has them, and pytest-benchmark's machine info) and ``run``."""
        return {"machine": {"key": self.machine, "measure": self.measure, "device": self.device,
                            **self.versions,
                            "benchmark_machine_info": dict(self.benchmark_machine_info)},
                "run": {"date": self.date,
                        "commit": None if self.commit is None else dict(self.commit)}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunInfo:
        """The run info of a results file (``to_dict``'s shape). Lenient, as the report
        only shows these: a value of the wrong type is shown as ``?``, never trusted."""
        machine = _mapping(data.get("machine"))
        run = _mapping(data.get("run"))
        known = {"key", "measure", "device", "benchmark_machine_info"}
        return cls(machine=_text(machine.get("key")), measure=_text(machine.get("measure")),
                   device=_text(machine.get("device")),
                   versions={k: v for k, v in machine.items()
                             if k not in known and isinstance(v, str)},
                   commit=run.get("commit") if isinstance(run.get("commit"), dict) else None,
                   date=_text(run.get("date"), ""),
                   benchmark_machine_info=_mapping(machine.get("benchmark_machine_info")))


def versions() -> dict[str, str]:
    import numpy as np

    found = {"python": platform.python_version(), "numpy": np.__version__,
             "pytest-opprof": __version__, "platform": platform.platform()}
    if "cupy" in sys.modules:
        found["cupy"] = str(sys.modules["cupy"].__version__)
    return found


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _text(value: Any, missing: str = "?") -> str:
    return value if isinstance(value, str) else missing
