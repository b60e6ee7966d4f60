"""Example workloads profiled by pytest-opprof (see README.md here)."""
