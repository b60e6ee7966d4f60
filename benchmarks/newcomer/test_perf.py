"""The newcomer's four tests: README's example (``test_mlp_step``) and three more a
newcomer writes next (an FFT filter, a k-means step, sorting and searching), each op
named with ``gpu_profiler.op`` or ``pytest_opprof.op``. A workload for
benchmarks/instructions_cost.py (what ``--opprof-measure=instructions`` costs against a
plain run), not part of any test run.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m pytest -q -p no:cacheprovider \\
        -p no:randomly benchmarks/newcomer
"""

from __future__ import annotations

import numpy as np

import pytest_opprof


@pytest_opprof.op                      # an op named softmax, wherever it is called
def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_mlp_step(gpu_profiler):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((256, 512)), rng.standard_normal((512, 512))
    b = rng.standard_normal(512)
    for _ in gpu_profiler.iterations(30):
        with gpu_profiler.op("matmul"):
            h = x @ w
        with gpu_profiler.op("bias"):
            h = h + b
        with gpu_profiler.op("relu"):
            h = np.maximum(h, 0)
        p = softmax(h)
        with gpu_profiler.op("loss"):
            -np.log(p[:, 0] + 1e-9).mean()
        with gpu_profiler.op("grad"):
            x.T @ p


def test_fft_filter(gpu_profiler):
    rng = np.random.default_rng(1)
    signal = rng.standard_normal(1 << 16)
    image = rng.standard_normal((256, 256))
    keep = np.zeros((1 << 15) + 1)
    keep[:4096] = 1.0
    for _ in gpu_profiler.iterations(30):
        with gpu_profiler.op("rfft"):
            spectrum = np.fft.rfft(signal)
        with gpu_profiler.op("lowpass"):
            spectrum = spectrum * keep
        with gpu_profiler.op("irfft"):
            np.fft.irfft(spectrum, n=signal.size)
        with gpu_profiler.op("fft2"):
            np.fft.fft2(image)


def test_kmeans_step(gpu_profiler):
    rng = np.random.default_rng(2)
    points = rng.standard_normal((4000, 16))
    centres = points[:32].copy()
    for _ in gpu_profiler.iterations(30):
        with gpu_profiler.op("distances"):
            d = ((points[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        with gpu_profiler.op("assign"):
            labels = d.argmin(axis=1)
        with gpu_profiler.op("update"):
            sums = np.zeros_like(centres)
            np.add.at(sums, labels, points)
            counts = np.bincount(labels, minlength=len(centres))[:, None]
            centres = np.where(counts > 0, sums / np.maximum(counts, 1), centres)
        with gpu_profiler.op("inertia"):
            float(d.min(axis=1).sum())


def test_sort_search(gpu_profiler):
    rng = np.random.default_rng(3)
    values = rng.standard_normal(100_000)
    keys = rng.integers(0, 10_000, 100_000)
    queries = rng.standard_normal(10_000)
    for _ in gpu_profiler.iterations(30):
        with gpu_profiler.op("sort"):
            ordered = np.sort(values)
        with gpu_profiler.op("argsort"):
            np.argsort(keys, kind="stable")
        with gpu_profiler.op("searchsorted"):
            np.searchsorted(ordered, queries)
        with gpu_profiler.op("unique"):
            np.unique(keys)
