"""``opprof compare`` from fewer than 4 pairs: two results files (one pair), ``--pairs``
1 to 3. One pair cannot see how far each op moves between processes, so each op is
credited the spread it may have and the machine its swing; a change every op shares is
each op's (said as a finding); and every output's ``change`` is what the medians beside
it show.

Synthetic processes, seeded: on this project's shared 2-core runner an op's median moved
between processes by 5.4% (median op) to 16% (widest), lognormally across ops
(benchmarks/RESULTS.md, "Few pairs"); a busy machine slows a class of long ops 2.5-4x
in the iterations it preempts.
"""

from __future__ import annotations

import json
import math
import re

import jsonschema
import numpy as np
import pytest

from pytest_opprof.cli import main
from pytest_opprof.judge import comparison, paired
from pytest_opprof.render import amount, percent
from pytest_opprof.render import compare as render

from .test_compare import COSTS, MODEL_TEST, SCHEMA, profiles_from


def processes(rng, count=2, ops=44, iterations=30):
    """Log times (iterations, ops) of ``count`` processes of one code: each op has its
    own spread between processes (lognormal over ops around 5.4%, at most 20%), each
    process a drift (4%), each sample 3% noise."""
    sizes = np.log(np.geomspace(1e3, 2e7, ops))
    spread = np.minimum(np.exp(rng.normal(math.log(0.054), 0.5, ops)), 0.2)
    return [sizes + rng.normal(0, 0.04) + rng.standard_normal(ops) * spread
            + rng.normal(0, 0.03, (iterations, ops)) for _ in range(count)]


def files(logs):
    """One pair, as ``opprof compare A.json B.json`` judges it."""
    runs = profiles_from(logs)
    return comparison.compare_runs(runs[:1], runs[1:], mode="files", labels=("a.json", "b.json"))


def flagged(report):
    return [(r.name, r.change.verdict) for t in report.tests for r in t.ops
            if r.change.verdict != "ok"]


def test_same_code_compared_from_two_files_flags_no_op():
    """The issue's 30 same-code compares gave 3 false regressions and 2-4 false
    improvements under a 99% family-wise interval; 200 here may flag at most the 1%
    claimed (2 tests), and with a margin of one."""
    rng = np.random.default_rng(20)
    tests = sum(bool(flagged(files(processes(rng)))) for _ in range(200))
    assert tests <= 2


def test_exactly_twice_as_fast_is_every_ops_change_said_once():
    """Head exactly 2x faster on every op, one run per side: each op's estimate is
    -50% (never less what the others did), the shared change is said, and no op is
    called improved (one pair cannot tell the code from a machine that swung)."""
    (base,) = processes(np.random.default_rng(21), count=1)
    report = files([base, base - math.log(2)])
    test = report.tests[0]
    assert test.result.shared.change == pytest.approx(0.5, rel=1e-9)
    assert flagged(report) == []
    for row in test.ops:
        assert row.change.change == pytest.approx(0.5, rel=1e-9)
        assert row.change.estimate == pytest.approx(0.5, rel=1e-9)
    out = render.text(report)
    assert out.count("the ops moved together by -50.0%") == 1
    assert "one run per side cannot tell" in out
    assert "0 regressed, 0 improved, 44 ok of 44 op(s)" in out


def table_rows(report):
    """By OP_ID, the (base, head, change, corrected) cells of every op row, from the
    terminal table and from the Markdown table."""
    text_rows = [re.split(r"\s{2,}", line.strip()) for line in render.text(report).splitlines()
                 if re.match(r"\s+\d+\s{2,}", line)]
    md_rows = [[c.strip() for c in line.strip("|").split("|")]
               for line in render.markdown(report).splitlines()
               if re.match(r"\| \d+ \|", line)]
    return ({int(r[0]): (r[2], r[3], r[4], r[5]) for r in text_rows},
            {int(r[0]): (r[2], r[3], r[4], r[5]) for r in md_rows})


