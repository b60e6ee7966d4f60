"""The ``opprof`` command: baselines from the shell.

    opprof baseline update [--runs N] [PYTEST ARGS...]
    opprof baseline show [TEST] [--dir DIR] [--machine-key KEY]
    opprof baseline prune [--apply] [--dir DIR] [--machine-key KEY] [PYTEST ARGS...]
    opprof report RESULTS.json [-o report.html]

Every command exits non-zero on error with one line that says what to do.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__
from .baseline import Baseline, BaselineError, BaselineStore, safe_name
from .errors import OpprofError
from .options import DEFAULT_BASELINE_DIR
from .render.gate import duration
from .render.text import paddle_table, singa_ops, wall_line

DEFAULT_RUNS = 5


class CommandError(Exception):
    """Ends the command with its message and exit status 1."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opprof",
        description="pytest-opprof: per-op profiling and regression gate for array code. "
                    "Profiling and gating run inside pytest (pytest --opprof-verbosity=2); "
                    "this command manages the stored baselines.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    baseline = commands.add_parser("baseline", help="update, show or prune stored baselines")
    actions = baseline.add_subparsers(dest="action", metavar="ACTION")

    update = actions.add_parser(
        "update", help="run pytest N times, each in a new process, and store the profiled "
                       "tests that passed as their baselines on this machine",
        description="Runs 'pytest --opprof-update-baseline PYTEST ARGS' --runs times, each in "
                    "a new process, so that the gate learns each op's spread between "
                    "processes. Unrecognised arguments go to pytest.")
    update.add_argument("--runs", type=_runs, default=DEFAULT_RUNS, metavar="N",
                        help=f"separate pytest processes to take (default {DEFAULT_RUNS})")

    def where(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--dir", type=Path, default=Path(DEFAULT_BASELINE_DIR),
                         help=f"the baseline directory (default ./{DEFAULT_BASELINE_DIR})")
        sub.add_argument("--machine-key", default=None,
                         help="only this machine's baselines (default: every machine)")

    show = actions.add_parser("show", help="print stored baselines: a list, or one test's "
                                           "ops in the verbosity-2 formats")
    show.add_argument("test", nargs="?", default=None,
                      help="a node id, or part of one, to print in full")
    where(show)
    prune = actions.add_parser(
        "prune", help="remove the baselines of tests that no longer exist (dry run unless "
                      "--apply)",
        description="Collects the tests with 'pytest --collect-only PYTEST ARGS' and lists "
                    "stored baselines whose test is gone: its file no longer exists, or its "
                    "file was collected without it. Unrecognised arguments go to pytest.")
    prune.add_argument("--apply", action="store_true", help="delete them (default: only list)")
    where(prune)

    report = commands.add_parser(
        "report", help="draw a results file (pytest --opprof-json) as a self-contained HTML "
                       "report with charts (needs matplotlib: the 'report' extra)")
    report.add_argument("results", type=Path, help="the results JSON file")
    report.add_argument("-o", "--output", type=Path, default=Path("opprof-report.html"),
                        help="the HTML file to write (default opprof-report.html)")
    return parser


