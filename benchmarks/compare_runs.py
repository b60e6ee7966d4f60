"""``opprof compare`` on real runs: detection, false failures and wall time.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/compare_runs.py \\
        [--ops 10] [--self 20] [--pairs N] [--factor 1.15] [--growth 2,4,8] [--keep DIR]

Builds a git repository of its own (a temporary folder, or ``--keep DIR``) holding a
test of the many-op workload (benchmarks/manyop: 44 ops, ~5 us to ~5 ms, on the CPU
backend), whose committed ``workload.py`` says how much extra work each op does. For
each of ``--ops`` ops of 20 us or more (spread over their sizes), it commits a real
slowdown of that op (``--factor``: more calls in the op's code), runs ``opprof compare
HEAD~1`` as a user would (pairs sized automatically, or ``--pairs N``), and the same
commit through the stored-baseline gate (``opprof baseline update --runs 5`` at the base
commit, once; then one gated pytest run), and resets; the slowdown the commit really
makes is measured in one process too (:func:`in_process_factor`); then runs ``--self``
compares of the base commit against itself. Prints markdown tables: detection (exactly
the slowed op regressed) by each, false failures (any op flagged in a self-compare), and
the wall time of a compare for each ``--growth`` pairs count.

Every figure comes from the compare's ``--json``; each compare's output is kept in the
repository's ``runs/`` folder (``--keep`` to read them after).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the repository's packages come first
    sys.path.insert(0, str(ROOT))

from benchmarks.gate_runs import MIN_INJECT_NS  # noqa: E402
from pytest_opprof.render import duration  # noqa: E402

TEST = '''import pytest

from benchmarks.manyop.ops import ManyOp
from workload import SLOW


@pytest.mark.opprof(iterations=30)
def test_manyop(gpu_profiler):
    workload = ManyOp(gpu_profiler.xp, extra={name: f - 1 for name, f in SLOW.items()})
    for _ in gpu_profiler.iterations():
        workload.step()
'''
#: The code the slowdown commit changes: each op's work, as a factor (absent: 1).
WORKLOAD = "SLOW: dict[str, float] = {}\n"
SELECTED = "test_manyop.py"


def environment() -> dict[str, str]:
    """The many-op workload importable from the repository of this script; BLAS and
    OpenMP on one thread (as benchmarks/gate_runs.py)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True, env={**environment(), "GIT_AUTHOR_NAME": "bench",
                                          "GIT_AUTHOR_EMAIL": "bench@example.com",
                                          "GIT_COMMITTER_NAME": "bench",
                                          "GIT_COMMITTER_EMAIL": "bench@example.com"}).stdout


def make_repo(repo: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "pytest.ini").write_text("[pytest]\nopprof_measure = time\n")
    (repo / "test_manyop.py").write_text(TEST)
    (repo / "workload.py").write_text(WORKLOAD)
    (repo / ".gitignore").write_text("runs/\n__pycache__/\n.opprof/\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the many-op test")


def medians(repo: Path) -> dict[str, float]:
    """Each op's median (ns) in one plain run of the test."""
    out = repo / "runs" / "calibration.json"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "-p", "no:randomly", "--opprof-no-gate", f"--opprof-json={out}", SELECTED],
                   cwd=repo, env=environment(), check=True, capture_output=True)
    (test,) = json.loads(out.read_text())["tests"]
    return {op["name"]: op["current"]["median_ns"] for op in test["ops"]}


def chosen(sizes: dict[str, float], n: int) -> list[str]:
    """``n`` ops of MIN_INJECT_NS or more, evenly spread over their sizes."""
    sized = sorted((m, name) for name, m in sizes.items() if m >= MIN_INJECT_NS)
    if n > len(sized):
        raise SystemExit(f"only {len(sized)} ops take {duration(MIN_INJECT_NS)} or more")
    step = (len(sized) - 1) / max(n - 1, 1)
    return [sized[round(k * step)][1] for k in range(n)]