@pytest.mark.parametrize("pairs", [1, 2, 6])
def test_the_change_shown_is_what_the_medians_show_in_every_output(pairs):
    """The issue: ``softmax_grad 15.3 us -> 22.7 us: -29.1%``. Every op's change is its
    head median over its base median, in the table, the Markdown and the JSON; the
    drift-corrected change sits beside it as ``corrected``."""
    logs = processes(np.random.default_rng(22), count=2 * pairs)
    logs = [x + (0.3 if k % 2 else 0.0) for k, x in enumerate(logs)]  # a drift of +35%
    logs = [x + np.where(np.arange(x.shape[1]) == 30, math.log(3) * (k % 2), 0.0)
            for k, x in enumerate(logs)]  # op30 3x slower at head
    runs = profiles_from(logs)
    report = comparison.compare_runs(runs[0::2], runs[1::2],
                                     mode="files" if pairs == 1 else "pairs",
                                     labels=("a", "b"))
    ops = report.tests[0].ops
    for row in ops:
        assert row.change.change == row.change.head_ns / row.change.base_ns
    expected = {r.op_id: (amount(r.change.base_ns), amount(r.change.head_ns),
                          percent(r.change.change), percent(r.change.estimate)) for r in ops}
    text_rows, md_rows = table_rows(report)
    assert text_rows == expected and md_rows == expected
    data = json.loads(render.to_json(report))
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    for op in data["tests"][0]["ops"]:
        assert op["change"] == op["head_median_ns"] / op["base_median_ns"]
        assert op["low"] <= op["estimate"] <= op["high"]
    op30 = ops[30].change
    assert op30.verdict == "regressed" and op30.low < 3 < op30.high
    if pairs < paired.MIN_PAIRS:  # the estimate is the medians' change, exactly
        assert op30.estimate == pytest.approx(op30.change, rel=1e-9)
    assert "change is head/base of the medians" in render.text(report)


def test_a_busy_machine_slowing_the_long_ops_is_no_regression():
    """Real processes on our loaded runner: ops of a millisecond or more 2.5-4x slower
    at their median in some processes, their fastest iteration as fast as ever. A change
    of the code moves every iteration, the fastest too."""
    rng = np.random.default_rng(23)
    base, head = processes(rng)
    busy = rng.random(head.shape) < 0.7  # the preempted iterations
    busy[:, :38] = False  # the six longest ops
    head = head + np.where(busy, math.log(3), 0.0)
    report = files([base, head])
    assert flagged(report) == []
    assert "moved at the median but its fastest iteration less than half as far" in \
        " ".join(report.tests[0].result.notes)
    slower = head.copy()
    slower[:, 40] += math.log(3)  # every iteration of op40: the code
    assert flagged(files([base, slower])) == [("op40", "regressed")]


def test_an_op_whose_fastest_iteration_moved_too_is_not_held_as_a_busy_machine():
    """The issue's hidden workload: sort_x8 doing its work twice, medians 492 us -> 999
    us, fastest iteration 431 us -> 837 us (1.94x): it was held as "moved at the median
    but not at the fastest iteration". Every iteration moved: it regressed, no note."""
    rng = np.random.default_rng(26)
    base, head = processes(rng)
    head[:, 40] += math.log(2.03)
    head[0, 40] = base[:, 40].min() + math.log(1.94)  # the fastest iteration, 1.94x
    report = files([base, head])
    assert flagged(report) == [("op40", "regressed")]
    assert not any("fastest" in note for note in report.tests[0].result.notes)


@pytest.mark.parametrize("pairs", [2, 3])
@pytest.mark.parametrize("ops", [3, 44])
def test_two_or_three_pairs_are_judged_with_bounded_intervals(pairs, ops):
    """``--pairs 2`` gave ``-100.0% .. +4.5e14%`` and "nine in ten ops can show
    +2.9e14%": an op's own spread over 2 pairs has one degree of freedom. Fewer than
    paired.MIN_PAIRS pairs are judged with the assumed spread instead."""
    rng = np.random.default_rng(24 + pairs + ops)
    logs = processes(rng, count=2 * pairs, ops=ops)
    runs = profiles_from(logs)
    report = comparison.compare_runs(runs[0::2], runs[1::2], mode="pairs", labels=("a", "b"))
    test = report.tests[0]
    assert all(1 / 4 < row.change.low and row.change.high < 4 for row in test.ops)
    assert test.sees < 2 and flagged(report) == []
    assert f"{pairs} pairs: too few to see how each op moves between processes" in \
        " ".join(test.result.notes)
    slower = [x + np.where(np.arange(ops) == ops - 1, math.log(3) * (k % 2), 0.0)
              for k, x in enumerate(logs)]
    runs = profiles_from(slower)
    report = comparison.compare_runs(runs[0::2], runs[1::2], mode="pairs", labels=("a", "b"))
    assert flagged(report) == [(f"op{ops - 1}", "regressed")]


