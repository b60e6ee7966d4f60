"""The suite's tiers follow what a test does: a test tiered ``unit`` that starts a
process fails with one line naming the process and the tier to mark it
(tests/conftest.py), whichever way the process starts."""

from __future__ import annotations

#: An inner run with the suite's own tier hooks (the conftest is one module: its audit
#: hook is already installed in this process, and records only while a unit test runs).
CONFTEST = """
from tests.conftest import (pytest_collection_modifyitems, pytest_runtest_call,
                            pytest_runtest_protocol, pytest_runtest_setup,
                            pytest_runtest_teardown)
"""
INI = """
[pytest]
markers =
    unit: u
    pytester: p
    e2e: e
"""


def test_a_unit_test_that_starts_a_process_fails_saying_which_tier_to_mark(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    pytester.makepyfile(test_t="""
        import multiprocessing, os, subprocess, sys
        import pytest

        def test_in_process():
            assert sum(range(4)) == 6

        def test_popen():
            subprocess.run([sys.executable, "-c", "pass"], check=True)

        def test_system():
            os.system("true")

        def nothing():
            pass

        def test_spawned():
            process = multiprocessing.get_context("spawn").Process(target=nothing)
            process.start()
            process.join()

        @pytest.fixture
        def child():
            subprocess.run([sys.executable, "-c", "pass"], check=True)

        def test_in_a_fixture(child):
            pass

        @pytest.mark.pytester
        def test_marked():
            subprocess.run([sys.executable, "-c", "pass"], check=True)
    """)
    result = pytester.runpytest("-p", "no:randomly", "-rfE")
    result.assert_outcomes(passed=2, failed=3, errors=1)
    result.stdout.fnmatch_lines([
        "*tier 'unit' starts no process, and this test started 1: subprocess.Popen(* -c pass);"
        " mark it @pytest.mark.pytester (a short child) or @pytest.mark.e2e (whole flows)"])
    failed = {line.split()[1].split("::")[1] for line in result.outlines
              if line.startswith(("FAILED", "ERROR"))}
    assert failed == {"test_popen", "test_system", "test_spawned", "test_in_a_fixture"}
    assert "os.system(true);" in result.stdout.str()
    assert "multiprocessing.spawn(" in result.stdout.str()


def test_the_tiers_are_the_markers_the_project_registers(pytestconfig):
    from .conftest import TIERS

    registered = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(TIERS) <= registered
