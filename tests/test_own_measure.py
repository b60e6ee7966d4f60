"""A measure of the user's own, registered in a conftest.py and nothing else: it gets
baselines, the gate, every report and ``opprof baseline update``, as a user drives them.

The measure is a deterministic counter: each op's figure is the steps the test says it
took inside it (``gpu_profiler.timer.step(n)``); ``SLOW=1.1`` takes 10% more in ``solve``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pytest_opprof
from pytest_opprof.cli import main

from .fakes import STEP_COUNTER

CONFTEST = STEP_COUNTER + '''

@register
class Steps(Measure):
    name = "steps"
    help = "the steps each op took, as the test counts them"
    unit = Unit.COUNT
    counts = ("steps", "steps")
    figure = "steps taken"
    source = "a step counter"
    gate = COUNTED
    baseline_runs = 2
    key = "steps"
    probed = False
    repeats = True

    def __init__(self, worker=None):
        self.device = "a step counter"

    def timer(self, skip):
        return Counter()
'''

SUITE = '''
import os


def test_work(gpu_profiler):
    for _ in gpu_profiler.iterations(4):
        with gpu_profiler.phase("forward"):
            with gpu_profiler.op("parse"):
                gpu_profiler.timer.step(1_000)
            with gpu_profiler.op("solve"):
                gpu_profiler.timer.step(round(50_000 * float(os.environ.get("SLOW", "1"))))
'''


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.delenv("SLOW", raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_work=SUITE)
    pytester.makeini("[pytest]\nopprof_measure = steps\n")
    monkeypatch.chdir(pytester.path)
    return pytester


def test_the_terminal_report_speaks_of_steps(project):
    result = project.runpytest("--opprof-verbosity=2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "opprof: device a step counter, verbosity 2, skip 1, iterations 20",
        "opprof: machine 'steps-a step counter', *",
        "opprof: measure steps (steps taken from a step counter)",
        "measure steps (a step counter; steps taken from a step counter): 3 of 4 iterations "
        "counted (first 1 skipped)",
        "Forward Propagation Steps : 51k steps",
        "OP_ID0. parse : 1k steps",
        "OP_ID1. solve : 50k steps",
        "Stat=solve   total=150k steps   avg=50k steps*",
        "test_work.py::test_work: no baseline on this machine*",
    ])


@pytest.mark.e2e
def test_baselines_the_gate_and_every_report(project, capsys, monkeypatch):
    assert main(["baseline", "update", "-q"]) == 0  # the measure's 2 runs, each a process
    assert capsys.readouterr().out.splitlines()[-1] == (
        "opprof: baselines of 1 test(s) stored, from 2 run(s)")
    stored = json.loads(next((project.path / ".opprof").rglob("*.json")).read_text())
    assert [run["meta"]["measure"] for run in stored["runs"]] == ["steps", "steps"]
    assert stored["runs"][-1]["meta"]["unit"] == "count"
    assert stored["runs"][-1]["ops"]["median"] == [1000.0, 50000.0]

    project.runpytest().assert_outcomes(passed=1)  # the same steps: no regression

    monkeypatch.setenv("SLOW", "1.1")
    result = project.runpytest("--opprof-verbosity=2", "--opprof-json=out.json",
                               "--opprof-markdown=out.md", "--opprof-html=out.html",
                               "--opprof-trace=traces")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*opprof: 1 op(s) regressed in steps taken against the baseline of machine "
        "'steps-a step counter' (2 runs; steps are not drift-corrected)*",
        "*OP_ID1. solve: 50k steps -> 55k steps (+10.0% beyond its margin*",
        "*To accept: opprof baseline update test_work.py::test_work --opprof-measure=steps",
        "gate: 2 baseline runs; steps taken, not drift-corrected",
    ])

    jsonschema = pytest.importorskip("jsonschema")
    results = json.loads((project.path / "out.json").read_text())
    schema = Path(pytest_opprof.__file__).parent / "schemas" / "results-2.schema.json"
    jsonschema.validate(results, json.loads(schema.read_text()))
    test = results["tests"][0]
    assert (results["machine"]["measure"], test["measure"], test["unit"]) == (
        "steps", "steps", "count")
    assert [op["verdict"] for op in test["ops"]] == ["ok", "regressed"]

    markdown = (project.path / "out.md").read_text()
    assert "op figures are steps taken" in markdown
    assert "| `solve` | 50k steps | 55k steps | +10.0% |" in markdown.replace(
        "OP_ID1. ", "")

    html = (project.path / "out.html").read_text()
    assert "current median (steps)" in html and "55k steps" in html
    assert "millions of steps" in html  # the charts' axis

    trace = json.loads(next((project.path / "traces").iterdir()).read_text())
    assert trace["otherData"]["measure"] == "steps"
    assert trace["otherData"]["axis"] == "time axis: steps taken, 1 ns = 1 step"
    solve = [e for e in trace["traceEvents"] if e.get("name") == "solve"]
    assert {e["args"]["steps"] for e in solve} == {55_000}

    assert main(["baseline", "update", "-q"]) == 0  # the change accepted
    capsys.readouterr()
    project.runpytest().assert_outcomes(passed=1)