def test_from_four_pairs_the_ops_spreads_are_their_own():
    runs = profiles_from(processes(np.random.default_rng(25), count=2 * paired.MIN_PAIRS))
    report = comparison.compare_runs(runs[0::2], runs[1::2], mode="pairs", labels=("a", "b"))
    assert not any("too few" in note for note in report.tests[0].result.notes)
    assert math.isfinite(report.tests[0].result.dof)  # the paired model's t interval


def halved_results(pytester, factor, name):
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    costs = re.sub(r"(\d+)_000", lambda m: str(int(int(m.group(1)) * 1000 * factor)), COSTS)
    pytester.makepyfile(test_model=MODEL_TEST.replace("from costs import COSTS", costs))
    pytester.runpytest_inprocess(f"--opprof-json={name}", "--opprof-no-gate")
    return pytester.path / name


def test_two_results_files_of_a_head_twice_as_fast(pytester, monkeypatch, capsys):
    """The files form as a user runs it: exit 0, every op's change and estimate -50%
    (the fake clock halved them all: each is improved, none held at +0%), the ops'
    shared change said in every output."""
    monkeypatch.chdir(pytester.path)
    base, head = halved_results(pytester, 1, "a.json"), halved_results(pytester, 0.5, "b.json")
    assert main(["compare", str(base), str(head), "--json", "c.json",
                 "--markdown", "c.md"]) == 0
    out = capsys.readouterr().out
    assert "the ops moved together by -50.0%" in out
    assert "0 regressed, 6 improved, 0 ok of 6 op(s)" in out
    data = json.loads((pytester.path / "c.json").read_text())
    (test,) = data["tests"]
    assert test["shared"]["change"] == pytest.approx(0.5, rel=1e-12)
    assert [op["change"] for op in test["ops"]] == [pytest.approx(0.5, rel=1e-12)] * 6
    assert [op["estimate"] for op in test["ops"]] == [pytest.approx(0.5, rel=1e-12)] * 6
    md = (pytester.path / "c.md").read_text()
    assert "| -50.0% | -50.0% |" in md and "the ops moved together by -50.0%" in md


def test_a_files_gated_verdicts_widen_the_spread_of_their_ops(pytester, monkeypatch, capsys):
    """What the head's gate knew of an op from its stored baselines (the verdict's
    ``spread``, here 50%: an op that moves that much between processes) widens what one
    pair assumes for it: its 2.5x is no longer called."""
    monkeypatch.chdir(pytester.path)
    base = halved_results(pytester, 1, "a.json")
    assert pytester.runpytest_inprocess("--opprof-update-baseline").ret == 0
    costs = COSTS.replace('"mul": 30_000', '"mul": 75_000')
    pytester.makepyfile(test_model=MODEL_TEST.replace("from costs import COSTS", costs))
    pytester.runpytest_inprocess("--opprof-json=b.json", "--opprof-no-confirm")
    head = pytester.path / "b.json"
    assert main(["compare", str(base), str(head)]) == 1  # the gate's spreads are small
    capsys.readouterr()
    data = json.loads(head.read_text())
    for op in data["tests"][0]["result"]["comparison"]["ops"]:
        if op["name"] == "mul":
            op["spread"] = 0.5
    head.write_text(json.dumps(data))
    assert main(["compare", str(base), str(head)]) == 0
    assert "0 regressed, 0 improved, 6 ok of 6 op(s)" in capsys.readouterr().out
