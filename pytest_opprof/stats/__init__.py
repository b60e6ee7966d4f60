"""Pure numpy statistics, each estimator once (docs/architecture.md lists the modules):
every judge takes its model of the machine from here and passes its settings
(judge/config.py) in. Imports only the model below it.
"""
