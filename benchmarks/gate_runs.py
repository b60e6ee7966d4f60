"""The gate on real runs: every figure from pytest processes started as a user would,
with the peers' rules applied to the same runs' raw samples.

    python benchmarks/gate_runs.py baseline --dir D --runs 5 [--suite manyop|example] [--xdist N]
    python benchmarks/gate_runs.py baseline --dir D --plain      # pytest --opprof-update-baseline
    python benchmarks/gate_runs.py aa --dir D --runs 30 [--xdist N]
    python benchmarks/gate_runs.py inject --dir D --ops 10 --factors 1.25,1.5 [--repeat R]
    python benchmarks/gate_runs.py tables --dir D          # the tables again, from D alone
    python benchmarks/gate_runs.py fit --dir D [--out noise.json]

One folder D holds one baseline (``D/setup.json`` says how it was taken) and every run
gated against it: ``D/runs/KEY.json`` (``--opprof-json``) and ``KEY.log``, and
``D/outcomes.json``, each run's raw outcome, written after every run. A killed command
resumes where it stopped when run again (runs already in the outcomes are not redone).

The gate's verdicts come from the results JSON. The peers' (benchmarks/peer_rules.py)
come from the same JSON's profile, which holds every counted sample of every op (the
first process only: a confirmation re-run is the gate's own), against the raw samples
of the baseline file the test was gated against (``baseline_file``): pytest-benchmark
compares the test's mean iteration time with the latest stored run's, asv each op's
samples with those of all the stored runs pooled (asv pools its processes).

Every process runs with BLAS and OpenMP on one thread, ``-p no:randomly -p
no:cacheprovider``, in the repository root. ``fit`` prints each op's spread between
processes, measured on the A/A runs, by op size; ``--out`` writes it for
``gate_simulation.py --noise``.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the repository's packages come first
    sys.path.insert(0, str(ROOT))

from benchmarks.manyop.ops import NAMES as MANYOP_NAMES  # noqa: E402
from benchmarks.peer_rules import (  # noqa: E402
    PYTEST_BENCHMARK_THRESHOLD,
    asv_flags,
    pytest_benchmark_ratio,
)
from pytest_opprof.commands.common import whole_number  # noqa: E402
from pytest_opprof.model.profile import Profile  # noqa: E402
from pytest_opprof.render import duration, percent  # noqa: E402
from pytest_opprof.store.baseline import BaselineError, load_file  # noqa: E402
from pytest_opprof.store.files import replace_all  # noqa: E402

THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
#: Ops smaller than this are not injected into (the issue's detection targets).
MIN_INJECT_NS = 20_000
#: Size classes of ``fit`` (ns): below 20 us, 20-100 us, 100 us - 1 ms, above.
SIZE_EDGES = (20e3, 100e3, 1e6)


class Refused(Exception):
    """A problem the user can fix: printed as one line, exit code 2."""


@dataclass(frozen=True)
class Suite:
    path: str
    #: The variable that injects extra work, and the ops it accepts.
    slow_env: str
    slowable: tuple[str, ...]


SUITES = {
    "manyop": Suite("benchmarks/manyop", "OPPROF_MANYOP_SLOW", MANYOP_NAMES),
    "example": Suite("example_suite", "OPPROF_EXAMPLE_SLOWDOWN",
                     ("batch_norm", "conv2d", "relu", "relu_grad")),
}


# -- the folder ----------------------------------------------------------------------------

class Store:
    """D: its setup, its baselines, its runs and their outcomes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()  # the runs start in the repository root
        self.baselines = self.folder / "baselines"
        self.runs = self.folder / "runs"
        self._outcomes = self.folder / "outcomes.json"

    def setup(self) -> dict[str, Any]:
        path = self.folder / "setup.json"
        if not path.is_file():
            raise Refused(f"{self.folder}: no baseline here; take one first: "
                          f"python benchmarks/gate_runs.py baseline --dir {self.folder}")
        return dict(json.loads(path.read_text()))

    def write_setup(self, setup: dict[str, Any]) -> None:
        replace_all([(self.folder / "setup.json", json.dumps(setup, indent=1) + "\n")])

    def outcomes(self) -> dict[str, dict[str, Any]]:
        if not self._outcomes.is_file():
            return {}
        return dict(json.loads(self._outcomes.read_text()))

    def record(self, key: str, outcome: dict[str, Any]) -> None:
        """Adds one run's outcome (the file is replaced whole: a kill loses no other)."""
        done = self.outcomes()
        done[key] = outcome
        replace_all([(self._outcomes, json.dumps(done, indent=1, sort_keys=True) + "\n")])


