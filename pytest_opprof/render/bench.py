"""pytest-benchmark: the per-op statistics a test's ``benchmark.extra_info`` carries.

Each op's counted samples go through pytest-benchmark's own ``Stats`` (in seconds, as
its JSON has them), so ``--benchmark-json`` and ``--benchmark-autosave`` hold the same
fields per op as per benchmark: min, max, mean, stddev, median, iqr, q1, q3, outliers,
ops (calls per second) and so on.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pytest_benchmark.stats import Stats

from ..verdict import TestResult


def extra_info(result: TestResult) -> dict[str, Any]:
    profile = result.profile
    verdicts = {}
    if result.comparison is not None:
        verdicts = {(v.name, v.occurrence): v.verdict for v in result.comparison.ops}
    counted = profile.samples[profile.skip:]
    ops = []
    for info in profile.ops:
        column = counted[:, info.op_id]
        stats = Stats()
        for ns in column[~np.isnan(column)].tolist():
            stats.update(ns / 1e9)
        ops.append({
            "op_id": info.op_id, "name": info.name, "occurrence": info.occurrence,
            "phase": info.phase, "verdict": verdicts.get((info.name, info.occurrence)),
            "stats": stats.as_dict() if stats else None,
        })
    return {"verdict": result.verdict, "machine": result.machine, "backend": profile.backend,
            "device": profile.device, "iterations": profile.iterations, "skip": profile.skip,
            "ops": ops}
