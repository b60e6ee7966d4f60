"""``opprof compare``'s model replayed on real processes: the state adjustment and the
automatic pairs, measured on many more compares than real runs can afford.

    OMP_NUM_THREADS=1 python benchmarks/compare_replay.py --record 80 DIR
    python benchmarks/compare_replay.py DIR [--trials 150] [--factor 1.15] [--pairs 8,12,16,20]

``--record N`` runs the many-op test (benchmarks/manyop, 44 ops, CPU backend; the test
of benchmarks/compare_runs.py) in N pytest processes one after another, as ``opprof
compare`` runs them, each writing ``DIR/pK.json``. The replay then takes windows of
consecutive processes from DIR, the even ones of each pair the base and the odd ones the
head (ABBA order, as the command), and judges them through
:func:`pytest_opprof.commands.comparison.compare_runs` as the command does: A/A (nothing changed:
any op flagged is a false failure) and with one op of 20 us or more made ``--factor``
slower in the head's samples (detection: exactly that op regressed). Rows: each fixed
pairs count, judged from the samples as they are ("medians": the model before the state
adjustment) and at the common machine state (the command); and the automatic run (pairs
sized by ``--detect`` from the first pairs, as the command sizes them).

The injection multiplies recorded samples, so it is a replay of the machine's real noise
with a known change, not a substitute for benchmarks/compare_runs.py's committed
slowdowns.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the repository's packages come first
    sys.path.insert(0, str(ROOT))

from benchmarks.compare_runs import TEST, WORKLOAD, environment  # noqa: E402
from benchmarks.gate_runs import MIN_INJECT_NS  # noqa: E402
from pytest_opprof.commands import compare  # noqa: E402
from pytest_opprof.judge import comparison, config, paired  # noqa: E402
from pytest_opprof.model import comparison as data  # noqa: E402
from pytest_opprof.model.profile import Profile  # noqa: E402
from pytest_opprof.store.results import load_records  # noqa: E402


def counted(profile: Profile) -> np.ndarray:
    """A process's counted samples, as the command reads them."""
    return comparison.counted(profile)


def record(folder: Path, processes: int) -> None:
    """The many-op test in ``processes`` pytest processes, one after another."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\nopprof_measure = time\n")
    (folder / "test_manyop.py").write_text(TEST)
    (folder / "workload.py").write_text(WORKLOAD)
    env = {**environment(), "PYTHONPATH": os.pathsep.join((str(folder),
                                                           environment()["PYTHONPATH"]))}
    for k in range(processes):
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:randomly", "--opprof-no-gate",
                        f"--opprof-json={folder / f'p{k}.json'}", "test_manyop.py"],
                       cwd=folder, env=env, check=True, capture_output=True)
        print(f"process {k + 1} of {processes}", file=sys.stderr, flush=True)


def profiles(folder: Path) -> list[Profile]:
    files = sorted(folder.glob("p*.json"), key=lambda f: int(f.stem[1:]))
    found = []
    for f in files:
        (test,) = load_records(f)[1]
        found.append(test.profile)
    if len(found) < 4:
        raise SystemExit(f"{folder}: {len(found)} results files p*.json; record some first "
                         "(--record N)")
    return found


def plain(report_runs: tuple[list, list]) -> data.Report:
    """The model before the state adjustment: each process's medians as they are."""
    base, head = report_runs
    names = [info.name for info in base[0]["t"].ops]
    m = [[np.nanmedian(counted(p["t"]), axis=0) for p in side] for side in (base, head)]
    result = paired.judge_pairs(np.array(m[0]), np.array(m[1]))
    rows = tuple(data.OpRow(i, n, 0, c) for i, (n, c) in
                 enumerate(zip(names, result.ops, strict=True)))
    return data.Report("pairs", "a", "b", 0.05, 0.01, len(base),
                        (data.TestComparison("t", result, rows, (), ()),), (), (),
                        comparison.DEFAULT_DETECT)


def spreads(runs: list[Profile]) -> str:
    """How far each op's median moves between the recorded processes (sd of its log,
    each process's drift taken out, median over ops), as the samples are and at the
    machine's common state; and the ops' elasticities."""
    logs = [np.log(counted(r)) for r in runs]
    state = paired.state_adjusted(logs)
    adjusted, beta = state.logs, state.beta

    def spread(xs: list[np.ndarray]) -> float:
        m = np.array([np.nanmedian(x, axis=0) for x in xs])
        m = m - m.mean(axis=0)
        return float(np.median((m - np.median(m, axis=1, keepdims=True)).std(axis=0, ddof=1)))

    center = np.nanmedian(np.vstack(logs), axis=0)
    inside = np.median([np.nanmedian(x - center, axis=1).std() for x in logs])
    return (f"each op's spread between processes (median over ops, drift taken out): "
            f"{spread(logs):.1%} from the samples as they are, {spread(adjusted):.1%} at "
            f"the machine's common state; the machine's state (the median op's deviation) "
            f"moved by {inside:.1%} between iterations of a process (median over processes); "
            f"elasticities {beta.min():.2f} to {beta.max():.2f} (median {np.median(beta):.2f})")


