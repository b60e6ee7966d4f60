"""The newcomer's pull request (issue 28): README's four-test project, CI-style runs on a
loaded machine.

    python benchmarks/newcomer_runs.py compare --variant softmax2x --runs 10 --out D
    python benchmarks/newcomer_runs.py compare --variant searchsorted103 --runs 10 --out D
    python benchmarks/newcomer_runs.py gate --variant softmax2x --runs 10 --out D
    python benchmarks/newcomer_runs.py table --out D

The project is benchmarks/newcomer/test_perf.py (README's test_mlp_step, with an FFT
filter, a k-means step and a sort-and-search test beside it). Each command copies it into
a throwaway git repository as README lays it out (``tests/test_perf.py``, a
``pytest.ini``): the base commit, then a head commit that changes one op:

- ``softmax2x``: softmax does its work twice (about 2x);
- ``searchsorted103``: searchsorted looks up 10,300 queries instead of 10,000, the first
  10,000 the same (the last draw of the test's generator: 3% more of the same work in
  one op, nothing else changed).

``compare`` runs docs/ci.md's instruction pull-request job at the head,
``opprof compare HEAD~1 tests --opprof-measure=instructions``. ``gate`` runs the
stored-baseline time gate as docs/ci.md's pull-request job does: per run, ``opprof
baseline update --runs 5 tests`` at the base (the push to main), then at the head
``pytest tests`` with the job's options (``--gate-args``; default docs/ci.md's without
``--opprof-strict``).

Every process runs as on a CI runner: ``CI=true``, ``OPENBLAS_NUM_THREADS=1``,
``OMP_NUM_THREADS=1``, the tools of ``--python``'s environment first on PATH; and, unless
``--no-burner``, beside a ``python -c 'while True: pass'`` that holds one core for the
whole command (a shared runner's neighbour). Each run's outcome (exit code, the ops
flagged per test, the tests failed, wall time, load average) is appended to
``D/outcomes.jsonl`` and its output kept in ``D/logs/``; ``table`` prints them as the
Markdown of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

PROJECT = Path(__file__).resolve().parent / "newcomer"
KEY = "gha-newcomer"  # docs/ci.md's OPPROF_KEY: one name per runner type
#: docs/ci.md's Gate step less --opprof-strict (which makes a blind test's regressions block
#: again) and the HTML report and traces: CI=true decides.
GATE_ARGS = (f"--opprof-machine-key={KEY} --opprof-markdown=opprof/summary.md "
             "--junitxml=opprof/junit.xml --opprof-json=opprof/results.json")

#: variant -> (what the head commit changes: old text, new text, the commit message)
VARIANTS = {
    "softmax2x": (
        "    e = np.exp(x - x.max(axis=1, keepdims=True))\n"
        "    return e / e.sum(axis=1, keepdims=True)\n",
        "    for _ in range(2):                 # the same work, twice\n"
        "        e = np.exp(x - x.max(axis=1, keepdims=True))\n"
        "        p = e / e.sum(axis=1, keepdims=True)\n"
        "    return p\n",
        "softmax: do its work twice"),
    "searchsorted103": (
        "queries = rng.standard_normal(10_000)",
        "queries = rng.standard_normal(10_300)",
        "search: 10,300 queries (3% more searchsorted work)"),
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(parent: Path, variant: str) -> Path:
    """The project as a git repository: the base commit, and the head that changes one op."""
    repo = parent / "project"
    (repo / "tests").mkdir(parents=True)
    shutil.copy(PROJECT / "test_perf.py", repo / "tests" / "test_perf.py")
    (repo / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (repo / ".gitignore").write_text(".benchmarks/\n.opprof/\nopprof/\n__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    for name, value in (("user.name", "newcomer"), ("user.email", "newcomer@example.com")):
        git(repo, "config", name, value)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base: four perf tests")
    old, new, message = VARIANTS[variant]
    test = repo / "tests" / "test_perf.py"
    text = test.read_text()
    if text.count(old) != 1:
        raise SystemExit(f"newcomer_runs: the {variant} change does not apply to {test}")
    test.write_text(text.replace(old, new))
    git(repo, "commit", "-q", "-am", message)
    return repo


def ci_env(python: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "OPPROF_")) and k != "VIRTUAL_ENV"}
    env.update(CI="true", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PATH=f"{python.parent}{os.pathsep}{env.get('PATH', '')}")
    return env


def run(cmd: list[str], repo: Path, env: dict[str, str], log: Path) -> tuple[int, float]:
    start = time.monotonic()
    with log.open("a") as out:
        out.write(f"$ {shlex.join(cmd)}\n")
        out.flush()
        rc = subprocess.run(cmd, cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
        wall = time.monotonic() - start
        out.write(f"[exit {rc}, {wall:.1f} s]\n")
    return rc, wall


def flagged_of_compare(path: Path) -> dict[str, list[str]]:
    """test -> its ops not ok in a compare's JSON ('softmax regressed +95.1%')."""
    if not path.is_file():
        return {}
    found: dict[str, list[str]] = {}
    for test in json.loads(path.read_text())["tests"]:
        ops = [f"{op['name']} {op['verdict']} {op['change'] - 1:+.1%}"
               for op in test["ops"] if op["verdict"] != "ok"]
        if ops:
            found[test["nodeid"].split("::")[-1]] = ops
    return found


