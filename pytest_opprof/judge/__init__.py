"""Judging: the gate's configuration and shared defaults, the stored-baseline rule, the
per-test gate, agreement between runs, paired comparison, change points.

Pure decisions on data: what a judge needs from the session comes in as arguments or
one small protocol object. Imports the model, measure's data and stats below it.
"""
