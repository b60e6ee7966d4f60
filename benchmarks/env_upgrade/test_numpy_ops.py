"""The numpy-upgrade workload under the plugin: one test, the ops of ops.py, each timed by
``gpu_profiler.op``. A workload for ``opprof compare --base-python A --head-python B``
(issue 21), not part of any test run; reference.py times the very same bodies without
the plugin (reference_child.py).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m pytest -q -p no:cacheprovider \\
        -p no:randomly benchmarks/env_upgrade/test_numpy_ops.py
"""

from __future__ import annotations

from benchmarks.env_upgrade.ops import ITERATIONS, build


def test_numpy_ops(gpu_profiler):
    ops = build()  # the inputs, outside the timed blocks
    for _ in gpu_profiler.iterations(ITERATIONS):
        for name, body, state in ops:
            with gpu_profiler.op(name):
                body(state)
