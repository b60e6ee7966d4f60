"""The threat model's damage, for every file the package reads and writes
(docs/reliability.md): the files are trusted, what happens to them is real. Damaged
bytes (cut short, merge-conflicted, another version's, flipped, a second writer) are
one line naming the file and what to do, no traceback, the file kept as it was; a write
(an append, an update's commit, prune, a command's outputs) completes or leaves every
file as it was, whatever fails on the way (a full disk, a folder in the way)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_opprof.cli import main
from pytest_opprof.errors import OpprofError
from pytest_opprof.measure import measures
from pytest_opprof.model.hints import Retake
from pytest_opprof.run.options import CHILD_RECORDS


def opprof(*args: str, cwd, env=None) -> subprocess.CompletedProcess:
    """The opprof command as a user runs it: a new process."""
    return subprocess.run([sys.executable, "-m", "pytest_opprof.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, env=env)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# -- damaged bytes: every file kind the package reads, one parse path, one line ---------

NODEID = "t.py::test_x"


def damaged(data: bytes, other: bytes) -> st.SearchStrategy[bytes]:
    """``data`` (a file as its writer wrote it) as real damage leaves it, ``other`` being
    another file of its kind: cut short anywhere, a git merge conflict between the two
    around any lines, another version's (its schema's version moved, a field renamed),
    bytes flipped, and a second writer's bytes over the first's."""
    lines, theirs = data.splitlines(keepends=True), other.splitlines(keepends=True)

    def conflict(ij: tuple[int, int]) -> bytes:
        i, j = sorted(ij)
        return b"".join([*lines[:i], b"<<<<<<< HEAD\n", *lines[i:j], b"=======\n",
                         *theirs[i:j], b">>>>>>> theirs\n", *lines[j:]])

    def flipped(flips: list[tuple[int, int]]) -> bytes:
        out = bytearray(data)
        for at, bits in flips:
            out[at] ^= bits
        return bytes(out)

    newer = re.sub(rb"(pytest-opprof/\w+/)(\d+)", lambda m: m[1] + b"%d" % (int(m[2]) + 1), data)
    keys = sorted(set(re.findall(rb'"\w+":', data)))
    position = st.integers(0, len(data) - 1)
    return st.one_of(
        position.map(lambda k: data[:k]),
        st.tuples(st.integers(0, len(lines)), st.integers(0, len(lines))).map(conflict),
        st.just(newer) | st.sampled_from(keys).map(lambda k: data.replace(k, k[:-2] + b'_2":')),
        st.lists(st.tuples(position, st.integers(1, 255)), min_size=1, max_size=4).map(flipped),
        st.integers(0, len(other)).map(lambda k: other[:k] + data[k:]),
    )


@pytest.fixture(scope="module")
def records():
    """Two gated records of one test (a baseline of three runs, a current run)."""
    from pytest_opprof.judge.gate import gate_config, judge
    from pytest_opprof.model.records import TestRecord
    from pytest_opprof.store.baseline import Baseline

    from .fakes import train_profile

    baseline = Baseline(NODEID, "m", [_run(f"d{k}") for k in range(3)])
    found = []
    for iterations in (6, 7):
        current = train_profile(iterations=iterations)
        config = gate_config(measures.named("fake").gate, 0.05, {})
        found.append(TestRecord(current, judge(current, baseline, machine="m",
                                               retake=Retake(), strict_ops=False,
                                               config=config, budgets={})))
    return found


def _written(kind: str, record, folder) -> bytes:
    """The file of ``kind`` its writer writes for ``record``."""
    from pytest_opprof.model.records import dumps
    from pytest_opprof.model.runinfo import RunInfo
    from pytest_opprof.render import results_json
    from pytest_opprof.run.counting import Share
    from pytest_opprof.store.baseline import BaselineRun, BaselineStore

    if kind == "baseline":
        store = BaselineStore(folder / "written", "m")
        for date in ("d1", "d2", "d3"):  # a history: a line per run
            path = store.record(NODEID, BaselineRun.from_profile(record.profile, {"date": date}),
                                "", append=Retake())
        return path.read_bytes()
    return {"results": lambda: results_json.render([record], RunInfo("m", "fake", "d")),
            "records": lambda: dumps([record]),
            "share": lambda: Share({NODEID: record.profile}, "", {"t.py::y": "skipped"},
                                   1.5).to_json()}[kind]().encode()


def _read(kind: str, path) -> None:
    """``path`` read as the package reads a file of ``kind``, and used as it uses it;
    the one line, when it cannot be, as an OpprofError."""
    from pytest_opprof.run.child import read as read_child
    from pytest_opprof.run.counting import Share
    from pytest_opprof.store import results
    from pytest_opprof.store.baseline import BaselineStore

    if kind == "baseline":
        baseline = BaselineStore(path.parent.parent, "m").load(NODEID)
        assert baseline is not None
        baseline.samples(), baseline.op_ids(), baseline.probe_ns(), baseline.functions()
        baseline.span_seconds(), baseline.to_profile(), baseline.conditions()
    elif kind == "results":
        results.load(path)
    elif kind == "records":
        found, problem, _ = read_child(path.parent)
        if found is None:
            raise OpprofError(problem)
    else:
        share = Share.read(path)
        if share.problem:
            raise OpprofError(share.problem)


FIXES = {"baseline": "rerun with --opprof-update-baseline (opprof baseline update) to write "
                     "a new one",
         "results": "write it again with pytest --opprof-json=PATH",
         "records": "run the tests again", "share": "run the tests again"}


@pytest.mark.parametrize("kind", list(FIXES))
def test_damaged_bytes_are_one_line_naming_the_file_and_what_to_do(kind, records,
                                                                   tmp_path_factory):
    """Whatever damage leaves of a baseline, a results file, a child's records or a
    worker's share of instruction counts: it reads as what it still is, or it is one
    line naming the file, what is wrong and what to do, and never a traceback; a read
    keeps the file byte for byte, and for a baseline the fix it names works."""
    from pytest_opprof.store.baseline import BaselineRun, BaselineStore

    folder = tmp_path_factory.mktemp(kind)
    data, other = (_written(kind, record, folder / f"w{k}") for k, record in enumerate(records))
    store = BaselineStore(folder, "m")
    path = {"baseline": store.path_for(NODEID),  # the records where a child writes them
            "records": folder / CHILD_RECORDS}.get(kind, folder / f"{kind}.json")
    path.parent.mkdir(parents=True, exist_ok=True)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(damaged(data, other))
    def check(damage: bytes) -> None:
        path.write_bytes(damage)
        try:
            _read(kind, path)
        except OpprofError as exc:
            line = str(exc)
            assert line.startswith(f"{path}: ") and line.endswith(FIXES[kind]), line
            assert "\n" not in line and "Traceback" not in line
        assert path.read_bytes() == damage
        if kind == "baseline":  # the fix it names: an update writes a new file over it
            store.record(NODEID, BaselineRun.from_profile(records[0].profile, {}), "new")
            assert store.load(NODEID).batch == "new"

    check()


@pytest.mark.pytester  # starting the instructions measure asks valgrind its version
def test_a_lost_workers_share_is_one_line_for_each_of_its_tests(monkeypatch, tmp_path):
    """An xdist worker lost before it wrote its child's instruction counts (killed,
    crashed), or whose share comes damaged: every test of its share is unjudged in one
    line (naming the file when there is one), as soon as that worker is gone."""
    from types import SimpleNamespace

    from pytest_opprof.run import counting as module

    monkeypatch.setattr(module, "run_child", lambda *args: module.Share())
    config = SimpleNamespace(workerinput={"workerid": "gw1", "workercount": 2,
                                          module.FOLDER_KEY: str(tmp_path)})
    counting = module.Counting(config, 1, measures.named("instructions")())
    counting.count([SimpleNamespace(nodeid=f"t.py::t{k}", fixturenames=["gpu_profiler"])
                    for k in range(4)])
    (tmp_path / "worker-0").write_text("999999999 1")  # gone, its share never written
    for nodeid in ("t.py::t0", "t.py::t2"):
        assert counting.profile(nodeid) == (
            None, "no instructions counted: xdist worker gw0 ended before it shared what its "
                  "callgrind child counted (it crashed or was killed)")
    damaged = tmp_path / "share-0.json"
    damaged.write_text('{"profiles": [')
    counting.others.clear()
    assert counting.profile("t.py::t0") == (
        None, f"no instructions counted: {damaged}: not JSON (Expecting value: line 1 column "
              "15 (char 14)); run the tests again")


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


# -- appends, updates and prune: complete, or every file as it was ---------------------

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
    """--opprof-update-baseline=append onto a file it cannot read replaced a 6-run history with
    the one new run (and said "baseline updated"); it refuses in one line, the file kept."""
    from pytest_opprof.store.baseline import BaselineError, BaselineStore

    store = BaselineStore(tmp_path, "m")
    for k in range(6):
        path = store.record("t.py::test_x", _run(f"2026-01-0{k + 1}"), "", append=Retake())
    text = path.read_text()
    path.write_text({
        "newer schema": text.replace("pytest-opprof/baseline/3", "pytest-opprof/baseline/4"),
        "merge conflict": "<<<<<<< HEAD\n" + text + "=======\n" + text + ">>>>>>> branch\n",
        "another test's": text.replace('"t.py::test_x"', '"t.py::test_y"'),
    }[damage])
    before = _snapshot(tmp_path)
    with pytest.raises(BaselineError) as info:
        store.record("t.py::test_x", _run("2026-02-01"), "", append=Retake())
    message = str(info.value)
    assert "\n" not in message and "this run is not appended, and the file is kept" in message
    assert str(path) in message and "delete it, or rerun" not in message
    assert _snapshot(tmp_path) == before


@pytest.mark.e2e
def test_the_plugin_refuses_to_append_onto_a_conflicted_history(pytester):
    one_test_project(pytester)
    for _ in range(2):
        assert pytester.runpytest("-p", "no:randomly", "--opprof-update-baseline=append").ret == 0
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    path.write_text("<<<<<<< HEAD\n" + path.read_text() + "=======\n>>>>>>> other\n")
    before = path.read_bytes()
    result = pytester.runpytest("-p", "no:randomly", "--opprof-update-baseline=append")
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


# -- no output written over an input ----------------------------------------------------

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
        path = store.record("t.py::test_x", _run(f"2026-01-0{k + 1}"), "", append=Retake())
    return store, path


@pytest.mark.pytester
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


# -- what the user's code names (ops, parameters, environment values) printed escaped ----

FORGED = "x\nFORGED line\x1b[31m|y\u202e"


def _forge(value):
    """Every string of a stored file's data replaced by one holding a newline, an ESC
    sequence, a pipe and a bidi override, as op names, parameter ids and environment
    values may (the schema and the unit kept: the file must still load)."""
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
            "id": "a1b2c3d4e5f6", "branch": "main"}, outlying_ops=["conv2d"]), "", append=Retake())
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


@pytest.mark.pytester
@pytest.mark.parametrize("argv", [["baseline", "show"], ["baseline", "show", "test_x"],
                                  ["history"]])
def test_every_string_of_a_baseline_is_printed_escaped(forged_store, capsys, argv):
    if argv == ["history"]:
        pytest.importorskip("ruptures")
    code = main([*argv, "--dir", str(forged_store.root)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    _assert_escaped(captured.out)
    assert captured.err == ""


# -- prune deletes no live baseline -----------------------------------------------------

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


# -- the writers write nothing their readers refuse -------------------------------------

def test_a_run_the_baseline_reader_would_refuse_is_not_written(tmp_path):
    from pytest_opprof.store.baseline import BaselineError, BaselineStore

    store = BaselineStore(tmp_path, "m")
    run = _run()
    run.meta["probe_ns"] = float("nan")
    with pytest.raises(BaselineError, match="this run cannot be stored: a baseline reader "
                                            "would refuse it"):
        store.record("t.py::test_x", run, "b")
    assert not list(tmp_path.rglob("*.json"))


def test_a_function_name_longer_than_a_profile_keeps_is_kept_cut():
    """callgrind names C++ template instances of thousands of characters; a profile (and
    a baseline) keeps at most MAX_FUNCTION_NAME of each."""
    from pytest_opprof.measure.profiler import function_name
    from pytest_opprof.model.profile import MAX_FUNCTION_NAME

    assert len(function_name("std::vector<" * 500)) == MAX_FUNCTION_NAME
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
    from pytest_opprof.model import jsontext

    monkeypatch.setattr(jsontext, "MAX_BYTES", 4000)  # one bound: writer and reader
    one_test_project(pytester)
    result = pytester.runpytest("-p", "no:randomly", "--opprof-json=r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["ERROR: opprof: --opprof-json=*r.json: the results are * MB, "
                                 "more than opprof report and compare read (0 MB): not "
                                 "written; *"])
    assert not (pytester.path / "r.json").exists()
