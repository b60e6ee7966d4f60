"""The baseline store: names, round trips, batches, bad files, atomic and concurrent writes."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from pytest_opprof.store.baseline import (
    MAX_RUNS,
    SCHEMA,
    Baseline,
    BaselineError,
    BaselineRun,
    BaselineStore,
    safe_name,
)

from .fakes import batch, train_profile

NODEID = "tests/test_x.py::test_x"


def run_of(profile=None, **meta):
    return BaselineRun.from_profile(profile or train_profile(), {"date": "d", **meta})


@pytest.mark.parametrize("nodeid", [
    "a/b.py::test[../../etc/passwd]", "t.py::test[ü/ü]", "x.py::test[" + "n" * 500 + "]",
    "..", "/", "t.py::Test::test[a b]",
])
def test_file_names_stay_inside_the_machine_folder(tmp_path, nodeid):
    store = BaselineStore(tmp_path, "cpu/../../x")
    path = store.path_for(nodeid)
    assert path.parent == store.folder and store.folder.parent == tmp_path
    assert len(path.name) < 160 and "/" not in path.name
    store.record(nodeid, run_of(), "b")
    assert store.load(nodeid).nodeid == nodeid


def test_distinct_tests_never_share_a_file():
    names = {safe_name(n, always_hash=True) for n in
             ["t.py::a[1/2]", "t.py::a[1_2]", "t.py::a[1-2]", "t.py::a[1 2]"]}
    assert len(names) == 4
    assert safe_name("ci-gpu-a100") == "ci-gpu-a100"  # a safe machine key reads as itself


def test_round_trip_keeps_samples_summaries_and_metadata(tmp_path):
    store = BaselineStore(tmp_path, "m")
    store.record(NODEID, run_of(commit={"id": "abc"}), "batch1")
    baseline = store.load(NODEID)
    assert baseline.machine == "m" and len(baseline.runs) == 1
    ops = baseline.runs[0].ops
    assert (ops["name"][0], ops["n"][0], ops["samples"][0], ops["median"][0]) == (
        "conv2d", 3, [1000, 1000, 1000], 1000.0)
    assert baseline.runs[0].meta["counted"] == 3 and baseline.runs[0].meta["skip"] == 1
    assert baseline.samples()[("relu", 0)][0].tolist() == [250.0, 250.0, 250.0]
    assert baseline.op_ids()[("conv2d_grad", 0)] == 3


def test_files_are_versioned_json_with_sorted_keys_and_one_line_per_run(tmp_path):
    store = BaselineStore(tmp_path, "m")
    for _ in range(3):
        path = store.record(NODEID, run_of(), "b")
    text = path.read_text()
    data = json.loads(text)
    assert data["schema"] == SCHEMA and len(data["runs"]) == 3
    lines = text.splitlines()
    assert len(lines) == 1 + 3 + 1
    assert [json.loads(line.rstrip(",")) for line in lines[1:-1]] == data["runs"]
    assert lines[1] == json.dumps(data["runs"][0], sort_keys=True, separators=(",", ":")) + ","


def test_same_batch_appends_a_new_batch_replaces(tmp_path):
    store = BaselineStore(tmp_path, "m")
    for _ in range(MAX_RUNS + 2):
        store.record(NODEID, run_of(), "one")
    assert len(store.load(NODEID).runs) == MAX_RUNS
    store.record(NODEID, run_of(), "two")
    assert len(store.load(NODEID).runs) == 1


def test_append_grows_a_history_across_batches(tmp_path):
    store = BaselineStore(tmp_path, "m")
    store.record(NODEID, run_of(), "one")
    store.record(NODEID, run_of(), "two", append=True)
    store.record(NODEID, run_of(), "", append=True)
    baseline = store.load(NODEID)
    assert len(baseline.runs) == 3 and baseline.batch == "one"


def _at(commit: str, dirty: bool = False) -> dict:
    return {"commit": {"id": commit, "dirty": dirty}}


def test_the_gate_judges_against_the_runs_of_one_code(tmp_path):
    """A history appended onto the gate's runs (one machine key for both) measured other
    code at other commits: pooled, an op's step between them reads as its spread and
    its margin widens until the step passes. The gate's reference is the last update's
    runs and those appended at its clean commit; appended runs are marked as such."""
    store = BaselineStore(tmp_path, "m")
    for _ in range(3):
        store.record(NODEID, run_of(**_at("a" * 40)), "update")
    store.record(NODEID, run_of(**_at("a" * 40)), "", append=True)   # same code: kept
    store.record(NODEID, run_of(**_at("b" * 40)), "", append=True)   # the next commit
    store.record(NODEID, run_of(**_at("a" * 40, dirty=True)), "", append=True)  # edited
    baseline = store.load(NODEID)
    assert [bool(r.meta.get("appended")) for r in baseline.runs] == [False] * 3 + [True] * 3
    reference = baseline.reference()
    assert reference.runs == baseline.runs[:4]
    assert (reference.nodeid, reference.machine, reference.batch) == (NODEID, "m", "update")


@pytest.mark.parametrize(("commits", "kept"), [
    (["a", "b", "c", "c"], 2),              # the newest commit's runs
    (["a", "b", None], 1),                  # the newest run's code is unknown: itself
    (["unversioned"] * 3, 1),               # no version control: no code known
])
def test_a_history_alone_is_judged_against_its_newest_commits_runs(tmp_path, commits, kept):
    store = BaselineStore(tmp_path, "m")
    for commit in commits:
        meta = _at(commit * 40 if len(commit) == 1 else commit) if commit else {}
        store.record(NODEID, run_of(**meta), "", append=True)
    baseline = store.load(NODEID)
    assert baseline.reference().runs == baseline.runs[-kept:]


def test_runs_without_a_mark_are_one_update_as_before(tmp_path):
    """Runs stored before the mark existed, or by updates alone, are all the reference."""
    store = BaselineStore(tmp_path, "m")
    for commit in "abc":
        store.record(NODEID, run_of(**_at(commit * 40)), "one")
    baseline = store.load(NODEID)
    assert len(baseline.reference().runs) == 3


def test_no_file_means_no_baseline(tmp_path):
    assert BaselineStore(tmp_path, "m").load(NODEID) is None


@pytest.mark.parametrize(("content", "message"), [
    ("", ": empty; delete it"),
    ("{not json", "not JSON"),
    ("[1, 2]", "not a baseline"),
    ('{"schema": "pytest-opprof/baseline/99"}', "schema 'pytest-opprof/baseline/99' is not"),
    ('{"schema": "pytest-opprof/baseline/1", "nodeid": "x"}',
     "schema 'pytest-opprof/baseline/1' is not 'pytest-opprof/baseline/3'"),
    (f'{{"schema": "{SCHEMA}", "nodeid": "x"}}', "malformed baseline"),
    (f'{{"schema": "{SCHEMA}", "nodeid": "x", "machine": "m", "runs": [{{"ops": []}}]}}',
     "ops is not an object of columns"),
    (f'{{"schema": "{SCHEMA}", "nodeid": "x", "machine": "m", "runs": [{{"ops": '
     '{"name": [], "op_id": [1]}}]}', "malformed baseline (KeyError"),
])
def test_bad_files_raise_an_error_naming_the_file_and_what_to_do(tmp_path, content, message):
    store = BaselineStore(tmp_path, "m")
    path = store.path_for(NODEID)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(BaselineError) as info:
        store.load(NODEID)
    assert str(path) in str(info.value) and message in str(info.value)
    assert "--opprof-update-baseline" in str(info.value)
    assert path.read_text() == content  # never rewritten by a read


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-5", "true", '"12"', "1e30"])
def test_non_finite_or_negative_times_are_rejected(tmp_path, bad):
    store = BaselineStore(tmp_path, "m")
    path = store.record(NODEID, run_of(), "b")
    data = json.loads(path.read_text())
    text = json.dumps(data).replace('"samples": [[1000', f'"samples": [[{bad}', 1)
    assert text != json.dumps(data)
    path.write_text(text)
    with pytest.raises(BaselineError, match="samples of 'conv2d'"):
        store.load(NODEID)


def _stored_text(tmp_path, change) -> tuple[BaselineStore, Path]:
    """A stored baseline whose JSON data ``change(data)`` altered in place."""
    store = BaselineStore(tmp_path, "m")
    path = store.record(NODEID, run_of(), "b")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return store, path


def _set(path: str, value):
    """A change that sets one field: ``"runs.0.meta.probe_ns"``."""
    def change(data):
        *parents, last = path.split(".")
        for key in parents:
            data = data[int(key)] if isinstance(data, list) else data[key]
        data[int(last) if isinstance(data, list) else last] = value
    return change


@pytest.mark.parametrize("field, value, says", [
    ("runs.0.meta.probe_ns", 1e308, "meta probe_ns is 1e+308"),
    ("runs.0.meta.probe_ns", -1.0, "meta probe_ns is -1.0"),
    ("runs.0.meta.probe_ns", "fast", "meta probe_ns is 'fast'"),
    ("runs.0.meta.skip", 1.5, "meta skip is 1.5"),
    ("runs.0.meta.date", 5, "meta date is not a string"),
    ("runs.0.meta.outlying_ops", "relu", "meta outlying_ops is not a list of op names"),
    ("runs.0.meta.appended", "yes", "meta appended is not true or false"),
    ("runs.0.meta.outlying_ops", [1], "meta outlying_ops is not a list of op names"),
    ("runs.0.ops.op_id.0", -1, "op_id -1 is not a whole number"),
    ("runs.0.ops.depth.0", -1, "depth -1 is not a whole number"),
    ("runs.0.ops.median.0", 1e16, "median holds 1e+16"),
    ("runs.0.wall.0", 10**15, "wall holds 1000000000000000"),
    ("runs.0.ops.name.0", "", "an op name is empty"),
    ("runs.0.phases", "forward", "phases is not a list"),
])
def test_every_number_and_field_is_range_checked_with_one_line(tmp_path, field, value, says):
    """probe_ns = 1e308 would overflow the mean of the probes (INTERNALERROR under
    -W error); each field the plugin reads is refused out of range, in one line."""
    store, path = _stored_text(tmp_path, _set(field, value))
    with pytest.raises(BaselineError) as info:
        store.load(NODEID)
    message = str(info.value)
    assert message.startswith(f"{path}: malformed baseline (") and says in message
    assert "\n" not in message and message.endswith("to write a new one")


def test_the_writer_keeps_within_what_a_reader_reads(tmp_path, monkeypatch):
    """Appends drop the oldest runs to stay within the one bound on what is read; a run
    alone beyond it is refused in one line, nothing written."""
    from pytest_opprof.model import jsontext

    store = BaselineStore(tmp_path, "m")
    one_run = store.record(NODEID, run_of(tag=0), "b", append=True).stat().st_size
    monkeypatch.setattr(jsontext, "MAX_BYTES", int(one_run * 2.5))  # room for two runs
    for k in range(1, 5):
        path = store.record(NODEID, run_of(tag=k), "b", append=True)
        assert path.stat().st_size <= jsontext.MAX_BYTES
    assert [r.meta["tag"] for r in store.load(NODEID).runs] == [3, 4]
    monkeypatch.setattr(jsontext, "MAX_BYTES", one_run // 2)
    with pytest.raises(BaselineError, match=r"t\.py::x: this run cannot be stored: it is "):
        store.record("t.py::x", run_of(), "b")
    assert not store.path_for("t.py::x").exists()


def test_a_file_holding_another_tests_baseline_is_refused(tmp_path):
    store = BaselineStore(tmp_path, "m")
    store.record("t.py::other", run_of(), "b")
    store.path_for("t.py::other").rename(store.path_for(NODEID))
    with pytest.raises(BaselineError, match=r"holds the baseline of 't\.py::other'"):
        store.load(NODEID)


def test_an_update_replaces_a_broken_file(tmp_path):
    store = BaselineStore(tmp_path, "m")
    path = store.path_for(NODEID)
    path.parent.mkdir(parents=True)
    path.write_text("garbage")
    store.record(NODEID, run_of(), "b")
    assert store.load(NODEID) is not None


def test_writes_leave_no_temporary_files(tmp_path):
    store = BaselineStore(tmp_path, "m")
    for _ in range(3):
        store.record(NODEID, run_of(), "b")
    assert [p.name for p in store.folder.iterdir()] == [store.path_for(NODEID).name]


@pytest.mark.parametrize("obstacle", ["base", "base/m"])
def test_a_baseline_folder_that_is_a_file_is_one_clear_error(tmp_path, obstacle):
    """A plain file where the baseline folder or the machine folder should be is named
    (not the baseline file beneath it, which does not exist), on reads and on writes."""
    (tmp_path / obstacle).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / obstacle).write_text("")
    store = BaselineStore(tmp_path / "base", "m")
    expected = (f"{tmp_path / obstacle}: is a file where a baseline folder should be; "
                "move it away, or choose another folder with --opprof-baseline-dir")
    for use in (lambda: store.load(NODEID), lambda: store.record(NODEID, run_of(), "b")):
        with pytest.raises(BaselineError) as info:
            use()
        assert str(info.value).startswith(expected)
    assert (tmp_path / obstacle).read_text() == ""


def test_to_profile_shows_the_latest_run(tmp_path):
    store = BaselineStore(tmp_path, "m")
    store.record(NODEID, run_of(), "b")
    profile = store.load(NODEID).to_profile()
    assert [o.name for o in profile.ops] == ["conv2d", "relu", "relu_grad", "conv2d_grad"]
    assert profile.counted == 3 and profile.samples[:, 0].tolist() == [1000.0] * 3


def _record_many(args):
    root, worker = args
    store = BaselineStore(Path(root), "m")
    for i in range(5):
        store.record(f"t.py::test_{worker}_{i}", run_of(), "batch")
        store.record("t.py::shared", run_of(), "batch")


@pytest.mark.pytester
def test_concurrent_writers_lose_nothing(tmp_path):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_record_many, [(str(tmp_path), w) for w in range(4)])
    store = BaselineStore(tmp_path, "m")
    loaded = dict(store.entries())
    assert all(not isinstance(v, BaselineError) for v in loaded.values())
    assert len(loaded) == 4 * 5 + 1
    assert len(store.load("t.py::shared").runs) == 4 * 5  # every append kept (MAX_RUNS 20)


def test_a_baseline_that_cannot_be_written_is_one_clear_error(tmp_path, monkeypatch):
    import pytest_opprof.store.baseline as module

    store = BaselineStore(tmp_path, "m")
    store.record(NODEID, run_of(), "b")

    def read_only(files):
        raise PermissionError(13, "Permission denied", str(files[0][0]))

    monkeypatch.setattr(module, "replace_all", read_only)
    with pytest.raises(BaselineError, match=r"cannot write the baseline \(Permission denied\); "
                       r"make the folder writable.*--opprof-baseline-dir"):
        store.record(NODEID, run_of(), "c")
    assert store.load(NODEID).batch == "b"  # the old file is intact


def test_bounded_reads_return_the_whole_file_up_to_the_limit_and_refuse_more(tmp_path):
    """Every size around the limit and the read step: whole, or FileTooLarge."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from pytest_opprof.store.files import FileTooLarge, read_bounded

    path = tmp_path / "f"

    @settings(max_examples=60, deadline=None)
    @given(st.integers(0, 3 << 20), st.integers(0, 3 << 20))
    def check(size, limit):
        data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        path.write_bytes(data)
        if size <= limit:
            assert read_bounded(path, limit) == data
        else:
            with pytest.raises(FileTooLarge):
                read_bounded(path, limit)

    check()


