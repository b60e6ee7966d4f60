"""Pure numpy statistics, each estimator once; every judge takes its model of the
machine from here.

- summary.py: per-op and per-phase figures of a Profile (over its counted iterations,
  read through ``Profile.counted_samples`` / ``Profile.counted_matrix``);
- robust.py: the one "positive and finite" filter, the MAD, the median of logs and its
  standard error, a test's typical spread (chi-square median bias corrected);
- drift.py: drift across ops, weighted (the stored-baseline rule) and plain (the paired
  model, agreement, history);
- shrink.py: the two empirical-Bayes shrinkers of an op's variance, one per design;
- distributions.py: normal and Student's t, digamma, trigamma, Mann-Whitney;
- power.py: detectable effect, what a test sees, blindness, pairs needed.

Imports only the model below it. Judges pass their settings (judge/config.py) in.
"""
