"""What one child process of ``opprof compare`` costs, by the channel it answers on.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/child_channel.py --runs 10

Runs the many-op test (benchmarks/compare_runs.py's project) in fresh pytest processes,
taking turns: the user-facing results file (``--opprof-json``: run info, git commit and
pytest-benchmark's machine info from py-cpuinfo, the whole JSON rendered), as compare's
children answered before issue 18, against the typed records that
``run.launcher.run_pytest(..., records=True)`` asks for (the child plugin, its folder
named by ``PYTEST_OPPROF_CHILD``).
Prints each channel's median wall time and the median of the pairwise differences
(pairs taken in turn, so a machine that slows down between pairs moves both sides).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.compare_runs import TEST, WORKLOAD, environment  # noqa: E402
from pytest_opprof.commands.common import whole_number  # noqa: E402
from pytest_opprof.run.options import CHILD_PLUGIN, CHILD_VARIABLE  # noqa: E402

#: Each channel's arguments and whether it is the child plugin's (its folder by variable).
CHANNELS = {"results file (--opprof-json)": (["--opprof-no-gate", "--opprof-json=out/r.json"],
                                             False),
            "typed records (child plugin)": (["-p", CHILD_PLUGIN], True)}


def child(folder: Path, channel: tuple[list[str], bool], env: dict[str, str]) -> float:
    """One child's wall time, in seconds."""
    args, plugin = channel
    out = folder / "out"
    out.mkdir()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
               "no:randomly", *args, "test_manyop.py"]
    start = time.perf_counter()
    subprocess.run(command, cwd=folder, env={**env, CHILD_VARIABLE: str(out)} if plugin
                   else env, check=True, capture_output=True)
    elapsed = time.perf_counter() - start
    shutil.rmtree(out)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=whole_number("--runs", 1, 10_000), default=10,
                        help="pairs of children (default 10)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "pytest.ini").write_text("[pytest]\nopprof_measure = time\n")
        (folder / "test_manyop.py").write_text(TEST)
        (folder / "workload.py").write_text(WORKLOAD)
        env = {**environment(), "PYTHONPATH": os.pathsep.join(
            (str(folder), environment()["PYTHONPATH"]))}
        times: dict[str, list[float]] = {name: [] for name in CHANNELS}
        for channel in CHANNELS.values():  # a warm-up of each: disk caches, bytecode
            child(folder, channel, env)
        for k in range(args.runs):
            order = list(CHANNELS.items())
            for name, channel in order if k % 2 == 0 else order[::-1]:
                times[name].append(child(folder, channel, env))
            print(f"pair {k + 1} of {args.runs}", file=sys.stderr, flush=True)
    print(f"{args.runs} pairs of pytest processes of the many-op test, in turn")
    print("| channel | median wall | min | max |\n|---|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.3f} s | {min(values):.3f} s | "
              f"{max(values):.3f} s |")
    old, new = times.values()
    saved = [a - b for a, b in zip(old, new, strict=True)]
    print(f"\nsaved per child: median {statistics.median(saved):.3f} s "
          f"(pairs: {min(saved):.3f} .. {max(saved):.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
