"""Issue 20, section 2, the store's classes: writes that destroy or half-write what the
user had (1), prune deleting live baselines (2), the plugin writing what its own readers
refuse (5), exceptions outside the one-line handling (6: huge integers, a stdout that
cannot encode a name, unbounded counts) and data printed raw (9)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from pytest_opprof.cli import main
from pytest_opprof.model import jsontext


def opprof(*args: str, cwd, env=None) -> subprocess.CompletedProcess:
    """The opprof command as a user runs it: a new process."""
    return subprocess.run([sys.executable, "-m", "pytest_opprof.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, env=env)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# -- class 6: one parse path; any encoding; bounded counts ----------------------------

@pytest.mark.parametrize("text, says", [
    (b"\xff{}", "not UTF-8 text"),
    ("{", "not JSON ("),
    ("[" * 100_000, "not JSON (nested too deeply)"),
    ('{"skip": ' + "9" * 5000 + "}", "holds an integer of thousands of digits"),
])
def test_every_reader_parses_json_one_way(text, says):
    with pytest.raises(jsontext.JSONProblem, match=re.escape(says)):
        jsontext.loads(text)


def one_test_project(pytester) -> None:
    """The project most tests here start from: one profiled test (test_one.py::test_a,
    one op) on the fake backend."""
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile(test_one="""
        def test_a(gpu_profiler):
            dev = gpu_profiler.timer.device_model
            for _ in gpu_profiler.iterations(4):
                with gpu_profiler.op("matmul"):
                    dev.kernel(10_000)
        """)


@pytest.fixture
def results_file(pytester):
    """A results file of one profiled test (the fake backend), and the project."""
    one_test_project(pytester)
    assert pytester.runpytest("-p", "no:randomly", "--opprof-json=r.json").ret == 0
    return pytester.path / "r.json"


@pytest.mark.parametrize("where", ["skip", "a sample", "the machine"])
def test_a_5000_digit_integer_is_one_line_in_report_and_compare(results_file, capsys, where):
    """The results loader reads through the baseline loader's parse path: the same line."""
    data = json.loads(results_file.read_text())
    marker = 12345678987654321
    profile = data["tests"][0]["profile"]
    if where == "skip":
        profile["skip"] = marker
    elif where == "a sample":
        profile["samples_ns"][0][0] = marker
    else:
        data["machine"]["x"] = marker
    forged = json.dumps(data).replace(str(marker), "9" * 5000)
    bad = results_file.with_name("bad.json")
    bad.write_text(forged)
    for argv in (["report", str(bad), "-o", str(bad.with_name("x.html"))],
                 ["compare", str(bad), str(results_file)]):
        assert main(argv) == 1
        err = one_line(capsys.readouterr().err)
        assert err.startswith(f"opprof: {bad}: holds an integer of thousands of digits"), err


def test_a_name_the_terminal_cannot_encode_is_printed_escaped(results_file):
    """PYTHONIOENCODING=ascii (or LANG=C): an op named 注意力 is printed backslash-escaped
    by every command, never a UnicodeEncodeError."""
    data = json.loads(results_file.read_text())
    for test in data["tests"]:
        for op in test["profile"]["ops"]:
            op["name"] = "注意力"
    results_file.write_text(json.dumps(data))
    import os
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = opprof("compare", str(results_file), str(results_file), cwd=results_file.parent,
                  env=env)
    assert done.returncode == 0, done.stderr
    assert "\\u6ce8\\u610f\\u529b" in done.stdout and "Traceback" not in done.stderr


@pytest.mark.parametrize("argv, says", [
    (["baseline", "update", "--runs", "1000000000000"],
     "--runs must be a whole number from 1 to 20 (a baseline keeps the last 20 runs)"),
    (["baseline", "update", "--runs", "9" * 5000], "--runs must be a whole number from 1 to 20"),
    (["compare", "HEAD", "--pairs", "1000000000000"],
     "--pairs must be a whole number from 1 to 1000"),
    (["compare", "HEAD", "--max-pairs", "1001"],
     "--max-pairs must be a whole number from 1 to 1000"),
])
def test_every_count_argument_is_bounded(capsys, argv, says):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert says in capsys.readouterr().err.strip().splitlines()[-1]


