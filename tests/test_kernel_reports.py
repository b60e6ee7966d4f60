"""Kernel time (CUPTI) in every report: the terminal report at verbosity 2, the results
JSON and its schema, Markdown, HTML and the Chrome trace. Profiles come from the fake
device with the fake CUPTI (the same path the plugin takes with ``--opprof-measure``),
and from pytest runs of a user's test file (pytester)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import pytest_opprof
from pytest_opprof import Profile, Profiler
from pytest_opprof.measure.timers import FakeDevice, FakeTimer
from pytest_opprof.measure.timers.cupti import KernelTracer
from pytest_opprof.measure.timers.fake_cupti import FakeCupti
from pytest_opprof.model.hints import Retake
from pytest_opprof.model.records import TestRecord
from pytest_opprof.model.runinfo import RunInfo
from pytest_opprof.render import html, markdown, results_json, text, trace
from pytest_opprof.render.kernels import NAME_WIDTH, abbreviate
from pytest_opprof.stats.kernels import kernel_stats
from pytest_opprof.stats.reports import report_of
from pytest_opprof.store import results

from .fakes import train_profile

GEMM = ("void cutlass::Kernel<cutlass::gemm::kernel::GemmUniversal<float, "
        "cutlass::layout::RowMajor, cutlass::arch::Sm90 & OpClassTensorOp>>(Params&)")
SCHEMA = Path(pytest_opprof.__file__).parent / "schemas" / "results-2.schema.json"


def kernel_profiler(skip: int = 1) -> tuple[Profiler, FakeDevice]:
    tracer = KernelTracer(FakeCupti())
    tracer.start()
    timer = FakeTimer(FakeDevice(launch_ns=100), tracer=tracer)
    return Profiler(timer, skip=skip, nodeid="test_k.py::test_k"), timer.device_model


def kernel_profile(iterations: int = 4) -> Profile:
    """conv2d: a copy in, a long-named GEMM, relu nested in it; then add, which launches
    nothing in iteration 2; a memset outside any op. The host runs behind the device."""
    profiler, dev = kernel_profiler()
    for i in profiler.iterations(iterations):
        with profiler.op("conv2d"):
            dev.memcpy(300)
            dev.kernel(1000, name=GEMM)
            with profiler.op("relu"):
                dev.kernel(250, name="relu_kernel")
        with profiler.op("add"):
            if i != 2:
                dev.kernel(50, name="add_kernel")
        dev.memset(20)
        dev.cpu(2000)
    profile = profiler.profile
    assert profile is not None and profile.measure == "fake-kernel"
    return profile


def test_the_per_op_list_gives_kernel_time_then_the_span_and_each_ops_kernels():
    out = text.singa_ops(kernel_profile())
    lines = out.splitlines()
    assert lines[0] == "Time Profiling:"
    assert lines[1].startswith("Measure: kernel time (the GPU activities each op launched")
    assert "span: the op's event span" in lines[1]
    # conv2d: 300 + 1000 + 250 ns of GPU work (relu nested), its span is longer
    assert re.fullmatch(r"OP_ID0\. conv2d : 1\.55e-06 sec \(span \S+ sec\)", lines[2])
    assert lines[3:5] == [f"    {abbreviate(GEMM)} : count=3 total=0.003 ms",
                          "    [memcpy HtoD] : count=3 total=0.0009 ms"]
    assert re.fullmatch(r"OP_ID1\. relu : 2\.5e-07 sec \(span \S+ sec\)", lines[5])
    assert lines[6] == "    relu_kernel : count=3 total=0.00075 ms"
    # add launched nothing in one counted iteration: 0 there, so its mean is 2/3 of 50 ns
    assert re.fullmatch(r"OP_ID2\. add : 3\.33333e-08 sec \(span \S+ sec\)", lines[7])
    assert lines[8] == "    add_kernel : count=2 total=0.0001 ms"
    assert lines[9:] == ["Outside any op:", "    [memset] : count=3 total=6e-05 ms"]


def test_long_kernel_names_are_cut_to_a_width_in_the_terminal_only():
    shown = abbreviate(GEMM)
    assert len(GEMM) > NAME_WIDTH and len(shown) == NAME_WIDTH and shown.endswith("...")
    assert abbreviate("k\x1b[2J") == "k\\x1b[2J"  # no terminal sequence gets through
    report = text.render(kernel_profile(), 2)
    assert GEMM not in report and shown in report
    rows = results_json.entry(report_of(TestRecord(kernel_profile())))["ops"][0]["kernels"]
    assert rows[0]["name"] == GEMM


def test_the_per_kernel_table_is_by_total_time_in_ms_with_copies_and_memsets():
    table = text.kernel_table(kernel_profile())
    lines = table.splitlines()
    assert lines[0] == "GPU activities (kernels, memcpy, memset) by total time, ms:"
    stats = [re.split(r"\s{3,}", line.strip()) for line in lines[1:]]
    assert [row[0] for row in stats] == [f"Stat={abbreviate(GEMM)}", "Stat=[memcpy HtoD]",
                                         "Stat=relu_kernel", "Stat=add_kernel", "Stat=[memset]"]
    assert stats[0][1:] == ["total=0.003", "avg=0.001", "max=0.001", "min=0.001", "count=3"]
    assert stats[3][-1] == "count=2"
    assert len({line.index("total=") for line in lines[1:]}) == 1  # columns aligned


def test_verbosity_2_shows_the_kernel_sections_and_paddles_op_table_on_kernel_time():
    report = text.render(kernel_profile(), 2)
    assert "Stat=conv2d   total=0.00465" in report  # 3 x 1,550 ns of kernel time, in ms
    assert "GPU activities (kernels, memcpy, memset)" in report
    assert "Measure: kernel time" not in text.render(kernel_profile(), 1)


def test_the_header_says_the_ops_are_on_kernel_time():
    assert text.header(kernel_profile()).startswith(
        "measure fake-kernel (fake CUDA device; kernel time from fake CUPTI activity records): ")
    assert "CUPTI" not in text.header(train_profile())


def test_a_profile_without_kernel_time_reports_as_before():
    report = text.render(train_profile(), 2)
    assert "Measure" not in report and "GPU activities" not in report
    assert "(span " not in report
    entry = results_json.entry(report_of(TestRecord(train_profile())))
    assert entry["measure"] == "fake" and entry["outside_ops_kernels"] is None
    assert all(op["kernel"] is None and op["kernels"] is None for op in entry["ops"])


def test_kernel_stats_count_only_counted_iterations():
    profile = kernel_profile()
    assert sum(k.count for k in kernel_stats(profile)) == 3 * 5 - 1
    profile.skip = 0
    assert sum(k.count for k in kernel_stats(profile)) == 4 * 5 - 1


# -- results JSON, Markdown, HTML -----------------------------------------------------------

@pytest.mark.pytester
def test_results_json_has_the_measure_kernel_figures_and_kernel_rows_and_validates():
    jsonschema = pytest.importorskip("jsonschema")
    record = TestRecord(kernel_profile())
    data = json.loads(results_json.render([record], RunInfo.collect("m", "fake-kernel", "d")))
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    test = data["tests"][0]
    assert test["measure"] == "fake-kernel"
    conv = test["ops"][0]
    assert conv["current"]["median_ns"] == 1550.0  # the gated figure: kernel time
    assert conv["kernel"]["median_ns"] == 1550.0 and conv["kernel"]["count"] == 3
    assert conv["kernel"]["span_median_ns"] >= 1550.0
    assert [(k["name"], k["kind"], k["count"], k["total_ns"]) for k in conv["kernels"]] == [
        (GEMM, "kernel", 3, 3000.0), ("[memcpy HtoD]", "memcpy", 3, 900.0)]
    assert test["ops"][2]["kernel"]["count"] == 1  # the median over counted iterations
    assert [k["name"] for k in test["outside_ops_kernels"]] == ["[memset]"]
    test["ops"][0]["kernels"][0]["kind"] = "launch"  # the schema rejects bad data
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json.loads(SCHEMA.read_text()))


def test_a_results_file_read_back_reports_the_same_kernel_figures(tmp_path):
    record = TestRecord(kernel_profile())
    path = tmp_path / "r.json"
    path.write_text(results_json.render([record], RunInfo("m", "fake", "d")))
    _, (reported,) = results.load(path)
    assert reported.ops[0].kernels == report_of(record).ops[0].kernels
    assert results_json.entry(reported) == results_json.entry(report_of(record))
    assert reported.profile.activities is not None


def test_markdown_names_the_measure_in_its_header():
    run = RunInfo("m", "fake", "d")
    kernel = markdown.render([TestRecord(kernel_profile())], run)
    assert "1 profiled test(s), op times are kernel time, 0 failed" in kernel
    events = markdown.render([TestRecord(train_profile())], run)
    assert "op times are event span," in events
    both = markdown.render([TestRecord(train_profile()), TestRecord(kernel_profile())], run)
    assert "op times are event span in 1 test(s) and kernel time in 1 test(s)" in both


def test_markdown_shows_a_kernel_named_op_as_code():
    """Zero instrumentation names ops after kernels: ``<``, ``>``, ``&`` and ``|`` too."""
    profile = kernel_profile()
    profile.ops[0] = type(profile.ops[0])(0, "void k<a|b>&(T<1>)", 0, 0, None)
    from .test_render import gated, outside_code_spans, tags

    page = markdown.render([gated(profile)], RunInfo("m", "fake", "d"))
    assert "`void k<a\\|b>&(T<1>)`" in page
    assert tags(outside_code_spans(page)) == []


def test_html_shows_kernel_time_beside_the_span_and_escapes_kernel_names():
    record = TestRecord(kernel_profile())
    page = html.render_tests([report_of(record)],
                             RunInfo("m", "fake", "d"), charts=False)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page)
    cells = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row) for row in rows]
    assert cells[0] == ["OP_ID", "op", "baseline median", "current median (kernel time)",
                        "event span median", "kernels per iteration",
                        "change (drift-corrected)", "verdict"]
    assert cells[1][3] == "1.55 us" and cells[1][5] == "3"
    assert "op times are kernel time" in page
    assert "<code>void cutlass::Kernel&lt;cutlass::gemm" in page and "&amp; OpClass" in page
    assert GEMM not in page and "<cutlass" not in page
    kernel_header = next(c for c in cells if c and c[0] == "name")
    assert kernel_header == ["name", "kind", "count", "total", "mean", "min", "max"]
    plain = html.render_tests([report_of(TestRecord(train_profile()))],
                              RunInfo("m", "fake", "d"), charts=False)
    assert "kernel" not in plain


def test_html_charts_draw_kernel_time():
    pytest.importorskip("matplotlib")
    page = html.render([TestRecord(kernel_profile())], RunInfo("m", "fake", "d"))
    assert page.count("<svg") == 1 + 1 and "&lt;cutlass" in page  # no phases: no split chart


# -- Chrome trace -----------------------------------------------------------------------------

def _slices(events, tid, cat=None):
    return [e for e in events if e["ph"] == "X" and e["tid"] == tid
            and (cat is None or e.get("cat") == cat)]


def _nested(outer, inner) -> bool:
    return outer["ts"] <= inner["ts"] and (
        inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-6)


def test_the_trace_puts_activities_on_their_stream_inside_their_ops_slice():
    events = trace.events(kernel_profile())
    tracks = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert sorted(tracks.values()) == ["CPU (host dispatch)", "GPU stream 0"]
    gpu = trace.GPU_TID0
    ops = _slices(events, gpu, "op")
    acts = [e for e in _slices(events, gpu) if e["cat"] in ("kernel", "memcpy", "memset")]
    assert len(acts) == 4 * 5 - 1
    gemm = next(e for e in acts if e["name"] == GEMM)
    assert gemm["args"] == {"name": GEMM, "kind": "kernel", "op_id": 0, "op": "conv2d",
                            "iteration": 0, "stream": 0, "skipped": True}
    assert gemm["dur"] == pytest.approx(1.0)
    for act in acts:
        owner = act["args"]["op_id"]
        if owner < 0:
            assert act["name"] == "[memset]" and act["cat"] == "memset"
            continue
        it = act["args"]["iteration"]
        op = [o for o in ops if o["args"]["op_id"] == owner][it]
        assert _nested(op, act), (op, act)
    relu = next(e for e in acts if e["name"] == "relu_kernel")
    conv, nested = (next(o for o in ops if o["name"] == n) for n in ("conv2d", "relu"))
    assert _nested(conv, nested) and _nested(nested, relu)


def test_activities_that_cross_a_slice_edge_or_run_on_another_stream_get_their_own_track():
    profile = kernel_profile()
    acts = profile.activities
    assert acts is not None
    first = int(np.flatnonzero(acts.name_id == acts.names.index("relu_kernel"))[0])
    acts.end_ns[first] += 10_000  # outlasts relu's and conv2d's spans
    acts.stream[acts.names.index("[memset]") == acts.name_id] = 7
    events = trace.events(profile)
    tracks = {e["args"]["name"]: e["tid"] for e in events if e.get("name") == "thread_name"}
    assert set(tracks) == {"CPU (host dispatch)", "GPU stream 0", "GPU stream 7",
                           "GPU stream 0 (outside op spans)"}
    loose = _slices(events, tracks["GPU stream 0 (outside op spans)"])
    assert [(e["name"], e["args"]["iteration"]) for e in loose] == [("relu_kernel", 0)]
    memsets = _slices(events, tracks["GPU stream 7"], "memset")
    assert len(memsets) == 4


def test_every_slice_on_a_track_nests_or_is_disjoint():
    """What a trace viewer needs to draw a track: no slice crosses another's edge."""
    profile = kernel_profile(iterations=6)
    acts = profile.activities
    assert acts is not None
    acts.start_ns[::3] -= 400  # some start before their op
    events = trace.events(profile)
    assert any("(outside op spans)" in e["args"]["name"] for e in events
               if e.get("name") == "thread_name")
    for tid in {e["tid"] for e in events if e["ph"] == "X"}:
        spans = sorted(((round(e["ts"] * 1e3), round((e["ts"] + e["dur"]) * 1e3))
                        for e in _slices(events, tid)), key=lambda s: (s[0], -s[1]))
        for k, (_, b) in enumerate(spans):
            for c, d in spans[k + 1:]:
                assert d <= b or c >= b, (tid, b, (c, d))