def test_a_run_whose_op_times_outnumber_its_samples_becomes_a_profile():
    """A file the loader accepts may hold more op-time entries than samples or wall
    times (found by hypothesis in test_reliability): it is still read as a profile."""
    run = BaselineRun.from_profile(train_profile(), {})
    run.ops = {key: [] for key in run.ops}
    run.wall, run.op_time = [], [1000, 1000]
    profile = Baseline("t.py::t", "m", [run]).to_profile()
    assert profile.op_time.tolist() == [1000.0, 1000.0] and len(profile.wall) == 2


# -- a baseline written before measures were objects (schema 2) ---------------------------

def as_schema_2(data: dict, backend: str, measure: str) -> dict:
    """A baseline as pytest-opprof wrote it before its schema 3: ``*_ns`` columns, and each
    run's backend (meta) and measure (conditions) in place of the one measure's name."""
    runs = []
    for run in data["runs"]:
        meta = {k: v for k, v in run["meta"].items() if k not in ("measure", "unit")}
        conditions = {k: v for k, v in meta["conditions"].items() if k != "measure"}
        ops = {{"median": "median_ns", "samples": "samples_ns"}.get(k, k): v
               for k, v in run["ops"].items()}
        runs.append({"meta": {**meta, "backend": backend,
                              "conditions": {**conditions, "backend": backend,
                                             "measure": measure}},
                     "ops": ops, "wall_ns": run["wall"], "op_time_ns": run["op_time"],
                     "phases": run["phases"]})
    return {**data, "schema": "pytest-opprof/baseline/2", "runs": runs}