# -- class 1: a write completes or leaves every file as it was ---------------------------

def _run(date="d", **meta):
    from pytest_opprof.store.baseline import BaselineRun

    from .fakes import train_profile
    return BaselineRun.from_profile(train_profile(), {"date": date, **meta})


def _snapshot(root) -> dict[str, bytes]:
    """Every file under ``root`` by its relative path, byte for byte (temporaries too)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("damage", ["newer schema", "merge conflict", "another test's"])
def test_append_onto_a_history_it_cannot_read_refuses_and_keeps_the_file(tmp_path, damage):
    """--opprof-append-baseline onto a file it cannot read replaced a 6-run history with
    the one new run (and said "baseline updated"); it refuses in one line, the file kept."""
    from pytest_opprof.store.baseline import BaselineError, BaselineStore

    store = BaselineStore(tmp_path, "m")
    for k in range(6):
        path = store.record("t.py::test_x", _run(f"2026-01-0{k + 1}"), "", append=True)
    text = path.read_text()
    path.write_text({
        "newer schema": text.replace("pytest-opprof/baseline/3", "pytest-opprof/baseline/4"),
        "merge conflict": "<<<<<<< HEAD\n" + text + "=======\n" + text + ">>>>>>> branch\n",
        "another test's": text.replace('"t.py::test_x"', '"t.py::test_y"'),
    }[damage])
    before = _snapshot(tmp_path)
    with pytest.raises(BaselineError) as info:
        store.record("t.py::test_x", _run("2026-02-01"), "", append=True)
    message = str(info.value)
    assert "\n" not in message and "this run is not appended, and the file is kept" in message
    assert str(path) in message and "delete it, or rerun" not in message
    assert _snapshot(tmp_path) == before


@pytest.mark.e2e
def test_the_plugin_refuses_to_append_onto_a_conflicted_history(pytester):
    one_test_project(pytester)
    for _ in range(2):
        assert pytester.runpytest("-p", "no:randomly", "--opprof-append-baseline").ret == 0
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    path.write_text("<<<<<<< HEAD\n" + path.read_text() + "=======\n>>>>>>> other\n")
    before = path.read_bytes()
    result = pytester.runpytest("-p", "no:randomly", "--opprof-append-baseline")
    assert result.ret == 1 and "baseline updated" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*opprof: this run is not appended, and the file is kept*"])
    assert path.read_bytes() == before


def _staged_update(tmp_path, n_tests=3, n_old=2):
    """A store with old baselines of ``n_old`` tests on two machines, and a staging
    folder holding a new batch for ``n_tests`` tests on both."""
    from pytest_opprof.store import policy
    from pytest_opprof.store.baseline import BaselineStore

    root = tmp_path / "store"
    for machine in ("m1", "m2"):
        for k in range(n_old):
            BaselineStore(root, machine).record(f"t.py::test_{k}", _run("old"), "old")
    staging = policy.open_staging(root, "new")
    for machine in ("m1", "m2"):
        staged = BaselineStore(staging, machine)
        for k in range(n_tests):
            staged.record(f"t.py::test_{k}", _run("new"), "new")
    return root, staging


def _without_staging(snapshot):
    return {k: v for k, v in snapshot.items() if not k.startswith(".staging-")}


@pytest.mark.parametrize("call", ["os.replace", "os.write", "os.link"])
def test_a_commit_failing_at_any_step_leaves_every_file_as_it_was(tmp_path, monkeypatch, call):
    """A full disk at the k-th write, rename or link of a commit, for every k: every
    stored file byte for byte as it was (no test with the new batch beside one with the
    old), no temporary file left, and the advice is about space, not permissions."""
    import errno
    import os

    from pytest_opprof.store import policy
    from pytest_opprof.store.baseline import BaselineError

    name = call.split(".")[1]
    real = getattr(os, name)
    counted = {"calls": 0}

    def counting(*args, **kwargs):
        counted["calls"] += 1
        return real(*args, **kwargs)

    root, staging = _staged_update(tmp_path / "dry")
    monkeypatch.setattr(os, name, counting)
    policy.commit(staging, root, "new")
    monkeypatch.setattr(os, name, real)
    total = counted["calls"]
    assert total >= 4  # six files, four of them replacing old ones
    for k in range(1, total + 1):
        root, staging = _staged_update(tmp_path / f"k{k}")
        before = _without_staging(_snapshot(root))
        calls = {"n": 0}

        def failing(*args, k=k, calls=calls, **kwargs):
            calls["n"] += 1
            if calls["n"] == k:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(*args, **kwargs)

        monkeypatch.setattr(os, name, failing)
        with pytest.raises(BaselineError) as info:
            policy.commit(staging, root, "new")
        monkeypatch.setattr(os, name, real)
        message = str(info.value)
        assert "\n" not in message and "No space left on device" in message
        assert "free some space" in message and "writable" not in message
        assert "no baseline was changed" in message
        assert _without_staging(_snapshot(root)) == before, f"{call} failing at call {k}"


def test_a_folder_where_one_file_goes_changes_no_file(tmp_path):
    from pytest_opprof.store import policy
    from pytest_opprof.store.baseline import BaselineError, BaselineStore

    root, staging = _staged_update(tmp_path)
    in_the_way = BaselineStore(root, "m2").path_for("t.py::test_2")
    in_the_way.mkdir()
    before = _without_staging(_snapshot(root))
    with pytest.raises(BaselineError) as info:
        policy.commit(staging, root, "new")
    assert str(info.value).startswith(f"{in_the_way}: cannot write the baseline (is a folder")
    assert "move what is there away" in str(info.value)
    assert _without_staging(_snapshot(root)) == before and in_the_way.is_dir()


@pytest.mark.e2e
def test_update_whose_commit_fails_exits_1_with_every_baseline_as_it_was(pytester, monkeypatch):
    """opprof baseline update, a folder standing where the second test's file goes: exit
    1, one line naming it, and the first test keeps its old batch (it held the new)."""
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile(test_two="""
        def test_a(gpu_profiler):
            dev = gpu_profiler.timer.device_model
            for _ in gpu_profiler.iterations(4):
                with gpu_profiler.op("matmul"):
                    dev.kernel(10_000)

        def test_b(gpu_profiler):
            test_a(gpu_profiler)
        """)
    monkeypatch.chdir(pytester.path)
    assert main(["baseline", "update", "--runs", "1", "-q", "-p", "no:randomly"]) == 0
    files = sorted((pytester.path / ".opprof").rglob("*.json"))
    assert len(files) == 2
    files[1].unlink()
    files[1].mkdir()
    before = _snapshot(pytester.path / ".opprof")
    done = opprof("baseline", "update", "--runs", "1", "-q", "-p", "no:randomly",
                  cwd=pytester.path)
    assert done.returncode == 1
    assert one_line(done.stderr).startswith(f"opprof: {files[1]}: cannot write the baseline")
    assert _snapshot(pytester.path / ".opprof") == before


# -- class 1: no output written over an input ----------------------------------------

@pytest.mark.parametrize("spelling", ["same", "dot", "link"])
def test_report_and_compare_refuse_to_write_over_their_input(results_file, capsys, spelling):
    import os

    folder = results_file.parent
    other = folder / "other.json"
    other.write_bytes(results_file.read_bytes())
    target = {"same": str(results_file), "dot": f"{folder}/./r.json",
              "link": str(folder / "link.json")}[spelling]
    if spelling == "link":
        os.symlink(results_file, target)
    before = _snapshot(folder)
    for argv in (["report", str(results_file), "-o", target],
                 ["compare", str(results_file), str(other), "--json", target],
                 ["compare", str(other), str(results_file), "--markdown", target]):
        assert main(argv) in (1, 2)
        err = one_line(capsys.readouterr().err)
        assert f"is {results_file}, which this command reads; write it elsewhere" in err, err
        assert _snapshot(folder) == before


def test_two_outputs_of_one_command_cannot_share_a_file(results_file, capsys):
    out = results_file.with_name("out")
    assert main(["compare", str(results_file), str(results_file), "--json", str(out),
                 "--markdown", str(out)]) == 2
    assert one_line(capsys.readouterr().err) == (
        f"opprof: --markdown {out}: is also --json's file; give each output its own")
    assert not out.exists()


@pytest.fixture
def history_store(tmp_path):
    from pytest_opprof.store.baseline import BaselineStore

    store = BaselineStore(tmp_path / "store", "m")
    for k in range(3):
        path = store.record("t.py::test_x", _run(f"2026-01-0{k + 1}"), "", append=True)
    return store, path


@pytest.mark.parametrize("where", ["the baseline file", "a copy of it", "inside the folder"])
def test_history_writes_no_output_over_a_baseline(history_store, tmp_path, capsys, where):
    pytest.importorskip("ruptures")
    store, path = history_store
    copy = tmp_path / "copy.json"
    copy.write_bytes(path.read_bytes())
    target = {"the baseline file": path, "a copy of it": copy,
              "inside the folder": store.folder / "history.json"}[where]
    before = _snapshot(tmp_path)
    assert main(["history", "--dir", str(store.root), "--json", str(target)]) == 1
    err = one_line(capsys.readouterr().err)
    assert err.startswith(f"opprof: --json {target}: is ")
    assert ("inside the baseline folder" if where == "inside the folder"
            else "is a stored baseline; write the output elsewhere") in err
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("args, says", [
    (["--opprof-json=BASELINE"], "is a stored baseline; write the output elsewhere"),
    (["--opprof-json=MACHINE/r.json"], "is inside the baseline folder"),
    (["--opprof-json=out", "--opprof-markdown=out"], "is also --opprof-json's file"),
])
def test_the_plugins_outputs_write_over_no_baseline_and_not_over_each_other(pytester, args,
                                                                              says):
    one_test_project(pytester)
    assert pytester.runpytest("-p", "no:randomly", "--opprof-update-baseline").ret == 0
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    moved = pytester.path / "moved.json"  # a baseline file outside the folder too
    moved.write_bytes(path.read_bytes())
    before = _snapshot(pytester.path / ".opprof")
    args = [a.replace("BASELINE", str(moved)).replace("MACHINE", str(path.parent))
            for a in args]
    result = pytester.runpytest("-p", "no:randomly", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str()
    assert _snapshot(pytester.path / ".opprof") == before
    assert moved.read_bytes() == path.read_bytes() and not (pytester.path / "out").exists()


# -- class 9: everything from a file printed through the one escaping function ---------

FORGED = "x\nFORGED line\x1b[31m|y\u202e"


def _forge(value):
    """Every string of a stored file's data replaced by one holding a newline, an ESC
    sequence, a pipe and a bidi override (the schema and the unit kept: the file must still
    load)."""
    if isinstance(value, dict):
        return {k: (v if k in ("schema", "unit") else _forge(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_forge(v) for v in value]
    return FORGED + value if isinstance(value, str) else value


@pytest.fixture
def forged_store(tmp_path):
    from pytest_opprof.store.baseline import BaselineStore

    store = BaselineStore(tmp_path / "store", "m")
    for k in range(3):
        path = store.record("t.py::test_x", _run(f"2026-01-0{k + 1}", commit={
            "id": "a1b2c3d4e5f6", "branch": "main"}, outlying_ops=["conv2d"]), "", append=True)
    data = _forge(json.loads(path.read_text()))
    assert data["nodeid"].startswith(FORGED)
    for run in data["runs"]:
        run["meta"]["conditions"] = {"workers": 1, "measure": FORGED, "OMP_NUM_THREADS": FORGED}
    path.write_text(json.dumps(data))
    return store


def _assert_escaped(text: str) -> None:
    assert "\x1b" not in text and "\u202e" not in text, text
    assert not any(line.startswith("FORGED") for line in text.splitlines()), text
    assert "\\x1b[31m" in text and "\\n" in text


@pytest.mark.parametrize("argv", [["baseline", "show"], ["baseline", "show", "test_x"],
                                  ["history"]])
def test_every_string_of_a_forged_baseline_is_printed_escaped(forged_store, capsys, argv):
    if argv == ["history"]:
        pytest.importorskip("ruptures")
    code = main([*argv, "--dir", str(forged_store.root)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    _assert_escaped(captured.out)
    assert captured.err == ""


def test_an_unreadable_files_line_is_printed_escaped(forged_store, capsys):
    (path,) = forged_store.folder.glob("*.json")
    data = json.loads(path.read_text())
    data["schema"] = FORGED
    path.write_text(json.dumps(data))
    assert main(["baseline", "show", "--dir", str(forged_store.root)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("unreadable: ") and "\x1b" not in out and len(out.splitlines()) == 1


def test_a_forged_commit_id_and_date_are_escaped_where_history_names_a_run(forged_store):
    pytest.importorskip("ruptures")
    from pytest_opprof.judge.changepoints import history_of
    from pytest_opprof.store.baseline import load_file

    (path,) = forged_store.folder.glob("*.json")
    history = history_of(load_file(path), 0.05)
    for text in (history.label(0), history.where(0)):
        assert "\n" not in text and "\\n" in text


# -- class 2: prune deletes no live baseline -------------------------------------------

PROFILED = """
import pytest

