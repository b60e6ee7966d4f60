"""``opprof compare``: base against head, op by op, measured now on this machine.

    opprof compare REF [--pairs N | --detect X --max-pairs N] [--setup CMD]
                       [--tolerance X] [--json PATH] [--markdown PATH] [PYTEST ARGS...]
    opprof compare BASE.json HEAD.json [--tolerance X] [--json PATH] [--markdown PATH]

The first form checks REF out in a temporary git worktree (removed afterwards, also on
errors and Ctrl-C) and runs the selected tests there (base) and in the working tree
(head) in pytest processes taking turns, each writing its results file;
:mod:`pytest_opprof.judge.paired` judges each op from the pairs. ``--pairs N`` runs N pairs;
by default the run is sized from its first :data:`FIRST_PAIRS`: pairs are added until
nine in ten ops of every test would show a ``--detect`` slowdown, at most
``--max-pairs``. A stored baseline carries everything that changed since it was taken
(the machine, its load, the process's layout); two sides measured now, alternating,
share all of that.

The second form compares two results files (``pytest --opprof-json``) the user made
(on two machines, or before and after an upgrade): one pair, judged conservatively
(:func:`pytest_opprof.judge.paired.judge_assumed`: each op credited a spread between
processes it may have, widened by what the files' gated verdicts knew of it from their
baselines), as ``--pairs`` 1 to 3 are.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import OpprofError
from ..judge.comparison import DEFAULT_DETECT, Run, compare_runs, pairs_needed
from ..judge.paired import DEFAULT_TOLERANCE, MIN_PAIRS
from ..model.comparison import Report
from ..model.verdict import Key
from ..run.launcher import last_line, run_pytest
from ..run.options import Settings, parse_fraction
from ..run.outputs import Output, problem, write
from .common import CommandError, UsageProblem, pytest_view, whole_number

#: Pairs run before the first sizing: enough for each op's spread to be estimated.
FIRST_PAIRS = 6
#: The most pairs an automatic run grows to (at ~3 s per process, about 3 minutes).
MAX_PAIRS = 30
#: Its two forms, as ``opprof compare --help`` and a usage error show them.
USAGE = ("opprof compare REF [--pairs N | --detect X --max-pairs N] [--setup CMD]\n"
         "                      [--tolerance X] [--json PATH] [--markdown PATH] "
         "[PYTEST ARGS...]\n"
         "       opprof compare BASE.json HEAD.json [--tolerance X] [--json PATH] "
         "[--markdown PATH]")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``compare`` command's arguments (unrecognised ones go to pytest)."""
    sub = commands.add_parser(
        "compare", help="compare every op with a git ref (pytest processes taking turns) or "
                        "two results files",
        usage=USAGE,
        description="opprof compare REF [PYTEST ARGS...]: runs the selected tests at REF (a "
                    "temporary git worktree) and in the working tree, in pytest processes "
                    "taking turns, and judges every op of every test from the pairs. "
                    "opprof compare BASE.json HEAD.json: the same between two results "
                    "files (pytest --opprof-json). Exit status 1 when an op regressed, 0 "
                    "otherwise, 2 on a usage error. Unrecognised arguments go to pytest.")
    sub.set_defaults(run=run, takes_pytest_args=True)
    sub.add_argument("ref", metavar="REF | BASE.json",
                     help="a commit, branch or tag (then pytest's arguments); or the base "
                          "results file (then HEAD.json, the head's)")
    sub.add_argument("--pairs", type=whole_number("--pairs"), default=None, metavar="N",
                     help="pairs of processes (base, head) to run (default: as many as "
                          f"--detect needs, from {FIRST_PAIRS} up to --max-pairs; one under "
                          "--opprof-measure=instructions, whose counts repeat). Fewer than "
                          f"{MIN_PAIRS} cannot show how far each op moves between processes: "
                          "each op is credited a wide spread, and only large changes are "
                          "called")
    sub.add_argument("--detect", type=_detect, default=None, metavar="X",
                     help="the slowdown nine in ten ops of every test should be able to "
                          f"show; pairs are added until they can (default {DEFAULT_DETECT:g}: "
                          f"{DEFAULT_DETECT * 100:.0f}%%)")
    sub.add_argument("--max-pairs", type=whole_number("--max-pairs"), default=None,
                     metavar="N", help=f"the most pairs --detect may take (default {MAX_PAIRS})")
    sub.add_argument("--setup", default=None, metavar="CMD",
                     help="a shell command run in each tree (the worktree of REF, then the "
                          "working tree) before the first process, e.g. a build in place")
    sub.add_argument("--tolerance", type=_tolerance, default=None, metavar="X",
                     help="the smallest change that counts, such as 0.05 or 5%% (default: "
                          f"the gate's, opprof_tolerance, else {DEFAULT_TOLERANCE:g}: 5%%)")
    sub.add_argument("--json", type=Path, default=None, metavar="PATH",
                     help="write the comparison as JSON (schema pytest-opprof/compare/1)")
    sub.add_argument("--markdown", type=Path, default=None, metavar="PATH",
                     help="write the comparison as Markdown (for $GITHUB_STEP_SUMMARY)")


