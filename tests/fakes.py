"""Helpers shared by the tests: profiles on the fake backend, children to interrupt."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_opprof import Profile, Profiler
from pytest_opprof.measure.timers import FakeDevice, FakeTimer
from pytest_opprof.run.options import BATCH_VARIABLE


def fake_profiler(skip: int = 1, **device: int) -> tuple[Profiler, FakeDevice]:
    timer = FakeTimer(FakeDevice(**device))
    return Profiler(timer, skip=skip, nodeid="test_x.py::test_x"), timer.device_model


def train_profile(iterations: int = 4, skip: int = 1,
                  body: Callable[[Profiler, FakeDevice, int], None] | None = None) -> Profile:
    """A fake training step: conv2d (slow in iteration 0), relu | relu_grad, conv2d_grad,
    then 1.25 us of host time the device waits for."""
    profiler, dev = fake_profiler(skip)
    for i in profiler.iterations(iterations):
        if body is not None:
            body(profiler, dev, i)
            continue
        with profiler.phase("forward"):
            with profiler.op("conv2d"):
                dev.kernel(3000 if i == 0 else 1000)
            with profiler.op("relu"):
                dev.kernel(250)
        with profiler.phase("backward"):
            with profiler.op("relu_grad"):
                dev.kernel(500)
            with profiler.op("conv2d_grad"):
                dev.kernel(2000)
        dev.cpu(5000 if i else 7000)  # the host is behind: the device idles 1.25 us
    profile = profiler.profile
    assert profile is not None
    return profile


#: The head of a pytester test module whose ops slow down on demand:
#: SLOW="relu:1.3,matmul:2" makes factor("relu") 1.3 and factor("matmul") 2.
SLOW_FACTOR = """
import os
import pytest


def factor(name):
    for part in filter(None, os.environ.get("SLOW", "").split(",")):
        op, value = part.split(":")
        if op == name:
            return float(value)
    return 1.0
"""

#: A pytester test module of six ops, each as slow as SLOW asks.
SIX_OP_NET = SLOW_FACTOR + """

def test_net(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    for _ in gpu_profiler.iterations(8):
        for k, name in enumerate(["conv2d", "batch_norm", "relu", "pool2d", "mul", "softmax"]):
            with gpu_profiler.op(name):
                dev.kernel(int((k + 1) * 10_000 * factor(name)))
"""


def six_op_project(pytester, monkeypatch):
    """A pytester project of SIX_OP_NET on the fake backend's exact times, with no thread
    variable set and no slowdown (the fixture ``suite`` of the conditions' and strict
    mode's tests)."""
    from pytest_opprof.model.conditions import THREAD_VARIABLES

    for name in (*THREAD_VARIABLES, "SLOW"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_net=SIX_OP_NET)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    return pytester


def ctrl_c_as_from_a_terminal() -> None:
    """``preexec_fn`` of a child that a test interrupts with SIGINT: Ctrl-C's default
    disposition, as a terminal's shell starts a command. A process inherits an ignored
    SIGINT (a shell starts a background job with SIGINT ignored, and the suite's
    processes and their children keep that), and Python then raises no
    KeyboardInterrupt: the child would not notice the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def git(cwd: Path, *args: str) -> str:
    """git in ``cwd`` with an identity of its own (a runner may have none); its output,
    stripped."""
    return subprocess.run(["git", "-c", "user.name=opprof", "-c", "user.email=opprof@example.com",
                           *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def committed(path: Path) -> Path:
    """``path`` made a git repository holding what is in it, in one commit."""
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    return path


@contextlib.contextmanager
def batch(name: str) -> Iterator[None]:
    """Baseline updates in the block store runs of one batch, kept together (as the runs
    of one ``opprof baseline update``: the variable it sets for its children)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(BATCH_VARIABLE, name)
        yield


#: The head of a conftest.py that registers a measure of its own (tests/test_own_measure.py,
#: tests/test_child_channel.py): a timer whose marks are the steps the test says it took
#: (``gpu_profiler.timer.step(n)``), and the gate settings of figures that repeat.
STEP_COUNTER = """
import numpy as np

from pytest_opprof.measure.measures import GateSettings, Measure, register
from pytest_opprof.measure.timers.base import Timer
from pytest_opprof.model.words import Unit


class Counter(Timer):
    \"\"\"Marks are the steps taken so far.\"\"\"

    device = "a step counter"

    def __init__(self):
        self.taken = 0
        self.mark = lambda: self.taken

    @property
    def xp(self):
        return np

    def step(self, n):
        self.taken += n

    def resolve(self, marks):
        return list(marks), None


COUNTED = GateSettings(tolerance=0.02, floor=1.0, tau_prior=0.0005, tau_floor=0.0001,
                       jitter=1.0, min_samples=1, rank_test=False, drift=False,
                       spread_inflation=1.0, confirms=False)
"""
