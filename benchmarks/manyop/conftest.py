"""Checks OPPROF_MANYOP_SLOW before any test runs: a bad value is one usage line."""

from __future__ import annotations

import pytest

from benchmarks.manyop.ops import slowdowns


def pytest_configure(config: pytest.Config) -> None:
    try:
        slowdowns()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
