"""Summarise real A/A runs written by benchmarks/real_aa.sh: per test, the drift of
each run and the worst drift-corrected op ratio."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(folder: str, checks: int) -> None:
    rows: dict[str, list[tuple[float, float, str]]] = {}
    failures: dict[str, int] = {}
    for i in range(1, checks + 1):
        path = Path(folder, f"run{i}.json")
        if not path.exists():
            continue
        for test in json.loads(path.read_text())["tests"]:
            ratios = [(op["baseline"]["corrected_ratio"], op["name"]) for op in test["ops"]
                      if op["baseline"] and op["baseline"]["corrected_ratio"] is not None]
            worst = max(ratios, key=lambda r: abs(r[0] - 1)) if ratios else (1.0, "-")
            rows.setdefault(test["nodeid"], []).append((test["drift"] or 1.0, *worst))
            failures[test["nodeid"]] = failures.get(test["nodeid"], 0) + (
                test["verdict"] == "failed")
    print("| test | runs | drift range | worst op per run (drift-corrected), range | "
          "failures |")
    print("|---|---|---|---|---|")
    for nodeid, values in rows.items():
        drifts = [v[0] for v in values]
        worst = [v[1] for v in values]
        print(f"| {nodeid} | {len(values)} | {min(drifts):.3f} to {max(drifts):.3f} | "
              f"{min(worst):.3f} to {max(worst):.3f} | {failures[nodeid]} |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
