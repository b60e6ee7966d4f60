"""What the per-op read-out costs under callgrind: the many-op workload's loop run under
valgrind with instrumentation on and no marks, with a dump at every op boundary (what
``--opprof-measure=instructions`` does), and the same with callgrind's output options
that might shrink the dumps; and natively. Each variant is one valgrind process::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/callgrind_readout.py
    python benchmarks/callgrind_readout.py --iterations 4 --variants marks,marks-noline

Prints a markdown table: per variant, the wall time of the loop per iteration, the
dumps' bytes per mark and the time to read them back natively.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository's packages come first
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: variant -> (marks at op boundaries, extra valgrind options)
VARIANTS = {
    "native": (False, None),
    "no-marks": (False, []),
    "marks": (True, []),
    "marks-noline": (True, ["--dump-line=no"]),
    "marks-nocompress": (True, ["--compress-strings=no", "--compress-pos=no"]),
}


def child(iterations: int, marks: bool) -> None:
    """In the measured process: the loop, timed; prints one JSON line."""
    import numpy as np

    from benchmarks.manyop.ops import ManyOp
    from pytest_opprof.measure.profiler import Profiler
    from pytest_opprof.measure.timers import CpuTimer
    from pytest_opprof.measure.timers.callgrind import OUT_VARIABLE, CallgrindTimer, extension

    requests = extension()
    under = requests is not None and requests.running()
    timer = CallgrindTimer(os.environ[OUT_VARIABLE]) if marks else CpuTimer()
    workload = ManyOp(np, extra={})
    profiler = Profiler(timer, skip=1)
    if under and not marks:
        requests.start()
    started = time.perf_counter()
    for _ in profiler.iterations(iterations):
        workload.step()
    loop = time.perf_counter() - started
    if under and not marks:
        requests.stop()
    folder = Path(os.environ[OUT_VARIABLE]).parent
    size = sum(p.stat().st_size for p in folder.iterdir())
    read = time.perf_counter()
    profile = profiler.profile
    read = time.perf_counter() - read
    assert profile is not None
    marks_taken = int(requests.last()) if (requests is not None and marks) else 0
    print(json.dumps({"loop_s": loop, "read_s": read, "marks": marks_taken,
                      "ops": len(profile.ops), "bytes": size}))


def run(variant: str, iterations: int) -> dict[str, float]:
    marks, options = VARIANTS[variant]
    with tempfile.TemporaryDirectory(prefix="opprof-readout-") as tmp:
        prefix = Path(tmp, "dump")
        env = {**os.environ, "OPPROF_CALLGRIND_OUT": str(prefix), "PYTHONHASHSEED": "0"}
        command = [sys.executable, __file__, "--child", str(iterations)]
        if marks:
            command.append("--marks")
        if options is not None:
            command = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                       f"--callgrind-out-file={prefix}", "-q", *options, *command]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            raise SystemExit(f"{variant}: {done.stderr.strip().splitlines()[-1:]}")
        return dict(json.loads(lines[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--marks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.marks)
        return 0
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (apt-get install valgrind)")
    names = [v for v in args.variants.split(",") if v]
    unknown = set(names) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; choose from {', '.join(VARIANTS)}")
    results = {name: run(name, args.iterations) for name in names}
    native = results.get("native")
    print(f"many-op workload, {args.iterations} iterations (1 skipped)\n")
    print("| variant | loop per iteration | x native | marks | dump bytes per mark | "
          "read back (native process) |")
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        per = r["loop_s"] / args.iterations
        ratio = f"{per / (native['loop_s'] / args.iterations):.0f}x" if native else "-"
        per_mark = f"{r['bytes'] / r['marks'] / 1e3:.1f} kB" if r["marks"] else "-"
        read = f"{r['read_s']:.2f} s" if r["marks"] else "-"
        print(f"| {name} | {per * 1e3:.0f} ms | {ratio} | {r['marks']} | {per_mark} | {read} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
