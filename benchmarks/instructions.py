"""The instructions measure (issue 19) on real runs: ``--opprof-measure=instructions``
(one callgrind child per session counts each op's instructions) on the many-op test,
each run a new pytest process started as a user starts it.

    python benchmarks/instructions.py spread --dir D --runs 5 [--native]   # between processes
    python benchmarks/instructions.py baseline --dir D --runs 3 [--native]
    python benchmarks/instructions.py aa --dir D --runs 30
    python benchmarks/instructions.py calibrate --dir D [--ops OP,...] --target 1.02 --rounds 2
    python benchmarks/instructions.py inject --dir D --targets 1.02,1.01 [--ops OP,...]
                                             [--repeat R] [--native]
    python benchmarks/instructions.py cost --dir D [--runs 3] [--example]
    python benchmarks/instructions.py tables --dir D

One folder D holds everything: ``D/store`` the baselines (``--opprof-baseline-dir``),
``D/runs/KEY.json`` (``--opprof-json``) and ``KEY.log`` per process, ``D/outcomes.json``
(each run's exit code, wall time and environment). ``inject`` chooses each op's factor
from the folder's ``calibrate`` runs (``choose_factor``); ``--native`` uses the same
factors. A killed
command resumes where it stopped (runs already in the outcomes are not redone).

Instruction counts are deterministic up to what the process does differently each time
(allocator state, hash seeds, ...), so an injection's achieved ratio is read from the
counts themselves: the op's median count in the injected run over the median, across
the A/A runs, of its median count per process. ``inject --native`` takes the same
injections under the wall-time gate against ``baseline --native`` (its own store).

Every process runs with BLAS and OpenMP on one thread, ``-p no:randomly -p
no:cacheprovider``, in the repository root. The script measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
MANYOP = "benchmarks/manyop"
SLOW_ENV = "OPPROF_MANYOP_SLOW"
INSTR = ["--opprof-measure=instructions"]
NATIVE = ["--opprof-measure=time"]
#: The ops injected by default: 12 of the many-op test's, ~1.4 us to ~1.6 ms natively, chosen
#: where one leading row of one call is at most 1.6% of the op (``smallest_factor``).
DEFAULT_OPS = ("add_tiny", "cumsum_tiny", "matmul_40", "matmul_64", "mul", "sum_rows", "max_rows",
               "diff_rows", "norm_rows", "transpose_copy", "take_rows", "matmul_320")
COUNTED = re.compile(r"opprof: counted in ([0-9.]+) s")


# -- running pytest -------------------------------------------------------------------

def pytest_run(args: Sequence[str], env: dict[str, str] | None = None,
               log: Path | None = None) -> tuple[int, float, str]:
    """One pytest process: (exit code, wall seconds, output)."""
    full = {**os.environ, **THREADS}
    full.pop(SLOW_ENV, None)
    full.update(env or {})
    cmd = [sys.executable, "-m", "pytest", *args, "-p", "no:randomly", "-p", "no:cacheprovider"]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=full, capture_output=True, text=True)
    wall = time.monotonic() - started
    out = done.stdout + done.stderr
    if log is not None:
        log.write_text(" ".join(cmd) + "\n" + out)
    return done.returncode, wall, out


class Folder:
    def __init__(self, path: str) -> None:
        self.path = Path(path)
        (self.path / "runs").mkdir(parents=True, exist_ok=True)
        self.outcomes_file = self.path / "outcomes.json"
        self.outcomes: dict[str, Any] = (json.loads(self.outcomes_file.read_text())
                                         if self.outcomes_file.exists() else {})

    def store(self, native: bool = False) -> str:
        return str(self.path / ("store-native" if native else "store"))

    def json_of(self, key: str) -> Path:
        return self.path / "runs" / f"{key}.json"

    def run(self, key: str, args: Sequence[str],
            env: dict[str, str] | None = None) -> dict[str, Any]:
        if key in self.outcomes:
            return dict(self.outcomes[key])
        out_json = self.json_of(key)
        code, wall, out = pytest_run([*args, "--opprof-json", str(out_json)], env,
                                     self.path / "runs" / f"{key}.log")
        counted = COUNTED.search(out)
        outcome = {"rc": code, "wall_s": round(wall, 2), "env": env or {},
                   "counted_s": float(counted.group(1)) if counted else None,
                   "load": os.getloadavg()[0]}
        self.save(key, outcome)
        print(f"{key}: exit {code}, {wall:.1f} s, load {outcome['load']:.1f}", flush=True)
        return outcome

    def save(self, key: str, outcome: dict[str, Any]) -> None:
        """Adds one outcome, merged with what other commands on the folder wrote meanwhile."""
        if self.outcomes_file.exists():
            self.outcomes.update(json.loads(self.outcomes_file.read_text()))
        self.outcomes[key] = outcome
        tmp = self.outcomes_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.outcomes, indent=1))
        tmp.replace(self.outcomes_file)

    def results(self, key: str) -> dict[str, Any] | None:
        path = self.json_of(key)
        return json.loads(path.read_text()) if path.exists() else None

    def keys(self, prefix: str) -> list[str]:
        return sorted((k for k in self.outcomes if k.startswith(prefix)),
                      key=lambda k: (len(k), k))


# -- reading results ------------------------------------------------------------------

def the_test(results: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in results["tests"] if t["nodeid"].endswith("test_manyop"))


def op_medians(test: dict[str, Any]) -> dict[str, float]:
    """Each op's median over the counted iterations (the skipped ones left out)."""
    profile = test["profile"]
    names = [o["name"] for o in profile["ops"]]
    counted = profile["samples_ns"][profile["skip"]:]
    return {name: statistics.median(it[k] for it in counted) for k, name in enumerate(names)}