@pytest.mark.parametrize("backend", ["cpu"])  # the GPU runner parametrizes "cuda" too
def test_step(gpu_profiler, backend):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(4):
        with gpu_profiler.op("matmul"):
            dev.kernel(10_000)

def test_x(gpu_profiler):
    test_step(gpu_profiler, "cpu")
"""


@pytest.fixture
def prune_project(pytester, monkeypatch):
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile(test_s=PROFILED)
    monkeypatch.chdir(pytester.path)
    return pytester


@pytest.mark.e2e
def test_prune_keeps_the_baseline_of_repeated_tests(prune_project):
    """pytest-repeat's --count 2 collects test_x[1-2] and test_x[2-2]; their baseline is
    stored as test_x, and prune --apply --count 2 removed it."""
    root = prune_project.path / ".opprof"
    assert opprof("baseline", "update", "--runs", "1", "-q", "-p", "no:randomly",
                  "--count", "2", cwd=prune_project.path).returncode == 0
    before = _snapshot(root)
    assert sorted(json.loads(p.read_text())["nodeid"] for p in root.rglob("*.json")) == [
        "test_s.py::test_step[cpu]", "test_s.py::test_x"]
    done = opprof("baseline", "prune", "--apply", "--count", "2", cwd=prune_project.path)
    assert done.returncode == 0, done.stderr
    assert "no stale baselines" in done.stdout and _snapshot(root) == before


@pytest.mark.e2e
def test_prune_judges_only_this_machines_folder_and_never_another_backends_parameter(
        prune_project):
    """A laptop's prune deleted the GPU runner's test_step[cuda]: by default only this
    machine's folder is judged (and it says so); with --all-machines, a parameter this
    collection cannot see of a test function it does collect is kept, and a test whose
    function is gone is removed."""
    from pytest_opprof.store.baseline import BaselineStore

    root = prune_project.path / ".opprof"
    here = BaselineStore(root, "fake-fake CUDA device")
    gpu = BaselineStore(root, "cuda-NVIDIA H200")
    for store in (here, gpu):
        for nodeid in ("test_s.py::test_step[cpu]", "test_s.py::test_step[cuda]",
                       "test_s.py::test_x", "test_s.py::test_removed[cuda]"):
            store.record(nodeid, _run(), "b")
    gpu_before = _snapshot(gpu.folder)
    done = opprof("baseline", "prune", "--apply", cwd=prune_project.path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        "opprof: pruning the baselines of machine 'fake-fake CUDA device'; 1 other machine "
        "folder(s) left alone (--all-machines judges them too, against this machine's "
        "collection)")
    removed = [line.split("  [")[0] for line in done.stdout.splitlines()
               if line.startswith("remove: ")]
    assert removed == ["remove: test_s.py::test_removed[cuda]"]
    assert _snapshot(gpu.folder) == gpu_before
    assert sorted(b.nodeid for _, b in here.entries()) == [
        "test_s.py::test_step[cpu]", "test_s.py::test_step[cuda]", "test_s.py::test_x"]
    every = opprof("baseline", "prune", "--apply", "--all-machines", cwd=prune_project.path)
    assert every.returncode == 0, every.stderr
    assert sorted(b.nodeid for _, b in gpu.entries()) == [
        "test_s.py::test_step[cpu]", "test_s.py::test_step[cuda]", "test_s.py::test_x"]


def test_all_machines_and_one_machine_key_are_one_or_the_other(capsys):
    assert main(["baseline", "prune", "--all-machines", "--machine-key", "m"]) == 2
    assert "give one or the other" in one_line(capsys.readouterr().err)


# -- class 5: the plugin writes nothing its own readers refuse ---------------------------

@pytest.mark.e2e
@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_test_of_more_ops_than_a_profile_holds_fails_in_one_line(pytester, workers):
    """100,001 ops: the results file was refused by report and compare, and under -n 2
    the controller refused the worker's records in 61 INTERNALERROR lines."""
    from pytest_opprof.model.profile import MAX_OPS

    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile(test_many=f"""
        def test_many(gpu_profiler):
            for _ in gpu_profiler.iterations(2):
                for k in range({MAX_OPS + 1}):
                    with gpu_profiler.op("x"):
                        pass

        def test_few(gpu_profiler):
            for _ in gpu_profiler.iterations(4):
                with gpu_profiler.op("y"):
                    pass
        """)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--opprof-json=r.json", *workers)
    out = result.stdout.str()
    assert result.ret == 1 and "INTERNALERROR" not in out
    assert (f"opprof: test_many.py::test_many: {MAX_OPS + 1} ops; a profile holds at most "
            f"{MAX_OPS}: its profile is not kept") in out
    results = pytester.path / "r.json"
    assert main(["compare", str(results), str(results)]) == 0  # readable, test_few in it
    from pytest_opprof.store.results import load_records

    assert [r.nodeid for r in load_records(results)[1]] == ["test_many.py::test_few"]


