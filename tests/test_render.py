"""Exact-string tests of the report formats, on the fake clock."""

from __future__ import annotations

import math
import re
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_opprof.model.hints import Retake
from pytest_opprof.render.text import paddle_table, render, seconds, singa_ops, singa_phases

from .fakes import fake_profiler, train_profile


def test_seconds_print_like_a_cpp_stream():
    assert seconds(17372.2) == "1.73722e-05"
    assert seconds(612724) == "0.000612724"
    assert seconds(40912700) == "0.0409127"


def test_singa_phase_block():
    assert singa_phases(train_profile()) == (
        "Time Profiling:\n"
        "Forward Propagation Time : 1.25e-06 sec\n"
        "Backward Propagation Time : 2.5e-06 sec"
    )


def test_other_phases_take_their_own_name():
    def body(profiler, dev, i):
        for phase in ("forward", "update"):
            with profiler.phase(phase), profiler.op("x"):
                dev.kernel(1000)

    assert singa_phases(train_profile(body=body)).splitlines()[-1] == "Update Time : 1e-06 sec"


def test_singa_op_list_in_graph_order():
    assert singa_ops(train_profile()) == (
        "Time Profiling:\n"
        "OP_ID0. conv2d : 1e-06 sec\n"
        "OP_ID1. relu : 2.5e-07 sec\n"
        "OP_ID2. relu_grad : 5e-07 sec\n"
        "OP_ID3. conv2d_grad : 2e-06 sec"
    )


def test_paddle_table_sorted_by_total_in_ms_with_aligned_columns():
    """Its unit is said above it (before: a table of bare numbers)."""
    assert paddle_table(train_profile()) == (
        "Per op type (event span, ms; over the counted iterations):\n"
        "Stat=conv2d_grad   total=0.006     avg=0.002     max=0.002     min=0.002     count=3\n"
        "Stat=conv2d        total=0.003     avg=0.001     max=0.001     min=0.001     count=3\n"
        "Stat=relu_grad     total=0.0015    avg=0.0005    max=0.0005    min=0.0005    count=3\n"
        "Stat=relu          total=0.00075   avg=0.00025   max=0.00025   min=0.00025   count=3"
    )


def test_one_row_reproduces_paddles_line_shape():
    profiler, dev = fake_profiler(skip=0)
    for i in profiler.iterations(2):
        with profiler.op("conv2d_grad"):
            dev.kernel(2_222_000 if i else 15_852_000)
    assert paddle_table(profiler.profile).splitlines()[1] == (
        "Stat=conv2d_grad   total=18.074   avg=9.037   max=15.852   min=2.222   count=2")


def test_verbosity_levels():
    profile = train_profile()
    assert render(profile, 0) == ""
    one = render(profile, 1)
    assert one.splitlines()[0] == ("measure fake (fake CUDA device; event span from virtual "
                                   "CUDA events): "
                                   "3 of 4 iterations counted (first 1 skipped)")
    assert "Forward Propagation Time" in one and "OP_ID0" not in one
    two = render(profile, 2)
    assert two.startswith(one)
    assert two.splitlines()[-1] == (
        "Op time : 3.75e-06 sec of 5e-06 sec iteration wall time per counted iteration, "
        "25.0% outside any op")


def test_unbalanced_ops_are_reported():
    profiler, dev = fake_profiler(skip=0)
    scope = profiler.op("open")
    for i in profiler.iterations(2):
        if i == 0:
            scope.__enter__()
        with profiler.op("x"):
            dev.kernel(1)
    assert render(profiler.profile, 1).endswith(
        "1 op or phase boundaries were unbalanced (an exit with nothing open, or still open "
        "when the iteration ended) and were left out")


# ---- names from user code: one helper, every renderer ------------------------------------

def test_display_name_escapes_what_could_forge_a_line_and_keeps_the_rest():
    from pytest_opprof.render import display_name

    assert display_name("relu_grad") == "relu_grad"
    assert display_name("größe/ñ \\ x") == "größe/ñ \\ x"  # letters and backslashes kept
    assert display_name("a\nFAILED b") == "a\\nFAILED b"
    assert display_name("\x1b[31mred") == "\\x1b[31mred"
    assert display_name("x\ud800") == "x\\ud800"  # a lone surrogate: not encodable
    assert display_name("evil\u202etxt.exe") == "evil\\u202etxt.exe"  # bidi override
    assert display_name("a\u2028b\x85c") == "a\\u2028b\\x85c"  # what str.splitlines splits


