"""Strict mode (``--opprof-strict``: unjudged, an effect): which gated tests of a
run could not be judged, each with one line saying why.

Passing or failing a test the gate could not judge (no baseline on this machine, other
run conditions, an absurd drift) would claim a comparison that did not happen, so its own
outcome stands; in CI that is silent (a run under ``-n 2`` against a serial baseline
exits 0 with a 2x regression present), so strict mode fails the *session* instead.
Decided once, on the process that reports (an xdist controller: every worker's records).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..model.hints import Retake
from ..model.records import TestRecord
from ..model.verdict import COMPARED, Comparison, Verdict
from ..model.words import percent
from ..stats.power import blind, sees
from .config import GATE_SEES_QUANTILE


@dataclass(frozen=True)
class Unjudged:
    """A gated test strict mode fails the session for, and why (one line)."""

    nodeid: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"nodeid": self.nodeid, "why": self.why}


def seen(comparison: Comparison) -> float:
    """The slowdown the comparison could see (a fraction) for its median compared op;
    NaN when no op was compared. The ``blind`` line reads this too."""
    return sees([v.detectable for v in comparison.having(*COMPARED)], GATE_SEES_QUANTILE)


def why_unjudged(record: TestRecord, effect: float | None, retake: Retake) -> str | None:
    """Why strict mode counts this profiled test as not judged, or None when it was (or
    when its own outcome already says it all: the test failed, or the gate failed it);
    ``retake``: the run's ``opprof baseline update``."""
    result = record.result
    if not record.passed:
        return None  # the test failed itself: its failure is the news
    if result is None:
        profile = record.profile
        return (f"no counted iteration ({profile.iterations} ran, {profile.skip} skipped): "
                "nothing to judge; run more iterations than --opprof-skip")
    if result.verdict == Verdict.NO_BASELINE:
        return (f"no baseline on machine {result.machine!r}: take one with "
                f"`{retake.of(record.nodeid).command()}`")
    if result.verdict == Verdict.UNJUDGED:
        return f"{result.verdict}: {result.reason}" if result.reason else str(result.verdict)
    if result.verdict != Verdict.PASSED or result.comparison is None:
        return None  # failed by the gate, updated, not gated
    if not result.comparison.having(*COMPARED):
        return (f"none of its {len(result.comparison.ops)} op(s) could be compared with the "
                "baseline (new, missing or with too few samples)")
    if effect is not None:
        sees_now = seen(result.comparison)
        if blind(sees_now, effect):
            return (f"blind: the gate could only see slowdowns over {percent(1 + sees_now)} "
                    f"for its median op, beyond the strict effect {percent(1 + effect)}")
    return None


def unjudged(records: Iterable[TestRecord], unprofiled: Mapping[str, str],
             effect: float | None, retake: Retake) -> list[Unjudged]:
    """Every gated test of the run that strict mode fails the session for: the profiled
    ones (:func:`why_unjudged`) and those that used ``gpu_profiler`` and passed without
    profiling anything (``unprofiled``: node id -> why), in node id order."""
    found = dict(unprofiled)
    for record in records:
        why = why_unjudged(record, effect, retake)
        if why is not None:
            found[record.nodeid] = why
    return [Unjudged(nodeid, found[nodeid]) for nodeid in sorted(found)]


def effect_words(effect: float | None) -> str:
    """How the header names strict mode: ``strict`` or ``strict, blind beyond +25%``."""
    if effect is None or not math.isfinite(effect):
        return "strict"
    return f"strict, blind beyond {percent(1 + effect)} fails"