@pytest.mark.parametrize("bound", ["iterations", "ops", "phases", "cells"])
def test_the_profile_writer_and_reader_share_each_bound(bound, monkeypatch):
    """Profile.beyond_bounds (the session's refusal) and the reader refuse the same
    profiles: each bound lowered, a profile at it passes both, one over it fails both."""
    from pytest_opprof.errors import OpprofError
    from pytest_opprof.model import profile as module

    from .fakes import train_profile

    base = train_profile()
    n_iter, n_ops, n_phases = base.iterations, len(base.ops), len(base.phases)
    limits = {"iterations": ("MAX_ITERATIONS", n_iter), "ops": ("MAX_OPS", n_ops),
              "phases": ("MAX_PHASES", n_phases), "cells": ("MAX_CELLS", n_iter * n_ops)}
    name, at = limits[bound]
    assert at > 1
    monkeypatch.setattr(module, name, at)
    assert base.beyond_bounds() is None
    module.Profile.from_dict(base.to_dict())
    monkeypatch.setattr(module, name, at - 1)
    assert base.beyond_bounds() is not None
    with pytest.raises(OpprofError):
        module.Profile.from_dict(base.to_dict())


@pytest.mark.e2e
def test_a_thread_variable_longer_than_a_baseline_reads_is_recorded_bounded(pytester,
                                                                            monkeypatch):
    """OMP_NUM_THREADS of 300 characters was recorded as it was; the loader refuses a
    value over 200, so every later run failed, and the advised update wrote it again."""
    from pytest_opprof.model.conditions import MAX_VALUE_CHARS
    from pytest_opprof.store.baseline import load_file

    monkeypatch.setenv("OMP_NUM_THREADS", "1" * 300)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile(test_one="""
        def test_a(gpu_profiler):
            dev = gpu_profiler.timer.device_model
            for _ in gpu_profiler.iterations(6):
                with gpu_profiler.op("matmul"):
                    dev.kernel(10_000)
        """)
    assert pytester.runpytest_subprocess("-p", "no:randomly",
                                         "--opprof-update-baseline").ret == 0
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    value = load_file(path).conditions()["OMP_NUM_THREADS"]
    assert len(value) <= MAX_VALUE_CHARS and value.startswith("111")
    gated = pytester.runpytest_subprocess("-p", "no:randomly")
    assert gated.ret == 0, gated.stdout.str()
    assert "test_one.py::test_a: passed; 1 ops compared" in gated.stdout.str()
    monkeypatch.setenv("OMP_NUM_THREADS", "1" * 299 + "2")  # another value: told apart
    differing = pytester.runpytest_subprocess("-p", "no:randomly")
    assert "OMP_NUM_THREADS was" in differing.stdout.str()


