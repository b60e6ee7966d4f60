"""The few-pairs judge of ``opprof compare`` (two results files, ``--pairs 1..3``)
replayed on real processes: false alarms of same-code compares, and detection.

    python benchmarks/one_pair.py DIR [DIR ...] [--factors 2,3] [--seed 0]

Each DIR holds results files ``p0.json``, ``p1.json``, ... of the many-op test, one per
pytest process, as ``OMP_NUM_THREADS=1 python benchmarks/compare_replay.py --record 40
DIR`` writes them. Every two processes of a folder (all of them, and the disjoint
consecutive ones, 0-1, 2-3, ...) are compared as ``opprof compare A.json B.json``
compares two files, through :func:`pytest_opprof.judge.comparison.compare_runs`:

- same code: any op regressed or improved is a false alarm (the claim: at most 1% of
  tests, family-wise);
- one op of 20 us or more made FACTOR slower in the head's samples (every sample, as a
  change of the code does): detection is exactly that op regressed;
- every op exactly 2x faster in the head: the drift must read -50% and no op may be
  flagged.

Also ``--pairs 2`` and ``3`` as the command judges them (consecutive processes, ABBA).
Figures only; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the repository's packages come first
    sys.path.insert(0, str(ROOT))

from pytest_opprof.judge import comparison  # noqa: E402
from pytest_opprof.model.profile import Profile  # noqa: E402
from pytest_opprof.store.results import load_records  # noqa: E402

MIN_INJECT_NS = 20_000


def profiles(folder: Path) -> list[Profile]:
    files = sorted(folder.glob("p*.json"), key=lambda f: int(f.stem[1:]))
    found = [load_records(f)[1][0].profile for f in files]
    if len(found) < 4:
        raise SystemExit(f"{folder}: {len(found)} results files p*.json; record some first "
                         "(benchmarks/compare_replay.py --record N DIR)")
    return found


def judged(base: list[Profile], head: list[Profile]) -> dict[str, str]:
    report = comparison.compare_runs([{"t": b} for b in base], [{"t": h} for h in head],
                                     mode="files" if len(base) == 1 else "pairs",
                                     labels=("a", "b"))
    return {r.name: r.change.verdict for r in report.tests[0].ops}


def scaled(profile: Profile, factor: np.ndarray | float) -> Profile:
    return replace(profile, samples=profile.samples * factor)


def folder_rows(folder: Path, factors: list[float], rng: np.random.Generator) -> list[str]:
    runs = profiles(folder)
    names = [info.name for info in runs[0].ops]
    medians = np.nanmedian([np.nanmedian(comparison.counted(r), axis=0) for r in runs], axis=0)
    big = [i for i, m in enumerate(medians) if m >= MIN_INJECT_NS]
    rows = []
    for label, pairs in (("all", list(itertools.combinations(range(len(runs)), 2))),
                         ("disjoint", [(k, k + 1) for k in range(0, len(runs) - 1, 2)])):
        false = tests = 0
        caught = dict.fromkeys(factors, 0)
        halved = 0
        drifts = []
        for i, j in pairs:
            tests += 1
            false += any(v != "ok" for v in judged([runs[i]], [runs[j]]).values())
            for factor in factors:
                op = big[int(rng.integers(len(big)))]
                column = np.ones(runs[j].samples.shape[1])
                column[op] = factor
                found = judged([runs[i]], [scaled(runs[j], column)])
                caught[factor] += {n for n, v in found.items() if v != "ok"} == {names[op]} \
                    and found[names[op]] == "regressed"
            report = comparison.compare_runs([{"t": runs[i]}], [{"t": scaled(runs[i], 0.5)}],
                                             mode="files", labels=("a", "b"))
            halved += any(r.change.verdict != "ok" for r in report.tests[0].ops)
            drifts.append(report.tests[0].result.drift[0])
        detection = ", ".join(f"x{f:g}: {caught[f] / tests:.2f}" for f in factors)
        rows.append(f"| {folder.name} | one pair, {label} ({tests}) | {false / tests:.3f} | "
                    f"{detection} | {halved} flagged, drift {min(drifts) - 1:+.1%} to "
                    f"{max(drifts) - 1:+.1%} |")
    for pairs in (2, 3):
        false = tests = 0
        caught = dict.fromkeys(factors, 0)
        for start in range(0, len(runs) - 2 * pairs + 1, 2):
            window = runs[start:start + 2 * pairs]
            base = [window[2 * p + (p % 2)] for p in range(pairs)]  # ABBA
            head = [window[2 * p + 1 - (p % 2)] for p in range(pairs)]
            tests += 1
            false += any(v != "ok" for v in judged(base, head).values())
            for factor in factors:
                op = big[int(rng.integers(len(big)))]
                column = np.ones(head[0].samples.shape[1])
                column[op] = factor
                found = judged(base, [scaled(h, column) for h in head])
                caught[factor] += {n for n, v in found.items() if v != "ok"} == {names[op]} \
                    and found[names[op]] == "regressed"
        detection = ", ".join(f"x{f:g}: {caught[f] / tests:.2f}" for f in factors)
        rows.append(f"| {folder.name} | --pairs {pairs} ({tests} windows) | "
                    f"{false / tests:.3f} | {detection} | |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--factors", default="2,3")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    factors = [float(x) for x in args.factors.split(",")]
    rng = np.random.default_rng(args.seed)
    print("| processes | compares | false alarms (tests with any op flagged) | "
          "exactly the slowed op regressed | every op 2x faster |")
    print("|---|---|---|---|---|")
    for folder in args.folders:
        for row in folder_rows(folder, factors, rng):
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