def _tolerance(text: str) -> float:
    """``0.05`` or ``5%``, as every other tolerance of pytest-opprof."""
    return parse_fraction(text, "--tolerance")


def _detect(text: str) -> float:
    return parse_fraction(text, "--detect")


# -- the command ---------------------------------------------------------------------

def run(args: argparse.Namespace, extra: list[str]) -> int:
    """``opprof compare``: the form is told by its arguments (two .json files: files;
    else a git ref and pytest's arguments). Ctrl-C: 130, the worktree removed."""
    try:
        return _compare(args, extra)
    except KeyboardInterrupt:
        removed = "" if _files_form(args, extra) else "; the temporary worktree was removed"
        print(f"opprof: interrupted{removed}", file=sys.stderr)
        return 130


def _compare(args: argparse.Namespace, extra: list[str]) -> int:
    outputs = [Output(flag, path) for flag, path in (("--json", args.json),
                                                     ("--markdown", args.markdown)) if path]
    for output in outputs:
        why = problem(output)
        if why is not None:
            raise UsageProblem(f"{output.flag} {output.path}: {why}")
    if _files_form(args, extra):
        report = _files(args, extra)
    else:
        report = _pairs_of_processes(args, extra)
    from ..render import compare as render

    print(render.text(report, report.unit))
    for output in outputs:
        text = (render.to_json(report, report.unit) if output.flag == "--json"
                else render.markdown(report, report.unit))
        write(output.flag, output.path, text)
        print(f"opprof: wrote {output.path}")
    return 1 if report.count("regressed") else 0


def _settings(pytest_args: list[str]) -> Settings:
    """The plugin's settings as pytest sees ``pytest_args`` here (the gate's tolerance:
    ``opprof_tolerance``, ``--opprof-tolerance`` in addopts; the measure), as every
    other command takes them; arguments pytest refuses are left for the first process
    to name (the ini file's alone are taken)."""
    for args in ([pytest_args, []] if pytest_args else [[]]):
        with contextlib.suppress(UsageProblem):
            return pytest_view(args).settings
    return Settings()


def _files_form(args: argparse.Namespace, extra: Sequence[str] = ()) -> bool:
    """Whether the command compares two results files (else a git ref)."""
    return str(args.ref).endswith(".json") or bool(extra and extra[0].endswith(".json"))


def _files(args: argparse.Namespace, extra: list[str]) -> Report:
    from ..store.results import load_records

    if len(extra) != 1 or any(x is not None for x in (args.pairs, args.setup,
                                                      args.max_pairs)):
        raise UsageProblem("two results files take no pytest arguments, --pairs, --max-pairs "
                           "or --setup: opprof compare BASE.json HEAD.json")
    runs = []
    spreads: dict[str, dict[Key, float]] = {}
    for name in (args.ref, extra[0]):
        if not Path(name).is_file():
            raise UsageProblem(f"{name}: no such results file (pytest --opprof-json=PATH "
                               "writes one)")
        try:
            records = load_records(Path(name))[1]
        except OpprofError as exc:
            raise CommandError(str(exc)) from None
        runs.append({r.profile.nodeid: r.profile for r in records})
        for r in records:  # what the gate knew of each op's spread from its baselines
            c = None if r.result is None else r.result.comparison
            for v in () if c is None else c.ops:
                if math.isfinite(v.spread):
                    known = spreads.setdefault(r.nodeid, {})
                    known[v.key] = max(v.spread, known.get(v.key, 0.0))
    if args.tolerance is None:  # the files' measure's, unless the ini file says otherwise
        counts = all(p.measure == "instructions" for run in runs for p in run.values())
        args.tolerance = _settings([]).tolerance_for("instructions" if counts else None)
    return compare_runs([runs[0]], [runs[1]], mode="files", labels=(args.ref, extra[0]),
                        tolerance=args.tolerance, detect=_detect_of(args), spreads=spreads)


def _detect_of(args: argparse.Namespace) -> float:
    """--detect, which must exceed the tolerance (a change within it is never flagged)."""
    detect = DEFAULT_DETECT if args.detect is None else args.detect
    if detect <= args.tolerance:
        raise UsageProblem(f"--detect {detect:.0%} must exceed --tolerance "
                           f"{args.tolerance:.0%}: a change within the tolerance is never "
                           "flagged")
    return detect


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)