def test_a_run_the_baseline_reader_would_refuse_is_not_written(tmp_path):
    from pytest_opprof.store.baseline import BaselineError, BaselineStore

    store = BaselineStore(tmp_path, "m")
    run = _run()
    run.meta["probe_ns"] = float("nan")
    with pytest.raises(BaselineError, match="this run cannot be stored: a baseline reader "
                                            "would refuse it"):
        store.record("t.py::test_x", run, "b")
    assert not list(tmp_path.rglob("*.json"))


def test_a_function_name_longer_than_a_profile_reads_is_kept_cut():
    """callgrind names C++ template instances of thousands of characters; the reader
    takes at most MAX_FUNCTION_NAME: the writer cuts them to it."""
    from pytest_opprof.measure.profiler import function_name
    from pytest_opprof.model.profile import MAX_FUNCTION_NAME, read_functions

    name = function_name("std::vector<" * 500)
    assert len(name) == MAX_FUNCTION_NAME
    assert read_functions([[name, 5]], "f") == [(name, 5)]
    assert function_name("") == "?" and function_name("f") == "f"


# -- every output flag: missing folders made, a file in their way refused ----------------

@pytest.mark.e2e
def test_every_output_flag_makes_its_missing_folders_alike(results_file, history_store,
                                                           capsys):
    """--opprof-json=/nonexistent/dir/x.json made its folders silently: decided and
    documented (README, Output files): every output makes them, as --junitxml does."""
    pytest.importorskip("matplotlib")
    pytest.importorskip("ruptures")
    pytester_dir = results_file.parent
    outputs = {flag: pytester_dir / "new" / flag.strip("-") / "out" for flag in (
        "--opprof-json", "--opprof-markdown", "--opprof-trace", "--opprof-html")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-q",
                           *[f"{flag}={path}" for flag, path in outputs.items()]],
                          cwd=pytester_dir, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout
    assert all(path.exists() for path in outputs.values())
    assert main(["report", str(results_file), "-o", str(pytester_dir / "r1/a/x.html")]) == 0
    assert main(["compare", str(results_file), str(results_file), "--json",
                 str(pytester_dir / "r2/a/x.json"), "--markdown",
                 str(pytester_dir / "r3/a/x.md")]) == 0
    store, _ = history_store
    assert main(["history", "--dir", str(store.root), "--json",
                 str(pytester_dir / "r4/a/h.json"), "--html",
                 str(pytester_dir / "r5/a/h.html")]) == 0
    for made in ("r1/a/x.html", "r2/a/x.json", "r3/a/x.md", "r4/a/h.json", "r5/a/h.html"):
        assert (pytester_dir / made).is_file(), made
    capsys.readouterr()
    (pytester_dir / "blocker").write_text("a file where a folder goes")
    before = _snapshot(pytester_dir)
    for argv in (["report", str(results_file), "-o", str(pytester_dir / "blocker/x.html")],
                 ["compare", str(results_file), str(results_file), "--json",
                  str(pytester_dir / "blocker/x.json")],
                 ["history", "--dir", str(store.root), "--json",
                  str(pytester_dir / "blocker/h.json")]):
        assert main(argv) in (1, 2)
        assert "blocker is a file, not a folder" in one_line(capsys.readouterr().err)
    assert _snapshot(pytester_dir) == before


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_prune_that_cannot_remove_one_file_removes_none(tmp_path, monkeypatch, k):
    """prune --apply removes every stale file or none: a rename refused at the k-th
    file puts the ones moved back."""
    import errno
    import os

    from pytest_opprof.errors import OpprofError
    from pytest_opprof.store import policy
    from pytest_opprof.store.baseline import BaselineStore

    store = BaselineStore(tmp_path, "m")
    paths = [store.record(f"t.py::test_{j}", _run(), "b") for j in range(3)]
    before = _snapshot(tmp_path)
    real, calls = os.replace, {"n": 0}

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == k:
            raise OSError(errno.EACCES, "Permission denied")
        return real(*args, **kwargs)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OpprofError, match="cannot remove \\(Permission denied\\); nothing was "
                                          "removed"):
        policy.remove(paths, tmp_path)
    monkeypatch.setattr(os, "replace", real)
    assert _snapshot(tmp_path) == before
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no trash folder left
    policy.remove(paths, tmp_path)
    assert not any(p.exists() for p in paths) and [p.name for p in tmp_path.iterdir()] == ["m"]