def window(runs: list[Profile], start: int, pairs: int, slow: tuple[int, float] | None):
    """Pairs from ``start`` in ABBA order; ``slow``: (op, factor) in the head."""
    base, head = [], []
    for p in range(pairs):
        first, second = runs[start + 2 * p], runs[start + 2 * p + 1]
        b, h = (first, second) if p % 2 == 0 else (second, first)
        if slow is not None:
            column = np.ones(h.samples.shape[1])
            column[slow[0]] = slow[1]
            h = replace(h, samples=h.samples * column)
        base.append({"t": b})
        head.append({"t": h})
    return base, head


def verdicts(report: data.Report) -> dict[str, str]:
    return {r.name: r.change.verdict for r in report.tests[0].ops}


def outcome(report: data.Report, slowed: str | None) -> bool:
    """A/A: whether any op was flagged; injected: whether exactly ``slowed`` regressed."""
    flagged = {n for n, v in verdicts(report).items() if v != "ok"}
    return bool(flagged) if slowed is None else flagged == {slowed} and \
        verdicts(report)[slowed] == "regressed"


def automatic(runs: list[Profile], start: int, slow: tuple[int, float] | None,
              detect: float) -> tuple[data.Report, int] | None:
    """As the command sizes its run: FIRST_PAIRS, then what pairs_needed says, up to
    MAX_PAIRS; None when the recorded processes run out first."""
    planned = compare.FIRST_PAIRS
    while True:
        if start + 2 * planned > len(runs):
            return None
        report = comparison.compare_runs(*window(runs, start, planned, slow), mode="pairs",
                                      labels=("a", "b"), detect=detect)
        needed = min(comparison.pairs_needed(report), compare.MAX_PAIRS)
        if needed <= planned:
            return report, planned
        planned = needed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--record", type=int, default=0, metavar="N",
                        help="first run the many-op test in N processes into FOLDER")
    parser.add_argument("--trials", type=int, default=150)
    parser.add_argument("--factor", type=float, default=1.15)
    parser.add_argument("--pairs", default="8,12,16,20")
    parser.add_argument("--detect", type=float, default=comparison.DEFAULT_DETECT)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizing", default=str(config.SIZING_QUANTILE),
                        help="percentiles of the ops' spread the automatic run is sized on, "
                             "e.g. 75,90 (default: the command's)")
    args = parser.parse_args()
    if args.record:
        record(args.folder, args.record)
    runs = profiles(args.folder)
    names = [info.name for info in runs[0].ops]
    medians = np.nanmedian([np.nanmedian(counted(r), axis=0) for r in runs], axis=0)
    big = [i for i, m in enumerate(medians) if m >= MIN_INJECT_NS]
    rng = np.random.default_rng(args.seed)
    print(f"{len(runs)} processes of the many-op test ({len(names)} ops, {len(big)} of "
          f"{MIN_INJECT_NS / 1e3:g} us or more); {args.trials} compares per row, windows of "
          f"consecutive processes; one op x{args.factor:g} in the head\n")
    print(spreads(runs) + "\n")
    print("| pairs | model | false failures (A/A) | exactly the slowed op regressed |")
    print("|---|---|---|---|")
    for pairs in (int(x) for x in args.pairs.split(",")):
        if 2 * pairs > len(runs):
            continue
        counts = {"medians": [0, 0], "at the machine's state": [0, 0]}
        for t in range(args.trials):
            start = int(rng.integers(0, len(runs) - 2 * pairs + 1))
            op = big[t % len(big)]
            for slow in (None, (op, args.factor)):
                sides = window(runs, start, pairs, slow)
                slowed = None if slow is None else names[op]
                for model, report in (("medians", plain(sides)),
                                      ("at the machine's state", comparison.compare_runs(
                                          *sides, mode="pairs", labels=("a", "b")))):
                    counts[model][slow is not None] += outcome(report, slowed)
        for model, (false, caught) in counts.items():
            print(f"| {pairs} | {model} | {false / args.trials:.3f} | "
                  f"{caught / args.trials:.2f} |")
    for quantile in (int(x) for x in args.sizing.split(",")):
        config.SIZING_QUANTILE = quantile  # what the sizing reads (default 90)
        false = caught = done = 0
        used = []
        for t in range(args.trials):
            start = int(rng.integers(0, max(len(runs) - 2 * compare.FIRST_PAIRS, 0) + 1))
            op = big[t % len(big)]
            pair = [automatic(runs, start, slow, args.detect)
                    for slow in (None, (op, args.factor))]
            if pair[0] is None or pair[1] is None:
                continue
            done += 1
            false += outcome(pair[0][0], None)
            caught += outcome(pair[1][0], names[op])
            used += [pair[0][1], pair[1][1]]
        if done:
            print(f"| automatic, sized on the {quantile}th percentile op ({np.median(used):g} "
                  f"pairs, {min(used)}-{max(used)}) | at the machine's state | "
                  f"{false / done:.3f} | {caught / done:.2f} ({done} windows the recording "
                  "could hold) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
