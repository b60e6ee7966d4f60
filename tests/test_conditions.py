"""Trustworthy drift and run conditions, as a user meets them: a baseline the run
cannot fairly be judged against makes the test *unjudged*, with one line saying why,
never a silent pass and never a false failure."""

from __future__ import annotations

import json

import pytest

from pytest_opprof.model.conditions import THREAD_VARIABLES, difference
from pytest_opprof.model.hints import Retake, workers_flags
from pytest_opprof.store.baseline import Baseline, BaselineRun, BaselineStore

from .fakes import SIX_OP_NET, batch, six_op_project, train_profile

OPS = SIX_OP_NET

NETWORK = "test_net.py::test_net"


@pytest.fixture
def suite(pytester, monkeypatch):
    """The fake backend's exact times, no thread variable set, no slowdown."""
    return six_op_project(pytester, monkeypatch)


def update(pytester, *args, runs=3, name="t"):
    """Baselines of ``runs`` runs (one batch): the rule judges a fake op from three."""
    with batch(name):
        for _ in range(runs):
            pytester.runpytest(*args, "--opprof-update-baseline").assert_outcomes(passed=1)


def stored(pytester, nodeid=NETWORK) -> tuple[dict, object]:
    """The baseline file of ``nodeid`` (the only machine's) as JSON, and its path."""
    (store,) = BaselineStore.every_machine(pytester.path / ".opprof")
    path = store.path_for(nodeid)
    return json.loads(path.read_text()), path


# ---- run conditions -----------------------------------------------------------------

def test_a_baseline_records_its_run_conditions(suite, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    suite.runpytest("--opprof-update-baseline").assert_outcomes(passed=1)
    data, _ = stored(suite)
    conditions = data["runs"][0]["meta"]["conditions"]
    assert conditions["workers"] == 1 and conditions["measure"] == "fake"
    assert "backend" not in conditions
    assert conditions["device"] == "fake CUDA device"
    assert conditions["OMP_NUM_THREADS"] == "1" and conditions["MKL_NUM_THREADS"] is None
    assert set(THREAD_VARIABLES) <= set(conditions)


def test_a_thread_setting_other_than_the_baselines_is_refused_in_one_line(suite, monkeypatch):
    """Baseline with OMP_NUM_THREADS=1, run with it unset and a real 3x slowdown: the
    old gate judged it (a fail here, a silent pass or a false failure on a real
    machine); now the test passes unjudged, with the difference and the fix."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    update(suite)
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setenv("SLOW", "relu:3")
    result = suite.runpytest("--opprof-json=r.json")
    result.assert_outcomes(passed=1)
    line = (f"{NETWORK}: unjudged; OMP_NUM_THREADS was 1 in the baseline, unset now: "
            "export OMP_NUM_THREADS=1, or re-take the baseline with `opprof baseline update "
            f"{NETWORK} --opprof-measure=fake`")
    result.stdout.fnmatch_lines([line, "opprof: 0 regressed, 0 improved, 6 unjudged, *"])
    assert result.stdout.str().count("OMP_NUM_THREADS was 1") == 1  # one line, no traceback
    test = json.loads((suite.path / "r.json").read_text())["tests"][0]
    assert test["verdict"] == "unjudged" and test["reason"].startswith("OMP_NUM_THREADS was 1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as the baseline had it: judged again
    result = suite.runpytest("--opprof-no-confirm")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*regressed: relu (OP_ID 2) +200.0%*"])


@pytest.mark.e2e
def test_a_serial_baseline_is_not_judged_under_xdist_and_one_taken_so_is(suite, monkeypatch):
    """What the README showed (a serial baseline, then ``pytest -n 2``) failed untouched
    ops on a real machine; now the line names the worker counts and the commands."""
    pytest.importorskip("xdist")
    update(suite, runs=1)
    monkeypatch.setenv("SLOW", "relu:3")
    result = suite.runpytest("-n", "2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        f"{NETWORK}: unjudged; the baseline was taken with 1 worker (serial), this run has "
        "2 xdist workers: run serially (-n 0), or re-take the baseline with "
        f"`opprof baseline update {NETWORK} -n 2 --opprof-measure=fake`"])
    monkeypatch.delenv("SLOW")
    update(suite, "-n", "2", name="t2")
    assert stored(suite)[0]["runs"][-1]["meta"]["conditions"]["workers"] == 2
    monkeypatch.setenv("SLOW", "relu:3")
    result = suite.runpytest("-n", "2", "--opprof-no-confirm")
    result.assert_outcomes(failed=1)  # same conditions: judged, and the slowdown caught
    result = suite.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"{NETWORK}: unjudged; the baseline was taken with 2 xdist "
                                 "workers, this run has 1 worker (serial): run with -n 2, or "
                                 "re-take the baseline with `opprof baseline update "
                                 f"{NETWORK} --opprof-measure=fake`"])


def test_a_baseline_without_conditions_is_judged_as_before(suite, monkeypatch):
    update(suite)
    data, path = stored(suite)
    for run in data["runs"]:
        del run["meta"]["conditions"]  # written before conditions were recorded
    path.write_text(json.dumps(data))
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setenv("SLOW", "relu:3")
    result = suite.runpytest("--opprof-no-confirm")
    result.assert_outcomes(failed=1)
    assert "unjudged;" not in result.stdout.str()


def test_appending_a_run_under_other_conditions_is_refused(suite, monkeypatch):
    """A history of mixed conditions judges no run fairly: the append is refused in
    one line and the stored runs stay as they were."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    suite.runpytest("--opprof-update-baseline").assert_outcomes(passed=1)
    before = stored(suite)[1].read_text()
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    result = suite.runpytest("--opprof-update-baseline=append")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        f"*opprof: {NETWORK}: this run is not appended to its baseline: OMP_NUM_THREADS was "
        "1 in the baseline, 8 now: export OMP_NUM_THREADS=1, or re-take the baseline with "
        f"`opprof baseline update {NETWORK} --opprof-measure=fake`"])
    assert "Traceback" not in result.stdout.str()
    assert stored(suite)[1].read_text() == before
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    suite.runpytest("--opprof-update-baseline=append").assert_outcomes(passed=1)
    assert len(stored(suite)[0]["runs"]) == 2