# -- as a user runs it -------------------------------------------------------------------------

USER_TEST = f"""
GEMM = {GEMM!r}


def test_step(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(6):
        with gpu_profiler.op("matmul"):
            dev.memcpy(2_000)
            dev.kernel(30_000, name=GEMM)
        with gpu_profiler.op("relu"):
            dev.kernel(500, name="relu<float>")
        dev.cpu(50_000)
"""


@pytest.fixture
def user(pytester, monkeypatch):
    monkeypatch.delenv("OPPROF_FAKE_CUPTI", raising=False)
    pytester.makepyfile(test_user=USER_TEST)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    return pytester


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_a_user_run_with_kernel_time_reports_kernels_everywhere(user):
    jsonschema = pytest.importorskip("jsonschema")
    result = run(user, "--opprof-measure=fake-kernel", "--opprof-verbosity=2", "--opprof-skip=2",
                 "--opprof-json=out/r.json", "--opprof-markdown=out/s.md",
                 "--opprof-trace=out/traces", "--opprof-html=out/r.html", "--opprof-no-gate")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "Measure: kernel time (the GPU activities each op launched*",
        "OP_ID0. matmul : 3.2e-05 sec (span * sec)",
        f"    {abbreviate(GEMM)} : count=4 total=0.12 ms",
        "    [[]memcpy HtoD] : count=4 total=0.008 ms",
        "OP_ID1. relu : 5e-07 sec (span * sec)",
        "    relu<float> : count=4 total=0.002 ms",
        "GPU activities (kernels, memcpy, memset) by total time, ms:",
        f"Stat={abbreviate(GEMM)}   total=0.12 *count=4",
        "Stat=[[]memcpy HtoD] * total=0.008 *count=4",
        "Stat=relu<float> * total=0.002 *count=4",
    ])
    data = json.loads((user.path / "out/r.json").read_text())
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    (test,) = data["tests"]
    assert test["measure"] == "fake-kernel"
    assert test["ops"][0]["kernel"]["median_ns"] == 32_000.0
    assert test["ops"][0]["kernels"][0]["name"] == GEMM
    assert "op times are kernel time" in (user.path / "out/s.md").read_text()
    page = (user.path / "out/r.html").read_text()
    assert "current median (kernel time)" in page and "relu&lt;float&gt;" in page
    assert "relu<float>" not in page
    from pytest_opprof.cli import main

    assert main(["report", str(user.path / "out/r.json"), "-o", str(user.path / "a.html")]) == 0
    again = (user.path / "a.html").read_text()
    assert "current median (kernel time)" in again and "relu&lt;float&gt;" in again
    (trace_file,) = (user.path / "out/traces").glob("*.trace.json")
    events = json.loads(trace_file.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) == 12 and {e["tid"] for e in kernels} == {trace.GPU_TID0}