def per_iteration_wall(test: dict[str, Any]) -> float:
    profile = test["profile"]
    return float(statistics.median(profile["wall_ns"][profile["skip"]:]))


def spread_table(folder: Folder, prefix: str, unit: str) -> str:
    medians = [op_medians(the_test(r)) for k in folder.keys(prefix)
               if (r := folder.results(k)) is not None]
    if len(medians) < 2:
        return f"(fewer than 2 runs under {prefix!r})\n"
    rows = []
    for name in medians[0]:
        values = [m[name] for m in medians]
        mean = statistics.fmean(values)
        rows.append((name, mean, statistics.stdev(values) / mean, max(values) / min(values) - 1))
    rsd = sorted(r[2] for r in rows)
    rng = sorted(r[3] for r in rows)
    p90 = int(0.9 * (len(rows) - 1))
    worst = max(rows, key=lambda r: r[2])
    out = [f"{len(medians)} processes ({prefix}*), {len(rows)} ops, each op's median {unit} "
           "per process:\n",
           "| figure | relative sd | max/min - 1 |", "|---|---|---|",
           f"| median op | {pct(statistics.median(rsd))} | {pct(statistics.median(rng))} |",
           f"| p90 op | {pct(rsd[p90])} | {pct(rng[p90])} |",
           f"| worst op ({worst[0]}, {fmt(worst[1], unit)}) | {pct(worst[2])} | {pct(worst[3])} |",
           "", "The ten widest:", "", f"| op | mean {unit} | relative sd | max/min - 1 |",
           "|---|---|---|---|"]
    for name, mean, sd, r in sorted(rows, key=lambda r: -r[2])[:10]:
        out.append(f"| {name} | {fmt(mean, unit)} | {pct(sd)} | {pct(r)} |")
    return "\n".join(out) + "\n"


def pct(x: float) -> str:
    return f"{100 * x:.3f}%" if abs(x) < 0.1 else f"{100 * x:.1f}%"


def num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def fmt(x: float, unit: str) -> str:
    if unit == "ns":
        return f"{x / 1e3:.1f} us" if x < 1e6 else f"{x / 1e6:.2f} ms"
    return f"{x:,.0f}"


def reference(folder: Folder) -> dict[str, float]:
    """Each op's median count per process, medianed over the A/A runs (or the spread runs)."""
    keys = folder.keys("aa-") or folder.keys("spread-")
    medians = [op_medians(the_test(r)) for k in keys if (r := folder.results(k)) is not None]
    if not medians:
        raise SystemExit("no A/A or spread runs in the folder yet: run aa or spread first")
    return {name: statistics.median(m[name] for m in medians) for name in medians[0]}


