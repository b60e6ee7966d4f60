"""The reference's child: the ops of ops.py in a pytest test, in the same loops as the
plugin's tests, each body timed with ``time.perf_counter_ns`` alone (run with ``-p
no:opprof``): with OPPROF_ENVBENCH_SHAPE=mixed (the default) one loop over every op, as
test_numpy_ops.py; with ``grouped`` one loop per class of ops.CLASSES in turn, as
test_numpy_grouped.py. reference.py starts it; it writes the per-op per-iteration times
to the JSON file that OPPROF_ENVBENCH_OUT names. Not matched by pytest's file patterns:
collected only when named.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from benchmarks.env_upgrade.ops import CLASSES, ITERATIONS, SKIP, build


def test_numpy_ops_reference():
    out = os.environ["OPPROF_ENVBENCH_OUT"]
    shape = os.environ.get("OPPROF_ENVBENCH_SHAPE", "mixed")
    loops = list(CLASSES.values()) if shape == "grouped" else [None]
    clock = time.perf_counter_ns
    times: dict[str, list[int]] = {}
    for names in loops:
        ops = build(names)  # the inputs, outside the timed blocks
        for name, _, _ in ops:
            times[name] = []
        for _ in range(ITERATIONS):
            for name, body, state in ops:
                start = clock()
                body(state)
                times[name].append(clock() - start)
    with open(out, "w") as fh:
        json.dump({"python": sys.executable, "prefix": sys.prefix,
                   "numpy": np.__version__, "skip": SKIP, "shape": shape,
                   "times_ns": {name: ts[SKIP:] for name, ts in times.items()}}, fh)
