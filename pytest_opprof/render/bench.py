"""pytest-benchmark: the per-op statistics a test's ``benchmark.extra_info`` carries.

Each op's counted samples go through pytest-benchmark's own ``Stats`` (in seconds, as
its JSON has them), so ``--benchmark-json`` and ``--benchmark-autosave`` hold the same
fields per op as per benchmark: min, max, mean, stddev, median, iqr, q1, q3, outliers,
ops (calls per second) and so on. Under a measure of counts the statistics are of counts,
not seconds (``unit``: what is counted, ``instructions``; else ``s``).
"""

from __future__ import annotations

from typing import Any

from pytest_benchmark.stats import Stats

from ..model.verdict import TestResult
from ..model.words import Unit
from . import word
from .kernels import measure_of


def extra_info(result: TestResult) -> dict[str, Any]:
    profile = result.profile
    verdicts = {}
    if result.comparison is not None:
        verdicts = {(v.name, v.occurrence): word(v.verdict) for v in result.comparison.ops}
    samples = profile.counted_samples()
    counts = profile.unit is Unit.COUNT
    scale = 1.0 if counts else 1e9
    ops = []
    for info in profile.ops:
        stats = Stats()  # type: ignore[no-untyped-call]  # pytest-benchmark is untyped
        for ns in samples[info.op_id].tolist():
            stats.update(ns / scale)  # type: ignore[no-untyped-call]
        ops.append({
            "op_id": info.op_id, "name": info.name, "occurrence": info.occurrence,
            "phase": info.phase, "verdict": verdicts.get((info.name, info.occurrence)),
            "stats": stats.as_dict() if stats else None,  # type: ignore[no-untyped-call]
        })
    return {"verdict": word(result.verdict), "machine": result.machine,
            "measure": profile.measure, "device": profile.device,
            "iterations": profile.iterations, "skip": profile.skip,
            "unit": (measure_of(profile).counts[0] or Unit.COUNT.value) if counts else "s",
            "ops": ops}
