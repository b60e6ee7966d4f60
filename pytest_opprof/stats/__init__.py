"""Pure numpy statistics, each estimator once: the one reader of a profile's counted
samples, summaries, robust estimators of centre and spread, drift.

Every judge takes its model of the machine from here. Imports only the model below it.
"""
