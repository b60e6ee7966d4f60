"""How large and how slow the two HTML pages get at scale.

    python benchmarks/html_scale.py                 # all four cases (minutes before the bound)
    python benchmarks/html_scale.py --only history  # or --only report
    python benchmarks/html_scale.py --timeout 600   # seconds one case may take

``opprof history --html``: a store of 100 and 1,000 tests of 20 runs each (6 ops a
test, 19 samples a run, one op stepping +40% at run 12 in every tenth test), drawn by
the command as a user runs it (``opprof history --dir D --html OUT``, a new process).
The text history of the same store (no ``--html``) for comparison.

``--opprof-html`` (and ``opprof report -o``): one test of 8 ops profiled for 100,000
and 1,000,000 iterations (a synthetic profile, not a run: the page is a function of the
profile), rendered by :func:`pytest_opprof.render.html.render`.

Bytes are deterministic; seconds are on a shared machine: read their growth.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pytest_opprof.model.profile import OpInfo, Profile
from pytest_opprof.model.records import TestRecord
from pytest_opprof.model.runinfo import RunInfo
from pytest_opprof.store.baseline import Baseline, BaselineRun, BaselineStore

RUNS = 20
OPS = 6
SAMPLES = 19


def profile_of(iterations: int, n_ops: int = 8, seed: int = 0, level: float = 1.0,
               nodeid: str = "tests/test_big.py::test_big") -> Profile:
    """A profile of ``iterations`` iterations of ``n_ops`` top-level ops (lognormal
    noise around 10-80 us), built directly: what a long-running test records."""
    rng = np.random.default_rng(seed)
    base = 10_000.0 * (1 + np.arange(n_ops)) * level
    samples = base * np.exp(rng.normal(0, 0.05, (iterations, n_ops)))
    op_time = samples.sum(axis=1)
    ops = [OpInfo(op_id=k, name=f"op{k}", occurrence=0, depth=0, phase=None)
           for k in range(n_ops)]
    return Profile(nodeid=nodeid, measure="time", device="synthetic", skip=1, ops=ops,
                   samples=samples, phase_samples=np.zeros((iterations, 0)), phases=[],
                   wall=op_time * 1.05, op_time=op_time)


def history_store(root: Path, n_tests: int) -> None:
    """``n_tests`` baselines of RUNS runs each, with dates and commits, under ``root``."""
    store = BaselineStore(root, "bench")
    rng = np.random.default_rng(1)
    for t in range(n_tests):
        nodeid = f"tests/test_m{t // 50}.py::test_{t}"
        runs = []
        for r in range(RUNS):
            level = 1.0
            profile = profile_of(SAMPLES + 1, OPS, seed=t * RUNS + r, nodeid=nodeid,
                                 level=level)
            if t % 10 == 0 and r >= 12:
                profile.samples[:, 3] *= 1.4
            profile.samples *= np.exp(rng.normal(0, 0.02))
            runs.append(BaselineRun.from_profile(profile, {
                "date": f"2026-01-{1 + r:02d}T00:00:00+00:00",
                "commit": {"id": f"{t:04d}{r:02d}" + "0" * 34}}))
        store.save(Baseline(nodeid, "bench", runs))


def timed(command: list[str], timeout: float) -> tuple[float, bool]:
    start = time.perf_counter()
    try:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, False
    return time.perf_counter() - start, True


def history_rows(timeout: float, sizes: list[int]) -> list[str]:
    rows = []
    for n_tests in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "store"
            history_store(root, n_tests)
            page = Path(tmp) / "history.html"
            base = [sys.executable, "-m", "pytest_opprof.cli", "history", "--dir", str(root),
                    "--machine-key", "bench"]
            text_s, _ = timed(base, timeout)
            html_s, done = timed([*base, "--html", str(page)], timeout)
            size = f"{page.stat().st_size / 1e6:.2f}" if done else "-"
            rows.append(f"| history, {n_tests:,} tests x {RUNS} runs | {text_s:.1f} | "
                        + (f"{html_s:.1f}" if done else f"> {timeout:.0f} (killed)")
                        + f" | {size} |")
            print(rows[-1], flush=True)
    return rows


def report_rows(sizes: list[int]) -> list[str]:
    from pytest_opprof.render.html import render

    rows = []
    info = RunInfo(machine="bench", measure="time", device="synthetic")
    for iterations in sizes:
        record = TestRecord(profile=profile_of(iterations))
        start = time.perf_counter()
        page = render([record], info)
        took = time.perf_counter() - start
        rows.append(f"| report, 1 test x {iterations:,} iterations | - | {took:.1f} | "
                    f"{len(page.encode()) / 1e6:.2f} |")
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=("history", "report"), default=None)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--tests", type=int, nargs="+", default=[100, 1_000],
                        help="store sizes of the history cases")
    parser.add_argument("--iterations", type=int, nargs="+", default=[100_000, 1_000_000],
                        help="iterations of the report cases")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    print("| page | text (s) | HTML (s) | HTML (MB) |")
    print("|---|---|---|---|")
    if args.only in (None, "history"):
        history_rows(args.timeout, args.tests)
    if args.only in (None, "report"):
        report_rows(args.iterations)


if __name__ == "__main__":
    main()
