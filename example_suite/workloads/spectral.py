"""A pseudo-spectral 2D Navier-Stokes solver step (vorticity form, periodic box
[0, 2pi)^2): a Poisson solve for the stream function, velocities and vorticity
gradients by spectral derivatives, the advection term in physical space with
2/3-rule dealiasing, and semi-implicit viscous diffusion.

A non-learning workload of another shape: few, large FFT-bound ops. Pass an
instrumented ``xp`` (``gpu_profiler.instrument(xp, names=["fft"])``) and every
FFT becomes an op of its own, nested inside the solver's named ops.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from pytest_opprof import op

Array = Any


class VorticitySolver:
    """Arrays are indexed [y, x]; spectra are ``rfft2`` halves (x is the short axis)."""

    def __init__(self, xp: ModuleType, n: int = 128, nu: float = 1e-3, dt: float = 1e-2,
                 dtype: str = "float64") -> None:
        self.xp, self.n, self.nu, self.dt = xp, n, nu, dt
        fft = xp.fft
        ky = fft.fftfreq(n, 1.0 / n)[:, None]
        kx = fft.rfftfreq(n, 1.0 / n)[None, :]
        self.ikx = (1j * kx).astype("complex128" if dtype == "float64" else "complex64")
        self.iky = (1j * ky).astype(self.ikx.dtype)
        k2 = kx * kx + ky * ky
        self.k2 = k2
        inv = 1.0 / xp.where(k2 == 0, 1.0, k2)
        self.inv_k2 = xp.where(k2 == 0, 0.0, inv)  # the mean of psi is zero
        self.dealias = (abs(kx) < n / 3) & (abs(ky) < n / 3)
        self.diffusion = 1.0 / (1.0 + dt * nu * k2)

    def grid(self) -> tuple[Array, Array]:
        """The (y, x) coordinates of the grid points."""
        xp = self.xp
        s = xp.arange(self.n) * (2 * xp.pi / self.n)
        return s[:, None] + 0 * s[None, :], 0 * s[:, None] + s[None, :]

    def to_spectral(self, w: Array) -> Array:
        return self.xp.fft.rfft2(w)

    def to_physical(self, w_hat: Array) -> Array:
        return self.xp.fft.irfft2(w_hat, s=(self.n, self.n))

    def advection(self, w_hat: Array) -> Array:
        """The spectrum of u . grad(w), dealiased."""
        irfft2 = self.to_physical
        with op("poisson_solve"):
            psi_hat = w_hat * self.inv_k2
        with op("velocity"):
            u = irfft2(self.iky * psi_hat)  # u = d(psi)/dy
            v = irfft2(-self.ikx * psi_hat)  # v = -d(psi)/dx
        with op("vorticity_gradient"):
            wx = irfft2(self.ikx * w_hat)
            wy = irfft2(self.iky * w_hat)
        with op("elementwise_mul"):
            nonlinear = u * wx + v * wy
        with op("dealias"):
            return self.to_spectral(nonlinear) * self.dealias

    @op("diffusion")
    def diffuse(self, w_hat: Array, advection_hat: Array) -> Array:
        """One semi-implicit Euler step: explicit advection, implicit viscosity."""
        return (w_hat - self.dt * advection_hat) * self.diffusion

    def step(self, w_hat: Array) -> Array:
        return self.diffuse(w_hat, self.advection(w_hat))

    def enstrophy(self, w_hat: Array) -> float:
        w = self.to_physical(w_hat)
        return float((w * w).mean() / 2)
