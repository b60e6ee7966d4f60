"""Kernel time from CUPTI, on the fake CUPTI: linking, nesting, copies, zero
instrumentation, the fallbacks and their lines, the gate on kernel time (no GPU assumed)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from pytest_opprof import Profile, Profiler
from pytest_opprof.errors import OpprofError
from pytest_opprof.measure import measures
from pytest_opprof.measure.timers import FakeDevice, FakeTimer
from pytest_opprof.measure.timers.cupti import CuptiUnavailable, KernelTracer, import_cupti
from pytest_opprof.measure.timers.fake_cupti import ENV, FAILURES, FakeCupti
from pytest_opprof.model.profile import KERNEL, MEMCPY, MEMSET

from .fakes import SLOW_FACTOR, batch


def kernel_profiler(skip: int = 0, **device: int) -> tuple[Profiler, FakeDevice, FakeCupti]:
    tracer = KernelTracer(FakeCupti())
    tracer.start()
    timer = FakeTimer(FakeDevice(**device), tracer)
    assert isinstance(tracer.api, FakeCupti)
    return Profiler(timer, skip=skip, nodeid="t.py::t"), timer.device_model, tracer.api


def built(profiler: Profiler) -> Profile:
    profile = profiler.profile
    assert profile is not None
    return profile


# -- linking kernels to ops ----------------------------------------------------------------
def test_each_op_gets_the_summed_time_of_its_kernels_nested_ops_included():
    profiler, dev, _ = kernel_profiler(launch_ns=5_000)
    for _ in profiler.iterations(3):
        with profiler.op("outer"):
            dev.kernel(1_000, name="gemm")
            with profiler.op("inner"):
                dev.kernel(200, name="relu")
                dev.kernel(300, name="relu")
            with profiler.op("idle"):
                dev.cpu(50_000)
    profile = built(profiler)
    assert profile.measure == "fake-kernel"
    assert profile.kernel_samples.tolist() == [[1_500.0, 500.0, 0.0]] * 3
    assert profile.kernel_counts.tolist() == [[3.0, 2.0, 0.0]] * 3
    # the event span, launch waits included, stays the second figure
    assert (profile.samples[:, 0] > profile.kernel_samples[:, 0]).all()
    assert profile.gated_samples() is profile.kernel_samples


def test_an_activity_belongs_to_the_innermost_op_and_outside_ops_to_none():
    profiler, dev, _ = kernel_profiler()
    for _ in profiler.iterations(2):
        dev.kernel(10, name="before")
        with profiler.op("a"):
            with profiler.op("b"):
                dev.kernel(20, name="k")
            dev.kernel(30, name="k")
        dev.kernel(40, name="after")
    acts = built(profiler).activities
    assert acts is not None and len(acts) == 8
    names = [acts.names[i] for i in acts.name_id]
    assert names[:4] == ["before", "k", "k", "after"]
    assert acts.op_id.tolist() == [-1, 1, 0, -1] * 2
    assert acts.iteration.tolist() == [0] * 4 + [1] * 4
    assert acts.kind.tolist() == [KERNEL] * 8
    assert (acts.end_ns - acts.start_ns).tolist() == [10, 20, 30, 40] * 2


def test_an_op_that_did_not_run_is_nan_and_one_that_launched_nothing_is_zero():
    profiler, dev, _ = kernel_profiler()
    for i in profiler.iterations(3):
        with profiler.op("always"):
            dev.cpu(10)
        if i == 1:
            with profiler.op("once"):
                dev.kernel(70)
    profile = built(profiler)
    ks = profile.kernel_samples
    assert ks[:, 0].tolist() == [0.0, 0.0, 0.0]
    assert np.isnan(ks[0, 1]) and ks[1, 1] == 70.0 and np.isnan(ks[2, 1])


def test_memcpy_and_memset_inside_an_op_count_as_its_gpu_work_named():
    profiler, dev, _ = kernel_profiler()
    for _ in profiler.iterations(2):
        with profiler.op("upload"):
            dev.memcpy(400, "HtoD")
            dev.memset(50)
            dev.kernel(100, name="scale")
            dev.memcpy(300, "DtoH")
    profile = built(profiler)
    assert profile.kernel_samples.tolist() == [[850.0], [850.0]]
    assert profile.kernel_counts.tolist() == [[4.0], [4.0]]
    acts = profile.activities
    assert acts is not None
    assert [acts.names[i] for i in acts.name_id[:4]] == [
        "[memcpy HtoD]", "[memset]", "scale", "[memcpy DtoH]"]
    assert acts.kind[:4].tolist() == [MEMCPY, MEMSET, KERNEL, MEMCPY]


def test_work_launched_between_iterations_is_nobodys():
    profiler, dev, _ = kernel_profiler()
    loop = profiler.iterations(2)
    for i in loop:
        with profiler.op("a"):
            dev.kernel(10)
        if i == 0:
            dev.cpu(1)
    dev.kernel(999, name="after the loop")  # after the last iteration: never collected
    profile = built(profiler)
    assert profile.kernel_samples.tolist() == [[10.0], [10.0]]
    assert profile.activities is not None and len(profile.activities) == 2


def test_an_op_left_before_the_iteration_pops_nothing_and_open_ops_are_popped():
    """Unbalanced ops must not pop CUPTI's stack empty (it raises) nor leave ids on it."""
    profiler, dev, cupti = kernel_profiler()
    scope = profiler.op("spans iterations")
    for i in profiler.iterations(3):
        if i == 1:
            scope.__enter__()
        if i == 2:
            scope.__exit__(None, None, None)
        with profiler.op("a"):
            dev.kernel(5)
    assert all(not stack for stack in cupti.stack.values())
    assert built(profiler).kernel_samples[:, 0].tolist() == [5.0, 5.0, 5.0]