CPU_TEST = """
def test_cpu(gpu_profiler):
    for _ in gpu_profiler.iterations(12):
        for name in ("parse", "sum", "sort"):
            with gpu_profiler.op(name):
                sorted(range(2000, 0, -1))
"""


def test_a_baseline_of_schema_2_still_gates_and_is_written_as_schema_3(pytester):
    pytester.makepyfile(test_cpu=CPU_TEST)
    with batch("b"):
        for _ in range(2):
            pytester.runpytest("--opprof-measure=time",
                               "--opprof-update-baseline").assert_outcomes(passed=1)
    (path,) = (pytester.path / ".opprof").rglob("*.json")
    assert path.parent.name.startswith("cpu-")  # the machine key of the backend cpu
    path.write_text(json.dumps(as_schema_2(json.loads(path.read_text()), "cpu", "events")))

    result = pytester.runpytest("--opprof-measure=time")
    # judged against it (a busy machine may fail it, not refuse it)
    result.stdout.fnmatch_lines(["test_cpu.py::test_cpu: *; 3 ops compared, drift *"])
    loaded = BaselineStore(path.parent.parent, path.parent.name).load("test_cpu.py::test_cpu")
    assert (loaded.measure(), loaded.conditions()["measure"]) == ("time", "time")
    assert "backend" not in loaded.conditions() and "backend" not in loaded.runs[0].meta

    pytester.runpytest("--opprof-measure=time", "--opprof-update-baseline=append").assert_outcomes(
        passed=1)
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA == "pytest-opprof/baseline/3"
    assert [run["meta"]["measure"] for run in data["runs"]] == ["time"] * 3
    assert all("samples" in run["ops"] and "wall" in run for run in data["runs"])


def test_schema_2_names_the_measure_its_backend_and_measure_stand_for():
    from pytest_opprof.measure.measures import former
    from pytest_opprof.model.baseline import update_to_3

    run = {"meta": {"backend": "fake", "conditions": {"backend": "fake", "measure": "kernel",
                                                       "workers": 1}},
           "ops": {"median_ns": [1.0], "samples_ns": [[1]]}, "wall_ns": [2], "op_time_ns": [1]}
    (updated,) = update_to_3({"schema": "pytest-opprof/baseline/2", "runs": [run]},
                             former)["runs"]
    assert updated["meta"] == {"measure": "fake-kernel", "unit": "ns",
                               "conditions": {"measure": "fake-kernel", "workers": 1}}
    assert (updated["ops"], updated["wall"], updated["op_time"]) == (
        {"median": [1.0], "samples": [[1]]}, [2], [1])
    no_conditions = {**run, "meta": {"backend": "cpu"}}  # older still: no conditions
    (updated,) = update_to_3({"runs": [no_conditions, "not a run"]}, former)["runs"][:1]
    assert updated["meta"] == {"measure": "time", "unit": "ns"}
