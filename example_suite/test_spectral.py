"""A pseudo-spectral Navier-Stokes step: FFT-bound, no learning.

``instrument`` times every ``xp.fft`` call as an op of its own, nested inside
the solver's ops; the phases are the step's two halves.
"""

from __future__ import annotations

import numpy as np
import pytest

from example_suite.workloads.spectral import VorticitySolver


@pytest.mark.opprof(iterations=30)
def test_vorticity_step(gpu_profiler):
    plain = gpu_profiler.xp
    solver = VorticitySolver(plain, n=256, nu=1e-3, dt=5e-3)
    rng = np.random.default_rng(0)
    w_hat = solver.to_spectral(plain.asarray(rng.standard_normal((256, 256))))
    w_hat = w_hat * solver.dealias
    start = solver.enstrophy(w_hat)
    # the FFTs become ops for the loop only: the set-up's and the check's are not timed
    solver.xp = gpu_profiler.instrument(plain, names=["fft"])
    for _ in gpu_profiler.iterations():
        with gpu_profiler.phase("advection"):
            advection = solver.advection(w_hat)
        with gpu_profiler.phase("diffusion"):
            w_hat = solver.diffuse(w_hat, advection)
    solver.xp = plain
    assert solver.enstrophy(w_hat) < start, "viscosity should dissipate enstrophy"
