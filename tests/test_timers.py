from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from pytest_opprof.measure import timers
from pytest_opprof.measure.timers import CpuTimer, FakeDevice, FakeTimer
from pytest_opprof.measure.timers.fake import EventNotReady

from .fakes import fake_profiler


def test_cpu_timer_marks_are_perf_counter_ns():
    timer = CpuTimer()
    assert timer.mark is time.perf_counter_ns
    times, host = timer.resolve([5, 7, 11])
    assert list(times) == [5, 7, 11]  # already nanoseconds: made arrays in bulk later
    assert host is None
    assert timer.xp is np
    assert "cores" in timer.device


def test_fake_device_refuses_to_read_an_event_before_a_sync():
    dev = FakeDevice()
    start, end = dev.new_event(), dev.new_event()
    dev.record(start)
    dev.kernel(1000)
    dev.record(end)
    with pytest.raises(EventNotReady):
        dev.elapsed_ns(start, end)
    dev.synchronize(end)
    assert dev.elapsed_ns(start, end) == 1000


def test_cuda_timing_one_sync_per_iteration_two_records_per_op_events_reused():
    profiler, dev = fake_profiler(skip=0)
    ops = 5
    for _ in profiler.iterations(6):
        for k in range(ops):
            with profiler.op(f"op{k}"):
                dev.kernel(100 * (k + 1))
    profile = profiler.profile
    assert dev.syncs == 6
    # two records per op, plus the iteration's opening and closing marks
    assert dev.records == 6 * (2 * ops + 2)
    # events are created for the first iteration and reused by every later one
    assert dev.events_created == 2 * ops + 2
    assert profile.samples.tolist() == [[100.0, 200.0, 300.0, 400.0, 500.0]] * 6


def test_cuda_times_are_resolved_after_the_sync_not_before():
    # Were any elapsed time read before the iteration's sync, the fake device would
    # raise EventNotReady: the host never catches up with the queued kernels otherwise.
    profiler, dev = fake_profiler(skip=0)
    for _ in profiler.iterations(3):
        with profiler.op("gemm"):
            dev.kernel(10_000)
            dev.cpu(10)  # the host runs ahead of the device
    assert profiler.profile.samples[:, 0].tolist() == [10_000.0] * 3


def test_cuda_keeps_cpu_dispatch_time_per_op():
    profiler, dev = fake_profiler(skip=0, launch_ns=30)
    for _ in profiler.iterations(2):
        with profiler.op("matmul"):
            dev.kernel(5000)
            dev.kernel(5000)
    profile = profiler.profile
    assert profile.samples[:, 0].tolist() == [10_000.0, 10_000.0]  # device time
    assert profile.host_samples[:, 0].tolist() == [60.0, 60.0]  # two launches on the host


def test_fake_timer_is_the_cuda_timer():
    timer = FakeTimer()
    assert isinstance(timer, timers.cuda.CudaTimer) and timer.measure == "fake"


@pytest.mark.pytester
def test_importing_the_plugin_does_not_import_cupy():
    code = ("import sys, pytest_opprof.plugin, pytest_opprof.measure.timers.cuda; "
            "print('cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
