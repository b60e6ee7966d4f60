"""Failure modes end in one line and lose nothing: interruption, concurrency, hostile
and odd input (docs/reliability.md lists each with its test)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_opprof.model.hints import Retake
from pytest_opprof.store import policy
from pytest_opprof.store.baseline import BaselineError, BaselineRun, BaselineStore

from .fakes import ctrl_c_as_from_a_terminal, train_profile

TESTS = [f"t.py::test_{k}[a/b-{k}]" for k in range(4)]


def run_of(tag: int) -> BaselineRun:
    return BaselineRun.from_profile(train_profile(), {"date": "d", "tag": tag})


# ---- interruption -----------------------------------------------------------------

def _write_forever(root: str, ready: Any) -> None:
    """A writer that never stops: every test's baseline rewritten, over and over, both
    replacing (a new batch) and appending. Ctrl-C gets Python's own handling here, in
    the writer: it inherits the disposition of the process that forked it, which ignores
    SIGINT when the suite runs as a background job; changing the suite's own disposition
    would let a stray SIGINT end it instead. ``ready`` is set once that is done: a
    signal sent before it would meet the forked copy of the xdist worker, which would
    report the Ctrl-C to the controller over the worker's channel as its own."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    ready.set()
    store = BaselineStore(Path(root), "m")
    tag = 0
    while True:
        tag += 1
        for nodeid in TESTS:
            store.record(nodeid, run_of(tag), batch=f"b{tag // 3}",
                         append=Retake() if tag % 2 == 0 else None)


@pytest.mark.e2e
def test_killed_or_interrupted_writers_leave_every_baseline_old_or_new(tmp_path):
    """100 writers, each killed (SIGKILL) or interrupted (SIGINT, Ctrl-C) at a random
    moment: every baseline file is a whole, valid baseline of its test afterwards."""
    store = BaselineStore(tmp_path, "m")
    for nodeid in TESTS:
        store.record(nodeid, run_of(0), batch="start")
    fork = multiprocessing.get_context("fork")
    rnd = random.Random(4)
    interrupted = {signal.SIGKILL: 0, signal.SIGINT: 0}
    _interrupt_writers(tmp_path, store, fork, rnd, interrupted)
    assert min(interrupted.values()) > 20
    leftovers = {p.name for p in store.folder.iterdir()} - {
        store.path_for(n).name for n in TESTS}
    assert all(name.endswith(".tmp") for name in leftovers)  # only SIGKILL's, never read


def _interrupt_writers(tmp_path, store, fork, rnd, interrupted) -> None:
    for _ in range(100):
        ready = fork.Event()
        writer = fork.Process(target=_write_forever, args=(str(tmp_path), ready))
        writer.start()
        ready.wait(60)
        time.sleep(rnd.uniform(0.005, 0.06))
        sig = rnd.choice(list(interrupted))
        os.kill(writer.pid, sig)
        writer.join(30)
        if writer.exitcode is None:
            # a Ctrl-C'd writer that has not stopped (seen once in a few hundred on a
            # loaded runner, still writing after 120 s): what is tested is the files, so
            # it is killed, and the bound keeps the test's worst case to minutes
            sig = signal.SIGKILL
            os.kill(writer.pid, sig)
            writer.join()
        assert writer.exitcode != 0
        interrupted[sig] += 1
        for nodeid in TESTS:
            baseline = store.load(nodeid)  # raises if a file were damaged
            assert baseline.nodeid == nodeid and baseline.runs