def compare(repo: Path, ref: str, pairs: int | None, key: str) -> tuple[dict[str, Any], float]:
    """``opprof compare REF [--pairs N]`` as a user runs it: its JSON and wall time."""
    out = repo / "runs" / f"{key}.json"
    start = time.perf_counter()
    sized = ["--pairs", str(pairs)] if pairs else []
    done = subprocess.run([sys.executable, "-m", "pytest_opprof.cli", "compare", ref, *sized,
                           "--json", str(out), "-p", "no:randomly", SELECTED], cwd=repo,
                          env=environment(), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    (repo / "runs" / f"{key}.log").write_text(done.stdout + done.stderr)
    if done.returncode not in (0, 1):
        raise SystemExit(f"opprof compare failed ({key}): {done.stderr.strip()}")
    return json.loads(out.read_text()), wall


def stored_baseline(repo: Path) -> None:
    """``opprof baseline update --runs 5`` at the base commit, as a user keeps one."""
    done = subprocess.run([sys.executable, "-m", "pytest_opprof.cli", "baseline", "update",
                           "--runs", "5", "-p", "no:randomly", SELECTED], cwd=repo,
                          env=environment(), capture_output=True, text=True, check=False)
    (repo / "runs" / "baseline.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"opprof baseline update failed: {done.stderr.strip()}")


def gated(repo: Path, key: str) -> list[str]:
    """One pytest run gated against the stored baseline: the ops it called regressed."""
    out = repo / "runs" / f"{key}.json"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "-p", "no:randomly", f"--opprof-json={out}", SELECTED], cwd=repo,
                   env=environment(), capture_output=True, check=False)
    (test,) = json.loads(out.read_text())["tests"]
    return [op["name"] for op in test["ops"] if op["verdict"] == "regressed"]


def in_process_factor(name: str, factor: float, rounds: int = 400) -> float:
    """How much slower the committed change makes op ``name``, measured in one process
    (the op's calls with and without the extra work, alternating, after the other ops
    as in the test): the slowdown actually injected, which whole and partial extra calls
    make only roughly ``factor``."""
    import numpy as np

    from benchmarks.manyop.ops import ManyOp

    plain, slow = ManyOp(np), ManyOp(np, extra={name: factor - 1})
    index = next(k for k, (_, spec, _) in enumerate(plain.ops) if spec.name == name)
    times: dict[int, list[int]] = {0: [], 1: []}
    for r in range(rounds):
        for which in (r % 2, 1 - r % 2):
            workload = (plain, slow)[which]
            for k, (_, spec, calls) in enumerate(workload.ops):
                if abs(k - index) > 1:
                    continue  # the op and its neighbours, so caches are as in the test
                if spec.warm:
                    spec.call(*calls[0])
                start = time.perf_counter_ns()
                for args in calls:
                    spec.call(*args)
                if k == index:
                    times[which].append(time.perf_counter_ns() - start)
    return statistics.median(times[1]) / statistics.median(times[0])


def flagged(data: dict[str, Any]) -> list[str]:
    return [op["name"] for t in data["tests"] for op in t["ops"] if op["verdict"] != "ok"]


