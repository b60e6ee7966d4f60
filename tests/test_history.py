"""``opprof history``: steps found at the right run and commit, none on flat noisy
histories or excursions, a change every op shares named as each op's step, counts judged
as counts, the same words in every output, its files, and its errors as one line each."""

from __future__ import annotations

import html
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from pytest_opprof.cli import main
from pytest_opprof.judge.changepoints import NEEDS_RUPTURES, significant_steps
from pytest_opprof.model.hints import Retake
from pytest_opprof.render.history import SCHEMA, sparkline
from pytest_opprof.store.baseline import BaselineRun, BaselineStore

from .fakes import SIX_OP_NET, SLOW_FACTOR, git

NODEID = "tests/test_net.py::test_net"
OPS = ("conv2d", "relu", "softmax")


def stored_run(medians: dict[str, float], index: int, measure: str = "time",
               commit_id: str | None = None) -> BaselineRun:
    """A run as ``--opprof-update-baseline=append`` stores it, on commit ``c{index}...`` and
    day ``index`` (ops: name -> median ns, or instructions under ``instructions``)."""
    names = list(medians)
    values = [round(medians[name]) for name in names]
    ops = {"op_id": list(range(len(names))), "name": names, "occurrence": [0] * len(names),
           "depth": [0] * len(names), "phase": [None] * len(names), "n": [3] * len(names),
           "median": [float(v) for v in values], "samples": [[v] * 3 for v in values]}
    commit = {"id": commit_id or f"c{index:02d}" + "0" * 38, "time": None, "dirty": False,
              "branch": "main"}
    unit = "count" if measure == "instructions" else "ns"
    return BaselineRun(ops=ops, wall=[], op_time=[], phases=[],
                       meta={"measure": measure, "unit": unit,
                             "date": f"2026-11-{index + 1:02d}T12:00:00+00:00",
                             "commit": commit})


def grow(root, history: list[dict[str, float]], nodeid: str = NODEID, **run) -> None:
    store = BaselineStore(root, "ci-runner")
    for index, medians in enumerate(history):
        store.record(nodeid, stored_run(medians, index, **run), "", append=Retake())


def noisy(runs: int, seed: int, sigma: float = 0.03) -> list[dict[str, float]]:
    """Runs of OPS around 1 ms, 200 us and 50 us with lognormal noise ``sigma``."""
    rng = np.random.default_rng(seed)
    base = {"conv2d": 1e6, "relu": 2e5, "softmax": 5e4}
    return [{name: ns * float(np.exp(rng.normal(0, sigma))) for name, ns in base.items()}
            for _ in range(runs)]


