"""Benchmarks: `pytest benchmarks -p no:cacheprovider` (not part of the test run).

Each module records its figures into FIGURES; the terminal summary prints them as the
Markdown tables that benchmarks/RESULTS.md keeps.
"""

from __future__ import annotations

import pytest

#: The many-op suite is a workload for gate_runs.py (a new process per run), not a
#: benchmark of its own: collected only when named (pytest benchmarks/manyop).
collect_ignore = ["manyop", "env_upgrade", "newcomer", "dumpscale"]

#: table title -> list of rows (each a list of cells; the first row is the header)
FIGURES: dict[str, list[list[str]]] = {}


def record(table: str, header: list[str], row: list[str]) -> None:
    FIGURES.setdefault(table, [header]).append(row)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for title, rows in FIGURES.items():
        terminalreporter.write_sep("=", title)
        terminalreporter.write_line("| " + " | ".join(rows[0]) + " |")
        terminalreporter.write_line("|" + "---|" * len(rows[0]))
        for row in rows[1:]:
            terminalreporter.write_line("| " + " | ".join(row) + " |")