def _env(slow: tuple[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in
           {s.slow_env for s in SUITES.values()}}
    env.update(THREADS, PYTHONUNBUFFERED="1")
    if slow is not None:
        env[slow[0]] = slow[1]
    return env


def _pytest_args(suite: Suite, store: Store, xdist: int) -> list[str]:
    return [suite.path, "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
            f"--opprof-baseline-dir={store.baselines}",
            *(["-n", str(xdist)] if xdist else [])]


def _run(command: list[str], log: Path, env: dict[str, str]) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        return subprocess.run(command, cwd=ROOT, env=env, stdout=out,
                              stderr=subprocess.STDOUT, check=False).returncode


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip() or "?"


# -- baseline --------------------------------------------------------------------------------

def baseline(store: Store, suite_name: str, runs: int | None, xdist: int, plain: bool) -> int:
    if (store.folder / "setup.json").exists():
        raise Refused(f"{store.folder} holds a baseline already, and the runs gated against "
                      "it: choose a new --dir (or delete this one)")
    if plain and runs not in (None, 1):
        raise Refused("--plain takes one run (pytest --opprof-update-baseline); "
                      "leave out --runs or drop --plain")
    runs = runs or (1 if plain else 5)
    suite = SUITES[suite_name]
    args = _pytest_args(suite, store, xdist)
    if plain:
        command = [sys.executable, "-m", "pytest", "--opprof-update-baseline=replace", *args]
    else:
        command = [_opprof_command(), "baseline", "update", "--runs", str(runs), *args]
    store.folder.mkdir(parents=True, exist_ok=True)
    log = store.folder / "baseline.log"
    started = time.perf_counter()
    code = _run(command, log, _env())
    if code != 0:
        raise Refused(f"the baseline command failed (exit {code}: {_last_line(log)}); "
                      f"see {log}")
    store.write_setup({
        "suite": suite_name, "runs": runs, "plain": plain, "xdist": xdist,
        "command": " ".join(["python" if plain else "opprof", *command[1:]]),
        "threads": THREADS, "commit": _commit(), "seconds": round(time.perf_counter() - started),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")})
    print(f"baseline of {suite_name}: {runs} run(s) in {time.perf_counter() - started:.0f} s "
          f"-> {store.baselines}")
    return 0


def _opprof_command() -> str:
    """The ``opprof`` script of this Python's environment, as a user would run it."""
    script = Path(sys.executable).with_name("opprof")
    found = str(script) if script.exists() else shutil.which("opprof")
    if found is None:
        raise Refused("no opprof command found: pip install -e . in this environment")
    return found


# -- gated runs ------------------------------------------------------------------------------

def gated_run(store: Store, key: str, suite: Suite, xdist: int,
              slow: tuple[str, str] | None = None) -> dict[str, Any]:
    """One gated pytest process; its raw outcome (recorded in the store)."""
    results = store.runs / f"{key}.json"
    results.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", *_pytest_args(suite, store, xdist),
               f"--opprof-json={results}"]
    log = store.runs / f"{key}.log"
    started = time.perf_counter()
    code = _run(command, log, _env(slow))
    seconds = time.perf_counter() - started
    if not results.is_file():
        raise Refused(f"run {key} wrote no results (exit {code}: {_last_line(log)}); "
                      f"see {log}")
    data = json.loads(results.read_text())
    unbased = [t["nodeid"] for t in data["tests"] if t["verdict"] == "no baseline"]
    if unbased:  # a run not gated at all would count as a pass
        raise Refused(f"run {key}: {unbased[0]} has no baseline in {store.baselines} (taken "
                      f"for other tests, or under another machine key); see {log}")
    outcome = {"exit": code, "seconds": round(seconds, 1), "xdist": xdist,
               "slow": None if slow is None else slow[1],
               "tests": [_test_outcome(test) for test in data["tests"]]}
    store.record(key, outcome)
    return outcome


def _test_outcome(test: dict[str, Any]) -> dict[str, Any]:
    """What one test of a results file says: the gate's verdicts (from the JSON), each
    op's median and within-run spread (for ``fit``), and the peers' verdicts."""
    profile = Profile.from_dict(test["profile"])
    samples = profile.counted_samples()
    keys = [f"{o.name}#{o.occurrence}" for o in profile.ops]
    result = test.get("result") or {}
    comparison = result.get("comparison") or {}
    ops = {f"{op['name']}#{op['occurrence']}": op for op in test["ops"]}
    return {
        "nodeid": test["nodeid"], "verdict": test["verdict"], "counted": test["counted"],
        "drift": test["drift"],
        "drift_source": test["drift_source"], "baseline_runs": test["baseline_runs"],
        "current_runs": comparison.get("current_runs", 1),
        "regressed": sorted(k for k, op in ops.items() if op["verdict"] == "regressed"),
        "unjudged": sorted(k for k, op in ops.items() if op["verdict"] == "unjudged"),
        "unconfirmed": sorted(f"{v['name']}#{v['occurrence']}"
                              for v in comparison.get("unconfirmed", [])),
        # the op's evidence as the JSON gives it (every field, whatever the rule adds)
        "baseline": {k: op["baseline"] for k, op in ops.items() if op["baseline"]},
        "median_ns": {k: float(np.median(s)) for k, s in zip(keys, samples, strict=True)
                      if s.size},
        "log_median_se": {k: _log_median_se(s) for k, s in zip(keys, samples, strict=True)
                          if s.size > 2},
        "peers": _peers(test.get("baseline_file"), profile, dict(zip(keys, samples,
                                                                     strict=True))),
    }


def _log_median_se(samples: np.ndarray) -> float:
    """The standard error of the log median of one run (normal approximation, the
    scale from the MAD of the log samples)."""
    logs = np.log(np.maximum(samples, 1.0))
    mad = 1.4826 * float(np.median(np.abs(logs - np.median(logs))))
    return 1.2533 * mad / math.sqrt(samples.size)


def _peers(baseline_file: str | None, profile: Profile,
           current: dict[str, np.ndarray]) -> dict[str, Any] | None:
    """pytest-benchmark's and asv's verdicts on this test, against the same baseline."""
    if not baseline_file:
        return None
    try:
        stored = load_file(ROOT / baseline_file)  # relative to pytest's folder, or absolute
    except BaselineError:
        return None
    pooled = {f"{name}#{occ}": np.concatenate(runs)
              for (name, occ), runs in stored.samples().items()}
    wall = profile.wall[profile.skip:]
    ratio = pytest_benchmark_ratio(wall[~np.isnan(wall)],
                                   np.asarray(stored.runs[-1].wall, dtype=float))
    return {"pytest_benchmark_ratio": ratio,
            "pytest_benchmark_failed": ratio > 1 + PYTEST_BENCHMARK_THRESHOLD,
            "asv": sorted(str(k) for k in asv_flags(current, pooled))}


def aa(store: Store, runs: int, xdist: int | None) -> int:
    setup = store.setup()
    suite = SUITES[setup["suite"]]
    xdist = setup["xdist"] if xdist is None else xdist
    series = f"aa-n{xdist}"
    for i in range(1, runs + 1):
        key = f"{series}-{i:03d}"
        if key in store.outcomes():
            continue
        outcome = gated_run(store, key, suite, xdist)
        failed = ", ".join(_failed_ops(outcome))
        status = f"FAILED {failed or 'exit code ' + str(outcome['exit'])}" \
            if failed or outcome["exit"] else "ok"
        print(f"{key}: {status} ({outcome['seconds']:.0f} s)", flush=True)
    print_tables(store)
    return 0


def _failed_ops(outcome: dict[str, Any]) -> list[str]:
    return [op for test in outcome["tests"] for op in test["regressed"]]


def inject(store: Store, n_ops: int, factors: Sequence[float], repeat: int,
           only: Sequence[str], xdist: int | None) -> int:
    setup = store.setup()
    suite = SUITES[setup["suite"]]
    xdist = setup["xdist"] if xdist is None else xdist
    unknown = [name for name in only if name not in suite.slowable]
    if unknown:
        raise Refused(f"--only {','.join(unknown)}: not an op {suite.slow_env} can slow; "
                      f"choose from {', '.join(suite.slowable)}")
    ops = list(only) or pick_ops(store, suite, n_ops)
    for name in ops:
        for factor in factors:
            for r in range(1, repeat + 1):
                key = f"inject-n{xdist}-{name}-{factor:g}-{r}"
                if key in store.outcomes():
                    continue
                outcome = gated_run(store, key, suite, xdist, (suite.slow_env,
                                                               f"{name}:{factor:g}"))
                caught, others = _caught(outcome, name)
                print(f"{key}: {'caught' if caught else 'missed'}"
                      f"{', others failed: ' + ', '.join(others) if others else ''}"
                      f" ({outcome['seconds']:.0f} s)", flush=True)
    print_tables(store)
    return 0


def pick_ops(store: Store, suite: Suite, n_ops: int) -> list[str]:
    """``n_ops`` op names of at least 20 us in the baseline, spread evenly over sizes."""
    medians: dict[str, float] = {}
    for path in sorted(store.baselines.glob("*/*.json")):
        for (name, _), runs in load_file(path).samples().items():
            if name in suite.slowable:
                medians[name] = max(medians.get(name, 0.0),
                                    float(np.median(np.concatenate(runs))))
    sized = sorted((m, name) for name, m in medians.items() if m >= MIN_INJECT_NS)
    if len(sized) < n_ops:
        raise Refused(f"--ops {n_ops}: the baseline has {len(sized)} op(s) that can be slowed "
                      f"and take {duration(MIN_INJECT_NS)} or more; ask for fewer")
    picks = np.unique(np.round(np.linspace(0, len(sized) - 1, n_ops)).astype(int))
    return [sized[i][1] for i in picks]


def _caught(outcome: dict[str, Any], name: str) -> tuple[bool, list[str]]:
    """Whether the gate flagged the slowed op (any occurrence), and what else it flagged."""
    failed = _failed_ops(outcome)
    mine = [op for op in failed if op.rsplit("#", 1)[0] == name]
    return bool(mine), [op for op in failed if op not in mine]


# -- tables ----------------------------------------------------------------------------------

def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)


def _share(hits: int, n: int) -> str:
    return f"{hits} / {n}" if n else "-"


def print_tables(store: Store) -> None:
    setup = store.setup()
    outcomes = store.outcomes()
    how = ("`pytest --opprof-update-baseline` (1 run)" if setup["plain"]
           else f"`opprof baseline update --runs {setup['runs']}`")
    print(f"\n{setup['suite']} suite, baseline by {how}"
          f"{', -n ' + str(setup['xdist']) if setup['xdist'] else ''}, commit {setup['commit']};"
          f" BLAS/OpenMP on 1 thread; folder {store.folder}\n")
    aa_runs = {k: v for k, v in outcomes.items() if k.startswith("aa-")}
    if aa_runs:
        print(aa_table(aa_runs) + "\n")
    injected = {k: v for k, v in outcomes.items() if k.startswith("inject-")}
    if injected:
        print(inject_table(injected) + "\n")
        print(injection_rows(injected) + "\n")


def aa_table(runs: dict[str, dict[str, Any]]) -> str:
    """Per series (xdist setting): how many A/A runs failed, under each rule."""
    rows = []
    for xdist in sorted({o["xdist"] for o in runs.values()}):
        mine = [o for o in runs.values() if o["xdist"] == xdist]
        tests = [t for o in mine for t in o["tests"]]
        failed_ops: dict[str, int] = {}
        for op in (op for o in mine for op in _failed_ops(o)):
            failed_ops[op] = failed_ops.get(op, 0) + 1
        drifts = [t["drift"] for t in tests if t["drift"] is not None]
        peers = [t["peers"] for t in tests if t["peers"]]
        detectable = [d for d in map(_median_detectable, tests) if math.isfinite(d)]
        rows.append([
            f"-n {xdist}" if xdist else "serial", len(mine),
            _share(sum(bool(_failed_ops(o)) or o["exit"] != 0 for o in mine), len(mine)),
            ", ".join(f"{op} x{n}" for op, n in sorted(failed_ops.items())) or "-",
            _share(sum(t["current_runs"] > 1 for t in tests), len(tests)),
            sum(len(t["unconfirmed"]) for t in tests),
            f"{min(drifts):.3f} to {max(drifts):.3f}" if drifts else "-",
            percent(1 + float(np.median(detectable))) if detectable else "-",
            _share(sum(p["pytest_benchmark_failed"] for p in peers), len(peers)),
            _share(sum(bool(p["asv"]) for p in peers), len(peers)),
        ])
    return _table(["A/A runs", "runs", "opprof: runs failed", "ops failed (times)",
                   "tests re-run", "suspects cleared by the re-run", "drift",
                   "median op's detectable slowdown (median over tests)",
                   "pytest-benchmark mean:5%: tests failed", "asv: tests with an op flagged"],
                  rows)


def _detectable(evidence: Iterable[dict[str, Any]]) -> list[float]:
    """The rule's detectable slowdowns (0.12: +12%) in the ops' evidence that has one."""
    found = (e.get("detectable") for e in evidence)
    return [float(d) for d in found if isinstance(d, int | float) and math.isfinite(d)]


def _median_detectable(test: dict[str, Any]) -> float:
    """The detectable slowdown of the test's median op (NaN where the rule gave none)."""
    found = _detectable(test["baseline"].values())
    return float(np.median(found)) if found else math.nan


def _injection(key: str, outcome: dict[str, Any]) -> dict[str, Any]:
    """One injection's verdicts under each rule."""
    name, factor = outcome["slow"].rsplit(":", 1)
    caught, others = _caught(outcome, name)
    tests = [t for t in outcome["tests"]
             if any(k.rsplit("#", 1)[0] == name for k in t["median_ns"])]
    evidence = [e for t in tests for k, e in t["baseline"].items()
                if k.rsplit("#", 1)[0] == name]
    peers = [t["peers"] for t in tests if t["peers"]]
    asv = [k for p in peers for k in p["asv"]]
    asv_mine = [k for k in asv if k.rsplit("#", 1)[0] == name]
    return {
        "key": key, "nodeid": tests[0]["nodeid"] if tests else "?", "name": name,
        "factor": float(factor), "caught": caught,
        "others": others, "exact": caught and not others,
        # the op's size: its baseline median (its largest occurrence)
        "baseline_ns": max((e.get("median_ns") or math.nan for e in evidence),
                           default=math.nan),
        "corrected_ratio": max((e.get("corrected_ratio") or math.nan for e in evidence),
                               default=math.nan),
        # its most sensitive occurrence: the one that could fail the test first
        "detectable": min(_detectable(evidence), default=math.nan),
        "pb_caught": any(p["pytest_benchmark_failed"] for p in peers),
        "pb_ratio": max((p["pytest_benchmark_ratio"] for p in peers), default=math.nan),
        "asv_caught": bool(asv_mine), "asv_exact": bool(asv_mine) and len(asv) == len(asv_mine),
    }


def inject_table(runs: dict[str, dict[str, Any]]) -> str:
    """Per factor: the share of injections caught, exactly, under each rule."""
    found = [_injection(k, o) for k, o in sorted(runs.items())]
    rows = []
    for factor in sorted({f["factor"] for f in found}):
        mine = [f for f in found if f["factor"] == factor]
        n = len(mine)
        ratios = [f["corrected_ratio"] for f in mine if math.isfinite(f["corrected_ratio"])]
        detectable = [f["detectable"] for f in mine if math.isfinite(f["detectable"])]
        rows.append([
            f"x{factor:g}", n, len({f["name"] for f in mine}),
            f"{np.median(ratios):.3f}" if ratios else "-",
            percent(1 + float(np.median(detectable))) if detectable else "-",
            _share(sum(f["exact"] for f in mine), n), _share(sum(f["caught"] for f in mine), n),
            _share(sum(bool(f["others"]) for f in mine), n),
            _share(sum(f["pb_caught"] for f in mine), n),
            _share(sum(f["asv_exact"] for f in mine), n),
            _share(sum(f["asv_caught"] for f in mine), n),
        ])
    return _table(["injected", "runs", "ops", "measured drift-corrected ratio, median",
                   "its detectable slowdown, median", "opprof: exactly that op",
                   "opprof: that op", "opprof: other ops failed",
                   "pytest-benchmark mean:5%: test failed", "asv: exactly that op",
                   "asv: that op"], rows)


def injection_rows(runs: dict[str, dict[str, Any]]) -> str:
    """One row per injection: what each rule said."""
    def mark(ok: bool) -> str:
        return "caught" if ok else "missed"

    rows = []
    for f in sorted((_injection(k, o) for k, o in runs.items()),
                    key=lambda f: (np.nan_to_num(f["baseline_ns"], nan=math.inf), f["name"],
                                   f["factor"], f["key"])):
        rows.append([f["name"], duration(f["baseline_ns"]), f"x{f['factor']:g}",
                     f"{f['corrected_ratio']:.3f}", percent(1 + f["detectable"]),
                     mark(f["caught"]),
                     ", ".join(f["others"]) or "-", f"{f['pb_ratio']:.3f}",
                     mark(f["pb_caught"]), mark(f["asv_caught"])])
    return _table(["op", "baseline median", "injected", "opprof: drift-corrected ratio",
                   "opprof: detectable slowdown", "opprof", "opprof: other ops failed",
                   "pytest-benchmark: test mean ratio",
                   "pytest-benchmark", "asv"], rows)


def real_rates(store: Store) -> dict[str, dict[str, Any]]:
    """Per test, for the simulation to set beside its own: its ops, counted iterations
    and baseline runs, and per rule ``{factor: [hits, runs]}``: A/A runs failed (factor
    1.0) and injections caught exactly (pytest-benchmark: the test failed). Runs with
    another xdist setting than the baseline's are left out."""
    setup = store.setup()
    rates: dict[str, dict[str, Any]] = {}

    def entry(test: dict[str, Any]) -> dict[str, Any]:
        return rates.setdefault(test["nodeid"], {
            "ops": len(test["median_ns"]), "counted": test["counted"], "runs": setup["runs"],
            "opprof": {}, "pytest-benchmark": {}, "asv": {}})

    def add(rule: dict[float, list[int]], factor: float, hit: bool) -> None:
        counts = rule.setdefault(factor, [0, 0])
        counts[0] += hit
        counts[1] += 1

    for key, outcome in sorted(store.outcomes().items()):
        if outcome["xdist"] != setup["xdist"]:
            continue
        if key.startswith("aa-"):
            for test in outcome["tests"]:
                r = entry(test)
                add(r["opprof"], 1.0, bool(test["regressed"]) or test["verdict"] == "failed")
                if test["peers"]:
                    add(r["pytest-benchmark"], 1.0, test["peers"]["pytest_benchmark_failed"])
                    add(r["asv"], 1.0, bool(test["peers"]["asv"]))
        elif key.startswith("inject-"):
            f = _injection(key, outcome)
            test = next(t for t in outcome["tests"] if t["nodeid"] == f["nodeid"])
            r = entry(test)
            add(r["opprof"], f["factor"], f["exact"])
            add(r["pytest-benchmark"], f["factor"], f["pb_caught"])
            add(r["asv"], f["factor"], f["asv_exact"])
    return rates


# -- fit -------------------------------------------------------------------------------------

def fit(store: Store, out: Path | None) -> int:
    noise = fitted_noise(store)
    print(f"\nspread between processes per op over {noise['runs']} A/A runs "
          f"(std of the drift-corrected log median; tau: less the within-run error); "
          f"run drift: log-sd {noise['machine']:.4f}\n")
    print(fit_table(noise["ops"]))
    if out is not None:
        replace_all([(out, json.dumps(noise, indent=1) + "\n")])
        print(f"\nwritten to {out} (python benchmarks/gate_simulation.py --noise {out})")
    return 0


def fitted_noise(store: Store) -> dict[str, Any]:
    """Each op's spread between processes over the A/A runs, after each run's drift
    (the median over the test's ops of the log ratio to the op's mean) is taken out,
    and ``tau``, less the part its within-run sampling error explains; the runs' drift
    log-sd as ``machine``."""
    runs = [o for k, o in sorted(store.outcomes().items()) if k.startswith("aa-")]
    if len(runs) < 3:
        raise Refused(f"fit needs 3 or more A/A runs in {store.folder}, found {len(runs)}: "
                      f"python benchmarks/gate_runs.py aa --dir {store.folder} --runs 10")
    ops: list[dict[str, Any]] = []
    drifts: list[float] = []
    for nodeid in sorted({t["nodeid"] for o in runs for t in o["tests"]}):
        tests = [t for o in runs for t in o["tests"] if t["nodeid"] == nodeid]
        fitted, drift = _fit_test(tests)
        ops += [{"nodeid": nodeid, **o} for o in fitted]
        drifts += drift
    machine = float(np.std(drifts, ddof=1)) if len(drifts) > 2 else math.nan
    return {"source": str(store.folder), "runs": len(runs), "machine": machine, "ops": ops}


def _fit_test(tests: list[dict[str, Any]]) -> tuple[list[dict[str, float]], list[float]]:
    keys = sorted(set.intersection(*(set(t["log_median_se"]) for t in tests)))
    logs = np.log([[t["median_ns"][k] for k in keys] for t in tests])  # (runs, ops)
    se2 = np.square([[t["log_median_se"][k] for k in keys] for t in tests]).mean(axis=0)
    drift = np.median(logs - logs.mean(axis=0), axis=1) if len(keys) >= 5 else \
        np.zeros(len(tests))
    corrected = logs - drift[:, None]
    between = corrected.var(axis=0, ddof=1)
    fitted = [{"op": k, "median_ns": float(np.exp(np.median(logs[:, i]))),
               "spread": float(math.sqrt(between[i])),
               "tau": float(math.sqrt(max(between[i] - se2[i], 0.0)))}
              for i, k in enumerate(keys)]
    return fitted, drift.tolist()


def fit_table(ops: list[dict[str, float]]) -> str:
    edges = (0.0, *SIZE_EDGES, math.inf)
    rows = []
    for lo, hi in itertools.pairwise(edges):
        mine = [o for o in ops if lo <= o["median_ns"] < hi]
        if not mine:
            continue
        spread = np.array([o["spread"] for o in mine])
        tau = np.array([o["tau"] for o in mine])
        worst = max(mine, key=lambda o: o["spread"])
        size = f"under {duration(hi)}" if not lo else \
            f"{duration(lo)} to {duration(hi)}" if hi < math.inf else f"{duration(lo)} and more"
        rows.append([size, len(mine),
                     *(f"{np.percentile(x, q):.2%}" for x in (spread, tau) for q in (50, 90)),
                     f"{spread.max():.2%} ({worst['op']})"])
    return _table(["op size", "ops", "spread median", "spread p90", "tau median", "tau p90",
                   "spread max"], rows)


# -- command line ----------------------------------------------------------------------------

def _factors(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or any(not 1 < v <= 10 for v in values):
        raise argparse.ArgumentTypeError(f"--factors {text!r}: give factors above 1 and at "
                                         "most 10, comma-separated, e.g. 1.25,1.5")
    return values


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"--xdist {text!r}: give a number of workers (0: "
                                         "none)")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gate_runs.py",
                                     description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def sub(name: str, help_text: str) -> argparse.ArgumentParser:
        p = commands.add_parser(name, help=help_text)
        p.add_argument("--dir", type=Path, required=True, help="the folder of one baseline "
                                                               "and its runs")
        return p

    b = sub("baseline", "take the baseline, as a user would")
    b.add_argument("--runs", type=whole_number("--runs", 1, 20), default=None,
                   help="pytest processes (default 5; 1 with --plain)")
    b.add_argument("--plain", action="store_true",
                   help="one run by pytest --opprof-update-baseline (the quick path)")
    b.add_argument("--suite", choices=sorted(SUITES), default="manyop")
    b.add_argument("--xdist", type=_workers, default=0, help="pytest -n N (default: serial)")
    a = sub("aa", "gated runs where nothing changed: false failures")
    a.add_argument("--runs", type=whole_number("--runs", 1, 10_000), default=30)
    a.add_argument("--xdist", type=_workers, default=None,
                   help="pytest -n N (default: as the baseline was taken)")
    i = sub("inject", "gated runs with one op slowed by real work: detection")
    i.add_argument("--ops", type=whole_number("--ops", 1, 1000), default=10,
                   help="ops of 20 us or more, spread over sizes (default 10)")
    i.add_argument("--only", default="", help="these ops (comma-separated) instead")
    i.add_argument("--factors", type=_factors, default=[1.25, 1.5])
    i.add_argument("--repeat", type=whole_number("--repeat", 1, 1000), default=1,
                   help="runs per op and factor")
    i.add_argument("--xdist", type=_workers, default=None,
                   help="pytest -n N (default: as the baseline was taken)")
    sub("tables", "print the tables of the runs recorded so far")
    f = sub("fit", "each op's spread between processes, from the A/A runs")
    f.add_argument("--out", type=Path, default=None, help="write it as JSON for "
                                                          "gate_simulation.py --noise")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    store = Store(args.dir)
    try:
        if args.command == "baseline":
            return baseline(store, args.suite, args.runs, args.xdist, args.plain)
        if args.command == "aa":
            return aa(store, args.runs, args.xdist)
        if args.command == "inject":
            only = [x.strip() for x in args.only.split(",") if x.strip()]
            return inject(store, args.ops, args.factors, args.repeat, only, args.xdist)
        if args.command == "tables":
            print_tables(store)
            return 0
        return fit(store, args.out)
    except (Refused, OSError) as exc:
        print(f"gate_runs.py: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gate_runs.py: interrupted; run the same command again to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
