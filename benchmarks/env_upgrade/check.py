"""``opprof compare --json`` of the numpy upgrade, op by op against reference.py's JSON.

    python benchmarks/env_upgrade/check.py --reference REF.json COMPARE.json [...]

Prints, per test and op, the reference's head/base ratio and 95% (Welch) interval beside
the compare's change, the change its verdict judged (compare/3's estimate, compare/2's
drift-corrected change), interval and verdict,
and sorts each op, with t the compare's tolerance:

- right: flagged in the direction the reference's interval excludes 1 to; or ok where
  the reference's interval reaches within t of 1 (no change, or one within tolerance);
- missed: ok, where the reference's interval lies wholly beyond the tolerance (above
  1 + t or below 1 / (1 + t));
- false: flagged where the reference's interval includes 1, or flagged the other way.

Then a tally per test and for the file. Exit 0 (a measurement, not a gate). Standard
library only; reads the compare's schemas 2 and 3 (pytest_opprof/schemas/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

KINDS = ("right", "missed", "false")


def sort_op(verdict: str, ref: dict, tolerance: float) -> str:
    lo, hi = ref["ci95"]
    ref_dir = 1 if lo > 1 else -1 if hi < 1 else 0
    if verdict != "ok":
        flag_dir = 1 if verdict == "regressed" else -1
        return "right" if flag_dir == ref_dir else "false"
    beyond = lo > 1 + tolerance or hi < 1 / (1 + tolerance)
    return "missed" if beyond else "right"


def check(compare: dict, reference: dict[str, dict]) -> dict[str, int]:
    tolerance = compare["tolerance"]
    total = dict.fromkeys(KINDS, 0)
    print(f"{compare['base']} -> {compare['head']}: {compare['pairs']} pairs, tolerance "
          f"{tolerance:.0%}; {compare['regressed']} regressed, {compare['improved']} improved")
    print(f"  {'op':26s} {'ref':>6s} {'ref 95%':>13s} {'change':>7s} {'judged':>7s} "
          f"{'interval':>13s} {'verdict':>9s}  sort")
    for test in compare["tests"]:
        tally = dict.fromkeys(KINDS, 0)
        common = sorted(test.get("common") or test.get("drift") or [])  # schema 3, 2
        mid = common[len(common) // 2] if common else float("nan")
        shared = test.get("shared")  # schema 3: what the ops moved by together
        ratios = sorted(reference[op["name"]]["ratio"] for op in test["ops"])
        print(f"{test['nodeid']} ({test['pairs']} pairs, median pair's common change "
              f"{mid:.3f}" + (f"; shared {shared['change']:.3f} ({shared['low']:.3f}-"
                              f"{shared['high']:.3f})" if shared else "")
              + f"; the reference's median op {statistics.median(ratios):.3f})")
        for op in test["ops"]:
            ref = reference[op["name"]]
            kind = sort_op(op["verdict"], ref, tolerance)
            tally[kind] += 1
            judged = op.get("estimate", op.get("corrected"))
            print(f"  {op['name']:26s} {ref['ratio']:6.3f} {ref['ci95'][0]:6.3f}-"
                  f"{ref['ci95'][1]:<6.3f} {op['change']:7.3f} "
                  f"{'' if judged is None else f'{judged:7.3f}':>7s} "
                  f"{op['low']:6.3f}-{op['high']:<6.3f} {op['verdict']:>9s}  "
                  f"{'' if kind == 'right' and op['verdict'] == 'ok' else kind}")
        print("  tally: " + ", ".join(f"{tally[k]} {k}" for k in KINDS))
        for k in KINDS:
            total[k] += tally[k]
    print("total: " + " / ".join(f"{total[k]} {k}" for k in KINDS))
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, required=True, help="reference.py's --json")
    ap.add_argument("compares", type=Path, nargs="+", help="opprof compare's --json")
    args = ap.parse_args(argv)
    data = json.loads(args.reference.read_text())
    reference = {r["op"]: r for r in data["ops"]}
    print(f"reference: {data['base']['numpy']} -> {data['head']['numpy']}, "
          f"{data['processes']} processes a side, shape {data.get('shape', 'mixed')}")
    for path in args.compares:
        print(f"\n== {path}")
        check(json.loads(path.read_text()), reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
