"""One op, one set of numbers: every output of a run renders the same verdict.

The issue: terminal and JUnit said ``fc2_grad: 415 us -> 764 us``, the JSON, Markdown
and HTML 790 us; p was 1.3e-15 in the terminal and 1.7e-9 in the JSON. Two causes:
after a confirmation re-run the verdict's current median is the geometric mean of both
runs' medians (764), while the files showed the first run's samples' median (790); and
the terminal printed the rank test's p where the JSON printed the between-run p. Now
every surface shows the verdict's own figures, and the terminal names both p-values.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from pytest_opprof.render import amount, percent

from .fakes import SLOW_FACTOR, batch

#: Six ops; each pytest process's relu is 10% slower than the one before's was (one
#: process in two), so a confirmation re-run measures another median than the first run.
WOBBLING = SLOW_FACTOR + """
import pathlib

CALLS = pathlib.Path(__file__).with_name("calls.txt")


def test_net(gpu_profiler):
    calls = int(CALLS.read_text()) if CALLS.exists() else 0
    CALLS.write_text(str(calls + 1))
    wobble = 1.1 if calls % 2 else 1.0
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(8):
        for k, name in enumerate(["conv2d", "batch_norm", "relu", "pool2d", "mul", "softmax"]):
            with gpu_profiler.op(name):
                extra = wobble if name == "relu" else 1.0
                dev.kernel(int((k + 1) * 10_000 * factor(name) * extra))
"""


@pytest.fixture
def wobbling(pytester, monkeypatch):
    monkeypatch.delenv("SLOW", raising=False)
    pytester.makepyfile(test_net=WOBBLING)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    with batch("b"):
        for _ in range(2):
            result = pytester.runpytest("-p", "no:randomly", "--opprof-update-baseline")
            assert result.ret == 0, result.stdout.str()
    return pytester


@pytest.mark.rerun
def test_every_output_shows_the_verdicts_figures_after_a_confirmation_rerun(wobbling,
                                                                            monkeypatch):
    pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib")
    monkeypatch.setenv("SLOW", "relu:2")
    result = wobbling.runpytest("-p", "no:randomly", "--junitxml=j.xml",
                                "--opprof-json=r.json", "--opprof-markdown=r.md",
                                "--opprof-html=r.html")
    result.assert_outcomes(failed=1)
    terminal = result.stdout.str()
    assert "re-running test_net.py::test_net in a new process to confirm" in terminal
    (test,) = json.loads((wobbling.path / "r.json").read_text())["tests"]
    assert test["current_runs"] == 2
    relu = next(op for op in test["ops"] if op["name"] == "relu")
    verdict = relu["baseline"]
    before, after = amount(verdict["median_ns"]), amount(verdict["current_median_ns"])
    # the re-run measured another median: the verdict's is not the first run's
    assert verdict["current_median_ns"] != pytest.approx(relu["current"]["median_ns"])
    assert verdict["current_count"] == 2 * relu["current"]["count"]
    change = percent(verdict["corrected_ratio"])
    p, rank_p = f"p={verdict['p_value']:.2g}", f"rank test p={verdict['rank_p_value']:.2g}"

    line = re.search(r"OP_ID2\. relu: .*", terminal)
    assert line is not None, terminal
    shown = line.group(0)
    assert shown.startswith(f"OP_ID2. relu: {before} -> {after} (")
    assert f"{change} drift-corrected" in shown and p in shown and rank_p in shown
    assert f"regressed: relu (OP_ID 2) {change}" in terminal

    properties = {p.get("name"): p.get("value") for p in
                  ET.parse(wobbling.path / "j.xml").getroot().iter("property")}
    assert properties["opprof_regressed"] == shown

    markdown = (wobbling.path / "r.md").read_text()
    assert (f"| `test_net.py::test_net` | OP_ID2. `relu` | {before} | {after} | {change} |"
            in markdown)

    html = (wobbling.path / "r.html").read_text()
    assert (f'<td class="num">{before}</td><td class="num">{after}</td>'
            f'<td class="num">{change}</td>') in html


def test_an_unjudged_tests_markdown_counts_its_stored_runs(wobbling, monkeypatch):
    """A baseline of 2 runs taken under OMP_NUM_THREADS=1 cannot judge a run without it:
    the test is unjudged, and every output says the baseline has 2 runs (the Markdown
    said 0)."""
    wobbling.path.joinpath("calls.txt").unlink()
    for name in (".opprof",):
        import shutil

        shutil.rmtree(wobbling.path / name)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with batch("c"):
        for _ in range(2):
            result = wobbling.runpytest("-p", "no:randomly", "--opprof-update-baseline")
            assert result.ret == 0, result.stdout.str()
    monkeypatch.delenv("OMP_NUM_THREADS")
    result = wobbling.runpytest("-p", "no:randomly", "--opprof-json=r.json",
                                "--opprof-markdown=r.md")
    result.assert_outcomes(passed=1)
    (test,) = json.loads((wobbling.path / "r.json").read_text())["tests"]
    assert test["verdict"] == "unjudged" and test["baseline_runs"] == 2
    assert re.search(r"\| `test_net.py::test_net` \| unjudged: .* \| - \| 2 \|",
                     (wobbling.path / "r.md").read_text())


@pytest.mark.pytester
def test_baseline_update_says_how_many_runs_a_baseline_keeps(tmp_path, monkeypatch, capsys):
    """``--runs 21`` said "from 21 run(s)" where each baseline keeps its latest 20."""
    from pytest_opprof.commands import baseline as command
    from pytest_opprof.store.baseline import MAX_RUNS

    (tmp_path / "pytest.ini").write_text("[pytest]\nopprof_measure = fake\n")
    monkeypatch.chdir(tmp_path)
    taken = []
    monkeypatch.setattr(command, "_take", lambda folder, batch, args, labels:
                        taken.extend(labels))
    monkeypatch.setattr(command, "_retake_disagreeing", lambda *args: (0, []))
    monkeypatch.setattr(command.policy, "commit", lambda staging, root, batch: 1)
    assert command.update(MAX_RUNS + 1, []) == 0
    assert len(taken) == MAX_RUNS + 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"opprof: baselines of 1 test(s) stored, from {MAX_RUNS + 1} run(s); a baseline "
        f"keeps its latest {MAX_RUNS}, so {MAX_RUNS} of them are kept")
    assert command.update(MAX_RUNS, []) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"opprof: baselines of 1 test(s) stored, from {MAX_RUNS} run(s)")