def change_of(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(op for t in data["tests"] for op in t["ops"] if op["name"] == name)


def show(*lines: str) -> None:
    """Printed as measured: a long run stopped early keeps what it saw (and every
    compare's JSON is in runs/)."""
    print("\n".join(lines), flush=True)


def run(repo: Path, args: argparse.Namespace) -> None:
    make_repo(repo)
    (repo / "runs").mkdir()
    sizes = medians(repo)
    base = git(repo, "rev-parse", "HEAD").strip()
    stored_baseline(repo)
    how = f"--pairs {args.pairs}" if args.pairs else "(pairs sized by --detect 15%)"
    show(f"### opprof compare HEAD~1 {how}: one op x{args.factor:g} (more calls in its code); "
         "the stored-baseline gate on the same commit", "",
         "| op | its median | in one process | pairs | change seen | interval | compare "
         "| other ops flagged | wall | stored gate |",
         "|---|---|---|---|---|---|---|---|---|---|")
    caught, caught_stored, walls, pairs = 0, 0, [], []
    for name in chosen(sizes, args.ops):
        (repo / "workload.py").write_text(f"SLOW: dict[str, float] = {{{name!r}: "
                                          f"{args.factor}}}\n")
        git(repo, "commit", "-qam", f"{name} x{args.factor:g}")
        data, wall = compare(repo, "HEAD~1", args.pairs, f"inject-{name}")
        stored = gated(repo, f"gated-{name}")
        git(repo, "reset", "-q", "--hard", base)
        op, others = change_of(data, name), [n for n in flagged(data) if n != name]
        caught += op["verdict"] == "regressed" and not others
        caught_stored += stored == [name]
        walls.append(wall)
        pairs.append(data["pairs"])
        show(f"| {name} | {duration(sizes[name])} | x{in_process_factor(name, args.factor):.3f} "
             f"| {data['pairs']} | {op['change'] - 1:+.1%} | {op['low'] - 1:+.1%} .. "
             f"{op['high'] - 1:+.1%} | {op['verdict']} | {', '.join(others) or '-'} | "
             f"{wall:.0f} s | {', '.join(stored) or 'ok'} |")
    show("", "| self-compare | pairs | ops flagged | wall | stored gate |", "|---|---|---|---|---|")
    false, false_stored = 0, 0
    for k in range(args.self):
        data, wall = compare(repo, "HEAD", args.pairs, f"self-{k}")
        stored = gated(repo, f"gated-self-{k}")
        false += bool(flagged(data))
        false_stored += bool(stored)
        walls.append(wall)
        pairs.append(data["pairs"])
        show(f"| {k + 1} | {data['pairs']} | {', '.join(flagged(data)) or '-'} | {wall:.0f} s "
             f"| {', '.join(stored) or 'ok'} |")
    show("", "| | opprof compare | stored-baseline gate |", "|---|---|---|",
         f"| detection: exactly the slowed op regressed | {caught} of {args.ops} | "
         f"{caught_stored} of {args.ops} |",
         f"| false failures: a commit against itself, any op flagged | {false} of "
         f"{args.self} | {false_stored} of {args.self} |",
         f"| pairs (median, range) | {statistics.median(pairs) if pairs else 0:g} "
         f"({min(pairs, default=0)}-{max(pairs, default=0)}) | - |",
         f"| wall time (median) | "
         f"{statistics.median(walls) if walls else float('nan'):.0f} s | one run |")
    if args.growth:
        show("", "| pairs | wall time of a self-compare |", "|---|---|")
        for p in args.growth:
            show(f"| {p} | {compare(repo, 'HEAD', p, f'growth-{p}')[1]:.0f} s |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10, help="ops to slow, one at a time")
    parser.add_argument("--self", type=int, default=20, help="compares of a commit with "
                                                             "itself")
    parser.add_argument("--pairs", type=int, default=None,
                        help="pairs per compare (default: sized by opprof compare)")
    parser.add_argument("--factor", type=float, default=1.15, help="the slowdown")
    parser.add_argument("--growth", default="2,4,8",
                        help="pairs counts whose wall time is measured ('' for none)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="build the repository here and keep it (default: temporary)")
    args = parser.parse_args()
    try:
        args.growth = [int(x) for x in args.growth.split(",") if x.strip()]
    except ValueError:
        parser.error("--growth takes whole numbers, e.g. 2,4,8")
    if args.ops < 0 or args.self < 0 or (args.pairs or 1) < 1 or not 1 < args.factor <= 10:
        parser.error("--ops and --self 0 or more, --pairs 1 or more, --factor above 1")
    if args.keep is not None and args.keep.exists():
        parser.error(f"--keep {args.keep}: exists; name a new folder")
    scratch = Path(tempfile.mkdtemp(prefix="opprof-compare-runs-"))
    try:
        run(args.keep or scratch / "repo", args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