def flagged_of_results(path: Path) -> dict[str, list[str]]:
    """test -> its verdict and the ops not ok in a gate's results JSON."""
    if not path.is_file():
        return {}
    found: dict[str, list[str]] = {}
    for test in json.loads(path.read_text())["tests"]:
        ops = []
        for op in test["ops"]:
            if op["verdict"] in ("ok", "new", "missing"):
                continue
            ratio = (op.get("baseline") or {}).get("corrected_ratio")
            ops.append(f"{op['name']} {op['verdict']}"
                       + (f" {ratio - 1:+.1%}" if ratio is not None else ""))
        if ops or test["verdict"] not in ("passed",):
            found[test["nodeid"].split("::")[-1]] = [test["verdict"], *ops]
    return found


def failed_of_junit(path: Path) -> list[str]:
    if not path.is_file():
        return ["(no junit xml)"]
    return sorted(case.get("name", "?") for case in ET.parse(path).iter("testcase")
                  if case.find("failure") is not None or case.find("error") is not None)


def record(out: Path, row: dict[str, object]) -> None:
    with (out / "outcomes.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def main_compare(args: argparse.Namespace, env: dict[str, str], logs: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="newcomer-") as tmp:
        repo = make_repo(Path(tmp), args.variant)
        for i in range(args.runs):
            out = Path(tmp) / f"compare-{i}.json"
            log = logs / f"compare-{args.variant}-{int(time.time())}.log"
            load = os.getloadavg()[0]
            rc, wall = run(["opprof", "compare", "HEAD~1", "tests", "--opprof-measure=instructions",
                            "--json", str(out)], repo, env, log)
            record(args.out, dict(kind="compare", variant=args.variant, run=i, rc=rc,
                                  wall_s=round(wall, 1), load=round(load, 2),
                                  flagged=flagged_of_compare(out), log=log.name))


def main_gate(args: argparse.Namespace, env: dict[str, str], logs: Path) -> None:
    gate_args = shlex.split(args.gate_args)
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="newcomer-") as tmp:
            repo = make_repo(Path(tmp), args.variant)
            log = logs / f"gate-{args.variant}-{int(time.time())}.log"
            git(repo, "checkout", "-q", "HEAD~1")  # the push to main: the baselines
            rc_base, wall_base = run(["opprof", "baseline", "update", "--runs", "5", "tests",
                                      f"--opprof-machine-key={KEY}"], repo, env, log)
            git(repo, "checkout", "-q", "main")  # the pull request: the gate
            (repo / "opprof").mkdir()
            load = os.getloadavg()[0]
            rc, wall = run(["pytest", "tests", *gate_args], repo, env, log)
            record(args.out, dict(kind="gate", variant=args.variant, run=i, rc=rc,
                                  wall_s=round(wall, 1), load=round(load, 2),
                                  baseline_rc=rc_base, baseline_wall_s=round(wall_base, 1),
                                  failed=failed_of_junit(repo / "opprof" / "junit.xml"),
                                  flagged=flagged_of_results(repo / "opprof" / "results.json"),
                                  gate_args=args.gate_args, log=log.name))
            summary = repo / "opprof" / "summary.md"
            if summary.is_file():
                (logs / f"{log.stem}.md").write_text(summary.read_text())
            kept = logs / log.stem  # the results (samples and all) and the baselines
            shutil.copytree(repo / ".opprof", kept / ".opprof", dirs_exist_ok=True)
            if (repo / "opprof" / "results.json").is_file():
                shutil.copy(repo / "opprof" / "results.json", kept / "results.json")


def table(out: Path) -> None:
    rows = [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]
    print("| job | head | run | exit | tests failed | ops flagged | wall s | load |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        flagged = "; ".join(f"{test}: {', '.join(ops)}" for test, ops in r["flagged"].items())
        failed = ", ".join(r.get("failed", [])) or ("-" if r["kind"] == "gate" else "")
        print(f"| {r['kind']} | {r['variant']} | {r['run']} | {r['rc']} | {failed} | "
              f"{flagged or 'none'} | {r['wall_s']} | {r['load']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["compare", "gate", "table"])
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="softmax2x")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--python", type=Path, default=Path(sys.executable),
                        help="the interpreter of the environment with pytest-opprof (its bin/ "
                             "goes first on PATH)")
    parser.add_argument("--gate-args", default=GATE_ARGS,
                        help=f"the gate's pytest options (default: docs/ci.md's, {GATE_ARGS})")
    parser.add_argument("--no-burner", action="store_true",
                        help="no busy loop beside the runs (the machine's own load only)")
    args = parser.parse_args()
    if args.kind == "table":
        table(args.out)
        return
    logs = args.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = ci_env(args.python)
    burner = None if args.no_burner else subprocess.Popen(
        [sys.executable, "-c", "while True: pass"])
    try:
        (main_compare if args.kind == "compare" else main_gate)(args, env, logs)
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()


if __name__ == "__main__":
    main()