def _runs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--runs must be a whole number >= 1, not {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    action = getattr(args, "action", None)
    if extra and action not in ("update", "prune"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "report":
        return _guarded(lambda: report(args.results, args.output))
    if args.command is None or action is None:
        parser.print_help(sys.stdout)
        return 0
    return _guarded(lambda: _baseline(args, extra))


def _guarded(run: Callable[[], int]) -> int:
    """Runs a command; its errors are one line on stderr and exit status 1."""
    try:
        return run()
    except (CommandError, OpprofError) as exc:
        print(f"opprof: {exc}", file=sys.stderr)
        return 1


def report(results: Path, output: Path) -> int:
    from .outputs import Output, problem, write
    from .render.html import render_tests
    from .render.results_json import load

    why = problem(Output("-o", output))
    if why is not None:
        raise CommandError(f"-o {output}: {why}")
    run_info, records = load(results)
    try:
        text = render_tests(records, run_info)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # a file written by hand or by another version: its fields are not what they say
        raise CommandError(f"{results}: malformed results ({type(exc).__name__}: {exc}); "
                           "write it again with pytest --opprof-json") from None
    write("-o", output, text)
    print(f"opprof: wrote {output} ({len(records)} test(s))")
    return 0


def _baseline(args: argparse.Namespace, extra: list[str]) -> int:
    if args.action == "update":
        return update(args.runs, extra)
    if args.action == "show":
        return show(args.dir, args.machine_key, args.test)
    return prune(args.dir, args.machine_key, extra, args.apply)


def _pytest(args: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", *args], check=False, **kwargs)


def update(runs: int, pytest_args: list[str]) -> int:
    batch = uuid.uuid4().hex[:12]
    for run in range(1, runs + 1):
        print(f"opprof: baseline run {run} of {runs}: pytest --opprof-update-baseline "
              + " ".join(pytest_args), flush=True)
        code = _pytest(["--opprof-update-baseline", f"--opprof-baseline-batch={batch}",
                        *pytest_args]).returncode
        if code == 5:
            raise CommandError("pytest collected no tests: name the tests to take baselines of")
        if code != 0:
            raise CommandError(
                f"baseline run {run} of {runs} failed (pytest exit code {code}): baselines "
                "were written only for the tests that passed; fix the failures and rerun")
    print(f"opprof: {runs} baseline run(s) stored")
    return 0


def _stores(root: Path, machine_key: str | None) -> list[BaselineStore]:
    if not root.exists():
        raise CommandError(f"{root}: no baseline directory here (use --dir, or create "
                           "baselines with opprof baseline update)")
    if not root.is_dir():
        raise CommandError(f"{root}: is a file, not a baseline directory (use --dir)")
    if machine_key is not None:
        store = BaselineStore(root, machine_key)
        if not store.folder.is_dir():
            raise CommandError(f"{root}: no baselines for machine {machine_key!r} "
                               f"(folder {safe_name(machine_key)})")
        return [store]
    return BaselineStore.every_machine(root)


def show(root: Path, machine_key: str | None, test: str | None) -> int:
    broken = 0
    matched = 0
    for store in _stores(root, machine_key):
        for path, entry in store.entries():
            if isinstance(entry, BaselineError):
                broken += 1
                print(f"unreadable: {entry}")
                continue
            if test is not None and test not in entry.nodeid:
                continue
            matched += 1
            print(_describe(entry) if test is not None else _list_line(entry, path))
    if test is not None and not matched:
        raise CommandError(f"no stored baseline matches {test!r} under {root}")
    return 1 if broken else 0


def _list_line(b: Baseline, path: Path) -> str:
    last = b.runs[-1]
    return (f"{b.machine}  {b.nodeid}  {len(b.runs)} run(s), {last.n_ops} ops, "
            f"{last.meta.get('date', '?')}  [{path.name}]")


def _describe(b: Baseline) -> str:
    lines = [f"{b.nodeid} on machine {b.machine!r}: {len(b.runs)} run(s)"]
    for i, run in enumerate(b.runs, 1):
        commit = run.meta.get("commit") or {}
        commit_id = commit.get("id", "?") if isinstance(commit, dict) else "?"
        probe = run.meta.get("probe_ns")
        lines.append(
            f"  run {i}: {run.meta.get('date', '?')}, commit {str(commit_id)[:12]}, "
            f"{run.meta.get('counted', '?')} counted iterations (skip {run.meta.get('skip', '?')})"
            + (f", probe {duration(probe)}" if isinstance(probe, (int, float)) else ""))
    profile = b.to_profile()
    lines += ["", "Latest run:", singa_ops(profile), "", paddle_table(profile), "",
              wall_line(profile), ""]
    return "\n".join(lines)


def prune(root: Path, machine_key: str | None, pytest_args: list[str], apply: bool) -> int:
    stores = _stores(root, machine_key)
    proc = _pytest(["--collect-only", "-q", "-p", "no:cacheprovider", *pytest_args],
                   capture_output=True, text=True)
    if proc.returncode not in (0, 5):
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["?"]
        raise CommandError(f"pytest could not collect the tests (exit code {proc.returncode}: "
                           f"{tail[0]}); nothing was pruned")
    collected = {line.strip() for line in proc.stdout.splitlines() if "::" in line}
    modules = {nodeid.split("::", 1)[0] for nodeid in collected}
    project = root.resolve().parent  # node ids are relative to the rootdir, .opprof's parent
    stale = []
    for store in stores:
        for path, entry in store.entries():
            if isinstance(entry, BaselineError) or entry.nodeid in collected:
                continue
            module = entry.nodeid.split("::", 1)[0]
            if module in modules or not (project / module).exists():
                stale.append((path, entry.nodeid))
        stale += [(path, "temporary file of an interrupted write")
                  for path in store.stale_temporary_files()]
    for path, nodeid in stale:
        if apply:
            try:
                path.unlink()
            except OSError as exc:
                raise CommandError(f"{path}: cannot remove ({exc})") from None
        print(f"{'removed' if apply else 'would remove'}: {nodeid}  [{path}]")
    if stale and not apply:
        print(f"opprof: {len(stale)} stale baseline(s); rerun with --apply to remove them")
    elif not stale:
        print("opprof: no stale baselines")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
