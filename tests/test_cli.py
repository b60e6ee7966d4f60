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


@pytest.mark.parametrize("argv, usage", [([], "usage: opprof "),
                                         (["baseline"], "usage: opprof baseline ")])
def test_a_command_without_its_action_is_a_usage_error(capsys, argv, usage):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(usage) and captured.out == ""


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


def opprof(*args: str, cwd) -> subprocess.CompletedProcess:
    """The opprof command as a user runs it: a new process."""
    return subprocess.run([sys.executable, "-m", "pytest_opprof.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


def stored(root) -> dict[str, list[str]]:
    """Each stored test's batch per run, by node id."""
    found = {}
    for path in root.rglob("*.json"):
        data = json.loads(path.read_text())
        found[data["nodeid"]] = [data["batch"]] * len(data["runs"])
    return found


def test_update_runs_pytest_n_times_into_one_batch(project, capsys):
    assert main(["baseline", "update", "--runs", "2", "-q", "test_suite.py"]) == 0
    out = capsys.readouterr().out
    assert "opprof: baseline run 2 of 2: pytest --opprof-update-baseline -q test_suite.py" in out
    assert out.splitlines()[-1] == "opprof: baselines of 2 test(s) stored, from 2 run(s)"
    files = list((project.path / ".opprof").rglob("*.json"))
    assert len(files) == 2
    assert all(len(json.loads(f.read_text())["runs"]) == 2 for f in files)
    assert [p.name for p in (project.path / ".opprof").iterdir()] == ["fake-fake_CUDA_device-"
                                                                      + files[0].parent.name[-10:]]


def test_a_failing_run_stores_nothing_and_keeps_the_old_baselines(project, capsys):
    main(["baseline", "update", "--runs", "1", "-q", "test_suite.py"])
    before = stored(project.path / ".opprof")
    project.makepyfile(test_broken="def test_x():\n    assert False\n")
    assert main(["baseline", "update", "--runs", "3", "-q"]) == 1
    err = capsys.readouterr().err
    assert "opprof: baseline run 1 of 3 failed (pytest exit code 1: " in err
    assert err.strip().endswith("nothing was stored: fix the failures and rerun")
    assert stored(project.path / ".opprof") == before
    assert [p.name for p in (project.path / ".opprof").iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("args, says", [
    (["-k", "nothing_matches"], "pytest collected no tests: name the tests"),
    (["test_missing.py"], "pytest refused the arguments (file or directory not found: "
                          "test_missing.py); nothing was stored"),
    (["--no-such-flag"], "pytest refused the arguments: unrecognized arguments: --no-such-flag"),
])
def test_update_with_wrong_pytest_arguments_is_a_usage_error(project, capsys, args, says):
    assert main(["baseline", "update", "--runs", "2", "-q", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
    assert not (project.path / ".opprof").exists() or stored(project.path / ".opprof") == {}


@pytest.mark.parametrize("flag", ["--opprof-no-gate", "--opprof-update-baseline",
                                  "--opprof-append-baseline", "--opprof-baseline-batch=x"])
@pytest.mark.parametrize("where", ["argument", "addopts"])
def test_update_refuses_the_options_it_sets_itself(project, capsys, flag, where):
    if where == "addopts":
        project.makeini(f"[pytest]\nopprof_backend = fake\naddopts = {flag}\n")
    args = [flag] if where == "argument" else []
    assert main(["baseline", "update", "--runs", "2", "-q", *args]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == (f"opprof: {flag.split('=')[0]}: opprof baseline update "
                                    "sets this itself; leave it out")
    assert "baseline run 1" not in captured.out and not (project.path / ".opprof").exists()


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


def test_the_cli_finds_the_baseline_folder_and_machine_key_of_the_ini_file(project):
    """update, show and prune all use opprof_baseline_dir and opprof_machine_key from
    the ini file, as the plugin does (the ini value relative to the ini file)."""
    project.makeini("[pytest]\nopprof_backend = fake\nopprof_baseline_dir = ci/base\n"
                    "opprof_machine_key = runner-1\n")
    sub = project.mkdir("sub")
    assert opprof("baseline", "update", "--runs", "1", "-q", cwd=project.path).returncode == 0
    assert sorted(p.parent.name for p in (project.path / "ci/base").rglob("*.json")) == [
        "runner-1", "runner-1"]
    assert not (project.path / ".opprof").exists()
    shown = opprof("baseline", "show", cwd=sub)  # the rootdir and ini found from a sub folder
    assert shown.returncode == 0 and shown.stdout.count("runner-1  test_suite.py::") == 2
    project.makepyfile(test_suite=SUITE.split("def test_b")[0])
    pruned = opprof("baseline", "prune", cwd=project.path)
    assert pruned.returncode == 0 and "would remove: test_suite.py::test_b  [" in pruned.stdout
    assert "ci/base/runner-1/" in pruned.stdout


def test_prune_is_a_dry_run_until_apply(project):
    main(["baseline", "update", "--runs", "1", "-q", "test_suite.py"])
    project.makepyfile(test_suite=SUITE.split("def test_b")[0])  # test_b is gone
    dry = opprof("baseline", "prune", cwd=project.path)
    assert dry.returncode == 0
    assert "would remove: test_suite.py::test_b" in dry.stdout and "--apply" in dry.stdout
    assert len(list((project.path / ".opprof").rglob("*.json"))) == 2
    applied = opprof("baseline", "prune", "--apply", cwd=project.path)
    assert applied.returncode == 0
    assert applied.stdout.splitlines()[0].startswith("remove: test_suite.py::test_b  [")
    assert applied.stdout.splitlines()[-1] == "opprof: removed 1 stale baseline(s)"
    assert len(list((project.path / ".opprof").rglob("*.json"))) == 1
    again = opprof("baseline", "prune", cwd=project.path)
    assert "no stale baselines" in again.stdout


def test_prune_keeps_everything_when_collection_fails(project):
    main(["baseline", "update", "--runs", "1", "-q", "test_suite.py"])
    project.makepyfile(test_suite="this is not python")
    pruned = opprof("baseline", "prune", "--apply", cwd=project.path)
    assert pruned.returncode == 1 and "Traceback" not in pruned.stderr
    assert pruned.stderr.startswith("opprof: pytest could not collect the tests (")
    assert pruned.stderr.strip().endswith("nothing was pruned")
    assert len(list((project.path / ".opprof").rglob("*.json"))) == 2
