"""The op bodies of the numpy-upgrade workload, in ONE place: test_numpy_ops.py times them
with the plugin in one test, test_numpy_grouped.py one test per class (CLASSES),
reference_child.py with perf_counter_ns alone (reference.py drives it).

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


def _float32(n: int) -> Setup:
    return lambda rs: rs.standard_normal(n).astype(np.float32)


def _gather(dtype: type) -> Setup:
    """A 50k-element array of DTYPE and 2k indices into it."""
    return lambda rs: (rs.standard_normal(50_000).astype(dtype), rs.randint(0, 50_000, 2_000))


def _scatter(s: tuple[np.ndarray, np.ndarray]) -> None:
    s[0][s[1]] = 1.0


def _masked(n: int) -> Setup:
    return lambda rs: np.ma.masked_less(rs.standard_normal(n), -1.0)


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
    # more of the kin that 2.x changed: selection, set ops, FFTs, float32 ufuncs
    "partition_f32_20k": (_float32(20_000), lambda x: np.partition(x, 10_000)),
    "partition_i64_20k": (_ints(1 << 30, 20_000), lambda x: np.partition(x, 10_000)),
    "argpartition_f64_20k": (_normal(20_000), lambda x: np.argpartition(x, 10_000)),
    "percentile_f64_20k": (_normal(20_000), lambda x: np.percentile(x, 90)),
    "unique_f64_5k": (lambda rs: rs.randint(0, 500, 5_000).astype(np.float64),
                      lambda x: np.unique(x)),
    "unique_i32_5k": (lambda rs: rs.randint(0, 500, 5_000).astype(np.int32),
                      lambda x: np.unique(x)),
    "unique_counts_i64_5k": (_ints(500, 5_000), lambda x: np.unique(x, return_counts=True)),
    "intersect1d_i64_5k": (lambda rs: (rs.randint(0, 10_000, 5_000), rs.randint(0, 10_000, 5_000)),
                           lambda s: np.intersect1d(s[0], s[1])),
    "irfft_f64_8k": (lambda rs: rs.standard_normal(4_097) + 1j * rs.standard_normal(4_097),
                     lambda x: np.fft.irfft(x)),
    "ifft_c128_4k": (lambda rs: rs.standard_normal(4_096) + 1j * rs.standard_normal(4_096),
                     lambda x: np.fft.ifft(x)),
    "rfft_f64_16k": (_normal(16_384), lambda x: np.fft.rfft(x)),
    "fft_c128_1k": (lambda rs: rs.standard_normal(1_024) + 1j * rs.standard_normal(1_024),
                    lambda x: np.fft.fft(x)),
    "exp_f32_50k": (_float32(50_000), lambda x: np.exp(x)),
    "log_f32_50k": (lambda rs: (rs.random_sample(50_000) + 0.5).astype(np.float32),
                    lambda x: np.log(x)),
    "sin_f32_50k": (_float32(50_000), lambda x: np.sin(x)),
    "cos_f32_50k": (_float32(50_000), lambda x: np.cos(x)),
    # statistics: std and var (their kernels were rewritten in 2.x), mean beside them
    "std_f64_50k": (_normal(50_000), lambda x: np.std(x)),
    "var_f64_50k": (_normal(50_000), lambda x: np.var(x)),
    "std_f32_50k": (_float32(50_000), lambda x: np.std(x)),
    "var_f32_50k": (_float32(50_000), lambda x: np.var(x)),
    "std_i64_50k": (_ints(1_000, 50_000), lambda x: np.std(x)),
    "std_axis0_300": (_normal(300, 300), lambda x: x.std(axis=0)),
    "mean_f32_50k": (_float32(50_000), lambda x: np.mean(x)),
    "mean_f64_50k": (_normal(50_000), lambda x: np.mean(x)),
    # 1-D fancy indexing (gather, scatter, boolean masks)
    "fancy_f64_2k_of_50k": (_gather(np.float64), lambda s: s[0][s[1]]),
    "fancy_f32_2k_of_50k": (_gather(np.float32), lambda s: s[0][s[1]]),
    "fancy_i32_2k_of_50k": (_gather(np.int32), lambda s: s[0][s[1]]),
    "fancy_c128_2k_of_50k": (_gather(np.complex128), lambda s: s[0][s[1]]),
    "fancy_take_f64_2k_of_50k": (_gather(np.float64), lambda s: np.take(s[0], s[1])),
    "fancy_setitem_f64_2k": (_gather(np.float64), _scatter),
    "mask_f64_50k": (_normal(50_000), lambda x: x[x > 0.5]),
    # masked arrays (np.ma: Python-level wrappers around the ufuncs)
    "ma_sin_10k": (_masked(10_000), lambda m: np.ma.sin(m)),
    "ma_add_10k": (_masked(10_000), lambda m: m + m),
    "ma_multiply_10k": (_masked(10_000), lambda m: m * 2.0),
    "ma_sum_10k": (_masked(10_000), lambda m: m.sum()),
    "ma_mean_10k": (_masked(10_000), lambda m: m.mean()),
    "ma_masked_less_10k": (_normal(10_000), lambda x: np.ma.masked_less(x, 0.0)),
}


#: The ops in classes, one test each in test_numpy_grouped.py (as asv groups its benchmarks
#: in classes). Measured on the 2-vCPU VM (reference.py, 1.26.4 -> 2.4.6), most classes
#: move together: selection (-65 to -85%, median unchanged), FFTs (+25 to +70%, fft2
#: about unchanged), std/var (-10%, the means beside them not), 1-D gathers (-8%), set
#: ops (unique and intersect1d 2.5-5x); masked arrays and float64 ufuncs barely move.
CLASSES: dict[str, list[str]] = {
    "selection": ["partition_f64_20k", "partition_f32_20k", "partition_i64_20k",
                  "argpartition_f64_20k", "percentile_f64_20k", "median_f64_20k"],
    "fft": ["rfft_f64_8k", "fft_c128_4k", "irfft_f64_8k", "ifft_c128_4k", "rfft_f64_16k",
            "fft_c128_1k", "fft2_f64_128"],
    "std_var": ["std_f64_50k", "var_f64_50k", "std_f32_50k", "var_f32_50k", "std_i64_50k",
                "std_axis0_300", "mean_f32_50k", "mean_f64_50k"],
    "fancy_indexing": ["fancy_f64_2k_of_50k", "fancy_f32_2k_of_50k", "fancy_i32_2k_of_50k",
                       "fancy_c128_2k_of_50k", "take_f64_20k_of_100k",
                       "fancy_take_f64_2k_of_50k", "fancy_setitem_f64_2k", "mask_f64_50k"],
    "set_ops": ["unique_i64_5k", "unique_i32_5k", "unique_f64_5k", "unique_counts_i64_5k",
                "intersect1d_i64_5k", "isin_i64_5k_in_20k"],
    "ufuncs_f32": ["sin_f32_50k", "cos_f32_50k", "tanh_f32_50k", "exp_f32_50k",
                   "log_f32_50k"],
    "ufuncs_f64": ["exp_f64_50k", "log_f64_50k", "sin_f64_10k", "power_f64_20k"],
    "sorting": ["sort_f64_5k", "sort_i32_8k", "argsort_f64_4k", "searchsorted_2k_in_20k"],
    "linalg": ["outer_f64_256", "einsum_ij_jk_64", "einsum_sum_axis0_300", "matmul_f64_128",
               "norm_vec_100k", "norm_fro_300", "solve_f64_64"],
    "memory": ["add_f64_100k", "sum_f64_100k", "cumsum_f64_50k", "mean_axis1_300",
               "transpose_copy_300", "pad_edge_256", "concatenate_10x10k", "where_f64_50k"],
    "masked": ["ma_sin_10k", "ma_add_10k", "ma_multiply_10k", "ma_sum_10k", "ma_mean_10k",
               "ma_masked_less_10k"],
}
assert sorted(n for names in CLASSES.values() for n in names) == sorted(OPS), \
    "every op in exactly one class"


def build(names: list[str] | None = None) -> list[tuple[str, Body, State]]:
    """The ops' (name, body, inputs), in a fixed order (NAMES', else every op's); each
    op's inputs from a seed of its own name, so adding or removing an op, or grouping
    them, leaves the others' inputs as they were."""
    return [(name, OPS[name][1], OPS[name][0](np.random.RandomState(zlib.crc32(name.encode()))))
            for name in (OPS if names is None else names)]
