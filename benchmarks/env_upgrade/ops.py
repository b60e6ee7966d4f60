"""The op bodies of the numpy-upgrade workload, in ONE place: test_numpy_ops.py times them
with the plugin, reference_child.py with perf_counter_ns alone (reference.py drives it).

Each entry is name -> (setup, body): ``setup(rs)`` builds the op's inputs from a seeded
``np.random.RandomState`` (the legacy generator, whose streams numpy keeps the same across
versions, so both environments get the very same arrays), outside any timed block;
``body(state)`` is the timed op. Each op is a few tens to a few hundreds of microseconds on
the 2-vCPU VM. Some are ones whose implementation changed between numpy 1.26 and 2.x
(sorting and its kin, SIMD math, unique and isin, FFT, outer, einsum, the bundled
OpenBLAS), others plain memory-bound kernels that likely did not.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

State = Any
Setup = Callable[[np.random.RandomState], State]
Body = Callable[[State], object]

#: iterations per process, the first skipped (the plugin's --opprof-skip=1 default)
ITERATIONS = 100
SKIP = 1


def _normal(*shape: int) -> Setup:
    return lambda rs: rs.standard_normal(shape)


def _ints(high: int, n: int) -> Setup:
    return lambda rs: rs.randint(0, high, n)


def _pair(*shape: int) -> Setup:
    return lambda rs: (rs.standard_normal(shape), rs.standard_normal(shape))


def _positive(n: int) -> Setup:
    return lambda rs: rs.random_sample(n) + 0.5


OPS: dict[str, tuple[Setup, Body]] = {
    # sorting and its kin (x86-simd-sort / highway dispatch arrived in 2.x)
    "sort_f64_5k": (_normal(5_000), lambda x: np.sort(x)),
    "sort_i32_8k": (lambda rs: rs.randint(0, 1 << 30, 8_000).astype(np.int32),
                    lambda x: np.sort(x)),
    "argsort_f64_4k": (_normal(4_000), lambda x: np.argsort(x)),
    "partition_f64_20k": (_normal(20_000), lambda x: np.partition(x, 10_000)),
    "median_f64_20k": (_normal(20_000), lambda x: np.median(x)),
    "unique_i64_5k": (_ints(500, 5_000), lambda x: np.unique(x)),
    "isin_i64_5k_in_20k": (lambda rs: (rs.randint(0, 40_000, 5_000), rs.randint(0, 40_000, 20_000)),
                           lambda s: np.isin(s[0], s[1])),
    "searchsorted_2k_in_20k": (lambda rs: (np.sort(rs.standard_normal(20_000)),
                                           rs.standard_normal(2_000)),
                               lambda s: np.searchsorted(s[0], s[1])),
    # element-wise math (SIMD loops)
    "exp_f64_50k": (_normal(50_000), lambda x: np.exp(x)),
    "log_f64_50k": (_positive(50_000), lambda x: np.log(x)),
    "sin_f64_10k": (_normal(10_000), lambda x: np.sin(x)),
    "tanh_f32_50k": (lambda rs: rs.standard_normal(50_000).astype(np.float32),
                     lambda x: np.tanh(x)),
    "power_f64_20k": (_positive(20_000), lambda x: np.power(x, 2.5)),
    # FFT (pocketfft in C became the C++ pocketfft in 2.0)
    "rfft_f64_8k": (_normal(8_192), lambda x: np.fft.rfft(x)),
    "fft_c128_4k": (lambda rs: rs.standard_normal(4_096) + 1j * rs.standard_normal(4_096),
                    lambda x: np.fft.fft(x)),
    "fft2_f64_128": (_normal(128, 128), lambda x: np.fft.fft2(x)),
    # products (outer, einsum, the bundled OpenBLAS and LAPACK)
    "outer_f64_256": (lambda rs: (rs.standard_normal(256), rs.standard_normal(256)),
                      lambda s: np.outer(s[0], s[1])),
    "einsum_ij_jk_64": (_pair(64, 64), lambda s: np.einsum("ij,jk->ik", s[0], s[1])),
    "einsum_sum_axis0_300": (_normal(300, 300), lambda x: np.einsum("ij->j", x)),
    "matmul_f64_128": (_pair(128, 128), lambda s: s[0] @ s[1]),
    "norm_vec_100k": (_normal(100_000), lambda x: np.linalg.norm(x)),
    "norm_fro_300": (_normal(300, 300), lambda x: np.linalg.norm(x)),
    "solve_f64_64": (lambda rs: (rs.standard_normal((64, 64)) + 8 * np.eye(64),
                                 rs.standard_normal(64)),
                     lambda s: np.linalg.solve(s[0], s[1])),
    # memory-bound kernels, reductions and copies (likely unchanged)
    "add_f64_100k": (_pair(100_000), lambda s: s[0] + s[1]),
    "sum_f64_100k": (_normal(100_000), lambda x: x.sum()),
    "cumsum_f64_50k": (_normal(50_000), lambda x: np.cumsum(x)),
    "mean_axis1_300": (_normal(300, 300), lambda x: x.mean(axis=1)),
    "transpose_copy_300": (_normal(300, 300), lambda x: np.ascontiguousarray(x.T)),
    "pad_edge_256": (_normal(256, 256), lambda x: np.pad(x, 8, mode="edge")),
    "concatenate_10x10k": (lambda rs: [rs.standard_normal(10_000) for _ in range(10)],
                           lambda xs: np.concatenate(xs)),
    "take_f64_20k_of_100k": (lambda rs: (rs.standard_normal(100_000),
                                         rs.randint(0, 100_000, 20_000)),
                             lambda s: s[0][s[1]]),
    "where_f64_50k": (_normal(50_000), lambda x: np.where(x > 0, x, 0.0)),
}


def build() -> list[tuple[str, Body, State]]:
    """Every op's (name, body, inputs), in a fixed order; each op's inputs from a seed of
    its own name, so adding or removing an op leaves the others' inputs as they were."""
    return [(name, body, setup(np.random.RandomState(zlib.crc32(name.encode()))))
            for name, (setup, body) in OPS.items()]
