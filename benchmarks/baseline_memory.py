"""Peak memory of loading the largest baseline files: the worst one the reader accepts,
and a hostile one just under the size cap (one op of tens of millions of samples).

    python benchmarks/baseline_memory.py

Each case runs in a fresh process; the figure is the growth of its peak resident set
(VmHWM) from before the file is read to after every array the gate builds from
it (``samples()``, ``to_profile()``), and tracemalloc's peak of the same span.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

from pytest_opprof.store.baseline import MAX_RUNS, MAX_SAMPLES, MAX_TOTAL_SAMPLES, SCHEMA


def worst_valid() -> str:
    """MAX_RUNS runs, as many ops as the total allows, every sample 15 digits long."""
    per_run = MAX_TOTAL_SAMPLES // MAX_RUNS
    n_ops = (per_run - 2 * MAX_SAMPLES) // MAX_SAMPLES
    sample = [999_999_999_999_999 - k for k in range(MAX_SAMPLES)]
    ops = {"op_id": list(range(n_ops)), "name": [f"op_{k:025d}" for k in range(n_ops)],
           "occurrence": [0] * n_ops, "depth": [0] * n_ops, "phase": [None] * n_ops,
           "n": [MAX_SAMPLES] * n_ops, "median": [1e14] * n_ops,
           "samples": [sample] * n_ops}
    run = {"meta": {"measure": "time", "unit": "ns"}, "ops": ops, "wall": sample,
           "op_time": sample, "phases": []}
    return json.dumps({"schema": SCHEMA, "nodeid": "t.py::t", "machine": "m", "batch": "b",
                       "runs": [run] * MAX_RUNS})


def hostile(size: int = 250 * 2**20) -> str:
    """One op whose samples fill the file: the 250 MB file of issue 10."""
    head = ('{"schema": "SCHEMA", "nodeid": "t.py::t", "machine": "m", "runs": [{"ops": '
            '{"op_id": [0], "name": ["x"], "occurrence": [0], "depth": [0], "phase": [null], '
            '"n": [1], "median": [1], "samples": [[').replace("SCHEMA", SCHEMA)
    count = (size - len(head) - 10) // 2
    return head + ",".join(["1"] * count) + "]]}}]}"


def _peak_resident_kb(reset: bool = False) -> int:
    """The peak resident set (Linux VmHWM, reset on request: a child inherits its
    parent's ``ru_maxrss`` across fork and exec)."""
    if reset:
        Path("/proc/self/clear_refs").write_text("5")
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure(path: str, traced: bool) -> None:
    """One load of ``path``: resident growth, or (``traced``) tracemalloc's peak, whose
    bookkeeping would inflate the resident figure."""
    from pytest_opprof.store.baseline import BaselineError, load_file

    before = _peak_resident_kb(reset=True)
    if traced:
        tracemalloc.start()
    try:
        baseline = load_file(Path(path))
        baseline.samples()
        baseline.to_profile()
        outcome = f"loaded, {len(baseline.runs)} runs of {baseline.runs[0].n_ops} ops"
    except BaselineError as exc:
        outcome = f"refused: {str(exc).split(': ', 1)[1][:60]}"
    figure = (f"peak traced {tracemalloc.get_traced_memory()[1] / 2**20:.0f} MB" if traced
              else f"peak resident +{(_peak_resident_kb() - before) / 1024:.0f} MB")
    print(f"{Path(path).stat().st_size / 2**20:.1f} MB file: {figure} ({outcome})")


def main() -> None:
    if len(sys.argv) == 3:
        measure(sys.argv[1], sys.argv[2] == "traced")
        return
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (("worst-valid", worst_valid), ("hostile", hostile)):
            path = Path(tmp, f"{name}.json")
            path.write_text(make())
            for how in ("resident", "traced"):
                print(f"{name}: ", end="", flush=True)
                subprocess.run([sys.executable, __file__, str(path), how], check=True)


if __name__ == "__main__":
    main()