def test_baseline_show_prints_each_runs_conditions(suite, monkeypatch, capsys):
    from pytest_opprof.cli import main

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    suite.runpytest("--opprof-update-baseline").assert_outcomes(passed=1)
    capsys.readouterr()
    assert main(["baseline", "show", "test_net"]) == 0
    assert ("    conditions: serial, measure fake (fake CUDA device), "
            "OPENBLAS_NUM_THREADS=1, others unset") in capsys.readouterr().out.splitlines()


def retake_of(now: dict) -> Retake:
    """The run's own ``opprof baseline update``, as the session makes it for the run
    whose conditions are ``now`` (model/hints.py): its xdist workers and its measure."""
    workers = now.get("workers")
    return Retake((*workers_flags(workers if isinstance(workers, int) else None),
                   *([f"--opprof-measure={now['measure']}"] if "measure" in now else [])))


def test_difference_names_every_difference_and_one_fix_for_them_all():
    then = {"workers": 1, "measure": "time", "OMP_NUM_THREADS": None, "MKL_NUM_THREADS": "2"}

    def differs(then, now):
        return difference(then, now, retake_of(now))

    assert differs(then, dict(then)) is None
    assert differs(None, then) is None  # a baseline from before conditions
    assert differs({**then, "future": "x"}, then) is None  # unknown here: not compared
    assert differs({**then, "device": "EPYC"}, {**then, "device": "Xeon"}) is None
    now = {**then, "measure": "events", "OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": None}
    assert differs(then, now) == (  # the measure is not the shell's: only a re-take
        "the baseline's measure was time, this run's is events; OMP_NUM_THREADS was unset in the "
        "baseline, 4 now; MKL_NUM_THREADS was 2 in the baseline, unset now: re-take the "
        "baseline with `opprof baseline update --opprof-measure=events`")
    now = {**then, "workers": 3, "OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": None}
    assert differs(then, now) == (
        "the baseline was taken with 1 worker (serial), this run has 3 xdist workers; "
        "OMP_NUM_THREADS was unset in the baseline, 4 now; MKL_NUM_THREADS was 2 in the "
        "baseline, unset now: export MKL_NUM_THREADS=2 and unset OMP_NUM_THREADS and run "
        "serially (-n 0), or re-take the baseline with `opprof baseline update -n 3 "
        "--opprof-measure=time`")
    assert differs(then, {**then, "MKL_NUM_THREADS": None}) == (
        "MKL_NUM_THREADS was 2 in the baseline, unset now: export MKL_NUM_THREADS=2, or "
        "re-take the baseline with `opprof baseline update --opprof-measure=time`")
    assert differs({**then, "OMP_NUM_THREADS": None},
                   {**then, "OMP_NUM_THREADS": "\x1b[2J"}).startswith(
        "OMP_NUM_THREADS was unset in the baseline, \\x1b[2J now: unset OMP_NUM_THREADS")


@pytest.mark.parametrize("conditions, says", [
    ("serial", "meta conditions is not an object"),
    ({"workers": 1.5}, "meta conditions 'workers' is not a string, a whole number or null"),
])
def test_stored_conditions_are_checked_in_one_line(tmp_path, conditions, says):
    from pytest_opprof.store.baseline import BaselineError

    store = BaselineStore(tmp_path, "m")
    store.record("t.py::t", BaselineRun.from_profile(train_profile(), {}), "b")
    path = store.path_for("t.py::t")
    data = json.loads(path.read_text())
    data["runs"][0]["meta"]["conditions"] = conditions
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError) as info:
        store.load("t.py::t")
    assert str(info.value).startswith(f"{path}: malformed baseline (") and says in str(info.value)


