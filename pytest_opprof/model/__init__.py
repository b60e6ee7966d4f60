"""Typed data and its JSON: a profile, verdicts, records, run info, conditions, the
words every message uses, compare and history data.

The lowest layer: it imports nothing of the package but :mod:`pytest_opprof.errors`.
"""