def test_percent_and_duration_say_dash_for_no_value():
    from pytest_opprof.render import duration, percent

    assert percent(1.85) == "+85.0%" and percent(0.5) == "-50.0%"
    assert percent(None) == percent(math.nan) == duration(None) == duration(math.inf) == "-"
    assert duration(25_100) == "25.1 us"


def named_profile(name: str, phase: str = "forward"):
    """A profile of two ops called ``name`` (two occurrences) inside ``phase``."""
    profiler, dev = fake_profiler(skip=0)
    for _ in profiler.iterations(6):
        with profiler.phase(phase):
            for ns in (1000, 3000):
                with profiler.op(name):
                    dev.kernel(ns)
    assert profiler.profile is not None
    return profiler.profile


def gated(profile, verdicts=("regressed", "new")):
    """The profile's record with a failing result: its ops judged ``verdicts``, plus a
    missing op and an op over its budget, all named as in the profile."""
    from pytest_opprof.model.records import TestRecord
    from pytest_opprof.model.verdict import (
        BudgetVerdict,
        Comparison,
        OpStatus,
        OpVerdict,
        TestResult,
        Verdict,
    )

    name = profile.ops[0].name
    ops = [OpVerdict(name=name, occurrence=k, op_id=k, verdict=OpStatus(v), baseline_median=1000.0,
                     current_median=1850.0, ratio=1.85, corrected_ratio=1.85, margin=1.1,
                     p_value=1e-9, rank_p_value=1e-6, runs=3)
           for k, v in enumerate(verdicts)]
    ops.append(OpVerdict(name=name, occurrence=9, op_id=9, verdict=OpStatus.MISSING,
                         baseline_median=500.0))
    comparison = Comparison(ops=tuple(ops), drift=1.0, drift_source="ops", runs=3)
    result = TestResult(nodeid=profile.nodeid, verdict=Verdict.FAILED, machine=name,
                        profile=profile, comparison=comparison,
                        over_budget=(BudgetVerdict(op_id=0, name=name, median_ns=1000.0,
                                                   budget_ns=500.0),),
                        at_fault=tuple(ops))
    return TestRecord(profile, result)


def every_text_surface(name: str) -> dict[str, str]:
    from pytest_opprof.model.runinfo import RunInfo
    from pytest_opprof.render import html, markdown, text, verdicts

    profile = named_profile(name, phase=name)
    profile.nodeid = f"test_x.py::test_x[{name}]"
    record = gated(profile)
    run_info = RunInfo(machine=name, measure="fake", device=name)
    from pytest_opprof.stats.reports import report_of

    return {
        "text": text.render(profile, 2),
        "failure": verdicts.failure_text(record.result, Retake()),
        "summary": verdicts.summary_line(record.result, Retake()),
        "counts": verdicts.counts_line([record.result]),
        "markdown": markdown.render([record], run_info),
        "html": html.render_tests([report_of(record)], run_info,
                                  charts=False),
    }


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)


def tags(page: str) -> list[str]:
    parser = Tags()
    parser.feed(page)
    return parser.tags


FORGED = {"Cc", "Cf", "Cs", "Zl", "Zp"}
ANY_TEXT = st.text(st.characters(blacklist_categories=()), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANY_TEXT)
def test_no_name_forges_a_line_or_a_tag_in_any_renderer(name):
    """Arbitrary op, phase and test names (controls, escape codes, lone surrogates, markup):
    every renderer's output has no raw control character, as many lines as with a plain
    name, encodes as UTF-8, and the HTML has exactly the tags of a plain name's page."""
    plain, hostile = every_text_surface("x"), every_text_surface(name)
    for surface, out in hostile.items():
        out.encode("utf-8")  # no lone surrogate left to fail the file write
        raw = {c for c in out if c != "\n" and unicodedata.category(c) in FORGED}
        assert not raw, (surface, raw)
        assert len(out.splitlines()) == len(plain[surface].splitlines()), surface
    assert tags(hostile["html"]) == tags(plain["html"])
    assert tags(outside_code_spans(hostile["markdown"])) == []  # no markup renders


