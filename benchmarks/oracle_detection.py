"""What an oracle would catch on these runs, and how the rule's spreads compare with the truth.

    python benchmarks/oracle_detection.py /tmp/G2/mo5

From a gate_runs.py folder: each op's true spread between processes is the standard
deviation of its drift-corrected log ratio over the folder's serial A/A runs. An oracle
that knows it and uses the rule's margin (``k`` sigmas, ``k`` the normal quantile of
``alpha / ops``) catches a slowdown ``f`` with probability Phi((log f - k sd) / sd). Prints
that for each injected op and factor (with the factor as measured), and the median over
ops of the spread the rule used over the true one.
"""

from __future__ import annotations

import glob
import json
import math
import re
import sys
from pathlib import Path
from statistics import NormalDist, median

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pytest_opprof.judge.rule import GateConfig  # noqa: E402


def ops_of(path: str) -> dict[str, dict]:
    """Each op's ``baseline`` object in a run's results file (its one test)."""
    ops = json.loads(Path(path).read_text())["tests"][0]["ops"]
    return {op["name"]: op["baseline"] for op in ops if op["baseline"]}


def main(folder: str) -> int:
    runs = [ops_of(f) for f in sorted(glob.glob(f"{folder}/runs/aa-n0-*.json"))]
    names = list(runs[0])
    true_sd, used = {}, []
    for name in names:
        d = [math.log(r[name]["corrected_ratio"]) for r in runs if name in r]
        mean = sum(d) / len(d)
        true_sd[name] = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
        spread = median(r[name]["spread"] for r in runs if name in r)
        used.append(spread * math.sqrt(1 + 1 / 5) / true_sd[name])
    k = GateConfig().sigmas(GateConfig().alpha, len(names))
    print(f"{len(runs)} A/A runs, {len(names)} ops, k = {k:.2f}; the rule's spread / the true "
          f"one, median over ops: {median(used):.2f}\n")
    print("| op | true sd between processes | injected | measured | oracle catches |")
    print("|---|---|---|---|---|")
    by_factor: dict[str, list[float]] = {}
    for f in sorted(glob.glob(f"{folder}/runs/inject-*.json")):
        match = re.match(r"inject-n\d+-(.+)-([\d.]+)-\d+$", Path(f).stem)
        if not match:
            continue
        name, factor = match.groups()
        measured = ops_of(f)[name]["corrected_ratio"]
        sd = true_sd[name]
        p = NormalDist().cdf((math.log(float(factor)) - k * sd) / sd)
        by_factor.setdefault(factor, []).append(p)
        print(f"| {name} | {sd:.1%} | x{factor} | {measured:.3f} | {p:.0%} |")
    print()
    for factor, ps in by_factor.items():
        print(f"x{factor}: an oracle catches {sum(ps) / len(ps):.0%} of these injections")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
