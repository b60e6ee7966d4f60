"""What profiling a real workload costs: opprof against cProfile, the tool a user would
reach for instead, on the example suite's ResNet training step.

The step's ops are named with ``@pytest_opprof.op`` in the model's code, as a library
would. Three ways to run the same number of steps: no profiler (the names cost their
idle wrapper), opprof recording every op, and cProfile on the whole loop; the figure
is each one's time over the first, in one run. A tiny configuration (2 images of 8x8)
makes the per-op costs visible; the default one (16 of 32x32) is the example suite's.
"""

from __future__ import annotations

import cProfile

import pytest

from example_suite.workloads.resnet import Momentum, ResNet, ResNetConfig, synthetic_batch
from pytest_opprof import Profiler
from pytest_opprof.measure import profiler
from pytest_opprof.measure.timers import CpuTimer

from .conftest import record

STEPS = 10
CONFIGS = {
    "tiny (2 x 8x8)": ResNetConfig(batch=2, size=8),
    "example suite (16 x 32x32)": ResNetConfig(),
}


def make_step(config: ResNetConfig):
    import numpy as np

    model, optimizer = ResNet(np, config), Momentum(np)
    images, labels = synthetic_batch(np, config)

    def step() -> None:
        model.forward(images, labels)
        model.backward()
        optimizer.step(model.parameters())

    return step


def plain(step) -> None:
    for _ in range(STEPS):
        step()


def opprof(step) -> None:
    prof = Profiler(CpuTimer(), skip=0)
    for _ in prof.iterations(STEPS):
        step()
    assert prof.profile is not None


def cprofile(step) -> None:
    cProfile.Profile().runcall(plain, step)


MODES = {"no profiler (ops named, idle)": plain, "opprof recording": opprof,
         "cProfile": cprofile}
SECONDS: dict[tuple[str, str], float] = {}
OPS_PER_STEP: dict[str, int] = {}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("mode", list(MODES))
def test_workload(benchmark, config, mode):
    step = make_step(CONFIGS[config])
    benchmark.pedantic(MODES[mode], args=(step,), rounds=15, warmup_rounds=2)
    SECONDS[config, mode] = benchmark.stats.stats.median
    if config not in OPS_PER_STEP:
        prof = Profiler(CpuTimer(), skip=0)
        for _ in prof.iterations(1):
            step()
        OPS_PER_STEP[config] = len(prof.profile.ops)


def test_report():
    header = ["workload", "ops per step", "ms per step, no profiler",
              "opprof: over no profiler", "cProfile: over no profiler"]
    title = f"profiling a training step (recording in {profiler._impl.__name__})"
    for config in CONFIGS:
        base = SECONDS[config, "no profiler (ops named, idle)"]
        over = {mode: SECONDS[config, mode] / base - 1 for mode in MODES}
        record(title, header, [
            config, str(OPS_PER_STEP[config]), f"{base / STEPS * 1e3:.2f}",
            f"{over['opprof recording']:+.1%}", f"{over['cProfile']:+.1%}"])
