"""The independent measurement of a numpy upgrade, per op: no pytest-opprof timing.

    python benchmarks/env_upgrade/reference.py --base-python /work/venv-np1/bin/python \\
        --head-python /work/venv-np2/bin/python [--processes 10] [--shape grouped] [--json OUT]

Runs reference_child.py (the ops of ops.py, each body timed with perf_counter_ns, in one
loop over all ops as test_numpy_ops.py, or with --shape grouped one loop per class as
test_numpy_grouped.py) in K
pytest processes per interpreter, alternating A B B A A B ..., all in the repository
root with the process shape of the tests (``python -m pytest -q -p no:cacheprovider -p
no:randomly -p no:opprof FILE``) and BLAS and OpenMP on one thread. Per op: each
process's median over its counted iterations; per environment the median of those; the
ratio head/base; and 95% intervals of the ratio from the between-process spread of the
per-process log medians: Welch's t (the two environments as two samples) and a paired t
on the K adjacent pairs (each A with its B neighbour, which cancels slow drift of the
machine). An op is marked when the Welch interval excludes 1.

Standard library only: run it with any Python 3.10+.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = "benchmarks/env_upgrade/reference_child.py"
PINNED = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile by the Cornish-Fisher expansion about the normal one (within
    0.3% of the exact 0.975 quantile for df >= 3; exact as df grows)."""
    if math.isinf(df):
        return statistics.NormalDist().inv_cdf(p)
    z = statistics.NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def welch(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """mean(b) - mean(a), its 95% half-width (Welch), and Welch's degrees of freedom."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else math.inf
    return statistics.fmean(b) - statistics.fmean(a), t_quantile(0.975, df) * se, df


def paired(d: list[float]) -> tuple[float, float]:
    """mean of the pair differences and its 95% half-width (one-sample t)."""
    se = statistics.stdev(d) / math.sqrt(len(d))
    return statistics.fmean(d), t_quantile(0.975, len(d) - 1) * se


def interpreter(python: str) -> dict[str, str]:
    """The interpreter's prefix and numpy version, as the child will see them."""
    code = "import sys, numpy; print(sys.prefix); print(numpy.__version__)"
    prefix, numpy = subprocess.run([python, "-c", code], check=True, capture_output=True,
                                   text=True).stdout.split()
    return {"python": python, "prefix": prefix, "numpy": numpy}


def run_child(python: str, out: Path, shape: str) -> dict:
    env = {**os.environ, **PINNED, "OPPROF_ENVBENCH_OUT": str(out),
           "OPPROF_ENVBENCH_SHAPE": shape}
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "-p", "no:opprof", CHILD]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"reference: {' '.join(cmd)} failed ({proc.returncode}):\n"
                 f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return json.loads(out.read_text())


def order(k: int) -> list[str]:
    """A B B A A B ...: K pairs, each pair's order the reverse of the one before."""
    pairs = [("base", "head") if i % 2 == 0 else ("head", "base") for i in range(k)]
    return [side for pair in pairs for side in pair]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-python", required=True)
    ap.add_argument("--head-python", required=True)
    ap.add_argument("--processes", type=int, default=10, help="per environment (default 10)")
    ap.add_argument("--shape", choices=("mixed", "grouped"), default="mixed",
                    help="the loops of test_numpy_ops.py (mixed, default) or of "
                         "test_numpy_grouped.py (grouped)")
    ap.add_argument("--json", type=Path, default=None, help="write the per-op results here")
    args = ap.parse_args(argv)
    if args.processes < 2:
        ap.error("--processes must be at least 2 (the interval needs a spread)")
    pythons = {"base": args.base_python, "head": args.head_python}
    envs = {side: interpreter(py) for side, py in pythons.items()}
    # per side: one {op: median ns} per process, in the order they ran
    medians: dict[str, list[dict[str, float]]] = {"base": [], "head": []}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="opprof-ref-") as tmp:
        for i, side in enumerate(order(args.processes)):
            data = run_child(pythons[side], Path(tmp) / f"{i}.json", args.shape)
            medians[side].append({op: statistics.median(ts)
                                  for op, ts in data["times_ns"].items()})
            print(f"  process {i + 1}/{2 * args.processes}: {side} (numpy {data['numpy']})",
                  file=sys.stderr, flush=True)
    wall = time.monotonic() - started

    rows = []
    for op in medians["base"][0]:
        la = [math.log(m[op]) for m in medians["base"]]
        lb = [math.log(m[op]) for m in medians["head"]]
        base_ns = statistics.median(m[op] for m in medians["base"])
        head_ns = statistics.median(m[op] for m in medians["head"])
        diff, half, df = welch(la, lb)
        pdiff, phalf = paired([b - a for a, b in zip(la, lb, strict=True)])
        rows.append({
            "op": op, "base_ns": base_ns, "head_ns": head_ns, "ratio": head_ns / base_ns,
            "log_ratio": diff, "ci95": [math.exp(diff - half), math.exp(diff + half)],
            "welch_df": df, "paired_ci95": [math.exp(pdiff - phalf), math.exp(pdiff + phalf)],
            "changed": not (diff - half <= 0 <= diff + half),
        })

    print(f"base: {envs['base']['prefix']} (numpy {envs['base']['numpy']})")
    print(f"head: {envs['head']['prefix']} (numpy {envs['head']['numpy']})")
    print(f"shape {args.shape}; {args.processes} processes each, alternating A B B A ...; "
          f"{wall:.0f} s wall; medians over processes of each process's median; 95% intervals "
          "of head/base from the per-process log medians")
    print(f"{'op':26s} {'base us':>9s} {'head us':>9s} {'ratio':>7s} "
          f"{'Welch 95%':>15s} {'paired 95%':>15s}")
    for r in rows:
        lo, hi = r["ci95"]
        plo, phi = r["paired_ci95"]
        mark = "  changed" if r["changed"] else ""
        print(f"{r['op']:26s} {r['base_ns'] / 1e3:9.1f} {r['head_ns'] / 1e3:9.1f} "
              f"{r['ratio']:7.3f} {lo:7.3f}-{hi:<7.3f} {plo:7.3f}-{phi:<7.3f}{mark}")
    changed = [r for r in rows if r["changed"]]
    print(f"{len(changed)} of {len(rows)} ops changed (Welch 95% interval excludes 1)")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "base": envs["base"], "head": envs["head"], "processes": args.processes,
            "shape": args.shape,
            "wall_s": round(wall, 1), "command": sys.argv, "ops": rows,
            "per_process_median_ns": medians,
        }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