def native_sizes(folder: Folder) -> dict[str, float]:
    keys = folder.keys("native-spread-") or folder.keys("native-aa-")
    medians = [op_medians(the_test(r)) for k in keys if (r := folder.results(k)) is not None]
    return {n: statistics.median(m[n] for m in medians) for n in medians[0]} if medians else {}


def verdicts(test: dict[str, Any]) -> tuple[str, list[str], dict[str, Any]]:
    """(test verdict, ops not ok, per op the gate's figures)."""
    comparison = (test.get("result") or {}).get("comparison") or {}
    ops = {o["name"]: o for o in comparison.get("ops", [])}
    flagged = [o["name"] for o in test["ops"] if o.get("verdict") == "regressed"]
    return test.get("verdict", ""), flagged, ops


# -- commands -------------------------------------------------------------------------

def cmd_spread(a: argparse.Namespace) -> None:
    f = Folder(a.dir)
    prefix = "native-spread-" if a.native else "spread-"
    args = [MANYOP, *(NATIVE if a.native else INSTR), "--opprof-no-gate"]
    for i in range(1, a.runs + 1):
        f.run(f"{prefix}{i}", args)
    print(spread_table(f, prefix, "ns" if a.native else "instructions"))


def cmd_baseline(a: argparse.Namespace) -> None:
    f = Folder(a.dir)
    key = "native-baseline" if a.native else "baseline"
    if key in f.outcomes:
        print(f"{key}: taken already")
        return
    cmd = [sys.executable, "-m", "pytest_opprof.cli", "baseline", "update", "--runs", str(a.runs),
           MANYOP, *(NATIVE if a.native else INSTR), "--opprof-baseline-dir", f.store(a.native),
           "-p", "no:randomly", "-p", "no:cacheprovider"]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **THREADS}, capture_output=True,
                          text=True)
    (f.path / f"{key}.log").write_text(" ".join(cmd) + "\n" + done.stdout + done.stderr)
    f.save(key, {"rc": done.returncode, "wall_s": round(time.monotonic() - started, 1)})
    print(f"{key}: exit {done.returncode}, {f.outcomes[key]['wall_s']} s")


def gated(f: Folder, native: bool) -> list[str]:
    return [MANYOP, *(NATIVE if native else INSTR), "--opprof-baseline-dir", f.store(native)]


def cmd_aa(a: argparse.Namespace) -> None:
    f = Folder(a.dir)
    prefix = "native-aa-" if a.native else "aa-"
    for i in range(1, a.runs + 1):
        f.run(f"{prefix}{i}", gated(f, a.native))
    print(aa_table(f, prefix))


def aa_table(f: Folder, prefix: str) -> str:
    keys = [k for k in f.keys(prefix) if f.results(k) is not None]
    failed, ops_flagged, ratios = [], [], []
    for k in keys:
        test = the_test(f.results(k))  # type: ignore[arg-type]
        verdict, flagged, ops = verdicts(test)
        if verdict != "passed":
            failed.append(f"{k} ({verdict}: {', '.join(flagged) or test.get('reason')})")
        ops_flagged += flagged
        ratios += [o["corrected_ratio"] for o in ops.values() if o.get("corrected_ratio")]
    walls = [f.outcomes[k]["wall_s"] for k in keys]
    loads = [f.outcomes[k]["load"] for k in keys]
    dev = [abs(r - 1) for r in ratios]
    lines = ["| series | runs | tests not passed | ops flagged | median / max abs(ratio - 1) "
             "| wall per run | load (1-min) |",
             "|---|---|---|---|---|---|---|",
             f"| {prefix.rstrip('-')} | {len(keys)} | {len(failed)} | {len(ops_flagged)} | "
             f"{pct(statistics.median(dev)) if dev else '-'} / {pct(max(dev)) if dev else '-'} | "
             f"{statistics.median(walls):.1f} s | {min(loads):.1f}-{max(loads):.1f} |"]
    if failed:
        lines += ["", "Not passed: " + "; ".join(failed)]
    return "\n".join(lines) + "\n"