def test_the_hot_path_pushes_once_per_op_and_flushes_once_per_iteration_end():
    profiler, dev, cupti = kernel_profiler()
    before = cupti.flushes
    for _ in profiler.iterations(4):
        for k in range(5):
            with profiler.op(f"op{k}"):
                dev.kernel(10)
    # one push per op plus the iteration's own id; one flush at each iteration's end and
    # one at its start (what ran before the iteration is dropped)
    assert cupti.pushes == 4 * (5 + 1)
    assert cupti.pops == cupti.pushes
    assert cupti.flushes - before == 4 * 2
    assert dev.syncs == 4


def test_both_hot_paths_push_and_pop_the_correlation_ids(scope_impl):
    """The C hot path and its pure-Python reference call the tracer's hooks alike."""
    cupti = FakeCupti()
    tracer = KernelTracer(cupti)
    tracer.start()
    tracer.begin_iteration()
    names: list[str | None] = []
    marks: list[int] = []
    seen: list[list[int]] = []

    def mark() -> int:
        seen.append(list(cupti.stack.get(3, [])))
        return len(marks)

    scope_impl.set_sink((names, marks, mark, [], tracer.enter, tracer.exit))
    with scope_impl.OpScope("a"), scope_impl.OpScope("b"):
        pass
    scope_impl.set_sink(None)
    # each mark is taken with the op's id already pushed (entry) or not yet popped (exit)
    assert seen == [[1, 2], [1, 2, 3], [1, 2, 3], [1, 2]]
    assert cupti.stack[3] == [1]


# -- one event per boundary ----------------------------------------------------------------
def run_ops(timer: FakeTimer, iterations: int = 4, between: int = 0) -> Profile:
    profiler, dev = Profiler(timer, skip=0), timer.device_model
    for _ in profiler.iterations(iterations):
        with profiler.op("outer"):
            for name in ("a", "b", "c"):
                with profiler.op(name):
                    dev.kernel(1_000, name=name)
                dev.cpu(between)
        with profiler.op("d"):
            dev.kernel(500, name="d")
    return built(profiler)


