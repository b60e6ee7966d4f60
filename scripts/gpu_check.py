"""Run the example suite on the CUDA backend and print its reports.

    python scripts/gpu_check.py [extra pytest args]

Needs CuPy and a CUDA GPU (pip install -e '.[cuda12]' or '.[cuda13]'). Where the
environment variable OUT names a folder, the output is also written there as
gpu_check.txt. Exits with pytest's status; never part of the test suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def cuda_device() -> tuple[Any, str]:
    """(cupy, a line naming the versions and device 0), or (None, why not)."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed: pip install -e '.[cuda12]' (or '.[cuda13]')"
    if not cupy.cuda.is_available():
        return None, "CuPy finds no CUDA device"
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return cupy, (f"cupy {cupy.__version__}, CUDA runtime "
                  f"{cupy.cuda.runtime.runtimeGetVersion()}, device 0: {name}")


def main(argv: list[str]) -> int:
    cupy, line = cuda_device()
    if cupy is None:
        print(f"gpu_check: {line}")
        return 2
    lines = [line]
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "example_suite"), "--opprof-measure=auto",
           "--opprof-verbosity=2", "-p", "no:cacheprovider", *argv]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    lines += ["$ " + " ".join(cmd[2:]), proc.stdout, proc.stderr]
    text = "\n".join(lines)
    print(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_check.txt").write_text(text, encoding="utf-8")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
