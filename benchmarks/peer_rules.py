"""The peers' regression rules, applied to raw samples: what pytest-benchmark and asv
would have concluded from the same measurements the gate saw.

Used by benchmarks/gate_runs.py (real runs) and benchmarks/gate_simulation.py
(simulated ones), so that both judge the peers identically.

- pytest-benchmark, ``--benchmark-compare-fail=mean:5%``: one benchmark per test, the
  whole iteration; the test fails when its mean time grew by more than 5% over the
  saved run's mean (pytest_benchmark/utils.py ``PercentageRegressionCheck``: no
  significance test).
- asv, ``asv compare`` / ``asv continuous``: per benchmark (here: per op), "worse" when
  the ratio of medians exceeds ``--factor`` (1.1) and ``asv.statistics.is_different``
  holds: a two-sided Mann-Whitney U test at p < 0.002 on the raw samples (exact up to
  20 samples a side, else the normal approximation without continuity correction),
  tried only when the sample sizes allow a p that small.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import numpy as np

#: pytest-benchmark: ``--benchmark-compare-fail=mean:5%``.
PYTEST_BENCHMARK_THRESHOLD = 0.05
#: asv's defaults: ``--factor`` and ``is_different``'s ``p_threshold``.
ASV_FACTOR = 1.1
ASV_P = 0.002


def pytest_benchmark_ratio(current_wall: np.ndarray, baseline_wall: np.ndarray) -> float:
    """The test's mean iteration time over the saved run's."""
    return float(np.mean(current_wall) / np.mean(baseline_wall))


def pytest_benchmark_fails(current_wall: np.ndarray, baseline_wall: np.ndarray,
                           threshold: float = PYTEST_BENCHMARK_THRESHOLD) -> bool:
    return pytest_benchmark_ratio(current_wall, baseline_wall) > 1 + threshold


def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """asv's two-sided Mann-Whitney U p-value (asv/statistics.py ``mann_whitney_u``)."""
    from scipy.stats import mannwhitneyu

    exact = max(len(a), len(b)) <= 20
    return float(mannwhitneyu(a, b, alternative="two-sided", use_continuity=False,
                              method="exact" if exact else "asymptotic").pvalue)


def asv_is_different(a: np.ndarray, b: np.ndarray, p_threshold: float = ASV_P) -> bool:
    """asv's ``is_different`` on raw samples; with too few samples for the test to
    reach ``p_threshold`` asv falls back to non-overlapping 99% intervals, which
    summaries without raw samples need and raw samples here never do (both sides have
    at least 6)."""
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if len(a) == 0 or len(b) == 0:
        return False
    if 1 / math.comb(len(a) + len(b), min(len(a), len(b))) >= p_threshold:
        return False
    return mann_whitney_p(a, b) < p_threshold


def asv_flags(current: Mapping[Hashable, np.ndarray],
              baseline: Mapping[Hashable, np.ndarray],
              factor: float = ASV_FACTOR) -> set[Hashable]:
    """The ops asv would call "worse": median ratio > ``factor`` and significant."""
    flagged = set()
    for key, cur in current.items():
        base = baseline.get(key)
        if base is None or len(cur) == 0 or len(base) == 0:
            continue
        if np.median(cur) > factor * np.median(base) and asv_is_different(cur, base):
            flagged.add(key)
    return flagged
