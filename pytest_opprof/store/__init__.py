"""Files on disk: the one parse path for files, atomic writes, baselines, the store's
folders and policy, the results reader.

Imports the layers below it (model, measure, stats, judge).
"""