def cmd_calibrate(a: argparse.Namespace) -> None:
    """No-gate runs with every op of --ops slowed at once (ops are apart: one op's extra
    calls do not move another's count), each round's factors interpolated from every
    calibration run in the folder so far (``choose_factor``)."""
    f = Folder(a.dir)
    ops = a.ops.split(",") if a.ops else list(DEFAULT_OPS)
    for attempt in range(1, a.rounds + 1):
        key = f"calibrate-{a.target}-{attempt}"
        points = calibration_points(f)
        trial = {op: choose_factor(points.get(op, []), a.target, op) for op in ops}
        if key not in f.outcomes:
            env = {SLOW_ENV: ",".join(f"{op}:{x:.6g}" for op, x in trial.items())}
            f.run(key, [MANYOP, *INSTR, "--opprof-no-gate"], env)
    points = calibration_points(f)
    print(f"| op | calibration runs: factor -> achieved ratio | factor chosen for {a.target} |")
    print("|---|---|---|")
    for op in ops:
        seen = ", ".join(f"{x:.5g} -> {r:.4f}" for x, r in points.get(op, []))
        print(f"| {op} | {seen} | {choose_factor(points.get(op, []), a.target, op):.5g} |")


def calibration_points(f: Folder) -> dict[str, list[tuple[float, float]]]:
    """Per op, (factor, achieved ratio) of every calibration run in the folder."""
    ref = reference(f)
    points: dict[str, list[tuple[float, float]]] = {}
    for key in f.keys("calibrate-"):
        results = f.results(key)
        if results is None:
            continue
        got = op_medians(the_test(results))
        for item in f.outcomes[key]["env"][SLOW_ENV].split(","):
            op, x = item.split(":")
            points.setdefault(op, []).append((float(x), got[op] / ref[op]))
    return {op: sorted(set(p)) for op, p in points.items()}


def choose_factor(points: list[tuple[float, float]], target: float, op: str) -> float:
    """The factor expected to give ``target``: linear between the two calibration points
    that bracket it (or the two nearest, or through (1, 1) with one), never less than
    one row of one call."""
    pts = sorted({(1.0, 1.0), *points})
    if len(pts) == 1:
        return target
    below = [p for p in pts if p[1] <= target]
    above = [p for p in pts if p[1] > target]
    if below and above:
        (x0, r0), (x1, r1) = below[-1], above[0]
    elif above:  # every point overshoots: the two lowest
        (x0, r0), (x1, r1) = pts[0], pts[1]
    else:
        (x0, r0), (x1, r1) = pts[-2], pts[-1]
    x = x1 if r1 == r0 else x0 + (x1 - x0) * (target - r0) / (r1 - r0)
    return max(round(x, 6), smallest_factor(op))


