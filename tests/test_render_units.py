"""Figures in the profile's unit: instruction counts (``--opprof-measure=instructions``)
are written ``1.57M instr`` on every surface, never as a duration; ns profiles render as
before (tests/test_render.py and the other report tests hold them exactly)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from pytest_opprof.measure.measures import named
from pytest_opprof.model.profile import OpInfo, Profile
from pytest_opprof.model.records import TestRecord
from pytest_opprof.model.runinfo import RunInfo
from pytest_opprof.model.verdict import (
    Comparison,
    OpStatus,
    OpVerdict,
    TestResult,
    Verdict,
)
from pytest_opprof.model.words import Unit

#: Instructions per iteration of each op (4 iterations, the first skipped).
COUNTS = {"DOUBLE_add": 1_566_475.0, "sort": 412_000.0, "copy": 9_812.0}
#: A duration-like figure in any unit a renderer could write one in.
DURATION = re.compile(r"\d(?:\.\d+)?(?:e[-+]?\d+)? ?(?:ns|us|ms|sec|s)\b")
LONG_NAME = ("std::vector<double, std::allocator<double> > mylib::detail::transform<"
             "mylib::ops::add_kernel<double>, std::allocator<double> >(std::vector<double> "
             "const&, std::vector<double> const&)")


def profile_of(measure: str = "instructions") -> Profile:
    """Three ops in one phase, four iterations (one skipped); instruction counts for the
    instructions measure (the same numbers read as ns otherwise)."""
    names = list(COUNTS)
    n = 4
    samples = np.array([[COUNTS[name] + i for name in names] for i in range(n)])
    starts = np.cumsum(np.hstack([np.full((n, 1), 100.0), samples[:, :-1]]), axis=1)
    op_time = samples.sum(axis=1)
    wall = op_time + 1000.0
    return Profile(
        nodeid="tests/test_x.py::test_x", measure=measure,
        unit=Unit.COUNT if measure == "instructions" else Unit.NANOSECONDS,
        device="x86_64", skip=1,
        ops=[OpInfo(k, name, 0, 0, "forward") for k, name in enumerate(names)],
        samples=samples, phase_samples=op_time[:, None].copy(), phases=["forward"],
        wall=wall, op_time=op_time, starts=starts, phase_starts=np.full((n, 1), 100.0),
        iteration_starts=np.cumsum(np.hstack([[0.0], wall[:-1]])),
        op_functions=None if measure != "instructions" else [
            [("DOUBLE_add", 1_200_000), ("PyNumber_Add", 300_000), ("_PyEval_Eval", 60_000),
             ("malloc", 6_000)],
            [(LONG_NAME, 400_000), ("memcpy", 12_000)],
            []])


def record_of(profile: Profile, grew: bool = True) -> TestRecord:
    """The profile's record with a failing result: its first op regressed (with the
    functions that grew), its second new, a missing op."""
    first, second = profile.ops[0], profile.ops[1]
    functions = ((("DOUBLE_add", 1_200_000.0, 1_500_000.0),
                  (LONG_NAME, 400_000.0, 410_000.0),
                  ("PyNumber_Add", 300_000.0, 301_000.0),
                  ("malloc", 6_000.0, 6_100.0)) if grew else ())
    ops = (OpVerdict(name=first.name, occurrence=0, op_id=0, verdict=OpStatus.REGRESSED,
                     baseline_median=1_200_000.0, current_median=1_566_476.0, ratio=1.305,
                     corrected_ratio=1.305, margin=1.01, p_value=1e-9, rank_p_value=1e-6,
                     runs=3, grew=functions),
           OpVerdict(name=second.name, occurrence=0, op_id=1, verdict=OpStatus.NEW,
                     current_median=412_001.0),
           OpVerdict(name="gone", occurrence=0, op_id=9, verdict=OpStatus.MISSING,
                     baseline_median=5_000.0))
    drift, source = (1.0, "none") if profile.unit == "instructions" else (1.02, "ops")
    comparison = Comparison(ops=ops, drift=drift, drift_source=source, runs=3)
    result = TestResult(nodeid=profile.nodeid, verdict=Verdict.FAILED, machine="m",
                        profile=profile, comparison=comparison, at_fault=ops)
    return TestRecord(profile, result)


RUN_INFO = RunInfo(machine="m", measure="time", device="x86_64")


def no_duration(text: str) -> None:
    found = DURATION.findall(text)
    assert not found, found


# ---- the terminal report ------------------------------------------------------------------

def test_terminal_report_counts_instructions():
    from pytest_opprof.render.text import render

    profile = profile_of()
    two = render(profile, 2)
    no_duration(two)
    assert "callgrind" in two.splitlines()[0]
    assert "Forward Propagation Instructions : 1.99M instr" in two
    assert "OP_ID0. DOUBLE_add : 1.57M instr" in two
    assert "OP_ID2. copy : 9.81k instr" in two
    assert re.search(r"Stat=DOUBLE_add +total=4\.7M instr +avg=1\.57M instr", two)
    assert two.splitlines()[-1] == ("Op instructions : 1.99M instr of 1.99M instr per "
                                    "counted iteration, 0.1% outside any op")
    assert "Time" not in two and "sec" not in two


def test_verbosity_two_lists_each_ops_costliest_functions_aligned():
    from pytest_opprof.render.text import render, top_functions

    profile = profile_of()
    block = top_functions(profile)
    def row(op: str, function: str, n: str) -> str:  # names cut to 72 columns
        return f"    {op:<18}  {function:<72}  {n:>10}"

    assert block.splitlines() == [
        "Top functions per op (instructions in the last iteration, nested ops included):",
        row("OP_ID0. DOUBLE_add", "DOUBLE_add", "1.2M instr"),
        row("", "PyNumber_Add", "300k instr"),
        row("", "_PyEval_Eval", "60k instr"),  # three at most: malloc is not shown
        row("OP_ID1. sort", LONG_NAME[:69] + "...", "400k instr"),
        row("", "memcpy", "12k instr"),
    ]  # OP_ID2 recorded no function
    two = render(profile, 2)
    assert block in two
    ops, table = two.index("OP_ID0. DOUBLE_add : "), two.index("Stat=")
    assert ops < two.index(block) < table  # after the per-op list
    assert "Top functions" not in render(profile, 1)


def test_top_functions_only_for_instruction_profiles():
    from pytest_opprof.render.text import render

    ns = profile_of(measure="time")
    ns.op_functions = [[("f", 1)]] * 3  # even if a profile carried some
    assert "Top functions" not in render(ns, 2)
    assert "Top functions" not in render(profile_of(measure="events"), 2)


def test_ns_profiles_keep_seconds_in_the_terminal_report():
    from pytest_opprof.render.text import render

    two = render(profile_of(measure="time"), 2)
    assert "Time Profiling:" in two and "OP_ID0. DOUBLE_add : 0.00156648 sec" in two
    assert "instr" not in two


# ---- the gate's words -----------------------------------------------------------------

def test_failure_text_says_instructions_and_names_what_grew():
    from pytest_opprof.render.verdicts import failure_text

    text = failure_text(record_of(profile_of()).result)
    no_duration(text)
    lines = text.splitlines()
    assert lines[0] == ("opprof: 1 op(s) regressed in instructions executed against the "
                        "baseline of machine 'm' (3 runs; instructions are not "
                        "drift-corrected):")
    assert "drift" not in lines[1] and "from none" not in text
    assert lines[1].startswith("  OP_ID0. DOUBLE_add: 1.2M instr -> 1.57M instr (+30.5% "
                               "beyond its margin +1.0%, ")
    assert lines[2:5] == [
        "    grew: DOUBLE_add 1.2M -> 1.5M instr (+300k)",
        f"    grew: {LONG_NAME[:77]}... 400k -> 410k instr (+10k)",
        "    grew: PyNumber_Add 300k -> 301k instr (+1k)",
    ]  # at most three, long names cut to 80 columns
    assert not lines[5].startswith("    grew:")
    assert "  OP_ID1. sort: new, 412k instr (not in the baseline)" in lines
    assert "  OP_ID9. gone: missing (the baseline had it at 5k instr)" in lines


def test_grew_names_go_through_display_name():
    from pytest_opprof.render.verdicts import grew_lines

    v = OpVerdict(name="x", occurrence=0, op_id=0, verdict=OpStatus.REGRESSED,
                  grew=(("evil\nFAILED", 1.0, 2.0),))
    assert grew_lines(v, named("instructions")) == ["    grew: evil\\nFAILED 1 -> 2 instr (+1)"]


def test_ns_failure_text_has_no_grew_lines_and_keeps_its_drift():
    from pytest_opprof.render.verdicts import failure_text

    text = failure_text(record_of(profile_of(measure="time"), grew=False).result)
    assert "this run's drift +2.0%, from ops" in text and "grew" not in text
    assert "1.2 ms -> 1.57 ms (+30.5%; +30.5% drift-corrected" in text
    assert "instr" not in text


def test_verdict_table_in_instructions():
    from pytest_opprof.render.verdicts import verdict_table

    table = verdict_table(record_of(profile_of()).result)
    no_duration(table)
    assert table.splitlines()[0] == ("gate: 3 baseline runs; instructions executed, not "
                                     "drift-corrected")
    assert re.search(r"DOUBLE_add +1\.2M instr +1\.57M instr +\+30\.5%", table)


def test_op_line_in_the_measures_unit():
    from pytest_opprof.render.verdicts import op_line

    v = OpVerdict(name="x", occurrence=0, op_id=0, verdict=OpStatus.NEW, current_median=25_100)
    assert op_line(v, named("time")) == "OP_ID0. x: new, 25.1 us (not in the baseline)"
    assert op_line(v, named("instructions")) == ("OP_ID0. x: new, 25.1k instr (not in the "
                                                 "baseline)")


# ---- the files ------------------------------------------------------------------------

def test_markdown_in_instructions():
    from pytest_opprof.render import markdown

    page = markdown.render([record_of(profile_of())], RUN_INFO)
    rows = [r for r in page.splitlines() if "OP_ID" in r]
    assert rows and all("instr" in r for r in rows)
    for row in rows:
        no_duration(row)
    assert "op figures are instructions executed" in page
    assert "| 1.2M instr | 1.57M instr |" in page


def test_markdown_of_ns_profiles_is_unchanged():
    from pytest_opprof.render import markdown

    page = markdown.render([record_of(profile_of(measure="time"))], RUN_INFO)
    assert "op times are host time" in page and "instr" not in page
    assert "| 1.2 ms | 1.57 ms |" in page


def test_html_table_in_instructions():
    from pytest_opprof.render import html
    from pytest_opprof.stats.reports import report_of

    page = html.render_tests([report_of(record_of(profile_of()))], RUN_INFO, charts=False)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page)
    cells = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row) for row in rows]
    assert cells[0][3] == "current median (instructions)"
    assert cells[1][:4] == ["0", "<code>DOUBLE_add</code>", "1.2M instr", "1.57M instr"]
    assert "op figures are instructions executed" in page
    no_duration(page)


@pytest.mark.e2e
def test_html_charts_label_their_axes_in_instructions():
    """The charts through matplotlib, in a new process (as tests/test_render.py draws
    them: matplotlib does not survive an in-process pytester run dropping it)."""
    pytest.importorskip("matplotlib")
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tests.test_render_units import profile_of, record_of, RUN_INFO\n"
        "from pytest_opprof.render import html\n"
        "sys.stdout.write(html.render([record_of(profile_of(sys.argv[1] or None))], "
        "RUN_INFO))\n")
    root = Path(__file__).resolve().parent.parent

    def page(measure: str) -> str:
        done = subprocess.run([sys.executable, "-c", code, measure], cwd=root,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    counts, ns = page("instructions"), page("")
    assert counts.count("<svg") == ns.count("<svg") == 3
    # matplotlib writes text as glyph paths, with the string in an SVG comment
    assert "millions of instructions" in counts and "(ms)" not in counts
    assert "Per-op instructions against the baseline" in counts
    assert "(ms)" in ns and "instructions" not in ns


@pytest.mark.pytester
def test_results_json_has_each_tests_unit():
    from pytest_opprof.render import results_json

    jsonschema = pytest.importorskip("jsonschema")
    records = [record_of(profile_of()), record_of(profile_of(measure="events"), grew=False)]
    data = json.loads(results_json.render(records, RunInfo.collect("m", "time", "x86_64")))
    counts, ns = data["tests"]
    assert (counts["unit"], counts["measure"]) == ("count", "instructions")
    assert (ns["unit"], ns["measure"]) == ("ns", "events")
    assert counts["profile"]["op_functions"][0][0] == ["DOUBLE_add", 1_200_000]
    schema = Path(__file__).resolve().parent.parent / "pytest_opprof/schemas/results-2.schema.json"
    jsonschema.validate(data, json.loads(schema.read_text()))


def test_trace_says_its_axis_counts_instructions():
    from pytest_opprof.render import trace

    counts = trace.trace(profile_of())
    assert counts["otherData"]["unit"] == "count"
    assert "1 ns = 1 instruction" in counts["otherData"]["axis"]
    names = [e["args"]["name"] for e in counts["traceEvents"] if e["name"] == "thread_name"]
    assert names == ["CPU (time axis: instructions executed, 1 ns = 1 instruction)"]
    op = next(e for e in counts["traceEvents"] if e.get("cat") == "op")
    assert op["dur"] == pytest.approx(1_566.475) and op["args"]["instructions"] == 1_566_475
    ns = trace.trace(profile_of(measure="time"))
    assert "unit" not in ns["otherData"]
    assert all("instructions" not in e.get("args", {}) for e in ns["traceEvents"])


def test_benchmark_extra_info_keeps_counts_for_instructions():
    pytest.importorskip("pytest_benchmark")
    from pytest_opprof.render.bench import extra_info

    info = extra_info(record_of(profile_of()).result)
    assert (info["measure"], info["unit"]) == ("instructions", "instructions")
    assert info["ops"][0]["stats"]["median"] == pytest.approx(1_566_477.0)
    ns = extra_info(record_of(profile_of(measure="time")).result)
    assert ns["unit"] == "s" and ns["ops"][0]["stats"]["median"] == pytest.approx(1.566477e-3)


# ---- opprof compare and opprof history ------------------------------------------------

def comparison_report():
    from pytest_opprof.model.comparison import (
        OpChange,
        OpRow,
        PairedResult,
        Report,
        TestComparison,
    )

    change = OpChange(base_ns=1_200_000.0, head_ns=1_566_475.0, change=1.305, low=1.3,
                      high=1.31, sd=0.001, verdict=OpStatus.REGRESSED, detectable=0.01)
    result = PairedResult(ops=(change,), pairs=1, common=(1.0,), shared=None,
                          dof=float("inf"), quantile=1.96, notes=())
    test = TestComparison("t.py::t", result, (OpRow(0, "DOUBLE_add", 0, change),), (), ())
    return Report("files", "base.json", "head.json", 0.05, 0.05, 1, (test,), (), (), 0.15)


def test_compare_outputs_take_the_measure():
    from dataclasses import replace

    from pytest_opprof.render import compare

    ns = comparison_report()
    counts = replace(ns, measure="instructions", unit=Unit.COUNT)
    for out in (compare.text(counts), compare.markdown(counts)):
        assert "1.2M instr" in out and "1.57M instr" in out
        assert "medians, instructions executed; estimate is its mean" in out
        no_duration(out)
    assert "1.2 ms" in compare.text(ns) and "instr" not in compare.text(ns)
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parent.parent
                         / "pytest_opprof/schemas/compare-3.schema.json").read_text())
    for report, measure, unit in ((ns, "", "ns"), (counts, "instructions", "count")):
        data = json.loads(compare.to_json(report))
        assert (data["measure"], data["unit"]) == (measure, unit)
        jsonschema.validate(data, schema)


def history_of(measure: str):
    from pytest_opprof.model.baseline import BaselineRun
    from pytest_opprof.model.history import History, OpHistory, Step

    meta = {"measure": measure, "unit": named(measure).unit.value}
    runs = [BaselineRun(ops={}, wall=[], op_time=[], phases=[], meta=dict(meta))
            for _ in range(4)]
    levels = [1.2e6, 1.2e6, 1.5e6, 1.5e6]
    op = OpHistory(0, "DOUBLE_add", 0, [0, 1, 2, 3], levels, levels, 0.001,
                   [Step(2, 1.2e6, 1.5e6, 1.01, confirmed=1)], levels)
    return History("t.py::t", "m", runs, [op], tolerance=0.05)


def test_history_in_the_unit_of_its_runs():
    from pytest_opprof.render.history import ASCII_SPARKS, render_text, to_json
    from pytest_opprof.render.history_html import op_table

    counts = history_of("instructions")
    text = render_text(counts, ASCII_SPARKS)
    assert "1.2M instr -> 1.5M instr" in text and "1.5M instr" in text.splitlines()[-1]
    no_duration(text)
    assert '<td class="num">1.2M instr</td>' in op_table(counts)
    test = json.loads(to_json([counts], 0.05, []))["tests"][0]
    assert (test["measure"], test["unit"]) == ("instructions", "count")
    for measure in ("time", "events"):
        ns = history_of(measure)
        assert "1.2 ms -> 1.5 ms" in render_text(ns, ASCII_SPARKS)
        assert json.loads(to_json([ns], 0.05, []))["tests"][0]["unit"] == "ns"