def test_a_user_run_without_kernel_time_reports_as_before(user):
    result = run(user, "--opprof-verbosity=2", "--opprof-json=r.json", "--opprof-no-gate")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "Measure:" not in out and "GPU activities" not in out
    result.stdout.fnmatch_lines(["OP_ID0. matmul : * sec", "OP_ID1. relu : * sec"])
    test = json.loads((user.path / "r.json").read_text())["tests"][0]
    assert test["measure"] == "fake" and test["ops"][0]["kernels"] is None


ZERO_TEST = f"""
GEMM = {GEMM!r}


def test_untouched(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(5):
        dev.memcpy(1_000)
        dev.kernel(20_000, name=GEMM)
        dev.kernel(400, name="relu<float>")
        dev.kernel(400, name="relu<float>")
        dev.cpu(30_000)
"""


def test_zero_instrumentation_reports_one_op_per_kernel_name(user):
    jsonschema = pytest.importorskip("jsonschema")
    user.makepyfile(test_user=ZERO_TEST)
    result = run(user, "--opprof-measure=fake-kernel", "--opprof-verbosity=2",
                 "--opprof-json=r.json", "--opprof-trace=traces", "--opprof-no-gate")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "Measure: kernel time; the test named no op: one op per kernel name, in launch "
        "order (zero instrumentation)",
        "OP_ID0. [[]memcpy HtoD] : 1e-06 sec",
        f"OP_ID1. {abbreviate(GEMM)} : 2e-05 sec",
        "OP_ID2. relu<float> : 4e-07 sec",
        "OP_ID3. relu<float> : 4e-07 sec",
        f"Stat={abbreviate(GEMM)}   total=0.08 *count=4",
        "Stat=relu<float> * total=0.0032 *count=8",
    ])
    out = result.stdout.str()
    assert "(span" not in out and "    relu<float> : count" not in out
    data = json.loads((user.path / "r.json").read_text())
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    (test,) = data["tests"]
    assert test["zero_instrumentation"] is True and test["measure"] == "fake-kernel"
    assert [op["name"] for op in test["ops"]] == ["[memcpy HtoD]", GEMM, "relu<float>",
                                                  "relu<float>"]
    (trace_file,) = (user.path / "traces").glob("*.trace.json")
    events = json.loads(trace_file.read_text())["traceEvents"]
    ops = [e for e in events if e.get("cat") == "op"]
    acts = [e for e in events if e.get("cat") in ("kernel", "memcpy")]
    assert len(ops) == len(acts) == 20
    assert {e["tid"] for e in ops + acts} == {trace.GPU_TID0}  # each kernel inside its op


