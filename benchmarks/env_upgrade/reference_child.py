"""The reference's child: the ops of ops.py in a pytest test, in the same loop as
test_numpy_ops.py, each body timed with ``time.perf_counter_ns`` alone (run with
``-p no:opprof``). reference.py starts it; it writes the per-op per-iteration times to
the JSON file that OPPROF_ENVBENCH_OUT names. Not matched by pytest's file patterns:
collected only when named.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from benchmarks.env_upgrade.ops import ITERATIONS, SKIP, build


def test_numpy_ops_reference():
    out = os.environ["OPPROF_ENVBENCH_OUT"]
    ops = build()  # the inputs, outside the timed blocks
    clock = time.perf_counter_ns
    times: dict[str, list[int]] = {name: [] for name, _, _ in ops}
    for _ in range(ITERATIONS):
        for name, body, state in ops:
            start = clock()
            body(state)
            times[name].append(clock() - start)
    with open(out, "w") as fh:
        json.dump({"python": sys.executable, "prefix": sys.prefix,
                   "numpy": np.__version__, "skip": SKIP,
                   "times_ns": {name: ts[SKIP:] for name, ts in times.items()}}, fh)
