"""The ``opprof`` commands, one module each (asv-style), with their shared arguments.

Imports every layer below it; only :mod:`pytest_opprof.cli` imports it.
"""
