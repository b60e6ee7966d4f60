"""Checks the example suite's own environment variable before any test runs."""

from __future__ import annotations

import os

import pytest

from example_suite.workloads import SLOWDOWN_ENV, parse_slowdowns


def pytest_configure(config: pytest.Config) -> None:
    try:
        parse_slowdowns(os.environ.get(SLOWDOWN_ENV, ""))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
