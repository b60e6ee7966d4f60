"""pytest's ecosystem and CI surfaces, each driven as a user would: xdist, pytest-benchmark,
the results JSON (validated against its schema), Markdown, JUnit XML, Chrome traces and
the HTML report."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pytest_opprof

from .fakes import SLOW_FACTOR, batch

SUITE = SLOW_FACTOR + """

@pytest.mark.parametrize("k", range(4))
def test_step(gpu_profiler, k):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(8):
        with gpu_profiler.phase("forward"):
            for j, name in enumerate(["conv2d", "relu", "matmul", "softmax", "add"]):
                with gpu_profiler.op(name):
                    dev.kernel(int((j + 1) * 10_000 * (k + 1) * factor(name)))
        with gpu_profiler.phase("backward"), gpu_profiler.op("conv2d_grad"):
            dev.kernel(30_000)
"""
NODEIDS = [f"test_suite.py::test_step[{k}]" for k in range(4)]


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.delenv("SLOW", raising=False)
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    return pytester


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def update(pytester, *args):
    with batch("b"):
        for _ in range(3):
            result = run(pytester, *args, "--opprof-update-baseline")
            assert result.ret == 0, result.stdout.str()


# ---- xdist --------------------------------------------------------------------------

@pytest.mark.e2e
@pytest.mark.parametrize("workers", [["-n", "2"], ["-p", "no:xdist"]], ids=["n2", "no-xdist"])
def test_reports_and_the_gate_work_alike_with_and_without_xdist(suite, monkeypatch, workers):
    pytest.importorskip("xdist")
    update(suite, *workers)
    monkeypatch.setenv("SLOW", "relu:3")
    result = run(suite, *workers, "--opprof-verbosity=2", "--opprof-json=r.json",
                 "--opprof-markdown=r.md", "--opprof-no-confirm")
    result.assert_outcomes(failed=4)  # relu is in every test
    out = result.stdout.str()
    assert out.count("opprof profile") == 1 and out.count("opprof gate: machine") == 1
    profiles = out.split("opprof profile")[1].split("opprof gate: machine")[0]
    summary = out.split("opprof gate: machine")[1]
    for nodeid in NODEIDS:  # the controller reports each test exactly once
        assert len(re.findall(rf"^-+ {re.escape(nodeid)} -+$", profiles, re.M)) == 1
        assert len(re.findall(rf"^{re.escape(nodeid)}: failed", summary, re.M)) == 1
    assert profiles.count("Stat=conv2d_grad ") == 4  # one Paddle table a test
    data = json.loads((suite.path / "r.json").read_text())
    assert sorted(t["nodeid"] for t in data["tests"]) == NODEIDS
    assert all({op["name"] for op in t["ops"] if op["verdict"] == "regressed"} == {"relu"}
               for t in data["tests"])
    # the typed verdict each worker shipped reached the controller whole
    assert all([v["name"] for v in t["result"]["at_fault"]] == ["relu"]
               and t["result"]["verdict"] == "failed" for t in data["tests"])
    assert "relu" in (suite.path / "r.md").read_text()


def test_workers_take_cuda_devices_round_robin():
    from pytest_opprof.measure.timers.cuda import worker_device

    assert [worker_device(n, 3) for n in range(5)] == [0, 1, 2, 0, 1]  # gw3 -> device 0
    assert worker_device(1, 1) is None  # one device: left alone
    assert worker_device(0, 0) is None


@pytest.mark.e2e
def test_workers_never_rewrite_cuda_visible_devices(pytester, monkeypatch):
    """Devices are pinned in-process when a worker first profiles on CUDA, so the
    environment the user set stays as it was, fixture or not."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    pytester.makepyfile("""
        import os

        def test_plain():
            assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"

        def test_profiled(gpu_profiler):
            for _ in gpu_profiler.iterations(2):
                pass
            assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"
    """)
    pytester.runpytest_subprocess("-n", "2", "--opprof-measure=fake").assert_outcomes(passed=2)
    pytester.runpytest_subprocess("-n", "2").assert_outcomes(passed=2)


# ---- pytest-benchmark ---------------------------------------------------------------

def test_both_fixtures_in_one_test_put_op_statistics_into_the_benchmark_json(pytester):
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile("""
        def step(dev):
            return sum(range(100))

        def test_both(benchmark, gpu_profiler):
            dev = gpu_profiler.timer.device_model
            for _ in gpu_profiler.iterations(6):
                with gpu_profiler.op("matmul"):
                    dev.kernel(2_000)
                with gpu_profiler.op("relu"):
                    dev.kernel(500)
            benchmark(step, dev)
    """)
    result = run(pytester, "--benchmark-json=bench.json", "--opprof-verbosity=1")
    result.assert_outcomes(passed=1)
    (bench,) = json.loads((pytester.path / "bench.json").read_text())["benchmarks"]
    info = bench["extra_info"]["opprof"]
    assert info["measure"] == "fake" and info["verdict"] == "no baseline"
    assert [op["name"] for op in info["ops"]] == ["matmul", "relu"]
    stats = info["ops"][0]["stats"]
    assert stats["median"] == pytest.approx(2e-6) and stats["rounds"] == 5
    assert {"min", "max", "mean", "stddev", "iqr", "q1", "q3", "ops", "outliers"} <= set(stats)
    assert bench["stats"]["rounds"] >= 1  # pytest-benchmark's own work is untouched
    assert "opprof profile" in result.stdout.str()
    run(pytester, "--benchmark-json=bench.json", "--opprof-no-gate").assert_outcomes(passed=1)
    (bench,) = json.loads((pytester.path / "bench.json").read_text())["benchmarks"]
    assert bench["extra_info"]["opprof"]["verdict"] == "not gated"


def test_with_pytest_benchmark_turned_off_the_plugin_gates_and_writes_alike(pytester,
                                                                            monkeypatch):
    """The README's claim: ``-p no:benchmark`` drops pytest-benchmark's header line and its
    ``.benchmarks/`` folder, and pytest-opprof takes a baseline, gates a 3x slowdown and
    writes its results file as with it on."""
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    pytester.makepyfile("""
        import os

        def test_step(gpu_profiler):
            dev = gpu_profiler.timer.device_model
            for _ in gpu_profiler.iterations(8):
                with gpu_profiler.op("matmul"):
                    dev.kernel(2_000 * int(os.environ.get("SLOW", "1")))
    """)
    off = ("-p", "no:benchmark")
    update(pytester, *off)
    same = run(pytester, *off)
    same.assert_outcomes(passed=1)
    assert "benchmark:" not in same.stdout.str()
    monkeypatch.setenv("SLOW", "3")
    slow = run(pytester, *off, "--opprof-json=r.json", "--opprof-no-confirm")
    slow.assert_outcomes(failed=1)
    assert "OP_ID0. matmul" in slow.stdout.str() and "regressed" in slow.stdout.str()
    assert json.loads((pytester.path / "r.json").read_text())["tests"]
    assert not (pytester.path / ".benchmarks").exists()


# ---- results JSON, Markdown, JUnit ----------------------------------------------------

@pytest.fixture
def regressed(suite, monkeypatch):
    """The suite with a baseline, then run with matmul 2x slower in every test."""
    update(suite)
    monkeypatch.setenv("SLOW", "matmul:2")
    return suite


def test_the_results_json_validates_against_its_schema(regressed):
    jsonschema = pytest.importorskip("jsonschema")
    result = run(regressed, "--opprof-json=out/r.json", "--opprof-no-confirm")
    result.assert_outcomes(failed=4)
    data = json.loads((regressed.path / "out/r.json").read_text())
    schema_path = Path(pytest_opprof.__file__).parent / "schemas" / "results-2.schema.json"
    schema = json.loads(schema_path.read_text())
    jsonschema.validate(data, schema)
    assert data["run"]["commit"] is not None and "benchmark_machine_info" in data["machine"]
    data["tests"][0]["ops"][0]["verdict"] = "slower"  # the schema does reject bad data
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


def test_markdown_lists_regressions_first_with_baseline_current_and_ratio(regressed):
    regressed.makepyfile(test_suite=regressed.path.joinpath("test_suite.py").read_text()
                         .replace('"add"]', '"add", "gelu"]'))
    result = run(regressed, "--opprof-markdown=summary.md", "--opprof-no-confirm")
    result.assert_outcomes(failed=4)
    text = (regressed.path / "summary.md").read_text()
    headings = re.findall(r"^### (.+)$", text, re.M)
    assert headings == ["Regressions", "New ops", "Tests"]
    regressions = text.split("### Regressions")[1].split("###")[0]
    rows = [r for r in regressions.splitlines() if r.startswith("| `")]
    assert len(rows) == 4 and all("matmul" in r for r in rows)
    (row,) = [r for r in rows if "test_step[0]" in r]  # tests run in any order
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "30 us" and cells[3] == "60 us" and cells[4].startswith("+")
    assert "gelu" in text.split("### New ops")[1]


def test_a_failure_says_its_summary_once_and_the_run_ends_with_its_counts(regressed):
    result = run(regressed, "--opprof-no-confirm")
    result.assert_outcomes(failed=4)
    # pytest's own short summary echoes each failure (in full where CI is set): not ours
    out = result.stdout.str().split("short test summary info")[0]
    line = "test_suite.py::test_step[0]: failed; 6 ops compared, drift +0.0%; regressed: " \
        "matmul (OP_ID 2) +100.0%"
    assert out.count(line) == 1  # in the gate summary, not again under the failure
    assert out.count("opprof: 1 op(s) regressed against the baseline") == 4
    result.stdout.fnmatch_lines(["opprof: 4 regressed, 0 improved, 0 unjudged, "
                                 "0 without baseline (ops of 4 test(s))"])


def test_regressed_ops_are_junit_properties(regressed):
    result = run(regressed, "--junitxml=junit.xml", "--opprof-no-confirm")
    result.assert_outcomes(failed=4)
    tree = ET.parse(regressed.path / "junit.xml")
    case = next(c for c in tree.iter("testcase") if c.get("name") == "test_step[0]")
    props = [(p.get("name"), p.get("value")) for p in case.iter("property")]
    assert ("opprof_verdict", "failed") in props
    regressed_ops = [v for n, v in props if n == "opprof_regressed"]
    assert len(regressed_ops) == 1 and regressed_ops[0].startswith("OP_ID2. matmul: 30 us -> 60 us")


NO_MATPLOTLIB = "import sys\nsys.modules['matplotlib'] = None  # as if not installed\n"


@pytest.mark.parametrize(("flag", "why"), [
    ("--opprof-trace=taken/traces", "*/taken is a file, not a folder"),
    ("--opprof-trace=taken", "is a file, not a folder; name a folder"),
    ("--opprof-json=folder", "is a folder, not a regular file; name a file to write"),
    ("--opprof-markdown=/dev/stdout", "names a device or process file, *"),
    ("--opprof-json=/dev/null", "names a device or process file, *"),
    ("--opprof-html=r.html", "the HTML report needs matplotlib: pip install *"),
], ids=["trace-under-a-file", "trace-is-a-file", "json-is-a-folder", "dev-stdout",
        "dev-null", "html-without-matplotlib"])
def test_output_problems_are_one_usage_error_before_any_test_runs(suite, flag, why):
    (suite.path / "taken").write_text("a file, not a folder")
    (suite.path / "folder").mkdir()
    suite.makepyfile(nomatplotlib=NO_MATPLOTLIB)
    args = ["-p", "nomatplotlib"] if "html" in flag else []
    result = run(suite, *args, flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    name, _, value = flag.partition("=")
    (line,) = [x for x in result.stderr.lines if x.strip()]  # one, naming flag and path
    assert fnmatch.fnmatch(line, f"ERROR: opprof: {name}=*{value}: {why}"), line
    assert "collected" not in result.stdout.str()  # before any test, not after the run
    assert not (suite.path / "taken").is_dir() and (suite.path / "taken").read_text()


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_output_files_honour_the_umask(suite, umask):
    old = os.umask(umask)
    try:
        result = run(suite, "--opprof-json=out/r.json", "--opprof-markdown=r.md",
                     "--opprof-trace=traces")
    finally:
        os.umask(old)
    result.assert_outcomes(passed=4)
    files = [suite.path / "out/r.json", suite.path / "r.md",
             *(suite.path / "traces").iterdir()]
    assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o666 & ~umask}


def test_a_symlinked_output_is_written_through_and_stays_a_link(suite):
    (suite.path / "kept").mkdir()
    (suite.path / "r.json").symlink_to(suite.path / "kept" / "results.json")
    (suite.path / "r.md").symlink_to(suite.path / "kept" / "summary.md")
    result = run(suite, "--opprof-json=r.json", "--opprof-markdown=r.md")
    result.assert_outcomes(passed=4)
    for link, target in (("r.json", "results.json"), ("r.md", "summary.md")):
        assert (suite.path / link).is_symlink()
        assert (suite.path / "kept" / target).stat().st_size > 0
    assert len(json.loads((suite.path / "kept/results.json").read_text())["tests"]) == 4


def test_a_write_failing_at_the_end_is_one_error_naming_its_flag(tmp_path):
    from pytest_opprof.errors import OpprofError
    from pytest_opprof.run.outputs import write

    (tmp_path / "taken").write_text("x")
    with pytest.raises(OpprofError, match=r"^--opprof-json=.*taken/r.json: cannot write \("):
        write("--opprof-json", tmp_path / "taken" / "r.json", "{}")
    assert (tmp_path / "taken").read_text() == "x"


# ---- Chrome trace ----------------------------------------------------------------------

def test_trace_files_open_as_trace_events_with_tracks_iterations_phases_and_ops(suite):
    result = run(suite, "--opprof-trace=traces", "--opprof-skip=2")
    result.assert_outcomes(passed=4)
    files = sorted((suite.path / "traces").glob("*.trace.json"))
    assert len(files) == 4
    trace = json.loads(files[0].read_text())
    events = trace["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert sorted(tracks.values()) == ["CPU (host dispatch)", "GPU stream 0"]
    gpu = next(t for t, n in tracks.items() if n.startswith("GPU"))
    iterations = [e for e in events if e.get("cat") == "iteration" and e["ph"] == "X"
                  and e["tid"] == gpu]
    assert [e["args"]["skipped"] for e in iterations] == [True, True] + [False] * 6
    assert iterations[0]["name"] == "iteration 0 (skipped)" and iterations[0]["cname"] == "grey"
    ops = [e for e in events if e.get("cat") == "op" and e["tid"] == gpu]
    assert len(ops) == 8 * 6 and {e["name"] for e in ops} == {
        "conv2d", "relu", "matmul", "softmax", "add", "conv2d_grad"}
    phases = [e for e in events if e.get("cat") == "phase"]
    assert [p["name"] for p in phases[:2]] == ["forward", "backward"]
    forward, it0 = phases[0], iterations[0]
    inside = [e for e in ops if forward["ts"] <= e["ts"]
              and e["ts"] + e["dur"] <= forward["ts"] + forward["dur"] + 1e-6
              and e["ts"] < it0["ts"] + it0["dur"]]
    assert [e["name"] for e in inside] == ["conv2d", "relu", "matmul", "softmax", "add"]
    matmul = next(e for e in ops if e["name"] == "matmul")
    assert matmul["dur"] == pytest.approx(30.0)  # us: the kernel's 30,000 ns
    assert all(e["ts"] + e["dur"] <= it["ts"] + it["dur"] + 1e-6 for e in ops
               for it in iterations if it["ts"] <= e["ts"] < it["ts"] + it["dur"])


def test_cpu_trace_has_one_track(pytester):
    pytester.makepyfile("""
        def test_cpu(gpu_profiler):
            for _ in gpu_profiler.iterations(3):
                with gpu_profiler.op("sum"):
                    sum(range(1000))
    """)
    result = run(pytester, "--opprof-measure=time", "--opprof-trace=t", "--opprof-no-gate")
    result.assert_outcomes(passed=1)
    (path,) = (pytester.path / "t").iterdir()
    events = json.loads(path.read_text())["traceEvents"]
    assert [e["args"]["name"] for e in events if e.get("name") == "thread_name"] == ["CPU"]
    assert len([e for e in events if e.get("cat") == "op"]) == 3


def test_on_cuda_each_op_is_an_nvtx_range():
    """The CUDA timer pushes a range named after each op and pops it (checked on the
    fake device, which is the CUDA timer on a virtual GPU)."""
    from .fakes import fake_profiler

    profiler, dev = fake_profiler(skip=0)
    for _ in profiler.iterations(2):
        with profiler.op("conv2d"):
            with profiler.op("relu"):
                dev.kernel(10)
    assert dev.ranges == [("push", "conv2d"), ("push", "relu"), ("pop", None),
                          ("pop", None)] * 2


# ---- the HTML report ---------------------------------------------------------------------

@pytest.mark.e2e
def test_html_report_from_pytest_and_from_a_results_file(regressed):
    pytest.importorskip("matplotlib")
    from pytest_opprof.cli import main

    result = run(regressed, "--opprof-html=report.html", "--opprof-json=r.json",
                 "--opprof-no-confirm")
    result.assert_outcomes(failed=4)
    html = (regressed.path / "report.html").read_text()
    assert html.count("<section") == 4 and html.count("<svg") == 12  # 3 charts a test
    assert "Per-op event span against the baseline" in html and "Phase split" in html
    assert "moved most" in html
    assert "<script" not in html and not re.search(r'(src|href)="https?:', html)  # offline
    assert html.count("<table") == 4 and "<th>baseline median</th>" in html  # numbers too
    out = regressed.path / "again.html"
    assert main(["report", str(regressed.path / "r.json"), "-o", str(out)]) == 0
    assert out.read_text().count("<svg") == 12


MARKUP = '<script>alert("x")</script><img src=x onerror=alert(1)>\ud800'


@pytest.mark.pytester
def test_opprof_report_escapes_markup_from_a_results_file(tmp_path):
    """Test ids, op names, phases and machine facts of a results file are data: a file
    whose strings hold markup (or a lone surrogate) writes none of it into the page."""
    pytest.importorskip("matplotlib")
    import subprocess
    import sys
    from html.parser import HTMLParser

    from pytest_opprof.model.runinfo import RunInfo
    from pytest_opprof.render.results_json import render

    from .test_render import gated, named_profile

    data = json.loads(render([gated(named_profile("relu"))], RunInfo("m", "fake", "d")))
    data["machine"].update(key=MARKUP, device=MARKUP, backend=MARKUP)
    test = data["tests"][0]
    test.update(nodeid=MARKUP, verdict=MARKUP, counted=MARKUP, baseline_runs=MARKUP,
                result=None)  # the entry is ignored: the page is drawn from the profile
    test["profile"]["nodeid"] = MARKUP
    for op in test["profile"]["ops"]:
        op.update(name=MARKUP, phase=MARKUP)
    test["profile"]["phases"] = [MARKUP]
    (tmp_path / "r.json").write_text(json.dumps(data))
    done = subprocess.run([sys.executable, "-m", "pytest_opprof.cli", "report", "r.json",
                           "-o", "r.html"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    tags: list[str] = []
    parser = HTMLParser()
    parser.handle_starttag = lambda tag, attrs: tags.append(tag)  # type: ignore[method-assign]
    parser.feed(page)
    assert not {"script", "img"} & set(tags) and "onerror=alert" not in page.replace(
        "onerror=alert(1)&gt;", "")
    assert page.count("&lt;script&gt;") >= 5 and "\\ud800" in page


def test_opprof_report_errors_are_one_line(tmp_path, capsys):
    from pytest_opprof.cli import main

    bad = tmp_path / "r.json"
    bad.write_text('{"schema": "something else"}')
    assert main(["report", str(bad), "-o", str(tmp_path / "x.html")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"opprof: {bad}: not a results file") and "\n" not in err
    assert main(["report", str(tmp_path / "missing.json")]) == 1
    assert "missing.json: cannot be read (" in capsys.readouterr().err
    assert main(["report", str(bad), "-o", "/dev/stdout"]) == 1  # checked before reading
    assert capsys.readouterr().err == ("opprof: -o /dev/stdout: names a device or process "
                                       "file, not a file to write; name a regular file\n")
    broken = tmp_path / "broken.json"
    test = {"nodeid": "t", "ops": [{"name": "x"}], "profile": None}
    broken.write_text(json.dumps({"schema": "pytest-opprof/results/2", "machine": {},
                                  "tests": [test]}))
    assert main(["report", str(broken)]) == 1
    assert "not a profile of schema" in capsys.readouterr().err
    pytest.importorskip("matplotlib")
    from .fakes import train_profile

    test["profile"] = train_profile().to_dict()  # loads, but its verdict is no verdict
    test["result"] = {"nodeid": "test_x.py::test_x", "verdict": "slower", "machine": "m",
                      "comparison": None, "over_budget": [], "at_fault": [],
                      "baseline_path": None}
    broken.write_text(json.dumps({"schema": "pytest-opprof/results/2", "machine": {},
                                  "tests": [test]}))
    assert main(["report", str(broken), "-o", str(tmp_path / "x.html")]) == 1
    err = capsys.readouterr().err
    assert "'verdict' is 'slower', not one of 'passed'" in err and "\n" not in err.strip()
    test["result"] = None  # no typed result: not gated, drawn from its profile alone
    test["ops"] = [{"name": "x", "current": {"median_ns": 5.0}}]  # the entry is not read
    broken.write_text(json.dumps({"schema": "pytest-opprof/results/2", "machine": {},
                                  "tests": [test]}))
    assert main(["report", str(broken), "-o", str(tmp_path / "x.html")]) == 0
    page = (tmp_path / "x.html").read_text(encoding="utf-8")
    assert "not gated" in page and "<code>conv2d</code>" in page


# ---- any output path: a reason or None, never an exception ------------------------------

SHAPES = ["file", "folder", "missing", "link-to-file", "link-to-folder", "dangling-link",
          "fifo", "/dev/null", "/proc/self/fd/1"]


def _shape(base: Path, shape: str, name: str) -> Path:
    """``name`` under ``base`` made into ``shape`` (or a fixed special path)."""
    if shape.startswith("/"):
        return Path(shape)
    path = base / name
    if shape == "file":
        path.write_text("x")
    elif shape == "folder":
        path.mkdir()
    elif shape == "fifo":
        os.mkfifo(path)
    elif shape.startswith("link") or shape == "dangling-link":
        target = base / f"{name}.target"
        if shape == "link-to-file":
            target.write_text("x")
        elif shape == "link-to-folder":
            target.mkdir()
        path.symlink_to(target)
    return path


@given(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3),
       st.sampled_from(["--opprof-json", "--opprof-trace"]))
@settings(max_examples=150, deadline=None)
def test_any_output_path_is_a_reason_or_none_never_an_exception(shapes, flag):
    """Paths through files, folders, links, FIFOs and devices: the start-up check gives a
    reason or None, and where it gives None the writer does write."""
    import tempfile

    from pytest_opprof.run.outputs import Output, problem, write

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        for depth, shape in enumerate(shapes):
            if (path.is_dir() and not path.is_symlink()) or depth == 0:
                path = _shape(path, shape, f"p{depth}")
            else:
                path = path / f"p{depth}"
        output = Output(flag, path, folder=flag == "--opprof-trace")
        why = problem(output)
        assert why is None or "\n" not in why
        if why is None:  # what the check passed, the writer writes
            target = path / "t.trace.json" if output.folder else path
            write(flag, target, "{}")
            assert Path(os.path.realpath(target)).read_text() == "{}"