# ---- absurd drift -------------------------------------------------------------------

ONE_OP = """
import numpy as np


def test_one(gpu_profiler):
    a = np.arange(20_000, dtype=np.float64)
    for _ in gpu_profiler.iterations(12):
        with gpu_profiler.op("exp"):
            np.exp(a / 20_000)
"""


@pytest.mark.parametrize("scale, factor", [(1e-3, "slower"), (1e3, "faster")])
def test_an_absurd_probe_drift_leaves_a_few_op_test_unjudged(pytester, scale, factor):
    """A one-op test takes its drift from the reference probe. A stored probe 1000x
    off (as one call that met unpinned BLAS threads was) made drift +99,900%: the op
    looked 1000x faster and the test passed silently, or 1000x slower and it failed.
    Now it is unjudged, in one line with the figure and the fix, and not re-run."""
    pytester.makepyfile(test_one=ONE_OP)
    pytester.runpytest("--opprof-measure=time", "--opprof-update-baseline").assert_outcomes(
        passed=1)
    data, path = stored(pytester, "test_one.py::test_one")
    data["runs"][0]["meta"]["probe_ns"] *= scale
    path.write_text(json.dumps(data))
    result = pytester.runpytest("--opprof-measure=time", "--opprof-json=r.json",
                                "--opprof-markdown=r.md", "--opprof-html=r.html")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        f"test_one.py::test_one: unjudged; drift *: the machine measured * {factor} than at "
        "the baseline (the reference probe), beyond the 3x a drift correction is trusted "
        "with; find what changed (BLAS threads not pinned, another load, another device) "
        "and re-take the baseline with `opprof baseline update test_one.py::test_one "
        "--opprof-measure=time`"])
    assert "re-running" not in out and "0 regressed, 0 improved, 1 unjudged" in out
    test = json.loads((pytester.path / "r.json").read_text())["tests"][0]
    assert test["verdict"] == "unjudged" and test["drift_source"] == "probe"
    assert [op["verdict"] for op in test["ops"]] == ["unjudged"]
    assert "| unjudged: `` drift " in (pytester.path / "r.md").read_text()
    assert "unjudged</span> (drift " in (pytester.path / "r.html").read_text()


def test_an_absurd_drift_of_the_ops_leaves_the_test_unjudged(suite, monkeypatch):
    """The machine 4x slower (its probe too): drift-corrected, nothing moved, and the old
    gate passed."""
    suite.runpytest("--opprof-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("OPPROF_FAKE_MACHINE", "4")
    result = suite.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"{NETWORK}: unjudged; drift +300.0%: the machine measured "
                                 "4x slower than at the baseline (the median of its ops)*"])


def test_a_drift_within_bounds_is_still_corrected():
    from pytest_opprof.judge.gate import drift_problem
    from pytest_opprof.model.verdict import Comparison

    for drift, source in ((2.9, "probe"), (1 / 2.9, "ops"), (1000.0, "none")):
        assert drift_problem(Comparison((), drift, source, 1), None, Retake()) is None
    for drift in (3.1, 1 / 3.1, float("nan")):
        assert drift_problem(Comparison((), drift, "probe", 1), None, Retake()) is not None


# ---- the probe ----------------------------------------------------------------------

def test_the_probe_is_the_median_of_rounds_spread_out(monkeypatch):
    """One round that meets a busy machine (16 ms for a 30 us probe) moves nothing."""
    import numpy as np

    from pytest_opprof.measure import probe

    rounds = iter([16e6, 30e3, 31e3, 29e3, 30e3])
    slept = []
    monkeypatch.setattr(probe, "_round", lambda xp: next(rounds))
    monkeypatch.setattr(probe.time, "sleep", slept.append)
    assert probe.reference_probe(np) == 30e3
    assert slept == [probe.GAP_S] * (probe.ROUNDS - 1)


def test_the_baselines_probe_is_the_median_of_its_runs():
    conditions = {"workers": 1, "measure": "time"}
    runs = [BaselineRun.from_profile(train_profile(), {"probe_ns": p, "conditions": conditions})
            for p in (30e3, 16e6, 31e3, None)]
    assert Baseline("t.py::t", "m", runs).probe_ns() == 31e3


def test_probe_readings_of_runs_older_than_the_current_probe_are_not_used():
    """Runs written before run conditions were recorded timed the old probe (96x96):
    its readings are ~30% off today's, a false drift for every few-op test."""
    old = [BaselineRun.from_profile(train_profile(), {"probe_ns": 64.6e3}) for _ in range(3)]
    assert Baseline("t.py::t", "m", old).probe_ns() is None
