"""The CUDA backend on a real GPU: its per-op overhead, and its op times against
``cupyx.profiler.benchmark`` on the same kernels.

    python scripts/cuda_overhead.py

Needs CuPy and a CUDA GPU (pip install -e '.[cuda12]' or '.[cuda13]'); never part of
the test suite. Prints two Markdown tables for benchmarks/RESULTS.md and, where the
environment variable OUT names a folder, writes them there as cuda_overhead.md.

1. Overhead: ITERATIONS iterations of OPS tiny elementwise kernels (16 floats), bare
   (one synchronisation per iteration, as the profiler does) and with every kernel
   inside ``gpu_profiler.op`` on the CUDA backend; host wall time per op, in us.
2. Accuracy: matmul, elementwise and reduction kernels at sizes from about 1 us to
   10 ms of GPU time; each op's median GPU time from opprof (CUDA events around it,
   30 ops to an iteration) and from ``cupyx.profiler.benchmark`` (its gpu_times).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ITERATIONS, OPS = 50, 200


def overhead_table(cupy) -> list[str]:
    from pytest_opprof import Profiler, op
    from pytest_opprof.measure.timers.cuda import CudaTimer, CupyEvents

    x = cupy.ones(16, dtype=cupy.float32)
    stream = cupy.cuda.get_current_stream()

    def bare() -> None:
        for _ in range(ITERATIONS):
            for _ in range(OPS):
                x.__imul__(1.0)
            stream.synchronize()

    def profiled() -> None:
        profiler = Profiler(CudaTimer(CupyEvents()), skip=0)
        scope = op("imul")
        for _ in profiler.iterations(ITERATIONS):
            for _ in range(OPS):
                with scope:
                    x.__imul__(1.0)
        assert profiler.profile is not None

    def host_us_per_op(fn) -> float:
        fn()  # warm: kernels compiled, events created
        times = []
        for _ in range(7):
            start = time.perf_counter_ns()
            fn()
            times.append(time.perf_counter_ns() - start)
        return statistics.median(times) / (ITERATIONS * OPS) / 1e3

    bare_us, profiled_us = host_us_per_op(bare), host_us_per_op(profiled)
    return [
        f"Per-op overhead of the CUDA backend ({ITERATIONS} iterations of {OPS} elementwise "
        "kernels on 16 floats; host wall time, median of 7):",
        "",
        "| variant | us per op | over bare (us) |",
        "|---|---|---|",
        f"| bare (one sync per iteration) | {bare_us:.2f} | 0 |",
        f"| every kernel in gpu_profiler.op (2 events per op) | {profiled_us:.2f} "
        f"| {profiled_us - bare_us:.2f} |",
    ]


def kernels(cupy):
    """(kind, size label, op) for sizes from about 1 us to 10 ms on a current GPU."""
    rng = cupy.random.default_rng(0)
    for n in (64, 512, 2048, 8192):
        a = rng.standard_normal((n, n), dtype=cupy.float32)
        yield "matmul", f"{n}x{n}", (lambda a=a: a @ a)
    for n in (10**3, 10**5, 10**7, 10**8):
        v = rng.standard_normal(n, dtype=cupy.float32)
        yield "elementwise (x*2+1)", f"{n:.0e}", (lambda v=v: v * 2 + 1)
        yield "reduction (sum)", f"{n:.0e}", (lambda v=v: v.sum())


def accuracy_table(cupy) -> list[str]:
    import numpy as np
    from cupyx.profiler import benchmark

    from pytest_opprof import Profiler, op
    from pytest_opprof.measure.timers.cuda import CudaTimer, CupyEvents

    rows = ["Per-op GPU time, opprof (CUDA events, 30 ops per iteration, 20 counted "
            "iterations) against cupyx.profiler.benchmark (n_repeat=200):", "",
            "| kernel | size | cupyx median (us) | opprof median (us) | difference |",
            "|---|---|---|---|---|"]
    for kind, size, fn in kernels(cupy):
        reference = benchmark(fn, n_repeat=200, n_warmup=10)
        ref_us = float(np.median(reference.gpu_times[0])) * 1e6
        profiler = Profiler(CudaTimer(CupyEvents()), skip=2)
        scope = op(kind)
        for _ in profiler.iterations(22):
            for _ in range(30):
                with scope:
                    fn()
        samples = profiler.profile.samples[profiler.profile.skip:]
        ours_us = float(np.nanmedian(samples)) / 1e3
        rows.append(f"| {kind} | {size} | {ref_us:.2f} | {ours_us:.2f} "
                    f"| {ours_us / ref_us - 1:+.1%} |")
    return rows


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_check import cuda_device

    cupy, line = cuda_device()
    if cupy is None:
        print(f"cuda_overhead: {line}")
        return 2
    lines = [line, "", *overhead_table(cupy), "", *accuracy_table(cupy)]
    text = "\n".join(lines)
    print(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "cuda_overhead.md").write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
