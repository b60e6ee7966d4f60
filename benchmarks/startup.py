"""The plugin's cost where it is installed but unused: `pytest --collect-only -q` in a
project that does not use it, with the plugin and with `-p no:opprof`, alternated,
medians of N runs each; and the plugin's modules that `-X importtime` shows imported.

    python benchmarks/startup.py [N=8]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = {"test_plain.py": "def test_plain():\n    assert 1 + 1 == 2\n"}


def collect(project: Path, *extra: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                    "no:cacheprovider", *extra], capture_output=True, check=True, cwd=project)
    return time.perf_counter() - start


def imported(project: Path) -> list[tuple[str, int]]:
    """The plugin's modules imported in a session that profiles nothing, with each
    one's own import time in microseconds."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "pytest",
                           "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly"],  # pytest-randomly imports numpy itself
                          capture_output=True, text=True, check=True, cwd=project)
    found = []
    for line in done.stderr.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2].startswith(("pytest_opprof", "numpy")):
            found.append((parts[2], int(parts[0])))
    return found


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="opprof-startup-") as tmp:
        project = Path(tmp)
        for name, text in PROJECT.items():
            (project / name).write_text(text)
        with_plugin, without = [], []
        for _ in range(runs):
            with_plugin.append(collect(project))
            without.append(collect(project, "-p", "no:opprof"))
        modules = imported(project)
    a, b = statistics.median(with_plugin), statistics.median(without)
    print(f"pytest --collect-only -q, a project without opprof: {a * 1e3:.0f} ms with the "
          f"plugin, {b * 1e3:.0f} ms with -p no:opprof: {1e3 * (a - b):+.0f} ms "
          f"({runs} runs each)")
    ours = [m for m in modules if m[0].startswith("pytest_opprof")]
    print(f"{len(ours)} modules of pytest_opprof imported "
          f"({sum(us for _, us in ours) / 1e3:.1f} ms of their own import time): "
          + ", ".join(name for name, _ in ours))
    print("numpy imported (-p no:randomly):", any(name == "numpy" for name, _ in modules))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