def outside_code_spans(markdown: str) -> str:
    """The Markdown with its code spans (CommonMark: a run of n backticks to the next
    run of exactly n) cut out: what GitHub would render as markup."""
    return re.sub(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", "", markdown)


@pytest.mark.parametrize("name", ["<img src=x>", "`<b>`", "``x|y``", "[a](http://x) | `"])
def test_markdown_shows_markup_in_names_as_code(name):
    from pytest_opprof.model.runinfo import RunInfo
    from pytest_opprof.render import markdown

    page = markdown.render([gated(named_profile(name))], RunInfo("m", "fake", "d"))
    assert tags(outside_code_spans(page)) == [] and "http" not in outside_code_spans(page)
    rows = [r for r in page.splitlines() if r.startswith("| `") and "OP_ID" in r]
    assert len(rows) == 3  # the table holds: six cells a row, pipes in names escaped
    assert all(len(re.split(r"(?<!\\)\|", r)) == 8 for r in rows), rows


CHART_NAMES = ["<script>alert(1)</script>", "$\\frac{1}{$", "--><b>x", "x\ud800\x1b[2J", "a\nb"]


@pytest.mark.e2e
def test_html_charts_take_any_name(tmp_path):
    """Hostile op and phase names through matplotlib's SVG (math mode, comments, lone
    surrogates). Drawn in a new process: matplotlib's C extensions do not survive an
    in-process pytester run dropping matplotlib from sys.modules."""
    pytest.importorskip("matplotlib")
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from tests.test_render import gated, named_profile\n"
        "from pytest_opprof.render import html\n"
        "from pytest_opprof.model.runinfo import RunInfo\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    record = gated(named_profile(name, phase=name))\n"
        "    page = html.render([record], RunInfo(name, 'fake', 'd'))\n"
        "    sys.stdout.buffer.write(page.encode('utf-8') + b'\\0')\n")
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code, json.dumps(CHART_NAMES)], cwd=root,
                          capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    pages = done.stdout.decode("utf-8").split("\0")[:-1]
    assert len(pages) == len(CHART_NAMES)
    for page in pages:
        assert page.count("<svg") == 3
        assert not set(tags(page)) & {"script", "b"}


def test_html_has_a_table_of_numbers_per_test():
    from pytest_opprof.model.runinfo import RunInfo
    from pytest_opprof.render import html
    from pytest_opprof.stats.reports import report_of

    record = gated(named_profile("relu_grad"))
    page = html.render_tests([report_of(record)],
                             RunInfo(machine="m", measure="fake", device="d"), charts=False)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page)
    cells = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row) for row in rows]
    assert cells[0] == ["OP_ID", "op", "baseline median", "current median",
                        "change (drift-corrected)", "verdict"]
    # beside the verdict, its own current median (1.85 us), not the profile's samples' (1 us)
    assert cells[1] == ["0", "<code>relu_grad</code>", "1 us", "1.85 us", "+85.0%",
                        "over_budget"]
    assert cells[2] == ["1", "<code>relu_grad</code>", "-", "1.85 us", "-", "new"]
    assert cells[3] == ["9", "<code>relu_grad</code>", "500 ns", "-", "-", "missing"]


def test_summary_names_ops_with_their_op_ids():
    from pytest_opprof.render.verdicts import summary_line

    line = summary_line(gated(named_profile("relu_grad")).result, Retake())
    assert "regressed: relu_grad (OP_ID 0) +85.0%" in line
    assert "new (not in the baseline): relu_grad (OP_ID 1)" in line
    assert "missing (in the baseline only): relu_grad (OP_ID 9)" in line


def test_strict_ops_failures_say_new_and_missing_not_regressed():
    from pytest_opprof.render.verdicts import failure_text

    text = failure_text(gated(named_profile("gelu"), verdicts=("new",)).result, Retake())
    assert "regressed" not in text
    assert "opprof: 1 new op(s) not in the baseline (failing under --opprof-strict=ops):" in text
    assert ("opprof: 1 op(s) of the baseline missing from this run (failing under "
            "--opprof-strict=ops):") in text


def test_run_info_round_trips_through_a_results_file_and_tolerates_junk():
    from pytest_opprof.model.runinfo import RunInfo

    info = RunInfo("m", "cpu", "d", versions={"python": "3.11"}, commit={"id": "abc"},
                   date="2026-11-30T20:00:00+00:00", benchmark_machine_info={"node": "n"})
    assert RunInfo.from_dict(info.to_dict()) == info
    assert RunInfo.from_dict({"machine": ["x"], "run": 3}) == RunInfo("?", "?", "?")
    assert info.with_machine_info() is info  # asked once only
