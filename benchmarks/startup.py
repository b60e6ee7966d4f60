"""The plugin's start-up cost: `pytest --collect-only` on the example suite with the
plugin and with `-p no:opprof`, alternated, medians of N runs each.

    python benchmarks/startup.py [N=8]

`python -X importtime -c "import pytest_opprof.plugin"` shows where the time goes.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def collect(*extra: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                    "no:cacheprovider", str(ROOT / "example_suite"), *extra],
                   capture_output=True, check=True, cwd=ROOT)
    return time.perf_counter() - start


def main(runs: int) -> None:
    with_plugin, without = [], []
    for _ in range(runs):
        with_plugin.append(collect())
        without.append(collect("-p", "no:opprof"))
    a, b = statistics.median(with_plugin), statistics.median(without)
    print(f"pytest --collect-only example_suite: {a * 1e3:.0f} ms with the plugin, "
          f"{b * 1e3:.0f} ms with -p no:opprof: {1e3 * (a - b):+.0f} ms ({runs} runs each)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