@pytest.mark.parametrize("kernel", [False, True])
def test_consecutive_ops_share_one_event_per_boundary(kernel):
    """Per iteration: 12 marks (the iteration's two, two per op). Unshared, 12 events; an
    entry right after an exit (b, c after a, b; d after outer) takes the exit's: 9."""
    def timer(share: bool) -> FakeTimer:
        tracer = None
        if kernel:
            tracer = KernelTracer(FakeCupti())
            tracer.start()
        return FakeTimer(FakeDevice(), tracer, share_boundaries=share)

    two, one = timer(False), timer(True)
    unshared, shared = run_ops(two), run_ops(one)
    assert two.device_model.records == 4 * 12
    assert one.device_model.records == 4 * 9
    assert one.device_model.events_created == 9
    assert np.array_equal(shared.samples, unshared.samples)
    assert np.array_equal(shared.starts, unshared.starts)
    assert np.array_equal(shared.host_samples, unshared.host_samples)
    if kernel:
        assert np.array_equal(shared.kernel_samples, unshared.kernel_samples)


def test_shared_boundaries_are_the_default_under_the_kernel_measure_only():
    tracer = KernelTracer(FakeCupti())
    tracer.start()
    assert FakeTimer(tracer=tracer).share_boundaries
    assert not FakeTimer().share_boundaries


def test_with_shared_boundaries_the_gap_between_two_ops_joins_the_second_span():
    """The price of one event per boundary: what happens between two ops (here the device
    waiting 2 us for the host) is in the second op's span; kernel time is unchanged."""
    tracer = KernelTracer(FakeCupti())
    tracer.start()
    shared = run_ops(FakeTimer(FakeDevice(), tracer), between=3_000)
    unshared = run_ops(FakeTimer(FakeDevice()), between=3_000)
    assert unshared.samples[0].tolist() == [9_000.0, 1_000.0, 1_000.0, 1_000.0, 500.0]
    assert shared.samples[0].tolist() == [9_000.0, 1_000.0, 3_000.0, 3_000.0, 500.0]
    assert shared.kernel_samples[0].tolist() == [3_000.0, 1_000.0, 1_000.0, 1_000.0, 500.0]


# -- zero instrumentation ------------------------------------------------------------------
def test_a_loop_that_names_no_op_gets_one_op_per_kernel_name_in_launch_order():
    profiler, dev, _ = kernel_profiler()
    for i in profiler.iterations(4):
        dev.kernel(100, name="gemm")
        dev.memcpy(30, "DtoH")
        if i == 2:
            dev.kernel(5, name="extra")  # an iteration with one more kernel keeps the ids
        dev.kernel(200 + i, name="gemm")
    profile = built(profiler)
    assert [(o.name, o.occurrence) for o in profile.ops] == [
        ("gemm", 0), ("[memcpy DtoH]", 0), ("gemm", 1), ("extra", 0)]
    ks = profile.kernel_samples
    assert ks[:, 0].tolist() == [100.0] * 4
    assert ks[:, 2].tolist() == [200.0, 201.0, 202.0, 203.0]
    assert np.isnan(ks[[0, 1, 3], 3]).all() and ks[2, 3] == 5.0
    assert profile.meta["zero_instrumentation"] is True
    assert profile.activities is not None
    assert profile.activities.op_id[:3].tolist() == [0, 1, 2]
    Profile.from_json(profile.to_json())  # reads back


def test_zero_instrumentation_cuts_overlong_kernel_names():
    profiler, dev, _ = kernel_profiler()
    for _ in profiler.iterations(2):
        dev.kernel(10, name="void gemm<" + "float, " * 400 + ">")
        dev.kernel(10, name="")
    profile = built(profiler)
    assert len(profile.ops[0].name) == 1024 and profile.ops[0].name.endswith("...")
    assert profile.ops[1].name == "[kernel]"
    Profile.from_json(profile.to_json())


# -- the profile's new fields --------------------------------------------------------------
def test_kernel_fields_round_trip_through_json():
    profiler, dev, _ = kernel_profiler()
    for _ in profiler.iterations(3):
        with profiler.op("a"):
            dev.kernel(10, name="k")
            dev.memset(3)
    profile = built(profiler)
    again = Profile.from_json(profile.to_json())
    assert again.measure == "fake-kernel"
    assert np.array_equal(again.kernel_samples, profile.kernel_samples)
    assert np.array_equal(again.kernel_counts, profile.kernel_counts)
    assert again.activities is not None and profile.activities is not None
    assert again.activities.to_dict() == profile.activities.to_dict()
    assert again.activities.names == ["k", "[memset]"]


