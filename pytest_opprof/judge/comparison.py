"""A comparison made from runs: every test of each base and head process, op by op.

``opprof compare`` runs base and head in pytest processes taking turns; each pair of
processes gives each op a pair of sample columns. :func:`compare_runs` takes each op's
samples at each process's mean machine state
(:func:`pytest_opprof.judge.paired.state_adjusted`) and judges the pairs (one pair:
conservatively), every op against no change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..measure import measures
from ..model.comparison import OpRow, PairedResult, Report, TestComparison
from ..model.profile import Profile
from ..model.verdict import Key
from ..model.words import Unit
from ..stats.power import sees
from ..stats.robust import is_positive, one_log_median_se2, positive_or_nan
from . import config, paired
from .config import COMPARE_ALPHA, TOLERANCE
from .paired import judge_assumed, judge_counts, judge_pairs, state_adjusted

#: An automatic run adds pairs until nine in ten of every test's ops would catch this
#: slowdown (with probability config.POWER). On our noisy 2-core runner 18-30 pairs
#: (median 28); a quiet machine stops at the first pairs (benchmarks/RESULTS.md).
DEFAULT_DETECT = 0.15

#: One process's profiles, by node id.
Run = dict[str, Profile]


def compare_runs(base: Sequence[Run], head: Sequence[Run], *, mode: str, labels: tuple[str, str],
                 tolerance: float = TOLERANCE, alpha: float = COMPARE_ALPHA,
                 detect: float = DEFAULT_DETECT,
                 spreads: Mapping[str, Mapping[Key, float]] | None = None) -> Report:
    """Every test of ``base[p]`` and ``head[p]`` (pair p) compared op by op; tests on
    one side only are listed. ``spreads``: by node id, each op's spread between
    processes as its stored baselines knew it (what the results files' verdicts say),
    which widens what fewer than ``paired.MIN_PAIRS`` pairs assume."""
    base_ids = {nodeid for run in base for nodeid in run}
    head_ids = {nodeid for run in head for nodeid in run}
    tests = []
    for nodeid in sorted(base_ids & head_ids):
        pairs = [(b[nodeid], h[nodeid]) for b, h in zip(base, head, strict=True)
                 if nodeid in b and nodeid in h]
        if pairs:
            tests.append(_compare_test(nodeid, pairs, tolerance, alpha,
                                       None if spreads is None else spreads.get(nodeid)))
    taken = {(p.measure, p.unit) for run in (*base, *head) for p in run.values()}
    measure, unit = taken.pop() if len(taken) == 1 else ("", Unit.NANOSECONDS)
    return Report(mode, *labels, tolerance, alpha, len(base), tuple(tests),
                  tuple(sorted(base_ids - head_ids)), tuple(sorted(head_ids - base_ids)),
                  detect, measure=measure, unit=unit)


def pairs_needed(report: Report) -> int:
    """The pairs at which nine in ten ops of every test see ``report.detect``."""
    return max((paired.pairs_needed(t.result, report.detect, report.tolerance)
                for t in report.tests if t.ops and t.result.pairs > 1), default=report.pairs)


def counted(profile: Profile) -> np.ndarray:
    """A process's counted samples (iterations, ops) as a compare judges them: NaN where
    an op did not run or has no time to take a logarithm of."""
    return positive_or_nan(profile.counted_matrix())


def _ops(profile: Profile) -> dict[Key, int]:
    """Each op's OP_ID by (name, occurrence); ops that never ran in a counted iteration
    left out."""
    samples = profile.counted_matrix()
    return {(info.name, info.occurrence): info.op_id for info in profile.ops
            if is_positive(samples[:, info.op_id]).any()}


def _compare_test(nodeid: str, pairs: list[tuple[Profile, Profile]], tolerance: float,
                  alpha: float, spreads: Mapping[Key, float] | None = None) -> TestComparison:
    sides = [(_ops(b), _ops(h)) for b, h in pairs]
    base_keys = set().union(*(b for b, _ in sides))
    head_keys = set().union(*(h for _, h in sides))
    in_all = set.intersection(*(set(b) & set(h) for b, h in sides))  # judged in every pair
    keys = sorted(in_all, key=lambda k: sides[0][1][k])  # in the head's OP_ID order
    ops: tuple[OpRow, ...] = ()
    result = PairedResult((), len(pairs), (), None, 0.0, 0.0, ())
    if keys and all(measures.of(p.measure, p.unit).repeats for pair in pairs for p in pair):
        medians = [[_medians(counted(p)[:, [ids[k] for k in keys]]) for p, ids in
                    zip(pair, ids_of, strict=True)] for pair, ids_of in zip(pairs, sides,
                                                                          strict=True)]
        result = judge_counts(np.array([m[0] for m in medians]),
                              np.array([m[1] for m in medians]), tolerance, alpha)
    elif keys:
        # every process's log times of the judged ops, base and head of each pair in turn
        logs = [np.log(counted(profile)[:, [ids[k] for k in keys]])
                for pair, ids_of in zip(pairs, sides, strict=True)
                for profile, ids in zip(pair, ids_of, strict=True)]
        if len(pairs) < paired.MIN_PAIRS:  # too few to learn the ops' spreads: assumed
            known = None if spreads is None else np.array([spreads.get(k, np.nan)
                                                            for k in keys])
            fastest = (np.array([np.nanmin(x, axis=0) for x in logs[0::2]]),
                       np.array([np.nanmin(x, axis=0) for x in logs[1::2]]))
            result = judge_assumed(_log_medians(logs[0::2]), _log_medians(logs[1::2]),
                                   tolerance, alpha, known, fastest,
                                   names=[_labels({k})[0] for k in keys])
        else:
            state = state_adjusted(logs)
            raw = np.exp([_medians(x) for x in logs])  # (2 * pairs, ops)
            at_state = np.exp([_medians(x) for x in state.logs])
            result = judge_pairs(at_state[0::2], at_state[1::2], tolerance, alpha,
                                 shown=(raw[0::2], raw[1::2]), common=state.common())
    if keys:
        ops = tuple(OpRow(sides[0][1][k], k[0], k[1], c)
                    for k, c in zip(keys, result.ops, strict=True))
    return TestComparison(nodeid, result, ops, _labels(base_keys - head_keys),
                          _labels(head_keys - base_keys),
                          _labels((base_keys & head_keys) - in_all),
                          sees=sees([c.detectable for c in result.ops],
                                    config.SIZING_QUANTILE))


def _medians(logs: np.ndarray) -> np.ndarray:
    return np.asarray(np.nanmedian(logs, axis=0))


def _log_medians(processes: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each process's (row's) log median of each op (column) and its squared standard
    error, from the processes' log times: two (processes, ops) arrays."""
    found = [[one_log_median_se2(np.exp(column[np.isfinite(column)])) for column in x.T]
             for x in processes]
    return (np.array([[m for m, _ in row] for row in found]),
            np.array([[se2 for _, se2 in row] for row in found]))


def _labels(keys: set[Key]) -> tuple[str, ...]:
    return tuple(f"{name}#{occurrence}" if occurrence else name
                 for name, occurrence in sorted(keys))
