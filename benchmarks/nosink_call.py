"""The cost of a decorated call with no profiler recording, over a plain call, for one or
more source trees side by side (each built in place: ``python setup.py build_ext
--inplace``), alternating trees each round so that the machine's drift hits all alike.

    python benchmarks/nosink_call.py --rounds 8 /tmp/old-tree .

Prints each tree's best (minimum over rounds) plain and decorated ns per call."""
from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import pytest_opprof

def plain(x):
    return x

@pytest_opprof.op
def decorated(x):
    return x

def per_call(f, n=200_000):
    best = float("inf")
    for _ in range(15):
        t = time.perf_counter_ns()
        for i in range(n):
            f(i)
        best = min(best, (time.perf_counter_ns() - t) / n)
    return best

print(per_call(plain), per_call(decorated))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    best = {tree: [float("inf"), float("inf")] for tree in args.trees}
    for _ in range(args.rounds):
        for tree in args.trees:
            out = subprocess.run([sys.executable, "-I", "-c", CHILD, tree], check=True,
                                 capture_output=True, text=True).stdout.split()
            best[tree] = [min(b, float(x)) for b, x in zip(best[tree], out, strict=True)]
    for tree, (plain, decorated) in best.items():
        print(f"{tree}: plain {plain:.1f} ns, decorated {decorated:.1f} ns, "
              f"over a plain call {decorated - plain:.1f} ns")


if __name__ == "__main__":
    main()
