"""Do a baseline's runs agree? Runs taken while the machine was busy, found before they
are stored (why, and what ``opprof baseline update`` does with them:
docs/design/baselines.md).

A run taken under contention can hold some ops several times slower than the others
(seen: conv2d_grad at 4-6 ms in two runs of five, about 1 ms in the other three); stored,
it teaches the gate that the op spreads widely, and the gate goes blind to it (slowdowns
of +29% to +99% passed). Per op, each run's log median (less that run's drift over the
test's ops, when it has ops enough to tell it) is set against the median of the op's
other runs, with what such ops move: the test's typical spread between runs (the prior
with too few ops) plus per-call jitter, which makes short ops move more. A run is *out*
beyond ``max(SIGMAS`` expected sds, ``MIN_CHANGE)``. The worst run is set aside first, so
that one odd run of three does not make the other two look odd; of two runs that
disagree, the slower is set aside (contention slows, it does not speed up).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..model.verdict import Key
from ..stats.drift import run_drifts
from ..stats.robust import one_log_median_se2, positive, typical_spread
from .rule import GateConfig

SIGMAS = 6.0
MIN_CHANGE = 0.20

_DEFAULTS = GateConfig()


@dataclass(frozen=True)
class Agreement:
    """What the runs of one test say of each other."""

    #: For each run that is out (by its index among the runs given): the ops it is out on.
    outliers: Mapping[int, tuple[Key, ...]]
    #: For each op some run is out on: its spread between all the runs (relative sd of
    #: its median, drift removed).
    spread: Mapping[Key, float]

    @property
    def agrees(self) -> bool:
        return not self.outliers

    def ops(self) -> list[Key]:
        """The ops some run is out on, by name."""
        return sorted(self.spread)


def check(runs: Sequence[Mapping[Key, np.ndarray]], config: GateConfig = _DEFAULTS) -> Agreement:
    """Whether ``runs`` (each op's samples in ns, one mapping per run) agree; ops with
    fewer than ``config.min_samples`` samples in a run are left out of that run."""
    keys = sorted({key for run in runs for key in run})
    logs = np.full((len(keys), len(runs)), np.nan)
    for j, run in enumerate(runs):
        for i, key in enumerate(keys):
            samples = positive(np.asarray(run.get(key, ()), dtype=float))
            if samples.size >= config.min_samples:
                logs[i, j] = one_log_median_se2(samples)[0]
    compared = (~np.isnan(logs)).sum(axis=1) >= 2
    keys = [key for key, keep in zip(keys, compared, strict=True) if keep]
    if not keys:
        return Agreement({}, {})
    logs = logs[compared]
    if len(keys) >= config.min_ops_for_drift:
        # a machine a few percent slower in one run moves every op: not disagreement
        logs = logs - run_drifts(logs)[None, :]
    center = np.nanmedian(logs, axis=1)
    sd = np.sqrt(_typical_spread(logs, config) ** 2 + (config.jitter_ns / np.exp(center)) ** 2)
    outliers: dict[int, list[Key]] = {}
    spread: dict[Key, float] = {}
    for i, key in enumerate(keys):
        out = _outlying_runs(logs[i], sd[i])
        for j in out:
            outliers.setdefault(j, []).append(key)
        if out:
            spread[key] = math.expm1(float(np.nanstd(logs[i], ddof=1)))
    return Agreement({j: tuple(ops) for j, ops in sorted(outliers.items())}, spread)


def _typical_spread(logs: np.ndarray, config: GateConfig) -> float:
    """The test's typical spread of an op's log median between runs (the prior when too
    few ops were seen twice; never under the floor)."""
    dof = (~np.isnan(logs)).sum(axis=1) - 1.0
    variance = np.nansum((logs - np.nanmean(logs, axis=1)[:, None]) ** 2, axis=1) / dof
    typical = typical_spread(variance, dof, config.min_ops_for_drift)
    return config.tau_prior if typical is None else max(typical, config.tau_floor)


def _outlying_runs(row: np.ndarray, sd: float) -> list[int]:
    """The runs of one op (log medians, NaN where absent) that sit beyond the limit
    from the median of the op's other runs: the worst first, set aside before the rest
    are looked at again; of equal distances, the slower run."""
    present = ~np.isnan(row)
    out: list[int] = []
    while present.sum() >= 2:
        idx = np.flatnonzero(present)
        # the others' median has its own error: (pi / 2) sd^2 / others
        limit = max(SIGMAS * sd * math.sqrt(1 + math.pi / (2 * (len(idx) - 1))),
                    math.log1p(MIN_CHANGE))
        deviation = [float(row[j] - np.median(row[idx[idx != j]])) for j in idx]
        worst = max(range(len(idx)), key=lambda k: (abs(deviation[k]), deviation[k]))
        if abs(deviation[worst]) <= limit:
            break
        out.append(int(idx[worst]))
        present[idx[worst]] = False
    return sorted(out)