def smallest_factor(name: str) -> float:
    """The smallest factor that still injects something: one leading row of one call."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import numpy as np

    from benchmarks.manyop.ops import specs

    spec = next(s for s in specs(np) if s.name == name)
    rows = spec.make(np.random.default_rng(0))[0].shape[0]
    return 1 + 0.6 / (rows * spec.reps)


def cmd_inject(a: argparse.Namespace) -> None:
    f = Folder(a.dir)
    ops = a.ops.split(",") if a.ops else list(DEFAULT_OPS)
    points = calibration_points(f)
    prefix = "native-inject-" if a.native else "inject-"
    for target in a.targets.split(","):
        for op in ops:
            x = choose_factor(points.get(op, []), float(target), op)
            for r in range(1, a.repeat + 1):
                key = f"{prefix}{op}@{target}" + (f"#{r}" if r > 1 else "")
                f.run(key, gated(f, a.native), {SLOW_ENV: f"{op}:{x:.6g}"})
    print(inject_table(f, prefix))


def inject_table(f: Folder, prefix: str) -> str:
    ref = reference(f)
    sizes = native_sizes(f)
    keys = [k for k in f.keys(prefix) if f.results(k) is not None]
    lines = ["| op | native size | target | factor | achieved ratio (counts) | gate's ratio "
             "| margin | exactly that op | others flagged | grew (top 3) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    caught: dict[str, list[bool]] = {}
    by_ratio: dict[str, list[bool]] = {}
    edges = (1.0075, 1.015, 1.025, 1.05)
    def split(k: str) -> tuple[str, str]:
        op, target = k[len(prefix):].split("@")
        return op, target.split("#")[0]

    for k in sorted(keys, key=lambda k: (split(k)[1], sizes.get(split(k)[0], 0), k)):
        op, target = split(k)
        test = the_test(f.results(k))  # type: ignore[arg-type]
        verdict, flagged, ops = verdicts(test)
        # the ratio of instructions the injection achieved (under --native: that of the
        # same injection's instruction run, when there is one)
        counts = f.results(k[len("native-"):]) if prefix.startswith("native") else f.results(k)
        achieved = op_medians(the_test(counts))[op] / ref[op] if counts else math.nan
        exact = flagged == [op]
        caught.setdefault(target, []).append(exact)
        if not math.isnan(achieved):
            low = max([1.0, *(e for e in edges if e <= achieved)])
            high = min([math.inf, *(e for e in edges if e > achieved)])
            by_ratio.setdefault(f"{low:g}-{high:g}", []).append(exact)
        info = ops.get(op, {})
        grew = "; ".join(f"{g[0]} {g[1]:,.0f}->{g[2]:,.0f}" for g in (info.get("grew") or [])[:3])
        factor = f.outcomes[k]["env"][SLOW_ENV].split(":")[1]
        size = fmt(sizes[op], "ns") if op in sizes else "-"
        others_list = [o for o in flagged if o != op]
        others = (", ".join(others_list) if len(others_list) <= 4 else
                  f"{len(others_list)} ops") or "-"
        if verdict not in ("passed", "failed"):
            others += f" (test {verdict})"
        lines.append(f"| {op} | {size} | {target} | {factor} | {achieved:.4f} | "
                     f"{num(info.get('corrected_ratio'))} | {num(info.get('margin'))} | "
                     f"{'yes' if exact else 'no'} | {others} | {grew or '-'} |")
    lines.append("")
    for target, hits in caught.items():
        lines.append(f"- target {target}: exactly that op in {sum(hits)} / {len(hits)}")
    for span, hits in sorted(by_ratio.items()):
        lines.append(f"- achieved ratio {span}: exactly that op in {sum(hits)} / {len(hits)}")
    return "\n".join(lines) + "\n"


TRIVIAL = textwrap.dedent("""\
    import pytest
    from pytest_opprof import op

    @pytest.mark.opprof(iterations=2)
    def test_trivial(gpu_profiler):
        for _ in gpu_profiler.iterations():
            with op("one"):
                sum(range(100))
""")


DIRECT = textwrap.dedent("""\
    # The many-op workload's step timed inside callgrind, instrumentation on only around
    # each step (as the plugin's child has it, less its dumps at every op boundary).
    import sys, time
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    from benchmarks.manyop.ops import ManyOp
    from pytest_opprof.measure import _callgrind
    work = ManyOp(np, extra={})
    for _ in range(4):
        _callgrind.start()
        t0 = time.perf_counter()
        work.step()
        t = time.perf_counter() - t0
        _callgrind.stop()
        print(f"step {t:.3f} s", flush=True)
""")


def direct_steps(f: Folder) -> list[float]:
    """Wall seconds of each many-op step under callgrind, the first one included."""
    log = f.path / "direct.log"
    if not log.exists():
        script = f.path / "direct.py"
        script.write_text(DIRECT)
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "-q",
               f"--callgrind-out-file={f.path / 'direct.callgrind'}", sys.executable,
               str(script), str(ROOT)]
        done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **THREADS},
                              capture_output=True, text=True)
        log.write_text(" ".join(cmd) + "\n" + done.stdout + done.stderr)
    return [float(m) for m in re.findall(r"step ([0-9.]+) s", log.read_text())]


def watch_dumps(stop: threading.Event, seen: list[int]) -> None:
    """The largest size the child's dump folder reaches (it is removed at the end)."""
    tmp = Path(tempfile.gettempdir())
    while not stop.is_set():
        for d in tmp.glob("opprof-callgrind-*"):
            try:
                seen.append(sum(p.stat().st_size for p in d.iterdir()))
            except OSError:
                pass
        time.sleep(0.2)


