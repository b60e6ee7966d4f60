"""Files on disk: bounded reads, atomic writes, baselines, the store's policy, the
results reader. Imports the layers below it (model, measure, stats, judge)."""
