from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytest_opprof import __version__
from pytest_opprof.cli import main


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"opprof {__version__}"


def test_no_arguments_prints_help(capsys):
    assert main([]) == 0
    assert "usage: opprof" in capsys.readouterr().out


def test_the_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "pytest_opprof.cli", "--version"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"opprof {__version__}"


def test_unknown_arguments_exit_non_zero(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--bogus"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


SUITE = """
def test_a(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(6):
        for name in ("conv2d", "relu", "pool2d", "mul", "softmax"):
            with gpu_profiler.op(name):
                dev.kernel(10_000)

def test_b(gpu_profiler):
    test_a(gpu_profiler)
"""


@pytest.fixture
def project(pytester, monkeypatch):
    pytester.makeini("[pytest]\nopprof_backend = fake\n")
    pytester.makepyfile(test_suite=SUITE)
    monkeypatch.chdir(pytester.path)
    return pytester


def test_update_runs_pytest_n_times_into_one_batch(project, capsys):
    assert main(["baseline", "update", "--runs", "2", "-q", "test_suite.py"]) == 0
    out = capsys.readouterr().out
    assert "opprof: baseline run 2 of 2: pytest --opprof-update-baseline -q test_suite.py" in out
    files = list((project.path / ".opprof").rglob("*.json"))
    assert len(files) == 2
    assert all(len(json.loads(f.read_text())["runs"]) == 2 for f in files)


def test_update_stops_on_a_failing_run(project, capsys):
    project.makepyfile(test_broken="def test_x():\n    assert False\n")
    assert main(["baseline", "update", "--runs", "3", "-q"]) == 1
    err = capsys.readouterr().err
    assert "opprof: baseline run 1 of 3 failed (pytest exit code 1): baselines were written " \
           "only for the tests that passed" in err


def test_update_with_no_tests_says_so(project, capsys):
    assert main(["baseline", "update", "--runs", "1", "-q", "-k", "nothing_matches"]) == 1
    assert "pytest collected no tests" in capsys.readouterr().err


def test_runs_must_be_positive(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["baseline", "update", "--runs", "0"])
    assert exit_info.value.code == 2
    assert "--runs must be a whole number >= 1, not '0'" in capsys.readouterr().err


def test_show_lists_and_prints_one_test(project, capsys):
    main(["baseline", "update", "--runs", "1", "-q", "test_suite.py"])
    capsys.readouterr()
    assert main(["baseline", "show"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) == 2 and "test_suite.py::test_a  1 run(s), 5 ops" in listing[0]
    assert main(["baseline", "show", "test_a"]) == 0
    detail = capsys.readouterr().out
    assert "test_suite.py::test_a on machine 'fake-fake CUDA device': 1 run(s)" in detail
    assert "OP_ID0. conv2d : 1e-05 sec" in detail
    assert "Stat=conv2d " in detail and "count=5" in detail


def test_show_errors_are_one_line(project, capsys):
    assert main(["baseline", "show", "--dir", "missing"]) == 1
    assert capsys.readouterr().err.strip() == (
        "opprof: missing: no baseline directory here (use --dir, or create baselines with "
        "opprof baseline update)")
    main(["baseline", "update", "--runs", "1", "-q", "test_suite.py"])
    capsys.readouterr()
    assert main(["baseline", "show", "test_zzz"]) == 1
    assert "no stored baseline matches 'test_zzz'" in capsys.readouterr().err
    assert main(["baseline", "show", "--machine-key", "other"]) == 1
    assert "no baselines for machine 'other'" in capsys.readouterr().err


def test_show_reports_unreadable_files_and_exits_non_zero(project, capsys):
    main(["baseline", "update", "--runs", "1", "-q", "test_suite.py"])
    next((project.path / ".opprof").rglob("*test_a-*.json")).write_text("{")
    capsys.readouterr()
    assert main(["baseline", "show"]) == 1
    assert "unreadable: " in capsys.readouterr().out


def test_prune_is_a_dry_run_until_apply(project, capsys):
    main(["baseline", "update", "--runs", "1", "-q", "test_suite.py"])
    project.makepyfile(test_suite=SUITE.split("def test_b")[0])  # test_b is gone
    capsys.readouterr()
    assert main(["baseline", "prune"]) == 0
    out = capsys.readouterr().out
    assert "would remove: test_suite.py::test_b" in out and "--apply" in out
    assert len(list((project.path / ".opprof").rglob("*.json"))) == 2
    assert main(["baseline", "prune", "--apply"]) == 0
    assert "removed: test_suite.py::test_b" in capsys.readouterr().out
    assert len(list((project.path / ".opprof").rglob("*.json"))) == 1
    assert main(["baseline", "prune"]) == 0
    assert "no stale baselines" in capsys.readouterr().out


def test_prune_keeps_everything_when_collection_fails(project, capsys):
    main(["baseline", "update", "--runs", "1", "-q", "test_suite.py"])
    project.makepyfile(test_suite="this is not python")
    capsys.readouterr()
    assert main(["baseline", "prune", "--apply"]) == 1
    assert "pytest could not collect the tests" in capsys.readouterr().err
    assert len(list((project.path / ".opprof").rglob("*.json"))) == 2