def cmd_cost(a: argparse.Namespace) -> None:
    f = Folder(a.dir)
    trivial = f.path / "trivial"
    trivial.mkdir(exist_ok=True)
    (trivial / "test_trivial.py").write_text(TRIVIAL)
    for i in range(1, a.runs + 1):
        f.run(f"trivial-instr-{i}", [str(trivial), *INSTR, "--opprof-no-gate",
                                     f"--rootdir={trivial}"])
        f.run(f"trivial-native-{i}", [str(trivial), *NATIVE, "--opprof-no-gate",
                                      f"--rootdir={trivial}"])
    stop, seen = threading.Event(), [0]
    watcher = threading.Thread(target=watch_dumps, args=(stop, seen), daemon=True)
    watcher.start()
    f.run("cost-manyop-instr", [MANYOP, *INSTR, "--opprof-no-gate"])
    stop.set()
    if "dump_bytes_max" not in f.outcomes["cost-manyop-instr"]:
        f.save("cost-manyop-instr", {**f.outcomes["cost-manyop-instr"],
                                     "dump_bytes_max": max(seen)})
    direct_steps(f)
    if a.example:
        f.run("example-instr", ["example_suite", *INSTR, "--opprof-no-gate"])
        f.run("example-native", ["example_suite", *NATIVE, "--opprof-no-gate"])
    print(cost_tables(f))


def cost_tables(f: Folder) -> str:
    out = []
    ti = [f.outcomes[k] for k in f.keys("trivial-instr-")]
    tn = [f.outcomes[k] for k in f.keys("trivial-native-")]
    if ti and tn:
        out += ["Trivial test (one op; the child runs skip 1 + 3 counted, as always), median of "
                f"{len(ti)} processes each:", "",
                "| | pytest process wall | child (`counted in`) |", "|---|---|---|",
                f"| instructions | {statistics.median(o['wall_s'] for o in ti):.2f} s | "
                f"{statistics.median(o['counted_s'] for o in ti):.2f} s |",
                f"| native (`--opprof-measure=time`) | "
                f"{statistics.median(o['wall_s'] for o in tn):.2f} s | - |",
                ""]
    # Under the child the profile's wall_ns holds instructions, not time: the child's time
    # per iteration is (its many-op "counted in" - the trivial test's) / its iterations,
    # an upper bound (it includes making the inputs and the uninstrumented code between).
    runs = [k for k in [*f.keys("spread-"), *f.keys("aa-"), "cost-manyop-instr"]
            if k in f.outcomes and f.outcomes[k].get("counted_s") and f.results(k)]
    native = [per_iteration_wall(the_test(r)) for k in [*f.keys("native-spread-"),
                                                       *f.keys("native-aa-")]
              if (r := f.results(k)) is not None]
    if runs and native and ti:
        start = statistics.median(o["counted_s"] for o in ti)
        counted = statistics.median(f.outcomes[k]["counted_s"] for k in runs)
        iterations = len(the_test(f.results(runs[0]))["profile"]["wall_ns"])  # type: ignore[arg-type]
        c, n = (counted - start) / iterations * 1e9, statistics.median(native)
        out += ["Many-op test, wall time of one iteration (medians over processes):", "",
                "| | processes | per iteration | ratio |", "|---|---|---|---|",
                f"| under callgrind: (child {counted:.1f} s - trivial child {start:.1f} s) / "
                f"{iterations} iterations | {len(runs)} | {c / 1e6:.0f} ms | {c / n:.0f}x |",
                f"| native (`--opprof-measure=time`, the profile's wall_ns) | {len(native)} | "
                f"{n / 1e6:.1f} ms | 1x |", ""]
        steps = direct_steps(f) if (f.path / "direct.log").exists() else []
        if len(steps) > 1:
            d = statistics.median(steps[1:])
            out.insert(len(out) - 1, f"| under callgrind, timed inside it around each step "
                       f"(direct.py, no dumps; steps 2-{len(steps)}) | 1 | {d * 1e3:.0f} ms | "
                       f"{d * 1e9 / n:.0f}x |")
        walls = [f.outcomes[k]["wall_s"] for k in runs]
        nw = [f.outcomes[k]["wall_s"] for k in f.keys("native-spread-")]
        out += [f"Many-op pytest process: median {statistics.median(walls):.1f} s wall, of which "
                f"the child {counted:.1f} s ({len(runs)} processes); native (30 iterations) "
                + (f"{statistics.median(nw):.1f} s" if nw else "-") + ".", ""]
    if "cost-manyop-instr" in f.outcomes:
        b = f.outcomes["cost-manyop-instr"].get("dump_bytes_max", 0)
        out += ["Largest size of the child's dump folder during one many-op run: "
                f"{b / 1e6:.1f} MB.", ""]
    if "example-instr" in f.outcomes:
        e, en = f.outcomes["example-instr"], f.outcomes.get("example-native")
        out += ["Example suite: `pytest example_suite --opprof-measure=instructions "
                f"--opprof-no-gate` {e['wall_s']:.1f} s wall, the child {e['counted_s']} s"
                + (f"; native {en['wall_s']:.1f} s" if en else "") + ".", "",
                "| test | iterations in the child | instructions per iteration "
                "| native per iteration |", "|---|---|---|---|"]
        r = f.results("example-instr") or {"tests": []}
        rn = f.results("example-native") or {"tests": []}
        nat = {t["nodeid"]: t for t in rn["tests"] if t.get("profile")}
        for t in r["tests"]:
            p = t.get("profile")
            if not p:
                continue
            nt = nat.get(t["nodeid"])
            nper = f"{per_iteration_wall(nt) / 1e6:.1f} ms" if nt else "-"
            out.append(f"| {t['nodeid']} | {p['skip']} + {len(p['wall_ns']) - p['skip']} | "
                       f"{per_iteration_wall(t) / 1e6:.1f} M | {nper} |")
        out.append("")
    return "\n".join(out)


