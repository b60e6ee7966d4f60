"""The measurement harness of benchmarks/: the many-op suite's injected work, the peers'
rules, and gate_runs.py driven as a user runs it (one baseline, one gated run, the
tables and the fit read back from its folder)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import gate_runs
from benchmarks.manyop.ops import NAMES, SLOW_ENV, Spec, _calls
from benchmarks.peer_rules import asv_flags, pytest_benchmark_fails
from example_suite.workloads import parse_slowdowns

ROOT = Path(__file__).resolve().parents[1]


def test_the_manyop_suite_has_forty_distinct_ops_or_more():
    assert len(NAMES) >= 40
    assert len(set(NAMES)) == len(NAMES)


def test_extra_work_is_whole_calls_then_a_share_of_the_rows():
    a, b = np.ones((8, 3)), np.ones((3, 3))
    four = Spec("op", lambda rng: (a,), lambda x: x, reps=4)
    assert len(_calls(four, (a,), 0.0)) == 4
    assert [c[0].shape[0] for c in _calls(four, (a,), 0.25)] == [8] * 5  # x1.25: one call more
    one = Spec("matmul", lambda rng: (a, b), lambda x, y: x @ y, sliced=1)
    calls = _calls(one, (a, b), 0.5)  # x1.5: half of the rows again, the right side whole
    assert [(x.shape, y.shape) for x, y in calls] == [((8, 3), (3, 3)), ((4, 3), (3, 3))]


def test_a_bad_manyop_variable_names_the_variable_and_the_ops():
    with pytest.raises(ValueError, match=rf"^{SLOW_ENV}='nope:2': 'nope:2' must be OP:FACTOR "
                                         r"with OP one of add_tiny, .* e\.g\. "):
        parse_slowdowns("nope:2", env=SLOW_ENV, allowed=NAMES)
    assert parse_slowdowns(f"{NAMES[-1]}:1.5", env=SLOW_ENV, allowed=NAMES) == {NAMES[-1]: 0.5}


@pytest.mark.pytester
def test_a_bad_manyop_variable_is_one_usage_error_before_any_test():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks/manyop", "-q", "-p", "no:cacheprovider",
         "--opprof-measure=fake"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, SLOW_ENV: "matmul_64:0.5"})
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {SLOW_ENV}='matmul_64:0.5': 'matmul_64:0.5' must be" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_pytest_benchmark_fails_a_test_whose_mean_grew_by_more_than_5_percent():
    base = np.full(20, 100.0)
    assert pytest_benchmark_fails(np.full(20, 106.0), base)
    assert not pytest_benchmark_fails(np.full(20, 104.0), base)


def test_asv_flags_an_op_only_when_significant_and_over_its_factor():
    rng = np.random.default_rng(0)
    base = {k: 1000 + rng.normal(0, 5, 30) for k in ("slow", "small", "same")}
    current = {"slow": base["slow"] * 1.2 + rng.normal(0, 5, 30),
               "small": base["small"] * 1.05, "same": 1000 + rng.normal(0, 5, 30)}
    assert asv_flags(current, base) == {"slow"}
    # three samples a side cannot reach p < 0.002: asv does not call it different
    assert asv_flags({"slow": np.array([2.0, 2.1, 2.2])},
                     {"slow": np.array([1.0, 1.1, 1.2])}) == set()


def test_gated_runs_need_a_baseline_first(tmp_path, capsys):
    assert gate_runs.main(["aa", "--dir", str(tmp_path / "d"), "--runs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gate_runs.py: ") and "take one first" in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "d").exists()


def test_a_relative_folder_is_where_the_command_runs(tmp_path, monkeypatch):
    """The runs start in the repository root: every path they get is absolute."""
    monkeypatch.chdir(tmp_path)
    store = gate_runs.Store(Path("d"))
    assert (store.folder, store.baselines, store.runs) == (
        tmp_path / "d", tmp_path / "d" / "baselines", tmp_path / "d" / "runs")


def test_unknown_ops_to_inject_are_refused_before_any_run(tmp_path, capsys):
    gate_runs.Store(tmp_path).write_setup({"suite": "manyop", "runs": 1, "plain": True,
                                           "xdist": 0, "commit": "abc"})
    assert gate_runs.main(["inject", "--dir", str(tmp_path), "--only", "matmul_64,nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gate_runs.py: --only nope: not an op {SLOW_ENV} can slow; "
                          "choose from add_tiny, ")
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_bad_factors_are_one_usage_line(capsys):
    with pytest.raises(SystemExit) as exc:
        gate_runs.main(["inject", "--dir", "d", "--factors", "0.5,x"])
    assert exc.value.code == 2
    assert "--factors '0.5,x': give factors above 1" in capsys.readouterr().err


def _outcome(medians: dict[str, float], regressed: list[str], slow: str | None = None,
             peers: dict | None = None, evidence: dict | None = None) -> dict:
    return {"exit": 1 if regressed else 0, "seconds": 1.0, "xdist": 0, "slow": slow,
            "tests": [{"nodeid": "t.py::test", "verdict": "failed" if regressed else "passed",
                       "counted": 20, "drift": 1.0, "drift_source": "ops",
                       "baseline_runs": 5, "current_runs": 1, "regressed": regressed,
                       "unjudged": [], "unconfirmed": [], "baseline": evidence or {},
                       "median_ns": medians,
                       "log_median_se": {k: 0.001 for k in medians},
                       "peers": peers or {"pytest_benchmark_ratio": 1.0,
                                          "pytest_benchmark_failed": False, "asv": []}}]}


def test_fit_and_rates_read_the_recorded_outcomes(tmp_path, capsys):
    store = gate_runs.Store(tmp_path)
    store.write_setup({"suite": "manyop", "runs": 5, "plain": False, "xdist": 0,
                       "commit": "abc"})
    rng = np.random.default_rng(1)
    ops = {f"op{i}#0": 1e3 * 2 ** i for i in range(8)}  # 1 us to 128 us
    for run in range(6):  # op7 moves 10% between processes, the others 1%
        drift = 1 + 0.05 * run  # a machine-wide factor: taken out
        medians = {k: v * drift * np.exp(rng.normal(0, 0.10 if k == "op7#0" else 0.01))
                   for k, v in ops.items()}
        store.record(f"aa-n0-{run:03d}", _outcome(medians, ["op3#0"] if run == 0 else []))
    evidence = {"median_ns": 32e3, "corrected_ratio": 1.46, "detectable": 0.2}
    store.record("inject-n0-op5-1.5-1", _outcome(ops, ["op5#0"], "op5:1.5",
                                                 evidence={"op5#0": evidence}))
    store.record("inject-n0-op6-1.5-1", _outcome(ops, ["op6#0", "op1#0"], "op6:1.5",
                                                 {"pytest_benchmark_ratio": 1.06,
                                                  "pytest_benchmark_failed": True,
                                                  "asv": ["op6#0"]},
                                                 {"op6#0": {**evidence, "corrected_ratio": 1.5,
                                                            "detectable": 0.3}}))

    noise = gate_runs.fitted_noise(store)
    tau = {o["op"]: o["tau"] for o in noise["ops"]}
    assert 0.04 < tau["op7#0"] < 0.25
    assert max(t for k, t in tau.items() if k != "op7#0") < 0.03
    assert noise["machine"] == pytest.approx(np.std(np.log(1 + 0.05 * np.arange(6)), ddof=1),
                                             rel=0.2)

    rates = gate_runs.real_rates(store)["t.py::test"]
    assert rates["opprof"] == {1.0: [1, 6], 1.5: [1, 2]}  # op6 was caught with op1: not exact
    assert rates["pytest-benchmark"] == {1.0: [0, 6], 1.5: [1, 2]}
    assert rates["asv"] == {1.0: [0, 6], 1.5: [1, 2]}

    assert gate_runs.main(["tables", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| serial | 6 | 1 / 6 | op3#0 x1 | 0 / 6 | 0 | 1.000 to 1.000 | - | 0 / 6 | 0 / 6 |" \
        in out
    assert "| x1.5 | 2 | 2 | 1.480 | +25.0% | 1 / 2 | 2 / 2 | 1 / 2 | 1 / 2 | 1 / 2 | 1 / 2 |" \
        in out
    assert "| op5 | 32 us | x1.5 | 1.460 | +20.0% | caught | - |" in out


@pytest.mark.e2e
def test_a_baseline_and_a_gated_run_end_to_end(tmp_path, capsys):
    """As a user runs it, on the many-op suite: the quick-path baseline, one A/A run,
    its outcome read from the results JSON, and the tables."""
    folder = tmp_path / "d"
    assert gate_runs.main(["baseline", "--dir", str(folder), "--plain"]) == 0
    assert gate_runs.main(["baseline", "--dir", str(folder), "--plain"]) == 2  # not twice
    assert gate_runs.main(["aa", "--dir", str(folder), "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "| A/A runs | runs | opprof: runs failed |" in out
    (outcome,) = json.loads((folder / "outcomes.json").read_text()).values()
    (test,) = outcome["tests"]
    assert test["nodeid"] == "benchmarks/manyop/test_manyop.py::test_manyop"
    assert test["baseline_runs"] == 1 and len(test["median_ns"]) == len(NAMES)
    assert set(test["peers"]) == {"pytest_benchmark_ratio", "pytest_benchmark_failed", "asv"}
    setup = json.loads((folder / "setup.json").read_text())
    assert setup["command"].startswith("python -m pytest --opprof-update-baseline=replace "
                                       "benchmarks/manyop")

    # a run that finds no baseline is not a pass: one line, and nothing recorded
    shutil.rmtree(folder / "baselines")
    assert gate_runs.main(["aa", "--dir", str(folder), "--runs", "2"]) == 2
    err = capsys.readouterr().err
    assert "gate_runs.py: run aa-n0-002: benchmarks/manyop/test_manyop.py::test_manyop has " \
           "no baseline in " in err
    assert len(json.loads((folder / "outcomes.json").read_text())) == 1


@pytest.mark.e2e
def test_the_child_channel_benchmark_times_both_channels(capsys):
    """Both channels answer for the many-op test (a child that wrote nothing would fail
    the run: the benchmark removes each file it asked for)."""
    from benchmarks import child_channel

    assert child_channel.main(["--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "| results file (--opprof-json) |" in out
    assert "| typed records (child plugin) |" in out
    assert "saved per child: median" in out