def test_a_regressed_ops_failure_names_the_measure_and_the_kernels_it_launched():
    from pytest_opprof.render.verdicts import failure_text

    from .test_render import gated

    text_ = failure_text(gated(kernel_profile()).result, Retake())
    lines = text_.splitlines()
    regressed = lines.index(next(x for x in lines if "op(s) regressed" in x))
    assert "op(s) regressed in kernel time against the baseline" in lines[regressed]
    assert lines[regressed + 1].startswith("  OP_ID0. conv2d: 1 us -> 1.85 us")
    assert lines[regressed + 2:regressed + 4] == [
        f"    kernel {abbreviate(GEMM)}: 3 in 3 counted iterations, mean 1 us",
        "    memcpy [memcpy HtoD]: 3 in 3 counted iterations, mean 300 ns"]
    assert "kernel time" not in failure_text(gated(train_profile()).result, Retake())


def test_benchmark_extra_info_names_the_measure():
    from pytest_opprof.render.bench import extra_info

    from .test_render import gated

    assert extra_info(gated(kernel_profile()).result)["measure"] == "fake-kernel"
    assert extra_info(gated(train_profile()).result)["measure"] == "fake"


def test_html_from_a_results_file_ignores_junk_kernel_fields_in_its_entries(tmp_path):
    """A results file's entries are what its profile and result say: ``opprof report``
    makes them again from those, so junk written into an entry shows nowhere."""
    path = tmp_path / "r.json"
    path.write_text(results_json.render([TestRecord(kernel_profile())], RunInfo("m", "f", "d")))
    data = json.loads(path.read_text())
    data["tests"][0]["ops"][0]["kernel"] = {"count": "many", "span_median_ns": [1]}
    data["tests"][0]["ops"][1]["kernel"] = "x"
    path.write_text(json.dumps(data))
    run_info, reports = results.load(path)
    page = html.render_tests(reports, run_info, charts=False)
    assert "kernels per iteration" in page and "many" not in page
    assert page == html.render_tests([report_of(TestRecord(kernel_profile()))], run_info,
                                     charts=False)