def test_temporary_files_of_killed_writers_are_pruned_once_stale(pytester, capsys):
    """Temporary files of killed writers and staging folders of killed updates are
    never read as baselines (nor as machines) and prune removes them an hour on."""
    from pytest_opprof.cli import main

    store = BaselineStore(pytester.path / ".opprof", "m")
    store.record(TESTS[0], run_of(1), batch="b")
    fresh = store.folder / ".x.json.abc.tmp"
    stale = store.folder / ".y.json.def.tmp"
    for path in (fresh, stale):
        path.write_text("{half a fi")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    staging = {age: pytester.path / ".opprof" / f".staging-{age}" for age in ("old", "new")}
    for folder in staging.values():
        (folder / "m").mkdir(parents=True)
        (folder / "m" / "x.json").write_bytes(store.path_for(TESTS[0]).read_bytes())
    os.utime(staging["old"], (time.time() - 7200, time.time() - 7200))
    assert [s.machine for s in BaselineStore.every_machine(pytester.path / ".opprof")] == ["m"]
    assert policy.stale([store], pytester.path / ".opprof", lambda _: False) == [
        (stale, "temporary file of an interrupted write"),
        (staging["old"], "staging folder of an interrupted update")]
    assert [p for p, _ in store.entries()] == [store.path_for(TESTS[0])]
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    os.chdir(pytester.path)
    assert main(["baseline", "prune", "--apply", "--dir", ".opprof", "--machine-key", "m"]) == 0
    out = capsys.readouterr().out
    assert "temporary file of an interrupted write" in out
    assert "staging folder of an interrupted update" in out
    assert not stale.exists() and fresh.exists()
    assert not staging["old"].exists() and staging["new"].exists()


# ---- concurrency --------------------------------------------------------------------

SUITE = """
import pytest

@pytest.mark.parametrize("k", range(6))
def test_op(gpu_profiler, k):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(6):
        with gpu_profiler.op("matmul"):
            dev.kernel(1000 * (k + 1))
"""