def test_a_baseline_is_written_within_the_readers_count_of_values(tmp_path, monkeypatch):
    """The reader counts commas before it parses (op names' commas too); the writer kept
    runs by samples only, so names like ``conv(3,3)`` could write a file it refused."""
    from pytest_opprof.model import baseline as model
    from pytest_opprof.store.baseline import BaselineError, BaselineStore, load_file

    store = BaselineStore(tmp_path, "m")
    path = store.record("t.py::test_x", _run(), "", append=True)
    one_run = path.read_text().count(",")
    monkeypatch.setattr(model, "MAX_VALUES", int(one_run * 2.5))  # room for two runs
    for k in range(4):
        path = store.record("t.py::test_x", _run(f"d{k}"), "", append=True)
        assert path.read_text().count(",") <= model.MAX_VALUES
        baseline = load_file(path)  # the reader takes what the writer wrote
    assert [r.meta["date"] for r in baseline.runs] == ["d2", "d3"]  # the oldest dropped
    monkeypatch.setattr(model, "MAX_VALUES", one_run // 2)
    with pytest.raises(BaselineError, match="this run cannot be stored: it holds more values"):
        store.record("t.py::test_new", _run("d9"), "b")
    assert not store.path_for("t.py::test_new").exists()


def test_a_commands_outputs_are_written_all_or_none(results_file, monkeypatch, capsys):
    """compare --json A --markdown B: a full disk at the second left the first written;
    now neither is (as history's --json and --html, and the plugin's outputs)."""
    import errno
    import os

    folder = results_file.parent
    real, calls = os.replace, {"n": 0}

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    (folder / "a.json").write_text("old a")
    before = _snapshot(folder)
    monkeypatch.setattr(os, "replace", failing)
    assert main(["compare", str(results_file), str(results_file), "--json",
                 str(folder / "a.json"), "--markdown", str(folder / "b.md")]) == 1
    monkeypatch.setattr(os, "replace", real)
    err = one_line(capsys.readouterr().err)
    assert err.startswith(f"opprof: --markdown={folder / 'b.md'}: cannot write (No space")
    assert "free some space" in err
    assert _snapshot(folder) == before


def test_a_results_file_larger_than_its_readers_take_is_not_written(pytester, monkeypatch):
    from pytest_opprof.model import reports

    monkeypatch.setattr(reports, "RESULTS_MAX_BYTES", 4000)  # one bound: writer and reader
    one_test_project(pytester)
    result = pytester.runpytest("-p", "no:randomly", "--opprof-json=r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["ERROR: opprof: --opprof-json=*r.json: the results are * MB, "
                                 "more than opprof report and compare read (0 MB): not "
                                 "written; *"])
    assert not (pytester.path / "r.json").exists()
