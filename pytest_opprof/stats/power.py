"""What a comparison can see: each op's detectable effect, what a test sees (a
percentile of its ops'), and whether it is blind. Every judge's detectable effect is
computed here (``opprof compare`` sizes its pairs from it: judge/paired.pairs_needed).

An op's estimate of change (a log ratio) has standard deviation ``sigma`` and must
clear ``margin + sigmas * sigma`` to be flagged; a true change ``delta`` is flagged with
probability ``power`` when ``delta = margin + (sigmas + z_power) sigma``.
"""

from __future__ import annotations

import math

import numpy as np

from .distributions import normal_quantile


def detectable(margin: float, sigma: float, power: float, sigmas: float = 0.0) -> float:
    """The slowdown (a fraction) flagged with probability ``power``."""
    return math.expm1(margin + (sigmas + normal_quantile(power)) * sigma)


def sees(detectables: np.ndarray | list[float], quantile: float) -> float:
    """What a test sees: the ``quantile``-th percentile (0-100) of its ops' finite
    detectable effects (NaN with none)."""
    values = np.asarray(detectables, dtype=float)
    values = values[np.isfinite(values)]
    return float(np.percentile(values, quantile)) if values.size else math.nan


def blind(seen: float, limit: float) -> bool:
    """Whether a test that sees ``seen`` is blind to slowdowns up to ``limit``: the one
    such judgement."""
    return math.isfinite(seen) and seen > limit