def history(*args: str) -> tuple[int, str, str]:
    """``opprof history ARGS`` as the console script runs it."""
    proc = subprocess.run([sys.executable, "-m", "pytest_opprof.cli", "history", *args],
                          capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.pytester
def test_a_step_is_named_with_its_commit_date_and_size(tmp_path, capsys):
    runs = noisy(14, seed=1)
    for medians in runs[8:]:
        medians["conv2d"] *= 1.25
    grow(tmp_path, runs)
    assert main(["history", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == (f"{NODEID} on machine 'ci-runner': 14 runs, 2026-11-01 .. "
                        "2026-11-14, 3 ops")
    assert lines[1] == ("  1 step beyond the noise and the tolerance (5%), each held by at "
                        "least 2 later runs:")
    step = lines[2].strip()
    assert step.startswith("OP_ID0. conv2d: +2")
    assert " at c080000 (2026-11-09), held by 5 later runs: " in step
    assert lines[3] == "  trends, oldest run first (fewer than 5 ops: nothing taken out):"
    assert lines[4].strip().startswith("OP_ID0. conv2d  ")  # the op with a step first
    assert len(lines) == 7 and out.count(" at c") == 2  # its line and its trend's status
    assert lines[5].endswith("  no step (noise 1.9% a run)")  # relu, softmax: none


@pytest.mark.pytester
@pytest.mark.parametrize("seed", range(6))
def test_flat_noisy_histories_have_no_step(tmp_path, capsys, seed):
    runs = noisy(20, seed=seed)
    runs[5]["relu"] *= 1.6  # one run under contention is not a step
    grow(tmp_path, runs)
    assert main(["history", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert " at c" not in out
    assert "  no step beyond the noise and the tolerance (5%)\n" in out


@pytest.mark.pytester
def test_a_step_under_the_tolerance_is_not_reported_and_a_lower_tolerance_shows_it(
        tmp_path, capsys):
    runs = noisy(16, seed=3, sigma=0.002)
    for medians in runs[8:]:
        medians["relu"] *= 1.04
    grow(tmp_path, runs)
    assert main(["history", "--dir", str(tmp_path)]) == 0
    assert " at c" not in capsys.readouterr().out
    assert main(["history", "--dir", str(tmp_path), "--tolerance", "2%"]) == 0
    assert "OP_ID1. relu: +4." in capsys.readouterr().out


def six_ops(runs: int, seed: int, drift: float) -> list[dict[str, float]]:
    """Runs of six ops (1% noise each) that share a machine drift of lognormal ``drift``."""
    rng = np.random.default_rng(seed)
    history = []
    for _ in range(runs):
        speed = float(np.exp(rng.normal(0, drift)))
        history.append({f"op{k}": (k + 1) * 1e5 * speed * float(np.exp(rng.normal(0, 0.01)))
                        for k in range(6)})
    return history


@pytest.mark.pytester
@pytest.mark.parametrize("seed", range(3))
def test_an_op_step_is_found_through_machine_drift(tmp_path, capsys, seed):
    runs = six_ops(16, seed=seed, drift=0.06)
    for medians in runs[8:]:
        medians["op2"] *= 1.15
    grow(tmp_path, runs)
    assert main(["history", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "  trends, oldest run first, less what all ops shared in a run alone" in out
    assert out.count(" at c") == 2 and "    OP_ID2. op2: +1" in out
    assert " at c080000 (2026-11-09), held by 7 later runs" in out


@pytest.mark.pytester
@pytest.mark.parametrize("measure", ["time", "instructions"])
def test_a_step_every_op_shares_is_each_ops_step_and_said_once(tmp_path, capsys, measure):
    """A slower common helper (or dependency) moves every op at one commit: a change,
    not a drift to take out, whatever the measure."""
    runs = six_ops(12, seed=0, drift=0.0)
    for medians in runs[6:]:
        for name in medians:
            medians[name] *= 1.3
    grow(tmp_path, runs, measure=measure)
    assert main(["history", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count(" at c060000 (2026-11-07), held by 5 later runs: ") == 6  # each op
    assert "  6 steps beyond the noise and the tolerance" in out
    assert "    all 6 ops moved together: +30." in out
    assert out.count("moved together") == 1 and out.count(" at c") == 6 + 1 + 6


@pytest.mark.pytester
def test_counts_are_judged_as_counted_at_the_measures_tolerance(tmp_path, capsys):
    """Instruction counts: nothing taken out of a run (no machine moves a count), and the
    smallest step is the measure's 1%, not the time's 5%: a uniform +3% (the slower
    common helper) is a step of each op; a +2% of one op too."""
    rng = np.random.default_rng(0)
    runs = [{f"op{k}": (k + 1) * 1e6 * float(np.exp(rng.normal(0, 5e-5))) for k in range(6)}
            for _ in range(10)]
    for medians in runs[5:]:
        for name in medians:
            medians[name] *= 1.03
    for medians in runs[2:]:
        medians["op0"] *= 1.02
    grow(tmp_path, runs, measure="instructions")
    code, out, err = history("--dir", str(tmp_path), "--json", str(tmp_path / "h.json"))
    assert code == 0, err
    assert "  7 steps beyond the noise and the tolerance (1%)" in out
    assert "  trends, oldest run first, as counted (no machine moves a count):" in out
    # each op's line and trend status, and the line saying they moved together
    assert out.count(" at c050000 (2026-11-06), held by 4 later runs") == 6 + 6 + 1
    assert "OP_ID0. op0: +2.0% at c020000 (2026-11-03), held by 2 later runs" in out
    (test,) = json.loads((tmp_path / "h.json").read_text())["tests"]
    assert test["tolerance"] == 0.01 and test["unit"] == "count"
    assert test["shared"]["taken_out"] is None
    assert all(op["corrected"] == op["median"] for op in test["ops"])


def test_a_two_run_excursion_is_not_a_step_and_a_held_step_is():
    flat, up = math.log(100.0), math.log(283.4)
    logs = np.array([flat] * 2 + [up] * 2 + [flat] * 3)  # fc1 +183.4% then back
    assert significant_steps(logs, sigma=1e-3, tolerance=0.05) == []
    logs = np.array([flat] * 4 + [up] * 2 + [flat])  # back in the last run
    assert significant_steps(logs, sigma=1e-3, tolerance=0.05) == []
    logs = np.array([flat] * 5 + [up] * 2)  # the latest two runs: one more must agree
    assert significant_steps(logs, sigma=1e-3, tolerance=0.05) == []
    logs = np.array([flat] * 3 + [up] * 3 + [flat] + [up] * 2)  # held, one run off
    ((at, before, after, _, confirmed),) = significant_steps(logs, sigma=1e-3, tolerance=0.05)
    assert (at, confirmed, round(math.exp(after - before), 3)) == (3, 4, 2.834)


def test_an_improvement_and_a_later_regression_are_two_steps():
    logs = np.log([100.0] * 6 + [80.0] * 6 + [120.0] * 6)
    found = significant_steps(logs, sigma=1e-3, tolerance=0.05)
    assert [(f.at, round(float(np.exp(f.after - f.before)), 3), f.confirmed) for f in found] \
        == [(6, 0.8, 5), (12, 1.5, 5)]


@pytest.mark.pytester
def test_too_few_runs_say_so_for_the_test_and_each_op(tmp_path, capsys):
    grow(tmp_path, noisy(4, seed=0))
    assert main(["history", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "  no step can be found in fewer than 5 runs (two before a step, 2 after it to " \
           "confirm it): grow the history" in out
    assert out.count("  too few runs for a step (4 of 5)") == 3
    assert "noise" not in out and "(s)" not in out


@pytest.mark.pytester
def test_a_run_without_a_known_commit_is_named_by_its_number(tmp_path, capsys):
    runs = noisy(10, seed=4)
    for medians in runs[5:]:
        medians["conv2d"] *= 1.5
    store = BaselineStore(tmp_path, "ci-runner")
    for index, medians in enumerate(runs):  # git describe failed: pytest-benchmark's "unknown"
        store.record(NODEID, stored_run(medians, index, commit_id="unknown"), "", append=True)
    assert main(["history", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "OP_ID0. conv2d: +4" in out and " at run 6 (2026-11-06), held by 4 later runs:" in out
    assert "unknown" not in out


def test_sparkline_draws_low_to_high_and_flat_at_mid_height():
    assert sparkline([1.0, 1.0, 2.0, 4.0], "_-#") == "__-#"
    assert sparkline([5.0, 5.0], "_-#") == "--"


@pytest.mark.pytester
def test_json_holds_runs_medians_and_steps(tmp_path):
    runs = noisy(12, seed=2)
    for medians in runs[6:]:
        medians["softmax"] *= 0.7
    grow(tmp_path, runs)
    code, out, err = history("--dir", str(tmp_path), "--json", str(tmp_path / "out/h.json"))
    assert code == 0, err
    assert out.splitlines()[-1] == f"opprof: wrote {tmp_path / 'out/h.json'}"
    data = json.loads((tmp_path / "out/h.json").read_text())
    assert data["schema"] == SCHEMA and data["tolerance"] is None and data["unreadable"] == []
    (test,) = data["tests"]
    assert test["nodeid"] == NODEID and len(test["runs"]) == 12
    assert test["runs"][6]["commit"]["branch"] == "main"
    op = next(op for op in test["ops"] if op["name"] == "softmax")
    assert op["runs"] == list(range(12)) and len(op["median"]) == 12
    (step,) = op["steps"]
    assert step["run"] == 6 and step["commit_id"].startswith("c06") and step["confirmed"] == 5
    assert step["date"].startswith("2026-11-07") and 0.6 < step["ratio"] < 0.8
    assert op["status"] == step["text"] and step["text"].endswith(", held by 5 later runs")
    assert test["summary"].startswith("1 step beyond the noise and the tolerance (5%)")
    assert all(not other["steps"] for other in test["ops"] if other is not op)


@pytest.mark.pytester
def test_html_draws_each_op_with_its_step(tmp_path):
    runs = noisy(10, seed=4)
    for medians in runs[5:]:
        medians["conv2d"] *= 1.5
    grow(tmp_path, runs)
    grow(tmp_path, noisy(6, seed=5), nodeid="tests/test_net.py::test_<other>")
    code, _, err = history("--dir", str(tmp_path), "--html", str(tmp_path / "h.html"))
    assert code == 0, err
    page = (tmp_path / "h.html").read_text()
    assert page.count("<svg") == 6  # one chart per op of each test
    assert "test_&lt;other&gt;" in page and "<other>" not in page
    assert " at c050000 (2026-11-06), held by 4 later runs</td>" in page


@pytest.mark.pytester
def test_the_test_argument_narrows_to_matching_tests(tmp_path, capsys):
    grow(tmp_path, noisy(5, seed=0))
    grow(tmp_path, noisy(5, seed=1), nodeid="tests/test_io.py::test_read")
    assert main(["history", "test_io", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "tests/test_io.py::test_read on machine" in out and NODEID not in out


@pytest.mark.pytester
@pytest.mark.parametrize("case", ["no folder", "no runs", "no match", "other machine"])
def test_missing_histories_are_one_line(tmp_path, capsys, case):
    if case != "no folder":
        (tmp_path / "store").mkdir()
    if case in ("no match", "other machine"):
        grow(tmp_path / "store", noisy(5, seed=0))
    args = {"no match": ["test_zzz"], "other machine": ["--machine-key", "gpu-9"]}.get(case, [])
    assert main(["history", "--dir", str(tmp_path / "store"), *args]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert {"no folder": "no baseline directory here",
            "no runs": "no stored runs (grow a history with pytest --opprof-update-baseline=append",
            "no match": "no stored baseline matches 'test_zzz'",
            "other machine": "no baselines for machine 'gpu-9'"}[case] in err


def test_without_ruptures_it_says_what_to_install(tmp_path, capsys, monkeypatch):
    grow(tmp_path, noisy(5, seed=0))
    monkeypatch.setitem(sys.modules, "ruptures", None)  # not importable
    assert main(["history", "--dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"opprof: {NEEDS_RUPTURES}\n" and captured.out == ""


@pytest.mark.pytester
def test_an_unwritable_output_is_one_line_before_anything_is_read(tmp_path, capsys):
    grow(tmp_path, noisy(5, seed=0))
    (tmp_path / "file").write_text("")
    assert main(["history", "--dir", str(tmp_path), "--html", str(tmp_path / "file/h.html")]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("opprof: --html ") and captured.out == ""
    assert "is a file, not a folder" in captured.err


@pytest.mark.pytester
def test_a_bad_tolerance_is_a_usage_error(tmp_path):
    code, _, err = history("--dir", str(tmp_path), "--tolerance", "lots")
    assert code == 2 and "the tolerance must be a fraction or a percentage" in err


@pytest.mark.pytester
def test_an_unreadable_baseline_is_listed_and_the_rest_shown(tmp_path, capsys):
    grow(tmp_path, noisy(5, seed=0))
    (tmp_path / "ci-runner" / "broken.json").write_text("{")
    assert main(["history", "--dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("unreadable: ") and f"{NODEID} on machine 'ci-runner'" in out


# -- as a user grows it: one pytest --opprof-update-baseline=append per commit ------------------

SUITE = SLOW_FACTOR + """

def test_net(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(5):
        for k, name in enumerate(("conv2d", "relu", "softmax")):
            with gpu_profiler.op(name):
                dev.kernel(int((k + 1) * 10_000 * factor(name)))
"""


def appended_commits(pytester, monkeypatch, module, slow, edit=lambda k: False):
    """A git repository of the fake-measure test ``module``, one commit per entry of
    ``slow`` (what SLOW says at it), each profiled and appended to its history; the
    commit's change is ``edit(k)``'s where it made one, else a version file's. The
    commits' ids."""
    pytester.makepyfile(test_net=module)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    monkeypatch.chdir(pytester.path)
    git(pytester.path, "init", "-q")
    commits = []
    for k, factors in enumerate(slow):
        if not edit(k):
            (pytester.path / "version.txt").write_text(str(k))
        git(pytester.path, "add", "-A")
        git(pytester.path, "commit", "-q", "-m", f"commit {k + 1}")
        commits.append(git(pytester.path, "rev-parse", "HEAD"))
        monkeypatch.setenv("SLOW", factors)
        pytester.runpytest("--opprof-update-baseline=append").assert_outcomes(passed=1)
    return commits


@pytest.mark.e2e
def test_appended_runs_across_commits_show_the_commit_that_slowed_an_op(
        pytester, monkeypatch, capsys):
    commits = appended_commits(pytester, monkeypatch, SUITE,
                               ["relu:1.2" if k >= 3 else "" for k in range(6)])
    capsys.readouterr()  # the runs' own output
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert f"    OP_ID1. relu: +20.0% at {commits[3][:7]} (" in out
    assert "20 us -> 24 us" in out and out.count(" at ") == 3  # its line, status, "at least"


def _says_each_status(out: str, page: str, test: dict) -> None:
    """The terminal and the HTML page say the test's summary and each op's status in the
    words the JSON file holds."""
    assert f"  {test['summary']}" in out and html.escape(test["summary"]) in page
    for op in test["ops"]:
        assert f"  {op['status']}\n" in out, op["name"]
        assert f"<td>{html.escape(op['status'])}</td>" in page, op["name"]


@pytest.mark.pytester
@pytest.mark.parametrize("case", ["too few runs", "flat", "a step", "counts", "an op added"])
def test_every_output_says_the_same_words(tmp_path, capsys, case):
    runs = noisy(4 if case == "too few runs" else 10, seed=5, sigma=0.01)
    if case == "a step":
        for medians in runs[5:]:
            medians["relu"] *= 1.3
    if case == "an op added":
        for medians in runs[7:]:
            medians["gelu"] = 1e4
    grow(tmp_path, runs, measure="instructions" if case == "counts" else "time")
    json_path, html_path = tmp_path / "h.json", tmp_path / "h.html"
    assert main(["history", "--dir", str(tmp_path), "--json", str(json_path),
                 "--html", str(html_path)]) == 0
    out = capsys.readouterr().out
    (test,) = json.loads(json_path.read_text())["tests"]
    _says_each_status(out, html_path.read_text(), test)
    assert "(s)" not in out and "noise 0.1%" not in out


@pytest.mark.e2e
def test_the_newcomers_seven_commits_name_one_step_in_every_output(
        pytester, monkeypatch, capsys):
    """Seven appended commits on the fake measure's exact times: softmax 2.4x from commit
    4; conv2d 2.83x at commits 3 and 4 only (an excursion); commit 5 changes a comment.
    One step, softmax's at commit 4, in the terminal, the JSON and the HTML alike."""
    def comment_only(k):
        if k == 4:
            test_file = pytester.path / "test_net.py"
            test_file.write_text("# the net's ops, one kernel each\n" + test_file.read_text())
            return True
        return False

    slow = [",".join((["softmax:2.403"] if k >= 3 else [])
                     + (["conv2d:2.834"] if k in (2, 3) else [])) for k in range(7)]
    commits = appended_commits(pytester, monkeypatch, SIX_OP_NET, slow, comment_only)
    capsys.readouterr()  # the runs' own output
    assert main(["history", "--json", "h.json", "--html", "h.html"]) == 0
    out = capsys.readouterr().out
    (test,) = json.loads((pytester.path / "h.json").read_text())["tests"]
    stepped = [(op["name"], step) for op in test["ops"] for step in op["steps"]]
    assert [(name, step["commit_id"], step["confirmed"]) for name, step in stepped] \
        == [("softmax", commits[3], 3)]
    assert test["summary"].startswith("1 step beyond the noise and the tolerance (5%)")
    assert test["shared"]["steps"] == []
    (step_line,) = [line for line in out.splitlines() if line.startswith("    OP_ID5. softmax:")]
    assert step_line == (f"    OP_ID5. softmax: +140.3% at {commits[3][:7]} ("
                         f"{stepped[0][1]['date'][:10]}), held by 3 later runs: "
                         "60 us -> 144 us")
    page = (pytester.path / "h.html").read_text()
    _says_each_status(out, page, test)
    assert out.count(" at ") == 3  # its line, its status, and "held by at least"
    assert "no step (noise under 0.1% a run)" in out  # conv2d's excursion: not a step
