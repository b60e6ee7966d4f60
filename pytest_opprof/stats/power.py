"""What a comparison can see: each op's detectable effect, what a test sees (a
percentile of its ops'), whether it is blind, and how many pairs would make it see a
given slowdown. Every judge's detectable effect is computed here.

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


def runs_needed(sd: float, room: float, sigmas: float, power: float, least: int) -> int:
    """The inverse of :func:`detectable`: how many independent units (pairs) of log sd
    ``sd`` make a slowdown ``room`` (log) beyond the margin flagged with probability
    ``power``; at least ``least``."""
    z = sigmas + normal_quantile(power)
    return max(least, math.ceil((z * sd / room) ** 2))


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