def _renamed(name: str) -> Profile:
    profile = kernel_profile()
    assert profile.activities is not None
    profile.activities.names[profile.activities.names.index("relu_kernel")] = name
    return profile


@pytest.mark.parametrize("name", ["k\x1b[2J", "a\nb", "<script>alert(1)</script>",
                                  "\u202eevil", "x|y`z", "t\ud800"])
def test_no_kernel_name_forges_a_line_or_a_tag(name):
    import unicodedata

    from .test_render import FORGED, tags

    def surfaces(profile):
        record = TestRecord(profile)
        return {"text": text.render(profile, 2),
                "html": html.render_tests([report_of(record)],
                                          RunInfo("m", "fake", "d"), charts=False),
                "json": results_json.render([record], RunInfo("m", "fake", "d")),
                "trace": json.dumps(trace.trace(profile))}

    plain, hostile = surfaces(_renamed("plain")), surfaces(_renamed(name))
    for surface, out in hostile.items():
        out.encode("utf-8", "surrogatepass" if surface == "json" else "strict")
        raw = {c for c in out if c != "\n" and unicodedata.category(c) in FORGED}
        assert not raw, (surface, raw)
        assert len(out.splitlines()) == len(plain[surface].splitlines()), surface
    assert tags(hostile["html"]) == tags(plain["html"])
