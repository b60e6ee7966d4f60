"""The example suite: its workloads are right, and it runs profiled as the README says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from example_suite.workloads.resnet import ResNet, ResNetConfig, synthetic_batch
from example_suite.workloads.spectral import VorticitySolver
from example_suite.workloads.transformer import BlockConfig, TransformerBlock, mse_loss

EXAMPLE_SUITE = Path(__file__).resolve().parent.parent / "example_suite"


def relative_error(analytic: float, numeric: float) -> float:
    return abs(analytic - numeric) / max(abs(analytic) + abs(numeric), 1e-12)


def check_gradients(loss, params_and_grads, rng, probes=4, eps=1e-6):
    """Central finite differences at a few random entries of each array."""
    worst = 0.0
    for name, array, grad in params_and_grads:
        for _ in range(probes):
            idx = tuple(int(rng.integers(0, n)) for n in array.shape)
            old = array[idx]
            array[idx] = old + eps
            up = loss()
            array[idx] = old - eps
            down = loss()
            array[idx] = old
            err = relative_error(float(grad[idx]), (up - down) / (2 * eps))
            assert err < 1e-5, f"{name}{list(idx)}: relative error {err:.2e}"
            worst = max(worst, err)
    return worst


def test_resnet_gradients_match_finite_differences():
    config = ResNetConfig(batch=3, channels=2, size=4, classes=3, blocks=1, dtype="float64")
    model = ResNet(np, config, seed=3)
    x, labels = synthetic_batch(np, config, seed=4)
    model.forward(x, labels)
    model.backward()
    checks = [(f"{type(layer).__name__}.{name}", layer.params[name], layer.grads[name])
              for layer, name in model.parameters()]
    assert len(checks) == 11  # stem conv W + bn gamma, beta; block 2 convs + 2 bns; fc W, b
    check_gradients(lambda: float(model.forward(x, labels)), checks, np.random.default_rng(0))


def test_transformer_gradients_match_finite_differences():
    config = BlockConfig(batch=2, seq=4, dim=8, heads=2, dtype="float64")
    block = TransformerBlock(np, config, seed=1)
    rng = np.random.default_rng(2)
    x, target = rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 4, 8))
    _, dy = mse_loss(np, block.forward(x), target)
    dx = block.backward(dy)
    checks = [(name, block.params[name], block.grads[name]) for name in block.params]
    checks.append(("x", x, dx))
    check_gradients(lambda: float(mse_loss(np, block.forward(x), target)[0]), checks, rng)


def test_spectral_advection_matches_the_analytic_term():
    # w = sin x + cos 2y has psi = sin x + cos(2y)/4, so u = -sin(2y)/2, v = -cos x and
    # u dw/dx + v dw/dy = 1.5 cos x sin 2y
    solver = VorticitySolver(np, n=32)
    y, x = solver.grid()
    w = np.sin(x) + np.cos(2 * y)
    got = solver.to_physical(solver.advection(solver.to_spectral(w)))
    np.testing.assert_allclose(got, 1.5 * np.cos(x) * np.sin(2 * y), atol=1e-12)


def test_spectral_taylor_green_vortex_decays_at_the_viscous_rate():
    nu, dt, steps = 0.05, 0.01, 50
    solver = VorticitySolver(np, n=32, nu=nu, dt=dt)
    y, x = solver.grid()
    w0 = 2 * np.sin(x) * np.sin(y)
    w_hat = solver.to_spectral(w0)
    for _ in range(steps):
        w_hat = solver.step(w_hat)
    expected = w0 * (1 + 2 * nu * dt) ** -steps  # the implicit Euler factor for |k|^2 = 2
    np.testing.assert_allclose(solver.to_physical(w_hat), expected, atol=1e-12)


@pytest.fixture(scope="module")
def suite_v2_skip3(tmp_path_factory):
    """The README's main command, with --opprof-skip=3, in a new process."""
    pytester_dir = tmp_path_factory.mktemp("suite")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(EXAMPLE_SUITE), "--opprof-verbosity=2",
         "--opprof-skip=3", "--opprof-measure=time", "-p", "no:cacheprovider",
         f"--opprof-baseline-dir={pytester_dir / 'baselines'}"],
        cwd=pytester_dir, capture_output=True, text=True, timeout=300,
    )
    return proc


def _section(out: str, nodeid: str) -> str:
    """The report of one test: from its header line to the next header or summary line
    (tests run in any order under pytest-randomly, so any report may come last)."""
    after = out.split(f"{nodeid} -", 1)[1]
    return re.split(r"\n(?:-{3,}|={3,}) ", after, maxsplit=1)[0]


@pytest.mark.e2e
def test_the_example_suite_runs_profiled_at_verbosity_2(suite_v2_skip3):
    out = suite_v2_skip3.stdout
    assert suite_v2_skip3.returncode == 0, out[-3000:]
    lines = _section(out, "test_resnet.py::test_resnet_train_step").splitlines()
    assert "17 of 20 iterations counted (first 3 skipped)" in lines[1]
    for expected in ("Forward Propagation Time : ", "Backward Propagation Time : ",
                     "Update Time : ", "OP_ID0. conv2d : ", "OP_ID1. batch_norm : ",
                     "Stat=conv2d ", "Stat=momentum ", "Op time : "):
        assert any(line.startswith(expected) for line in lines), expected
    assert any("count=17" in line for line in lines if line.startswith("Stat=mean "))
    assert "% outside any op" in lines[-1]
    spectral = _section(out, "test_spectral.py::test_vorticity_step")
    assert "27 of 30 iterations counted" in spectral  # its marker asks for 30
    assert "Advection Time : " in spectral and "fft.irfft2" in spectral
    assert "test_transformer_block[32] -" in out and "test_transformer_block[64] -" in out
    # the showcase trips none of the notes a careless test gets (ops outside the loop...)
    assert "outside the iterations() loop" not in out and "without iterations()" not in out


@pytest.mark.e2e
def test_a_bad_slowdown_variable_is_one_usage_error():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(EXAMPLE_SUITE), "-q", "-p", "no:cacheprovider",
         "--opprof-measure=time"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "OPPROF_EXAMPLE_SLOWDOWN": "bogus:2"})
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: OPPROF_EXAMPLE_SLOWDOWN='bogus:2': 'bogus:2' must be OP:FACTOR" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
