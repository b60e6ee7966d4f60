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
from typing import TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)

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


def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """asv's two-sided Mann-Whitney U p-value (asv/statistics.py ``mann_whitney_u``),
    column by column of ``a`` and ``b`` (samples down the first axis)."""
    from scipy.stats import mannwhitneyu  # type: ignore[import-untyped]

    exact = max(len(a), len(b)) <= 20
    return np.asarray(mannwhitneyu(a, b, alternative="two-sided", use_continuity=False,
                                   method="exact" if exact else "asymptotic", axis=0).pvalue)


def _can_reach(m: int, n: int, p_threshold: float) -> bool:
    """Whether samples of m and n can give a p below ``p_threshold`` at all: asv runs the
    test only then (else it compares 99% intervals, which raw samples here never need)."""
    return m > 0 and n > 0 and 1 / math.comb(m + n, min(m, n)) < p_threshold


def asv_flags(current: Mapping[K, np.ndarray], baseline: Mapping[K, np.ndarray],
              factor: float = ASV_FACTOR, p_threshold: float = ASV_P) -> set[K]:
    """The ops asv would call "worse": a ratio of medians above ``factor`` and
    ``is_different`` (the test run once for all ops of the same sample counts)."""
    groups: dict[tuple[int, int], list[tuple[K, np.ndarray, np.ndarray]]] = {}
    for key, cur in current.items():
        if key not in baseline:
            continue
        cur, base = _finite(cur), _finite(baseline[key])
        if _can_reach(len(cur), len(base), p_threshold) and \
                np.median(cur) > factor * np.median(base):
            groups.setdefault((len(cur), len(base)), []).append((key, cur, base))
    flagged: set[K] = set()
    for group in groups.values():
        p = mann_whitney_p(np.column_stack([c for _, c, _ in group]),
                           np.column_stack([b for _, _, b in group]))
        flagged.update(key for (key, _, _), pk in zip(group, p, strict=True)
                       if pk < p_threshold)
    return flagged


def _finite(samples: np.ndarray) -> np.ndarray:
    samples = np.asarray(samples, dtype=float)
    return samples[np.isfinite(samples)]
