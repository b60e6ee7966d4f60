"""``opprof compare`` across two environments, checked against an independent measurement
(issue 21): which ops a numpy upgrade changed, and an A/A compare that must flag nothing.

    bash benchmarks/env_venvs.sh /work                     # the venvs, once (about 1 min)
    python benchmarks/env_upgrade/reference.py --base-python /work/venv-np1/bin/python \\
        --head-python /work/venv-np2/bin/python --processes 10 --json /tmp/reference.json
    python benchmarks/env_compare.py --base-python /work/venv-np1/bin/python \\
        --head-python /work/venv-np2/bin/python --twin /work/venv-np2b/bin/python \\
        --reference /tmp/reference.json --aa 10 --out /tmp/env-compare

Runs, from the repository root with BLAS and OpenMP on one thread, ``opprof compare
--base-python BASE --head-python HEAD benchmarks/env_upgrade/test_numpy_ops.py`` (the
default sizing: 6 pairs, more until nine in ten ops could show 15%, at most 30), then
``--aa`` compares of HEAD against its copy TWIN. Prints, per op, the command's verdict,
change and detectable slowdown beside the reference's ratio and 95% interval
(reference.py: perf_counter_ns around the same op bodies in alternating pytest
processes, no pytest-opprof timing), and sorts each op into:

- found: the reference's interval excludes 1 and its change exceeds the command's
  detectable effect, and the command flagged it in that direction;
- missed: the same, not flagged;
- flagged, smaller: flagged, the reference's change real (interval excludes 1) but
  within the detectable effect;
- flagged, not in the reference: flagged where the reference saw no change.

Writes OUT/upgrade.json (the compare's), OUT/aa-K.json and OUT/summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = "benchmarks/env_upgrade/test_numpy_ops.py"
PINNED = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def compare(base: str, head: str, out: Path) -> tuple[dict, float, int]:
    """One ``opprof compare`` across environments: its JSON, wall seconds, exit status."""
    command = [sys.executable, "-m", "pytest_opprof.cli", "compare", "--base-python", base,
               "--head-python", head, WORKLOAD, "--json", str(out)]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, **PINNED},
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode not in (0, 1) or not out.exists():
        sys.exit(f"{' '.join(command)}: exit {done.returncode}\n{done.stdout[-3000:]}"
                 f"{done.stderr[-3000:]}")
    return json.loads(out.read_text()), wall, done.returncode


def ops_of(data: dict) -> dict[str, dict]:
    (test,) = data["tests"]
    return {op["name"]: op for op in test["ops"]}


def classify(op: dict, ref: dict) -> str:
    lo, hi = ref["ci95"]
    real = not lo <= 1 <= hi
    ratio = ref["ratio"]
    beyond = ratio > 1 + op["detectable"] or ratio < 1 / (1 + op["detectable"])
    flagged = op["verdict"] != "ok"
    direction = (op["verdict"] == "regressed") == (ratio > 1)
    if real and beyond:
        return "found" if flagged and direction else "missed"
    if flagged:
        return "flagged, smaller" if real and direction else "flagged, not in the reference"
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-python", required=True)
    ap.add_argument("--head-python", required=True)
    ap.add_argument("--twin", required=True, help="a copy of the head's environment (A/A)")
    ap.add_argument("--reference", type=Path, required=True, help="reference.py's --json")
    ap.add_argument("--aa", type=int, default=10, help="A/A compares (default 10)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    reference = {r["op"]: r for r in json.loads(args.reference.read_text())["ops"]}

    data, wall, code = compare(args.base_python, args.head_python, args.out / "upgrade.json")
    ops = ops_of(data)
    print(f"upgrade: {data['base']} -> {data['head']}: {data['pairs']} pairs, {wall:.0f} s, "
          f"exit {code}; {data['regressed']} regressed, {data['improved']} improved of "
          f"{len(ops)}")
    print("differ: " + ", ".join(f"{d['name']} {d['base']} -> {d['head']}"
                                 for d in data["environments"]["differ"]))
    print(f"{'op':24s} {'verdict':>9s} {'change':>8s} {'detect':>7s} {'ref':>7s} "
          f"{'ref 95%':>13s}  class")
    classes: dict[str, list[str]] = {}
    for name, op in ops.items():
        ref = reference[name]
        kind = classify(op, ref)
        classes.setdefault(kind or "ok both", []).append(name)
        judged = op.get("estimate", op.get("corrected"))  # compare/3, compare/2
        print(f"{name:24s} {op['verdict']:>9s} {judged:8.3f} "
              f"{1 + op['detectable']:7.3f} {ref['ratio']:7.3f} "
              f"{ref['ci95'][0]:6.3f}-{ref['ci95'][1]:<6.3f}  {kind}")
    for kind, names in sorted(classes.items()):
        print(f"{kind}: {len(names)} {', '.join(names) if kind != 'ok both' else ''}")

    flagged_aa = []
    for k in range(args.aa):
        aa, aa_wall, _ = compare(args.head_python, args.twin, args.out / f"aa-{k}.json")
        names = [n for n, op in ops_of(aa).items() if op["verdict"] != "ok"]
        flagged_aa.append(names)
        print(f"A/A {k + 1}/{args.aa}: {aa['pairs']} pairs, {aa_wall:.0f} s, flagged "
              f"{len(names)}{': ' + ', '.join(names) if names else ''}", flush=True)
    print(f"A/A: {sum(map(len, flagged_aa))} op(s) flagged in {args.aa} compares of "
          f"{len(ops)} ops")
    (args.out / "summary.json").write_text(json.dumps({
        "upgrade": {"pairs": data["pairs"], "wall_s": round(wall, 1), "classes": classes},
        "aa_flagged": flagged_aa}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
