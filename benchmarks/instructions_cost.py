"""What ``pytest --opprof-measure=instructions`` costs against a plain ``pytest`` run of
the same tests (issue 28: "a gated run costs about 50x a plain run ... target at most
20x"), side by side in one run, and where the instruction run's time goes.

    python benchmarks/instructions_cost.py run --dir D [--reps 3] [--workloads W,...]
                                               [--variants plain,instr,gated] [--bytecode]
                                               [--before-tree T]
    python benchmarks/instructions_cost.py startup [--reps 3]
    python benchmarks/instructions_cost.py counts A.json B.json

``run``: per repetition and workload, three pytest processes started as a user starts
them, in an order that rotates each repetition: ``plain`` (``pytest SELECTION``),
``instr`` (``--opprof-measure=instructions``, no baseline stored) and ``gated`` (the same
against a baseline the script stores first in ``D/store-W``); ``--variants`` may add
``cold``, the gated run with an empty cache folder (``XDG_CACHE_HOME``), and ``before``,
the gated run on the package exported from another commit (``--before-tree T``). Each
repetition's ratios are taken between its own runs (instr / plain, gated / plain); the
table gives their medians. Every process loads this module as a plugin
(``PYTEST_PLUGINS``), which writes when each stage began to ``D/events/KEY.jsonl``, in
the parent and in the callgrind children (process start, configure, collection, each
test's set-up, skipped and counted iterations, the dumps' read-out, the tests' native
run, the end): the breakdown is each instruction variant's median per stage.
``--opprof-json`` of each instruction run is kept in ``D/runs`` (``counts`` compares two
of them op by op).

``startup``: the fixed costs under the child's valgrind options: ``python -c pass``,
the imports (pytest, numpy, the plugin) and a collection, natively and under callgrind.

``counts``: per test and op, the median count per counted iteration in each file and
their ratio; prints the largest differences (the same code must give the same counts).

Workloads (``--workloads``): ``numpy`` (benchmarks/env_upgrade: 32 numpy ops in one
test), ``newcomer`` (benchmarks/newcomer: README's example and three more, 4 tests),
``dump300`` and ``dump1500`` (benchmarks/dumpscale: 300 and 1,500 tiny ops in one test).
Every process runs with BLAS and OpenMP on one thread, ``-p no:randomly -p
no:cacheprovider``, in the repository root. The script measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
COMMON = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
INSTR = ["--opprof-measure=instructions"]
WORKLOADS = {
    "numpy": ["benchmarks/env_upgrade/test_numpy_ops.py"],
    "newcomer": ["benchmarks/newcomer"],
    "dump300": ["benchmarks/dumpscale/test_dumpscale.py::test_ops[300]"],
    "dump1500": ["benchmarks/dumpscale/test_dumpscale.py::test_ops[1500]"],
}
#: ``cold``: the gated run with an empty cache folder of its own (``XDG_CACHE_HOME``): where
#: no bytecode is written, the child's bytecode as on a first run.
#: ``before``: the gated run on another tree of the package (``--before-tree``: an
#: export of the commit to compare with, its C extensions copied), first on PYTHONPATH.
VARIANTS = ("plain", "instr", "gated", "cold", "before")
PROBE_VARIABLE = "OPPROF_COST_EVENTS"
#: ``run --bytecode``: every process writes and reads its bytecode in ``D/pycache``, as
#: where PYTHONDONTWRITEBYTECODE is not set (by default this machine's setting stands).
BYTECODE: dict[str, str] = {}
CHILD_VARIABLE = "OPPROF_CALLGRIND_OUT"


# -- the probe: loaded as a plugin in the parent and the child ----------------------------

def _event(what: str, **more: Any) -> None:
    path = os.environ.get(PROBE_VARIABLE)
    if not path:
        return
    role = "child" if os.environ.get(CHILD_VARIABLE) else "parent"
    line = json.dumps({"t": time.time(), "role": role, "pid": os.getpid(), "what": what, **more})
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def _process_start() -> float:
    """This process's start (under valgrind: valgrind's), from /proc, in epoch seconds."""
    with open("/proc/self/stat", encoding="ascii") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat", encoding="ascii") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def pytest_configure(config: Any) -> None:
    if not os.environ.get(PROBE_VARIABLE):
        return
    _event("start", at=_process_start())
    _event("configure")
    _wrap_timers()


def pytest_collection_finish(session: Any) -> None:
    _event("collected")


def pytest_runtest_setup(item: Any) -> None:
    _event("setup", test=item.nodeid)


def pytest_runtest_call(item: Any) -> None:
    _event("call", test=item.nodeid)


def pytest_runtest_teardown(item: Any) -> None:
    _event("teardown", test=item.nodeid)


def pytest_sessionfinish(session: Any) -> None:
    _event("sessionfinish")


def pytest_unconfigure(config: Any) -> None:
    _event("unconfigure")


def _wrap_timers() -> None:
    """The child's iterations and read-out, the parent's child: timed where they run."""
    from pytest_opprof.measure.timers import callgrind as timer
    from pytest_opprof.run import counting

    begin, read, run_child = (timer.CallgrindTimer.begin_iteration, timer.read,
                              counting.run_child)

    def begin_iteration(self: Any) -> None:
        _event("iteration", k=self._iteration + 1, skip=self.skip)
        begin(self)

    def read_dumps(prefix: str, *args: Any) -> Any:
        _event("read")
        files = sum(1 for _ in Path(prefix).parent.iterdir())
        size = sum(p.stat().st_size for p in Path(prefix).parent.iterdir())
        try:
            return read(prefix, *args)
        finally:
            _event("read_end", files=files, bytes=size)

    def child(*args: Any, **kwargs: Any) -> Any:
        _event("child")
        try:
            return run_child(*args, **kwargs)
        finally:
            _event("child_end")

    timer.CallgrindTimer.begin_iteration = begin_iteration  # type: ignore[method-assign]
    timer.read = read_dumps
    counting.run_child = child


# -- running pytest -----------------------------------------------------------------------

def run_pytest(args: list[str], events: Path | None = None,
               env: dict[str, str] | None = None) -> tuple[int, float, str]:
    """One pytest process as a user starts it: (exit code, wall seconds, output)."""
    full = {**os.environ, **THREADS, **BYTECODE, **(env or {})}
    if events is not None:
        events.parent.mkdir(parents=True, exist_ok=True)
        events.unlink(missing_ok=True)
        full[PROBE_VARIABLE] = str(events)
        full["PYTEST_PLUGINS"] = "benchmarks.instructions_cost"
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "pytest", *args, *COMMON], cwd=ROOT,
                          env=full, capture_output=True, text=True)
    if events is not None:
        with open(events, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t": started, "role": "bench", "what": "launch"}) + "\n")
            f.write(json.dumps({"t": time.time(), "role": "bench", "what": "exit"}) + "\n")
    return done.returncode, time.time() - started, done.stdout + done.stderr


def variant_args(d: Path, workload: str, variant: str, key: str) -> list[str]:
    selection = WORKLOADS[workload]
    if variant == "plain":
        return [*selection, f"--opprof-baseline-dir={d / 'store-empty'}"]
    store = d / ("store-empty" if variant == "instr" else f"store-{workload}")
    return [*selection, *INSTR, f"--opprof-baseline-dir={store}",
            f"--opprof-json={d / 'runs' / (key + '.json')}"]


def cmd_run(a: argparse.Namespace) -> None:
    d = Path(a.dir).resolve()
    (d / "runs").mkdir(parents=True, exist_ok=True)
    if a.bytecode:
        BYTECODE.update(PYTHONDONTWRITEBYTECODE="", PYTHONPYCACHEPREFIX=str(d / "pycache"))
    outcomes_path = d / "outcomes.json"
    outcomes: dict[str, Any] = (json.loads(outcomes_path.read_text())
                                if outcomes_path.exists() else {})
    workloads = a.workloads.split(",")
    for w in workloads:
        if not (d / f"store-{w}").exists():
            code, wall, out = run_pytest([*WORKLOADS[w], *INSTR, "--opprof-update-baseline",
                                          f"--opprof-baseline-dir={d / f'store-{w}'}"])
            print(f"baseline {w}: exit {code} in {wall:.1f} s", flush=True)
            if code:
                sys.exit(out[-3000:])
    for rep in range(1, a.reps + 1):
        chosen = [v for v in VARIANTS if v in a.variants.split(",")]
        order = chosen[rep % len(chosen):] + chosen[:rep % len(chosen)]  # each first in turn
        for w in workloads:
            for v in order:
                key = f"{w}-{v}-{rep}"
                if key in outcomes:
                    continue
                env = ({"XDG_CACHE_HOME": str(d / "cold" / key)} if v == "cold"
                       else {"PYTHONPATH": a.before_tree} if v == "before" else None)
                code, wall, out = run_pytest(variant_args(d, w, v, key),
                                             d / "events" / f"{key}.jsonl", env)
                (d / "runs" / f"{key}.log").write_text(out)
                outcomes[key] = {"exit": code, "wall_s": wall,
                                 "load": os.getloadavg()[0]}
                outcomes_path.write_text(json.dumps(outcomes, indent=1))
                print(f"{key}: exit {code} {wall:.1f} s (load {os.getloadavg()[0]:.1f})",
                      flush=True)
    print(tables(d, workloads, outcomes))


# -- the tables ---------------------------------------------------------------------------

def tables(d: Path, workloads: list[str], outcomes: dict[str, Any]) -> str:
    shown = [v for v in VARIANTS if any(k.split("-")[1] == v for k in outcomes)]
    out = ["| workload | " + " | ".join(shown) + " | "
           + " | ".join(f"{v} / plain" for v in shown[1:]) + " | reps |",
           "|---|" + "---|" * (2 * len(shown))]
    for w in workloads:
        reps = sorted({int(k.rsplit("-", 1)[1]) for k in outcomes if k.startswith(w + "-")})
        walls = {v: [outcomes[f"{w}-{v}-{r}"]["wall_s"] for r in reps
                     if f"{w}-{v}-{r}" in outcomes] for v in shown}
        ratios = {v: [outcomes[f"{w}-{v}-{r}"]["wall_s"] / outcomes[f"{w}-plain-{r}"]["wall_s"]
                      for r in reps if f"{w}-{v}-{r}" in outcomes and f"{w}-plain-{r}" in outcomes]
                  for v in shown[1:]}

        def span(xs: list[float], unit: str = " s") -> str:
            return (f"{statistics.median(xs):.1f}{unit} ({min(xs):.1f}-{max(xs):.1f})"
                    if xs else "-")

        out.append(f"| {w} | " + " | ".join(span(walls[v]) for v in shown) + " | "
                   + " | ".join(span(ratios[v], "x") for v in shown[1:]) + f" | {len(reps)} |")
    out += ["", "Where an instruction run's time goes (median over its repetitions, seconds; "
            "the child's stages summed over its children):", ""]
    for w in workloads:
        for v in shown[1:]:
            stages = [breakdown(d / "events" / f"{k}.jsonl") for k in sorted(outcomes)
                      if k.startswith(f"{w}-{v}-")]
            stages = [s for s in stages if s]
            if stages:
                out.append(f"- **{w} {v}**: " + "; ".join(
                    f"{n} {statistics.median(s.get(n, 0.0) for s in stages):.1f}"
                    for n in stages[0]))
    return "\n".join(out)


def breakdown(path: Path) -> dict[str, float]:
    """The stages of one instruction run, in seconds, from its events."""
    if not path.exists():
        return {}
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    parent = [e for e in events if e["role"] == "parent"]
    bench = {e["what"]: e["t"] for e in events if e["role"] == "bench"}
    p = {e["what"]: e["t"] for e in reversed(parent)}  # the first of each
    p["child_end"] = max(e["t"] for e in parent if e["what"] == "child_end")
    children: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e["role"] == "child":
            children.setdefault(e["pid"], []).append(e)
    if not children or "child" not in p:
        return {}
    out: dict[str, float] = {"parent start-up + collection": p["child"] - bench["launch"]}
    for child in children.values():
        for name, seconds in _child_stages(child, p["child_end"]).items():
            out[name] = out.get(name, 0.0) + seconds
    out["parent after the child (native tests, gate, exit)"] = bench["exit"] - p["child_end"]
    out["children (wall)"] = p["child_end"] - p["child"]
    out["total"] = bench["exit"] - bench["launch"]
    return out


def _child_stages(child: list[dict[str, Any]], ended: float) -> dict[str, float]:
    first = {e["what"]: e["t"] for e in reversed(child)}
    start = next(e["at"] for e in child if e["what"] == "start")
    out = {"child: valgrind, python, imports to configure": first["configure"] - start,
           "child: collection": first["collected"] - first["configure"]}
    setups = skipped = counted = reads = 0.0
    files = size = 0
    at: dict[str, float] = {}
    for e in child:  # per test: setup, iteration 0, iteration skip, read, read_end
        what = e["what"]
        if what == "setup":
            at = {"setup": e["t"]}
        elif what == "iteration" and e["k"] in (0, e["skip"]):
            at.setdefault("first", e["t"])
            if e["k"] == e["skip"]:
                at["counted"] = e["t"]
        elif what in ("read", "read_end"):
            at[what] = e["t"]
        if what == "read_end" and {"setup", "first", "counted", "read"} <= set(at):
            setups += at["first"] - at["setup"]
            skipped += at["counted"] - at["first"]
            counted += at["read"] - at["counted"]
            reads += at["read_end"] - at["read"]
            files += e["files"]
            size += e["bytes"]
    out["child: tests' set-up"] = setups
    out["child: skipped iterations"] = skipped
    out["child: counted iterations (with dumps)"] = counted
    out["child: dumps read out"] = reads
    finish = first.get("sessionfinish", ended)
    out["child: the rest of the tests"] = (finish - first["collected"] - setups - skipped
                                           - counted - reads)
    out["child: session end to exit"] = ended - finish
    out["dump files"] = files
    out["dump MB"] = size / 1e6
    return out


# -- start-up costs -----------------------------------------------------------------------

def cmd_startup(a: argparse.Namespace) -> None:
    import shutil

    valgrind = [shutil.which("valgrind") or "valgrind", "--tool=callgrind", "--instr-atstart=no",
                "--callgrind-out-file=/dev/null", "-q"]
    steps = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import numpy": [sys.executable, "-c", "import numpy"],
        "import pytest": [sys.executable, "-c", "import pytest"],
        "import pytest, numpy, the plugin": [sys.executable, "-c",
                                             "import pytest, numpy, pytest_opprof.plugin"],
        "pytest --co newcomer": [sys.executable, "-m", "pytest", "--co", *COMMON,
                                 "benchmarks/newcomer"],
        "pytest --co newcomer, plugins off": [sys.executable, "-m", "pytest", "--co", *COMMON,
                                              "-p", "no:xdist", "-p", "no:benchmark", "-p",
                                              "no:rerunfailures", "-p", "no:repeat",
                                              "benchmarks/newcomer"],
    }
    print("| step | native | under callgrind (instrumentation off) | ratio |\n|---|---|---|---|")
    env = {**os.environ, **THREADS}
    for name, cmd in steps.items():
        times: dict[str, list[float]] = {"native": [], "valgrind": []}
        for _ in range(a.reps):
            for how, full in (("native", cmd), ("valgrind", [*valgrind, *cmd])):
                t = time.time()
                subprocess.run(full, cwd=ROOT, env=env, capture_output=True, check=False)
                times[how].append(time.time() - t)
        n, v = statistics.median(times["native"]), statistics.median(times["valgrind"])
        print(f"| {name} | {n:.2f} s | {v:.2f} s | {v / n:.0f}x |", flush=True)


# -- counts -------------------------------------------------------------------------------

def per_op_counts(path: Path) -> dict[tuple[str, str], float]:
    data = json.loads(path.read_text())
    out = {}
    for t in data["tests"]:
        p = t.get("profile")
        if not p:
            continue
        counted = p["samples_ns"][p["skip"]:]
        for op in p["ops"]:
            out[(t["nodeid"], op["name"])] = statistics.median(row[op["op_id"]] for row in counted)
    return out


def cmd_counts(a: argparse.Namespace) -> None:
    before, after = per_op_counts(Path(a.before)), per_op_counts(Path(a.after))
    common = sorted(set(before) & set(after))
    diffs = sorted(((after[k] / before[k] - 1 if before[k] else 0.0), k) for k in common)
    absd = sorted((abs(x), k) for x, k in diffs)
    print(f"{len(common)} ops in both ({len(before)} / {len(after)}); median |ratio - 1| "
          f"{statistics.median(x for x, _ in absd):.4%}, max {absd[-1][0]:.4%} "
          f"({absd[-1][1][1]}); over 0.1%: {sum(x > 0.001 for x, _ in absd)}")
    for x, k in absd[-a.show:]:
        print(f"  {k[1]}: {before[k]:.0f} -> {after[k]:.0f} ({x:.4%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(required=True)
    p = sub.add_parser("run")
    p.add_argument("--dir", required=True)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--workloads", default="numpy,newcomer")
    p.add_argument("--variants", default="plain,instr,gated")
    p.add_argument("--bytecode", action="store_true")
    p.add_argument("--before-tree", default="")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("startup")
    p.add_argument("--reps", type=int, default=3)
    p.set_defaults(fn=cmd_startup)
    p = sub.add_parser("counts")
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--show", type=int, default=5)
    p.set_defaults(fn=cmd_counts)
    a = parser.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
