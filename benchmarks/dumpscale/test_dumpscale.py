"""Many small ops in one test: the scale of callgrind's dumps under
``--opprof-measure=instructions`` (issue 28: 300 ops 77 s, 1,500 ops 191 s and 124 MB of
temporary disk in one test). A workload for benchmarks/instructions_cost.py, not part of
any test run.

    python -m pytest -q -p no:cacheprovider -p no:randomly \\
        "benchmarks/dumpscale/test_dumpscale.py::test_ops[300]"
"""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("ops", [300, 1500])
def test_ops(gpu_profiler, ops):
    x = np.arange(64, dtype=np.float64)
    kinds = (np.add, np.multiply, np.subtract, np.maximum, np.minimum)
    for _ in gpu_profiler.iterations(10):
        for k in range(ops):
            with gpu_profiler.op(f"op_{k:04d}"):
                kinds[k % len(kinds)](x, float(k))
