"""The run-conditions advice, followed, makes the conditions match (issue 20, class 11).

A run under other conditions than its baseline's is not judged, with one line saying
what differs and what to do. Before: an empty ``OMP_NUM_THREADS`` was shown as nothing
("was  in the baseline"), a hand-written ``1`` against the environment's ``"1"``
advised the export that was already there, and a baseline of ``workers 0`` advised
``-n 0`` (which runs with one worker). Now every piece of advice is checked by
following it: as a property over every condition kind of model/conditions.py (the
advice applied to a real environment, the conditions then read by the same
``conditions.current``), and in pytester runs where the gate then judges the test.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_opprof.model import conditions as run_conditions
from pytest_opprof.model.conditions import (
    COUNT_CONDITIONS,
    THREAD_VARIABLES,
    WORKER_COUNT_VARIABLE,
    current,
    difference,
)
from pytest_opprof.model.hints import Retake

from .fakes import six_op_project
from .test_conditions import NETWORK, retake_of, stored

ADVICE = re.compile(r"^(?P<said>.*?): (?:(?P<fixes>.*?), or )?re-take the baseline with "
                    r"`opprof baseline update(?P<flags>[^`]*)`$")


def parse(line: str) -> tuple[list[str], str]:
    """The fixes a line advises (``export A=1``, ``unset B``, ``run with -n 2``), and the
    flags of its re-take command."""
    match = ADVICE.match(line)
    assert match, line
    fixes = match["fixes"]
    return (fixes.split(" and ") if fixes else []), match["flags"]


def follow(fixes: list[str], environ: dict[str, str]) -> int | None:
    """The fixes applied to ``environ`` as a shell applies them (assignments split as
    the shell splits them); the worker count a ``run`` fix asks for, if any."""
    workers = None
    for fix in fixes:
        verb, _, rest = fix.partition(" ")
        if verb == "export":
            for assignment in shlex.split(rest):
                name, _, value = assignment.partition("=")
                environ[name] = value
        elif verb == "unset":
            for name in rest.split():
                environ.pop(name, None)
        elif fix == "run serially (-n 0)":
            workers = 1
        else:
            found = re.fullmatch(r"run with -n (\d+)", fix)
            assert found, fix
            workers = int(found[1])
    return workers


def conditions_under(environ: dict[str, str], workers: int | None, *, device: str,
                     measure: str) -> dict[str, object]:
    """What ``conditions.current`` records in a process with ``environ`` and ``workers``
    xdist workers (None or 1: serial)."""
    environ = {k: v for k, v in environ.items() if k != WORKER_COUNT_VARIABLE}
    workerinput = None
    if workers is not None and workers > 1:
        environ[WORKER_COUNT_VARIABLE] = str(workers)
        workerinput = {"workercount": workers}
    with mock.patch.dict(os.environ, environ, clear=True):
        return current(workerinput, measure=measure, device=device)


THREAD_VALUES = st.one_of(st.none(), st.sampled_from(["", " ", "1", "4", "a b", "1 ", "'"]),
                          st.integers(0, 4))
WORKERS = st.one_of(st.integers(-1, 4), st.sampled_from(["2", "1", "x", ""]), st.none())


@st.composite
def condition_pairs(draw):
    """A baseline's conditions (as any file may hold them) and a run's (as a run records
    them: thread variables text or unset, workers at least 1)."""
    names = draw(st.lists(st.sampled_from(THREAD_VARIABLES), unique=True, max_size=3))
    then = {"workers": draw(WORKERS), "device": draw(st.sampled_from(["a", "b"])),
            "measure": draw(st.sampled_from(["time", "events", "kernel", "instructions"])),
            **{name: None for name in THREAD_VARIABLES}}
    now_env = {name: draw(st.one_of(st.none(), st.sampled_from(["", "1", "2", "a b"])))
               for name in names}
    for name in names:
        then[name] = draw(THREAD_VALUES)
    if draw(st.booleans()):  # a count condition only the baseline names is not compared
        then[draw(st.sampled_from(COUNT_CONDITIONS))] = "x"
    environ = {k: v for k, v in now_env.items() if v is not None}
    workers = draw(st.integers(1, 4))
    now = conditions_under(environ, workers, device="d",
                           measure=draw(st.sampled_from(["time", "fake", "fake-kernel"])))
    return then, now, environ, workers


@settings(max_examples=400, deadline=None)
@given(condition_pairs())
def test_every_piece_of_advice_followed_makes_the_conditions_match(pair):
    then, now, environ, workers = pair
    line = difference(then, now, retake_of(now))
    if line is None:  # agreeing: equal as the comparison reads them
        assert all(run_conditions.normal(k, then[k]) == run_conditions.normal(k, now[k])
                   for k in then if k in now and k != "device")
        return
    assert "\n" not in line and "  " not in line  # one line, no blank value
    fixes, flags = parse(line)
    if fixes:  # this run changed as advised now matches the baseline
        changed = dict(environ)
        asked = follow(fixes, changed)
        after = conditions_under(changed, asked if asked is not None else workers,
                                 device="d", measure=str(now["measure"]))
        assert difference(then, after, retake_of(after)) is None, (line, after)
    # the baseline re-taken as advised, in this shell, matches this run
    args = shlex.split(flags)
    n = int(args[args.index("-n") + 1]) if "-n" in args else 1
    given_flags = dict(a.split("=", 1) for a in args if a.startswith("--opprof-"))
    retaken = conditions_under(dict(environ), n, device="d",
                               measure=given_flags.get("--opprof-measure", str(now["measure"])))
    assert difference(retaken, now, retake_of(now)) is None, (line, retaken)


@pytest.mark.parametrize("then, now, says", [
    ({"OMP_NUM_THREADS": ""}, {"OMP_NUM_THREADS": None},
     "OMP_NUM_THREADS was set but empty ('') in the baseline, unset now: export "
     "OMP_NUM_THREADS='', or re-take the baseline with `opprof baseline update`"),
    ({"OMP_NUM_THREADS": None}, {"OMP_NUM_THREADS": ""},
     "OMP_NUM_THREADS was unset in the baseline, set but empty ('') now: unset "
     "OMP_NUM_THREADS, or re-take the baseline with `opprof baseline update`"),
    ({"OMP_NUM_THREADS": 1}, {"OMP_NUM_THREADS": "1"}, None),  # the same setting
    ({"workers": "2"}, {"workers": 2}, None),
    ({"workers": 0}, {"workers": 1},  # no run has 0 workers: -n 0 runs with one
     "the baseline was taken with workers 0, this run has 1 worker (serial): re-take the "
     "baseline with `opprof baseline update`"),
    ({"OMP_NUM_THREADS": "a b"}, {"OMP_NUM_THREADS": None},
     "OMP_NUM_THREADS was 'a b' in the baseline, unset now: export OMP_NUM_THREADS='a b', or "
     "re-take the baseline with `opprof baseline update`"),
    ({"measure": "kernel"}, {"measure": "events"},
     "the baseline's measure was kernel, this run's is events: re-take the baseline with "
     "`opprof baseline update --opprof-measure=events`"),
])
def test_the_issues_examples(then, now, says):
    assert difference(then, now, retake_of(now)) == says


@pytest.mark.pytester
def test_an_export_with_a_quoted_value_sets_it_in_a_real_shell():
    """The advice is shell: run it in bash and read the environment back."""
    line = difference({"OMP_NUM_THREADS": "a 'b'", "MKL_NUM_THREADS": ""},
                      {"OMP_NUM_THREADS": None, "MKL_NUM_THREADS": "3"}, Retake())
    (fix,), _ = parse(line)
    read = ("python3 -c 'import json, os; print(json.dumps([os.environ.get(n) for n in "
            "(\"OMP_NUM_THREADS\", \"MKL_NUM_THREADS\")]))'")
    out = subprocess.run(["bash", "-c", f"unset OMP_NUM_THREADS; MKL_NUM_THREADS=3; {fix}; {read}"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == ["a 'b'", ""]


def test_remedies_leave_out_what_the_run_had():
    assert run_conditions.remedies(None) == ["pinned BLAS threads (OMP_NUM_THREADS=1)",
                                             "fewer xdist workers"]
    assert run_conditions.remedies({"workers": 1, "OMP_NUM_THREADS": None}) == [
        "pinned BLAS threads (OMP_NUM_THREADS=1)"]
    assert run_conditions.remedies({"workers": 1, "OPENBLAS_NUM_THREADS": "1"}) == []
    assert run_conditions.remedies({"workers": 2, "OMP_NUM_THREADS": ""}) == [
        "pinned BLAS threads (OMP_NUM_THREADS=1)", "fewer xdist workers"]


# ---- followed in pytester runs --------------------------------------------------------

@pytest.fixture
def suite(pytester, monkeypatch):
    """The fake backend's exact times, no thread variable set (as test_conditions')."""
    return six_op_project(pytester, monkeypatch)


def _edit_conditions(pytester, **changes):
    data, path = stored(pytester)
    for run in data["runs"]:
        run["meta"]["conditions"].update(changes)
    path.write_text(json.dumps(data))


def _refusal(result) -> str:
    (line,) = [line for line in result.stdout.lines if line.startswith(f"{NETWORK}: unjudged; ")]
    return line.removeprefix(f"{NETWORK}: unjudged; ")


@pytest.mark.parametrize("changes", [
    {"OMP_NUM_THREADS": ""},          # empty, not unset: export OMP_NUM_THREADS=''
    {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "1"},   # two exports in one fix
    {"workers": 0},                   # no -n gives it: re-take
    {"measure": "kernel"},            # re-take with the run's measure
])
def test_the_advice_followed_in_a_real_run_gets_the_test_judged(suite, monkeypatch, changes):
    suite.runpytest("--opprof-update-baseline").assert_outcomes(passed=1)
    _edit_conditions(suite, **changes)
    line = _refusal(suite.runpytest())
    fixes, flags = parse(line)
    if fixes:
        environ = {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ}
        assert follow(fixes, environ) is None  # serial here: no -n asked
        for name in THREAD_VARIABLES:
            if name in environ:
                monkeypatch.setenv(name, environ[name])
            else:
                monkeypatch.delenv(name, raising=False)
    else:  # the re-take, as `opprof baseline update` runs it (one run of it)
        suite.runpytest(*shlex.split(flags), "--opprof-update-baseline").assert_outcomes(
            passed=1)
    result = suite.runpytest()
    result.assert_outcomes(passed=1)
    assert f"{NETWORK}: unjudged" not in result.stdout.str(), line


# ---- the other words of issue 20 ------------------------------------------------------

def test_the_far_runs_line_names_each_tests_runs_and_as_many_as_are_taken():
    """Before: ``run(s) 1, 3, 4, 5 of 2 test(s) ...; taking 3 run(s) again`` (four named,
    three taken): now which runs of which test, and why that many."""
    from pytest_opprof.commands.baseline import _far_line

    assert _far_line([("t.py::a", {0: (), 2: (), 3: ()}), ("t.py::b", {4: ()})], 3) == (
        "opprof: runs 1, 3, 4 of t.py::a and run 5 of t.py::b sit far from their test's "
        "other runs (a busy machine?); taking 3 more runs: each test's far runs are "
        "replaced by as many of them")
    assert _far_line([("t.py::a", [1])], 1) == (
        "opprof: run 2 of t.py::a sits far from the test's other runs (a busy machine?); "
        "taking 1 more run to replace it")
    many = _far_line([(f"t.py::t{k}", [k % 3]) for k in range(5)], 1)
    assert many.startswith("opprof: run 1 of t.py::t0, run 2 of t.py::t1, run 3 of t.py::t2 "
                           "and 2 run(s) of 2 other test(s) sit far")


def test_every_advice_names_one_number_of_runs():
    """``baseline show`` advised ``--runs 6`` for 3 runs where the gate said 5."""
    from pytest_opprof.judge.config import BASELINE_RUNS, more_runs
    from pytest_opprof.model.baseline import MAX_RUNS

    assert [more_runs(n) for n in (1, 3, 4)] == [BASELINE_RUNS] * 3
    assert (more_runs(5), more_runs(12), more_runs(MAX_RUNS)) == (10, MAX_RUNS, None)


def test_pytests_failure_line_is_its_summary_not_its_banner():
    from pytest_opprof.run.launcher import last_line

    out = ("============================= test session starts ==============================\n"
           "t.py F\n"
           "=========================== short test summary info ============================\n"
           "FAILED t.py::test_a - assert 0\nFAILED t.py::test_b - ZeroDivisionError\n"
           "============================== 2 failed in 0.05s ===============================\n")
    assert last_line(out) == "FAILED t.py::test_a - assert 0 (and 1 more); 2 failed in 0.05s"
    assert last_line("===== 1 passed in 0.1s =====") == "1 passed in 0.1s"
    assert "=" not in last_line("ERROR t.py - ImportError\n!!!! Interrupted: 1 error !!!!\n"
                                "===== 1 error in 0.1s =====")


def test_the_gates_advice_does_not_ask_to_pin_what_the_run_pinned():
    from pytest_opprof.judge.gate import drift_problem
    from pytest_opprof.model.verdict import Comparison

    far = Comparison(ops=(), drift=10.0, drift_source="probe", runs=3)
    assert "BLAS threads not pinned" in drift_problem(far, {"OMP_NUM_THREADS": None}, Retake())
    assert "BLAS threads not pinned" in drift_problem(far, None, Retake())  # not recorded: may be
    assert "pinned" not in drift_problem(far, {"OPENBLAS_NUM_THREADS": "1"}, Retake())


def test_without_phases_no_backward_op_gives_no_backward_line():
    """Verbosity 1 printed ``Backward Propagation Time : 0 sec`` for a test with no
    phase and no backward op; README: backward is the ops from the first backward op."""
    from pytest_opprof.render.text import singa_phases

    from .fakes import train_profile

    def body(profiler, dev, i):
        for name in ("matmul", "relu"):
            with profiler.op(name):
                dev.kernel(1000)

    assert singa_phases(train_profile(body=body)) == (
        "Time Profiling:\n"
        "Forward Propagation Time : 2e-06 sec\n"
        "(no phase named: forward is every top-level op; no op is named *backward* or "
        "*_grad, so there is no backward time)")


def test_names_are_cut_by_display_width():
    from pytest_opprof.render.kernels import abbreviate
    from pytest_opprof.render.table import cut, width

    assert width(abbreviate("卷" * 40, 20)) <= 20 and abbreviate("卷" * 40, 20).endswith("...")
    assert cut("e\u0301" * 30, 10) == "e\u0301" * 7 + "..."  # the accent stays on its e
    assert cut("ab", 10) == "ab"