def _pairs_of_processes(args: argparse.Namespace, extra: list[str]) -> Report:
    here = Path.cwd().resolve()
    top = _git(["rev-parse", "--show-toplevel"], here)
    if top.returncode != 0:
        raise UsageProblem(f"{here} is not in a git repository: opprof compare REF compares "
                           "with a commit of one (or give two results files)")
    commit = _git(["rev-parse", "--verify", "--quiet", f"{args.ref}^{{commit}}"], here)
    if commit.returncode != 0:
        raise UsageProblem(f"{args.ref!r} is not a commit, branch or tag of "
                           f"{top.stdout.strip()} (git rev-parse failed)")
    sha = commit.stdout.strip()
    inside = here.relative_to(Path(top.stdout.strip()).resolve())
    if args.pairs is not None and (args.max_pairs is not None or args.detect is not None):
        raise UsageProblem("--pairs N runs N pairs; --detect and --max-pairs size the run "
                           "instead: give one or the other")
    settings = _settings(extra)
    if args.tolerance is None:
        args.tolerance = settings.tolerance
    detect = _detect_of(args)
    most = args.max_pairs or MAX_PAIRS
    # instruction counts repeat: one pair shows them, more cost valgrind's time
    counts = settings.measure == "instructions"
    planned = args.pairs or (1 if counts else min(FIRST_PAIRS, most))
    labels = (f"{args.ref} ({sha[:10]})", "working tree")
    with tempfile.TemporaryDirectory(prefix="opprof-compare-") as scratch, \
            _worktree(here, Path(scratch) / "base", sha) as tree:
        base_dir = tree / inside
        if not base_dir.is_dir():
            raise UsageProblem(f"{inside} does not exist at {args.ref}: run opprof compare "
                               "from a folder both sides have")
        sides = {"base": base_dir, "head": here}
        if args.setup:
            for side, folder in sides.items():
                _setup(args.setup, side, folder)
        runs: dict[str, list[Run]] = {"base": [], "head": []}
        shown = {"base": f"base ({args.ref} at {sha[:10]})", "head": "head (working tree)"}
        p = 0
        while p < planned:
            # ABBA order: whatever favours the second process of a pair favours each side
            for side in ("base", "head") if p % 2 == 0 else ("head", "base"):
                print(f"opprof: pair {p + 1} of {planned}: {shown[side]}", flush=True)
                runs[side].append(_profiled(side, sides[side], extra))
            p += 1
            if p == planned and args.pairs is None and p < most and not counts:
                needed = pairs_needed(compare_runs(runs["base"], runs["head"], mode="pairs",
                                                   labels=labels, tolerance=args.tolerance,
                                                   detect=detect))
                if needed > p:
                    planned = min(needed, most)
                    cap = " (--max-pairs)" if needed > most else ""
                    print(f"opprof: {p} pairs show how far the ops move between processes; "
                          f"{needed} pairs let nine in ten ops of every test show a "
                          f"{detect:.0%} slowdown: running {planned}{cap}", flush=True)
    return compare_runs(runs["base"], runs["head"], mode="pairs", labels=labels,
                        tolerance=args.tolerance, detect=detect)


@contextlib.contextmanager
def _worktree(repo: Path, path: Path, sha: str) -> Iterator[Path]:
    """A detached worktree of ``sha`` at ``path``, removed (and unregistered) after,
    whatever happens meanwhile."""
    added = _git(["worktree", "add", "--detach", "--quiet", str(path), sha], repo)
    if added.returncode != 0:
        raise CommandError(f"git worktree add failed: {last_line(added.stderr)}")
    try:
        yield path
    finally:
        _git(["worktree", "remove", "--force", str(path)], repo)
        shutil.rmtree(path, ignore_errors=True)
        _git(["worktree", "prune"], repo)


def _setup(command: str, side: str, folder: Path) -> None:
    print(f"opprof: setup ({side}): {command}", flush=True)
    done = subprocess.run(command, shell=True, cwd=folder, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise CommandError(f"--setup failed in the {side} tree {folder} (exit code "
                           f"{done.returncode}: {last_line(done.stdout + done.stderr)})")


def _profiled(side: str, folder: Path, pytest_args: list[str]) -> Run:
    """One pytest process in ``folder``; its profiles by node id, as typed records
    (:mod:`pytest_opprof.run.launcher`: no results file, no machine info)."""
    child = run_pytest(["-q", "-p", "no:cacheprovider", "--opprof-no-gate", *pytest_args],
                       cwd=folder, env={"PYTHONDONTWRITEBYTECODE": "1"}, records=True)
    code, last = child.code, child.last
    if code == 4:
        raise UsageProblem(f"pytest refused the arguments at {side} ({last})")
    if code == 2:
        raise CommandError(f"pytest could not collect the tests at {side} ({last}); "
                           "fix the error, or name tests that exist on both sides")
    if code == 5:
        raise UsageProblem(f"pytest collected no tests at {side}: name the tests to compare")
    if code not in (0, 1) or (child.records is None and not child.records_problem):
        raise CommandError(f"pytest failed at {side} (exit code {code}: {last})")
    if child.records is None:
        raise CommandError(child.records_problem)
    if code == 1:
        print(f"opprof: some tests failed at {side} ({last}); the profiles of those that "
              "ran are compared", flush=True)
    return {r.profile.nodeid: r.profile for r in child.records}