def test_an_events_profile_has_no_kernel_fields():
    timer = FakeTimer()
    profiler = Profiler(timer, skip=0)
    for _ in profiler.iterations(2):
        with profiler.op("a"):
            timer.device_model.kernel(10)
    profile = built(profiler)
    assert profile.measure == "fake" and profile.kernel_samples is None
    assert profile.activities is None and profile.gated_samples() is profile.samples
    assert Profile.from_json(profile.to_json()).kernel_samples is None


@pytest.mark.parametrize(("change", "message"), [
    (lambda a: a["op_id"].__setitem__(0, 7), "op_id must hold whole numbers from -1 to 0"),
    (lambda a: a["iteration"].__setitem__(0, 3), "iteration must hold whole numbers"),
    (lambda a: a["name_id"].__setitem__(0, 5), "name_id must hold whole numbers"),
    (lambda a: a["kind"].__setitem__(0, 3), "kind must hold whole numbers from 0 to 2"),
    (lambda a: a["end_ns"].pop(), "end_ns has 1 entries for 2 activities"),
    (lambda a: a["start_ns"].__setitem__(0, "x"), "start_ns must hold numbers"),
    (lambda a: a.pop("stream"), "KeyError"),
    (lambda a: a.__setitem__("names", [""]), "activity name must be a non-empty string"),
])
def test_a_malformed_activity_table_is_one_error(change, message):
    profiler, dev, _ = kernel_profiler()
    for _ in profiler.iterations(2):
        with profiler.op("a"):
            dev.kernel(10, name="k")
    data = built(profiler).to_dict()
    change(data["activities"])
    with pytest.raises(OpprofError, match=message):
        Profile.from_json(json.dumps(data))


def test_a_profile_with_no_measure_another_unit_or_negative_counts_is_refused():
    profiler, dev, _ = kernel_profiler()
    for _ in profiler.iterations(2):
        with profiler.op("a"):
            dev.kernel(10)
    data = built(profiler).to_dict()
    with pytest.raises(OpprofError, match="measure name must be a non-empty string"):
        Profile.from_json(json.dumps({**data, "measure": ""}))
    with pytest.raises(OpprofError, match="'cycles' is not a valid Unit"):
        Profile.from_json(json.dumps({**data, "unit": "cycles"}))
    assert Profile.from_json(json.dumps({**data, "measure": "cycles"})).measure == "cycles"
    with pytest.raises(OpprofError, match="kernel_counts holds a negative count"):
        Profile.from_json(json.dumps({**data, "kernel_counts": [[-1], [1]]}))
    with pytest.raises(OpprofError, match="kernel_samples_ns: every row must hold 1"):
        Profile.from_json(json.dumps({**data, "kernel_samples_ns": [[1, 2], [1, 2]]}))


# -- starting CUPTI, and why it cannot ------------------------------------------------------
@pytest.mark.parametrize(("failure", "reason"), [
    ("no-gpu", "CUPTI could not initialise (no GPU or no CUDA driver) (ERROR_NOT_INITIALIZED)"),
    ("multiple-subscribers", "another profiler (Nsight Systems, Nsight Compute, "
     "torch.profiler) holds CUPTI (ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)"),
    ("version", "the CUPTI library does not match the CUDA driver (a version mismatch) "
     "(ERROR_NOT_COMPATIBLE)"),
])
def test_each_way_cupti_refuses_is_one_line_and_leaves_nothing_enabled(failure, reason):
    cupti = FakeCupti(failure)
    tracer = KernelTracer(cupti)
    with pytest.raises(CuptiUnavailable) as info:
        tracer.start()
    assert str(info.value) == reason
    assert not cupti.enabled and not tracer.started


def test_without_cupti_python_the_reason_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)  # as if not installed
    with pytest.raises(CuptiUnavailable, match=r"cupti-python is not installed \(pip install "
                       r"'cupti-python>=13' 'cuda-bindings>=13' \(the cupti extra\)\)$"):
        import_cupti()


