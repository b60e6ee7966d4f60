"""Measuring: the profiler, the scope loader, the op scopes (the C hot path and its
pure-Python reference), the instrumented namespace, the probe and the timers.

Imports only :mod:`pytest_opprof.model` below it.
"""