@pytest.mark.e2e
def test_two_pytest_processes_appending_to_the_same_baselines_lose_nothing(pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    procs = [pytester.popen([*pytester._getpytestargs(), "-p", "no:cacheprovider",
                             "--opprof-update-baseline=append", "-q"],
                            stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
             for _ in range(2)]
    assert [p.wait(120) for p in procs] == [0, 0]
    store = BaselineStore(pytester.path / ".opprof", "fake-" + "virtual CUDA device (fake)")
    entries = list(BaselineStore.every_machine(pytester.path / ".opprof")[0].entries())
    assert len(entries) == 6 and len({p.name for p, _ in entries}) == 6
    for _, baseline in entries:
        assert not isinstance(baseline, BaselineError) and len(baseline.runs) == 2
    del store


@pytest.mark.e2e
def test_xdist_workers_update_every_baseline(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    result = pytester.runpytest_subprocess("-n", "4", "--opprof-update-baseline",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    (store,) = BaselineStore.every_machine(pytester.path / ".opprof")
    entries = list(store.entries())
    assert sorted(b.nodeid for _, b in entries) == sorted(
        f"test_suite.py::test_op[{k}]" for k in range(6))
    result = pytester.runpytest_subprocess("-n", "4", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)


# ---- hostile and odd files ---------------------------------------------------------

def test_a_file_larger_than_what_is_read_is_refused_unread(tmp_path):
    """The one bound of the one read path (jsontext.MAX_BYTES): a file of 600 MB where a
    baseline goes is refused without reading it."""
    store = BaselineStore(tmp_path, "m")
    path = store.path_for(TESTS[0])
    path.parent.mkdir(parents=True)
    with open(path, "wb") as f:
        f.truncate(600 * 2**20)  # sparse: nothing is written, nothing must be read
    with pytest.raises(BaselineError, match=r"cannot be read \(is 600 MB, more than the 512 "
                                            r"MB read\); delete it"):
        store.load(TESTS[0])
    assert path.stat().st_size == 600 * 2**20


def test_a_baseline_is_parsed_as_data_only(tmp_path):
    """JSON into validated lists and numbers: a name that looks like code stays a name."""
    hostile = "__import__('os').system('touch pwned')"
    profile = train_profile()
    profile.ops[0] = profile.ops[0].__class__(0, hostile, 0, 0, "!!python/object:os.system")
    store = BaselineStore(tmp_path, "m")
    store.record(hostile, BaselineRun.from_profile(profile, {"date": "d"}), batch="b")
    baseline = store.load(hostile)
    assert baseline.runs[0].ops["name"][0] == hostile
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


@pytest.mark.parametrize("name", ["conv 2d", "свёртка", "fft/rfft2", "..", "a\\b", "x" * 300])
def test_odd_op_names_round_trip_through_baselines_and_reports(tmp_path, name):
    from pytest_opprof.render.text import render

    def body(profiler, dev, i):
        with profiler.op(name):
            dev.kernel(100)

    profile = train_profile(body=body)
    store = BaselineStore(tmp_path, "m")
    path = store.record("t.py::t", BaselineRun.from_profile(profile, {"date": "d"}), "b")
    assert store.load("t.py::t").runs[0].ops["name"] == [name]
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [path]  # the name is not a path
    assert name[:40] in render(profile, 2)
    json.loads(profile.to_json())


# ---- workloads ---------------------------------------------------------------------

def test_an_exception_in_a_phase_keeps_the_profile_consistent_and_the_next_test_clean(
        pytester):
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile("""
        import pytest_opprof

        def test_boom(gpu_profiler):
            dev = gpu_profiler.timer.device_model
            for i in gpu_profiler.iterations(5):
                with gpu_profiler.phase("forward"):
                    with gpu_profiler.op("conv2d"):
                        dev.kernel(100)
                    if i == 3:
                        raise RuntimeError("diverged")

        def test_next():
            assert not pytest_opprof.is_recording()
    """)
    result = pytester.runpytest("--opprof-verbosity=2")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: diverged*", "*OP_ID0. conv2d*"])
    assert not (pytester.path / ".opprof").exists()


def test_a_skipped_test_gets_no_verdict_and_no_baseline(pytester):
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile("""
        import pytest

        def test_skipped_midway(gpu_profiler):
            for i in gpu_profiler.iterations(5):
                with gpu_profiler.op("conv2d"):
                    gpu_profiler.timer.device_model.kernel(100)
                if i == 2:
                    pytest.skip("no data today")
    """)
    result = pytester.runpytest("--opprof-update-baseline")
    result.assert_outcomes(skipped=1)
    assert not (pytester.path / ".opprof").exists()
    result.stdout.fnmatch_lines(["*::test_skipped_midway: not gated"])


def test_the_package_never_turns_file_contents_into_code():
    """Loaders are json.loads plus validation: no pickle, YAML, eval, exec or imports
    of names taken from data anywhere in the package."""
    import re

    import pytest_opprof

    package = Path(pytest_opprof.__file__).parent
    forbidden = re.compile(r"\b(pickle|marshal|shelve|yaml|eval|exec|__import__|"
                           r"import_module|literal_eval)\b")
    found = [f"{path.name}:{n}: {line.strip()}"
             for path in sorted(package.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if forbidden.search(line.split("#")[0])]
    assert found == []


def test_every_test_docs_reliability_md_names_exists():
    """docs/reliability.md's rows name tests as FILE::NAME (or ::NAME, same file)."""
    import re

    tests = Path(__file__).parent
    doc = (tests.parent / "docs" / "reliability.md").read_text()
    named, current = [], None
    for file, name in re.findall(r"(test_\w+\.py)?::(test_\w+)", doc):
        current = file or current
        named.append((current, name))
    assert len(named) > 50
    missing = [f"{file}::{name}" for file, name in named
               if not re.search(rf"^\s*def {name}\(", (tests / file).read_text(), re.M)]
    assert missing == []


# ---- the store's files: special files, and the CLI's atomic update and provable prune ---

def _alarm(signum, frame):
    raise TimeoutError("the read blocked")


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "folder"])
def test_a_baseline_path_that_is_not_a_regular_file_is_one_line_and_never_blocks(tmp_path,
                                                                                kind):
    """Opened without blocking and refused: a FIFO would hang the session, /dev/zero
    would grow until MemoryError. The alarm turns a hang into a failure."""
    from pytest_opprof.commands.baseline import show

    store = BaselineStore(tmp_path, "m")
    path = store.path_for(TESTS[0])
    path.parent.mkdir(parents=True)
    {"fifo": lambda: os.mkfifo(path), "link to /dev/zero": lambda: path.symlink_to("/dev/zero"),
     "folder": path.mkdir}[kind]()
    what = {"fifo": "a FIFO", "link to /dev/zero": "a device", "folder": "a folder"}[kind]
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        with pytest.raises(BaselineError) as info:
            store.load(TESTS[0])
        assert str(info.value).startswith(f"{path}: cannot be read (is {what}, not a regular "
                                          "file)")
        if kind != "folder":  # a folder is not *.json-globbed as a file by show
            assert show(tmp_path, "m", None) == 1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


CLI_SUITE = """
import pytest

@pytest.mark.parametrize("k", range(2))
def test_op(gpu_profiler, k):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(4):
        with gpu_profiler.op("matmul"):
            dev.kernel(1000 * (k + 1))
"""


def _opprof(*args: str, cwd: Path, **kwargs):
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-m", "pytest_opprof.cli", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ctrl_c_as_from_a_terminal, **kwargs)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture
def cli_project(pytester):
    pytester.makepyfile(test_suite=CLI_SUITE)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    return pytester.path


@pytest.mark.e2e
def test_two_concurrent_updates_each_store_whole_batches(cli_project):
    """Both commands complete; every test keeps the 3 runs of one of them, never a mix
    (the runs go to a staging folder, committed under the store's lock)."""
    procs = [_opprof("baseline", "update", "--runs", "3", "-q", "-p", "no:cacheprovider",
                     cwd=cli_project) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    for out, _ in outputs:
        assert out.splitlines()[-1] == "opprof: baselines of 2 test(s) stored, from 3 run(s)"
    (store,) = BaselineStore.every_machine(cli_project / ".opprof")
    entries = [entry for _, entry in store.entries()]
    assert len(entries) == 2
    for baseline in entries:
        assert not isinstance(baseline, BaselineError)
        assert len(baseline.runs) == 3 and len({r.meta["date"] for r in baseline.runs}) >= 1
    assert [p.name for p in (cli_project / ".opprof").iterdir()] == [store.folder.name]


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_during_an_update_leaves_the_store_as_it_was(cli_project, sig):
    """SIGINT to the command and its pytest (a terminal's Ctrl-C), or SIGTERM (a CI job
    cancelled), in run 2 of 5: exit 130, one line, no traceback, every earlier baseline
    byte for byte, no staging left."""
    first = _opprof("baseline", "update", "--runs", "2", "-q", "-p", "no:cacheprovider",
                    cwd=cli_project)
    assert first.wait(300) == 0
    before = _snapshot(cli_project / ".opprof")
    assert len(before) == 2
    proc = _opprof("baseline", "update", "--runs", "5", "-q", "-p", "no:cacheprovider",
                   cwd=cli_project, start_new_session=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("opprof: baseline run 2 of 5"):
            os.killpg(proc.pid, sig)
            break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == "opprof: interrupted; nothing was stored or removed"
    assert "Traceback" not in err
    assert _snapshot(cli_project / ".opprof") == before


PRUNE_FILES = {"tests/test_a.py": "def test_x():\n    pass\n\ndef test_y():\n    pass\n",
               "tests/test_b.py": "def test_x():\n    pass\n\ndef test_y():\n    pass\n"}
STORED = ["tests/test_a.py::test_x", "tests/test_a.py::test_y", "tests/test_a.py::test_removed",
          "tests/test_b.py::test_x", "tests/test_b.py::test_y", "tests/test_gone.py::test_x"]


@pytest.mark.e2e
@pytest.mark.parametrize("cwd, args, removed", [
    # only test_a.py collected: test_b.py's baselines are live, merely not collected
    (".", ["--dir", "ci/baselines", "tests/test_a.py"],
     ["tests/test_a.py::test_removed", "tests/test_gone.py::test_x"]),
    # deselected by -k is not gone
    (".", ["--dir", "ci/baselines", "-k", "not test_y"],
     ["tests/test_a.py::test_removed", "tests/test_gone.py::test_x"]),
    # a node id narrows its file: what it leaves out is not proven gone
    (".", ["--dir", "ci/baselines", "tests/test_a.py::test_x"], ["tests/test_gone.py::test_x"]),
    # started in a sub folder: node ids are still relative to the rootdir
    ("tests", ["--dir", "../ci/baselines"],
     ["tests/test_a.py::test_removed", "tests/test_gone.py::test_x"]),
])
def test_prune_removes_only_what_it_can_prove_gone(pytester, cwd, args, removed):
    pytester.makeini("[pytest]\n")
    for name, text in PRUNE_FILES.items():
        (pytester.path / name).parent.mkdir(exist_ok=True)
        (pytester.path / name).write_text(text)
    store = BaselineStore(pytester.path / "ci/baselines", "m")
    for nodeid in STORED:
        store.record(nodeid, run_of(1), batch="b")
    proc = _opprof("baseline", "prune", *args, "--apply", "--machine-key", "m",
                   cwd=pytester.path / cwd)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (0, "")
    listed = [line.split("  [")[0].removeprefix("remove: ") for line in out.splitlines()
              if line.startswith("remove: ")]
    assert sorted(listed) == removed
    assert out.index("remove: ") < out.index("opprof: removed")  # listed, then removed
    kept = sorted(b.nodeid for _, b in store.entries())
    assert kept == sorted(set(STORED) - set(removed))


def _run_dict(n_ops: int, n_samples: int, n_wall: int, meta: dict) -> dict:
    sample = [1000 + k for k in range(n_samples)]
    return {"meta": {"measure": "time", "unit": "ns", **meta},
            "wall": sample[:1] * n_wall, "op_time": sample[:1] * n_wall,
            "phases": ["forward"],
            "ops": {"op_id": list(range(n_ops)), "name": [f"op{k}" for k in range(n_ops)],
                    "occurrence": [0] * n_ops, "depth": [0] * n_ops,
                    "phase": ["forward", None][: 1] * n_ops, "n": [n_samples] * n_ops,
                    "median": [None if not n_samples else 1000.0] * n_ops,
                    "samples": [sample] * n_ops}}


def _stored_file():
    """Baseline files of runs that differ: op counts, sample counts, wall lengths and
    meta fields vary run by run, with now and then a field replaced by any JSON value."""
    from hypothesis import strategies as st

    meta = st.fixed_dictionaries({}, optional={
        "probe_ns": st.none() | st.floats(allow_nan=True) | st.integers(),
        "date": st.sampled_from(["2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00",
                                 "yesterday"]),
        "skip": st.integers(-1, 3), "counted": st.integers(0, 5),
        "commit": st.none() | st.dictionaries(st.just("id"), st.text(max_size=5)),
        "conditions": st.none() | st.dictionaries(
            st.sampled_from(["workers", "measure", "OMP_NUM_THREADS"]),
            st.none() | st.integers(-2, 3) | st.text(max_size=5) | st.floats()) | st.integers()})
    run = st.builds(_run_dict, st.integers(0, 4), st.integers(0, 6), st.integers(0, 6), meta)
    odd = st.none() | st.integers() | st.floats() | st.text(max_size=5) | st.lists(
        st.integers(), max_size=3)
    return st.tuples(st.lists(run, min_size=0, max_size=4), st.none() | st.tuples(
        st.integers(0, 3), st.sampled_from(["wall", "phases", "meta", "ops"]), odd))


@pytest.mark.e2e
def test_whatever_the_loader_accepts_show_and_prune_take_without_a_traceback():
    """What the gate accepts, every command accepts: one loader for all, and for any
    file it accepts, show (the list and one test in full) and prune exit 0 or 1, and
    the gate's readings of it (samples, OP_IDs, probe, dates, profile) do not raise,
    warnings as errors (an overflow would be one)."""
    import contextlib
    import io
    import tempfile
    import warnings

    from hypothesis import HealthCheck, given, settings

    from pytest_opprof.commands.baseline import prune, show
    from pytest_opprof.store.baseline import SCHEMA, load_file

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_stored_file())
    def check(case):
        runs, change = case
        if change is not None and runs:
            runs[change[0] % len(runs)][change[1]] = change[2]
        data = {"schema": SCHEMA, "nodeid": "t.py::t", "machine": "m", "batch": "b",
                "runs": runs}
        with tempfile.TemporaryDirectory() as tmp:
            store = BaselineStore(Path(tmp, "base"), "m")
            store.folder.mkdir(parents=True)
            store.path_for("t.py::t").write_text(json.dumps(data))
            try:
                baseline = load_file(store.path_for("t.py::t"))
            except BaselineError:
                return
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                baseline.samples(), baseline.op_ids(), baseline.probe_ns()
                baseline.span_seconds(), baseline.to_profile(), baseline.conditions()
            with contextlib.redirect_stdout(io.StringIO()):
                assert show(store.root, None, None) == 0
                assert show(store.root, "m", "t.py::t") == 0
                assert prune(store.root, None, ["--rootdir", tmp, tmp], apply=False) == 0

    check()


@pytest.mark.e2e
def test_a_damaged_baseline_is_one_line_in_the_gate_and_update_mode_replaces_it(cli_project,
                                                                                 pytester):
    """A baseline cut short, and one left with git's merge-conflict markers: the gate
    fails each of their tests in one line naming the file (no INTERNALERROR), the file
    kept; update mode, the fix the line names, writes whole files over them."""
    assert pytester.runpytest("--opprof-update-baseline", "-p", "no:randomly").ret == 0
    paths = sorted((cli_project / ".opprof").rglob("*.json"))
    texts = [p.read_text() for p in paths]
    paths[0].write_text(texts[0][:len(texts[0]) // 2])
    paths[1].write_text(f"<<<<<<< HEAD\n{texts[1]}=======\n{texts[1]}>>>>>>> theirs\n")
    damaged = [p.read_bytes() for p in paths]
    gated = pytester.runpytest_subprocess("-W", "error", "-p", "no:randomly")
    assert gated.ret == 1 and "INTERNALERROR" not in gated.stdout.str()
    gated.stdout.fnmatch_lines([f"*{paths[0]}: not JSON (*); delete it, or rerun with "
                                "--opprof-update-baseline*",
                                f"*{paths[1]}: not JSON (*); delete it, or rerun with *"])
    assert [p.read_bytes() for p in paths] == damaged
    updated = pytester.runpytest_subprocess("-W", "error", "--opprof-update-baseline",
                                            "-p", "no:randomly")
    assert updated.ret == 0 and "INTERNALERROR" not in updated.stdout.str()
    (store,) = BaselineStore.every_machine(cli_project / ".opprof")
    assert all(not isinstance(entry, BaselineError) for _, entry in store.entries())


def test_a_file_where_the_baseline_folder_should_be_is_named_everywhere(cli_project, pytester):
    """The gate, update mode and the CLI name the file in the way, not a baseline file
    beneath it that does not exist."""
    (cli_project / ".opprof").write_text("")
    says = f"{cli_project / '.opprof'}: is a file where a baseline folder should be"
    for args in ([], ["--opprof-update-baseline"]):
        result = pytester.runpytest(*args, "-p", "no:randomly")
        assert result.ret == 1 and "INTERNALERROR" not in result.stdout.str()
        result.stdout.fnmatch_lines([f"*{says}*"])
    update = _opprof("baseline", "update", "--runs", "1", cwd=cli_project)
    out, err = update.communicate(timeout=120)
    assert update.returncode == 1 and err.startswith(f"opprof: {says}; move it away"), err
    assert "baseline run 1" not in out and (cli_project / ".opprof").read_text() == ""