# -- as a user drives it ----------------------------------------------------------------------
#: Ops whose span is mostly the host's launch time (`launch` spends 200 us of host time
#: first) and one whose span is its kernel; SLOW scales a kernel.
SUITE = SLOW_FACTOR + """

def test_net(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for i in gpu_profiler.iterations(8):
        for k, name in enumerate(["scale", "norm", "gemm", "exp", "add", "copy"]):
            with gpu_profiler.op(name):
                dev.cpu(200_000 + 37_000 * ((i * 7 + k) % 5))  # the host's noise
                if name == "copy":
                    dev.memcpy(int(4_000 * factor(name)), "HtoD")
                else:
                    dev.kernel(int((k + 1) * 2_000 * factor(name)), name=name + "_kernel")


def test_untouched(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for i in gpu_profiler.iterations(8):
        dev.cpu(100_000 * (i % 3))
        dev.kernel(int(8_000 * factor("ew")), name="elementwise")
        dev.kernel(50_000, name="reduce")
        dev.kernel(int(8_000 * factor("ew")), name="elementwise")
        dev.kernel(30_000, name="gemm")
        dev.memcpy(3_000, "DtoH")
        dev.kernel(12_000, name="softmax")
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.delenv("SLOW", raising=False)
    monkeypatch.delenv(ENV, raising=False)
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nopprof_measure = fake-kernel\n")
    return pytester


def test_the_header_says_kernel_time_is_gated_on(suite):
    result = suite.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "opprof: machine 'fake-kernel-fake CUDA device'*",
        "opprof: measure fake-kernel (per-op GPU time from fake CUPTI activity records; event "
        "spans kept as the second figure)",
    ])


def test_the_results_file_holds_kernel_times_and_activities(suite):
    result = suite.runpytest("--opprof-json=out.json")
    result.assert_outcomes(passed=2)
    data = json.loads((suite.path / "out.json").read_text())
    text = json.dumps(data)
    assert '"measure": "fake-kernel"' in text and "gemm_kernel" in text
    assert "[memcpy HtoD]" in text and "reduce" in text


def test_a_slower_kernel_under_a_launch_bound_op_fails_its_test(suite, monkeypatch):
    for measure in ("fake-kernel", "fake"):
        with batch("b"):
            for _ in range(3):
                result = suite.runpytest("--opprof-update-baseline",
                                         f"--opprof-measure={measure}")
                assert result.ret == 0, result.stdout.str()
    assert suite.runpytest().ret == 0  # A/A
    monkeypatch.setenv("SLOW", "scale:1.1")  # +10% of 2 us under a ~280 us span
    result = suite.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*OP_ID0. scale: 2 us -> 2.2 us (+10.0%*"])
    # the event span cannot see it: each measure has its own baselines
    suite.runpytest("--opprof-measure=fake").assert_outcomes(passed=2)


def test_an_untouched_loop_is_gated_per_kernel(suite, monkeypatch):
    with batch("b"):
        for _ in range(3):
            assert suite.runpytest("--opprof-update-baseline", "-k", "untouched").ret == 0
    monkeypatch.setenv("SLOW", "ew:1.125")
    result = suite.runpytest("-k", "untouched")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*OP_ID0. elementwise: 8 us -> 9 us (+12.5%*",
                                 "*OP_ID2. elementwise*: 8 us -> 9 us (+12.5%*"])


@pytest.fixture
def auto(suite, monkeypatch):
    """``--opprof-measure=auto`` over the fakes: fake kernel time, else fake spans."""
    monkeypatch.setattr(measures, "AUTO_ORDER", ("fake-kernel", "fake", "time"))
    suite.makeini("[pytest]\n")
    return suite


@pytest.mark.parametrize("failure", [f for f in FAILURES])
def test_auto_falls_back_to_events_with_one_line_saying_why(auto, monkeypatch, failure):
    monkeypatch.setenv(ENV, failure)
    result = auto.runpytest()
    result.assert_outcomes(passed=2)
    lines = [x for x in result.stdout.lines if x.startswith("opprof: measure")]
    assert len(lines) == 1
    assert lines[0].startswith("opprof: measure fake (event span from virtual CUDA events): "
                               "kernel time unavailable: ")
    assert "fake-fake CUDA device" in result.stdout.str()


@pytest.mark.parametrize("failure", [f for f in FAILURES])
def test_kernel_asked_for_where_cupti_cannot_start_is_one_usage_error(suite, monkeypatch,
                                                                        failure):
    monkeypatch.setenv(ENV, failure)
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [x for x in result.stderr.lines if x.strip()]
    assert len(errors) == 1, errors
    # the setting named where it was given (the suite's ini file)
    assert errors[0].startswith("ERROR: ini option opprof_measure = 'fake-kernel' in tox.ini: ")
    assert errors[0].endswith("; use --opprof-measure=fake")
    assert "Traceback" not in result.stderr.str()


def test_auto_with_a_working_fake_cupti_measures_kernel_time(auto, monkeypatch):
    monkeypatch.setenv(ENV, "ok")
    result = auto.runpytest()
    result.stdout.fnmatch_lines(["opprof: measure fake-kernel *"])


def test_event_spans_asked_for_have_no_kernel_figures(suite):
    result = suite.runpytest("--opprof-measure=fake", "--opprof-json=out.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["opprof: machine 'fake-fake CUDA device'*",
                                 "opprof: measure fake (event span from virtual CUDA events)"])
    text = (suite.path / "out.json").read_text()
    assert '"kernel_samples_ns": [' not in text


def test_an_op_that_launches_nothing_is_left_unjudged_not_failed(pytester, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    pytester.makepyfile(test_host="""
def test_host(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for i in gpu_profiler.iterations(8):
        for name in "abcdef":
            with gpu_profiler.op(name):
                dev.kernel(1000, name=name)
        with gpu_profiler.op("host_only"):
            dev.cpu(5000 + 1000 * (i % 3))
""")
    pytester.makeini("[pytest]\nopprof_measure = fake-kernel\n")
    with batch("b"):
        for _ in range(3):
            assert pytester.runpytest("--opprof-update-baseline").ret == 0
    result = pytester.runpytest("-W", "error::RuntimeWarning")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["opprof: 0 regressed, 0 improved, 1 unjudged, *"])


@pytest.mark.parametrize(("args", "ini", "message"), [
    (["--opprof-measure=cycles"], "", "ERROR: --opprof-measure: unknown measure 'cycles'; "
     "choose one of auto, time, events, kernel, instructions* (or register it in a "
     "conftest.py)"),
    ([], "opprof_measure = cycles", "ERROR: ini option opprof_measure = 'cycles' in tox.ini: "
     "unknown measure 'cycles'; choose one of auto, time, events, kernel, instructions*"),
    ([], "opprof_backend = cpu", "ERROR: ini option opprof_backend = 'cpu' in tox.ini: is "
     "gone, set opprof_measure instead (auto, time, events, kernel, instructions*; time for cpu, "
     "events or kernel for cuda)"),
])
def test_a_wrong_measure_is_one_line(suite, args, ini, message):
    suite.makeini(f"[pytest]\n{ini}\n")
    result = suite.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert len([x for x in result.stderr.lines if x.strip()]) == 1
    assert "Traceback" not in result.stderr.str()


@pytest.mark.rerun
def test_the_confirmation_rerun_measures_what_the_first_run_did(suite, monkeypatch):
    """A re-run must not fall back to events where the first run had kernel time."""
    from pytest_opprof.run import rerun

    config = suite.parseconfig()
    args = rerun.profiling(config, ["test_suite.py::test_net"], measure="fake-kernel", skip=1)
    assert "--opprof-measure=fake-kernel" in args


@pytest.mark.e2e
def test_the_gpu_check_script_runs_dry_on_the_fake_backend(tmp_path, monkeypatch):
    """scripts/cupti_check.py is for a session with a GPU; --dry-run keeps it working."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    monkeypatch.delenv(ENV, raising=False)
    proc = subprocess.run([sys.executable, str(root / "scripts" / "cupti_check.py"),
                           "--dry-run", "--out", str(tmp_path)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = (tmp_path / "cupti_check.md").read_text()
    assert "- exit status 0; opprof: measure fake-kernel" in report
    assert "| scale_4096_x40 | 40.0 | 0.00% | 1 |" in report
    assert "A/A: 0 false failure(s) in 1 runs against a 2-run baseline" in report
    assert "| matmul_4096 | +12.5% | yes | OP_ID0. matmul_4096: 2.66 ms -> 3 ms" in report
    assert "| kernel measure (CUPTI ids + 1 event per boundary) |" in report
    assert (tmp_path / "cupti_check.log").exists()
