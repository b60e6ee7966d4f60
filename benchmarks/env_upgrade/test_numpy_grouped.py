"""The numpy-upgrade workload grouped by class: the ops of ops.py, one test per class of
ops.CLASSES (as asv groups its benchmarks), each op timed by ``gpu_profiler.op``. Within
most classes the upgrade moves most ops alike: the case where a judge that takes a
test's shared change out as the machine's (issue 28, section 0) flags the class's
unchanged ops and misses its changed ones. The same ops as test_numpy_ops.py (one mixed
test); reference.py --shape grouped times them without the plugin, check.py tallies a
compare against it.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 opprof compare \\
        --base-python ENV1/bin/python --head-python ENV2/bin/python --pairs 12 \\
        benchmarks/env_upgrade/test_numpy_grouped.py --json grouped.json
"""

from __future__ import annotations

import pytest

from benchmarks.env_upgrade.ops import CLASSES, ITERATIONS, build


@pytest.mark.parametrize("group", list(CLASSES))
def test_numpy_class(gpu_profiler, group):
    ops = build(CLASSES[group])  # the inputs, outside the timed blocks
    for _ in gpu_profiler.iterations(ITERATIONS):
        for name, body, state in ops:
            with gpu_profiler.op(name):
                body(state)
