"""The judges' shared defaults, each defined once: every judge, the options and the
commands import them from here.

The stored-baseline gate and the paired compare share the tolerance, the power and the
least ops for a drift; their false-alarm rates differ by design (the gate judges every
test of every run, so each test may fail on noise far more rarely than one compare).
"""

from __future__ import annotations

#: The smallest slowdown that may fail an op (drift-corrected ratio - 1), and the runs
#: ``opprof baseline update`` takes: each measure's own where it says, these by default
#: (defined with the measures, which the judges sit above).
from ..measure.measures import BASELINE_RUNS as BASELINE_RUNS
from ..measure.measures import TOLERANCE as TOLERANCE


def more_runs(have: int) -> int | None:
    """The ``--runs`` every piece of advice names when more baseline runs would help a
    baseline of ``have`` runs: the default update's while it has fewer, else twice as
    many, up to the most a baseline keeps; None when it keeps that many already."""
    from ..model.baseline import MAX_RUNS  # not at import: the unused plugin reads this file

    if have >= MAX_RUNS:
        return None
    return BASELINE_RUNS if have < BASELINE_RUNS else min(2 * have, MAX_RUNS)


#: The functions a regressed op's verdict names (those whose instructions grew most).
GREW_SHOWN = 3
#: An op's detectable effect is the slowdown flagged with this probability.
POWER = 0.8
#: Fewer ops than this: no drift from the ops (one op's change would be its own drift).
MIN_OPS_FOR_DRIFT = 5
#: Fewer counted samples than this in a run: the op is not judged.
MIN_SAMPLES = 5
#: The gate's nominal false-alarm rate per test, shared by its ops.
GATE_ALPHA = 0.001
#: ``opprof compare``'s family-wise level per test (Bonferroni over its ops).
COMPARE_ALPHA = 0.01
#: A test the gate judged sees what its median op's detectable effect is (percentile) ...
GATE_SEES_QUANTILE = 50
#: ... and is said to be nearly blind beyond this slowdown.
BLIND = 0.30
#: A compare sees what nine in ten of its ops' detectable effects are (percentile), and
#: sizes its pairs on the same share of its ops' spreads. Replayed on 160 real processes
#: of a noisy 2-core runner, sizing on the 75th percentile caught +15% of one op in 87%
#: of compares (19 pairs), the 90th in 95% (28 pairs; benchmarks/compare_replay.py).
SIZING_QUANTILE = 90
