"""A synthetic test of many ops (44, ~5 us to ~5 ms each on a 2-core VM), for measuring
the gate on real runs: ``python benchmarks/gate_runs.py`` runs it in new processes.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 pytest benchmarks/manyop --opprof-verbosity=2
    OPPROF_MANYOP_SLOW=matmul_64:1.5 pytest benchmarks/manyop     # one op 1.5x as slow
"""

from __future__ import annotations

import pytest

from benchmarks.manyop.ops import ManyOp


@pytest.mark.opprof(iterations=30)
def test_manyop(gpu_profiler):
    workload = ManyOp(gpu_profiler.xp)
    for _ in gpu_profiler.iterations():
        workload.step()