def cmd_tables(a: argparse.Namespace) -> None:
    f = Folder(a.dir)
    for title, prefix, unit in (("Spread, instructions", "spread-", "instructions"),
                                ("Spread, A/A runs' instructions", "aa-", "instructions"),
                                ("Spread, native wall time", "native-spread-", "ns")):
        if f.keys(prefix):
            print(f"### {title}\n\n{spread_table(f, prefix, unit)}")
    for prefix in ("aa-", "native-aa-"):
        if f.keys(prefix):
            print(f"### A/A {prefix}\n\n{aa_table(f, prefix)}")
    for prefix in ("inject-", "native-inject-"):
        if f.keys(prefix):
            print(f"### Detection {prefix}\n\n{inject_table(f, prefix)}")
    print("### Cost\n\n" + cost_tables(f))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn, runs in (("spread", cmd_spread, 5), ("baseline", cmd_baseline, 3),
                           ("aa", cmd_aa, 30)):  # a series of runs, instructions or native
        p = sub.add_parser(name)
        p.add_argument("--runs", type=int, default=runs)
        p.add_argument("--native", action="store_true")
        p.set_defaults(fn=fn)
    p = sub.add_parser("calibrate")
    p.add_argument("--ops", default="")
    p.add_argument("--target", type=float, default=1.02)
    p.add_argument("--rounds", type=int, default=1)
    p.set_defaults(fn=cmd_calibrate)
    p = sub.add_parser("inject")
    p.add_argument("--ops", default="")
    p.add_argument("--targets", default="1.02,1.01")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--native", action="store_true")
    p.set_defaults(fn=cmd_inject)
    p = sub.add_parser("cost")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--example", action="store_true")
    p.set_defaults(fn=cmd_cost)
    p = sub.add_parser("tables")
    p.set_defaults(fn=cmd_tables)
    for p in sub.choices.values():
        p.add_argument("--dir", required=True)
    a = parser.parse_args(argv)
    a.fn(a)


if __name__ == "__main__":
    main()
