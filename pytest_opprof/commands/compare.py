"""``opprof compare``: base against head, op by op, measured now on this machine.

The ref form checks REF out in a temporary git worktree (removed afterwards, also on
errors and Ctrl-C) and runs the selected tests there (base) and in the working tree
(head) in pytest processes taking turns; :mod:`pytest_opprof.judge.paired` judges each op
from the pairs: ``--pairs N``, or as many as nine in ten ops of every test need to show a
``--detect`` slowdown, sized after the first :data:`FIRST_PAIRS`. A stored baseline
carries everything that changed since it was taken (the machine, its load, the process's
layout); two sides measured now, alternating, share all of that.

The environment form (``--base-python A [--head-python B]``) runs both sides in the
working tree, each under its own interpreter (a dependency upgrade), judged the same way;
the report names the packages that differ. Given a REF as well, the base side is REF
under A.

The files form compares two results files (``pytest --opprof-json``): one pair, judged
conservatively (:func:`pytest_opprof.judge.paired.judge_assumed`), as ``--pairs`` 1 to 3
are.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import OpprofError
from ..judge.comparison import DEFAULT_DETECT, Run, compare_runs, pairs_needed
from ..judge.config import TOLERANCE
from ..judge.paired import MIN_PAIRS
from ..measure import measures
from ..model.comparison import Environment, Report
from ..model.profile import Profile
from ..model.verdict import Key
from ..run import environments
from ..run.launcher import last_line, run_command, run_pytest
from ..run.options import Settings, fraction
from ..run.outputs import Output, clash, problem, write_files
from ..run.rerun import _expanded as expanded
from ..signals import deferred
from .common import CommandError, PytestView, UsageProblem, pytest_view, whole_number

#: Pairs run before the first sizing: enough for each op's spread to be estimated.
FIRST_PAIRS = 6
#: The most pairs an automatic run grows to (at ~3 s per process, about 3 minutes).
MAX_PAIRS = 30
#: Its two forms, as ``opprof compare --help`` and a usage error show them.
USAGE = ("opprof compare REF [--pairs N | --detect X --max-pairs N] [--strict-effect [X]]\n"
         "                      [--setup CMD] [--tolerance X] [--json PATH] [--markdown PATH] "
         "[PYTEST ARGS...]\n"
         "       opprof compare --base-python PYTHON [--head-python PYTHON] [REF]\n"
         "                      [--pairs N | ...] [PYTEST ARGS...]\n"
         "       opprof compare BASE.json HEAD.json [--tolerance X] [--json PATH] "
         "[--markdown PATH]")
#: The most pairs --pairs or --max-pairs may ask for (at ~3 s per process, 100 minutes).
MOST_PAIRS = 1000


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = commands.add_parser(
        "compare", help="compare every op with a git ref or another Python environment "
                        "(--base-python: a dependency upgrade), in pytest processes taking "
                        "turns, or between two results files",
        usage=USAGE,
        description="opprof compare REF [PYTEST ARGS...]: runs the selected tests at REF (a "
                    "commit, branch or tag, checked out in a temporary git worktree) and in "
                    "the working tree, in pytest processes taking turns, and judges every "
                    "op of every test from the pairs. opprof compare --base-python PYTHON "
                    "[PYTEST ARGS...]: the same between two Python environments (a "
                    "dependency upgrade), both in the working tree. opprof compare "
                    "BASE.json HEAD.json: between two results files (pytest "
                    "--opprof-json). REF or BASE.json comes before pytest's arguments. "
                    "Exit status 1 when an op regressed (or, with --strict-effect, a test "
                    "could not show the effect asked), 0 otherwise, 2 on a usage error. "
                    "Unrecognised arguments go to pytest.")
    sub.set_defaults(run=run, takes_pytest_args=True)
    sub.add_argument("--base-python", default=None, metavar="PYTHON",
                     help="the interpreter the base side runs under (another virtual "
                          "environment's bin/python); it needs pytest and pytest-opprof")
    sub.add_argument("--head-python", default=None, metavar="PYTHON",
                     help="the interpreter the head side runs under (default: this one)")
    sub.add_argument("--pairs", type=whole_number("--pairs", 1, MOST_PAIRS), default=None,
                     metavar="N",
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
    sub.add_argument("--strict-effect", type=fraction("--strict-effect"), nargs="?",
                     const=-1.0, default=None, metavar="X",
                     help="fail (exit 1) when a test's ops could not show a slowdown of X "
                          "(default: --detect's): a comparison that saw nothing fails "
                          "instead of passing blind")
    sub.add_argument("--max-pairs", type=whole_number("--max-pairs", 1, MOST_PAIRS), default=None,
                     metavar="N", help=f"the most pairs --detect may take (default {MAX_PAIRS})")
    sub.add_argument("--setup", default=None, metavar="CMD",
                     help="a shell command run in each tree (the worktree of REF, then the "
                          "working tree) before the first process, e.g. a build in place; "
                          "the side's interpreter is first on its PATH")
    sub.add_argument("--tolerance", type=fraction("--tolerance"), default=None, metavar="X",
                     help="the smallest change that counts, such as 0.05 or 5%% (default: "
                          f"the gate's, opprof_tolerance, else {TOLERANCE:.0%}%)")
    sub.add_argument("--json", type=Path, default=None, metavar="PATH",
                     help="write the comparison as JSON (schema pytest-opprof/compare/3)")
    sub.add_argument("--markdown", type=Path, default=None, metavar="PATH",
                     help="write the comparison as Markdown (for $GITHUB_STEP_SUMMARY)")


_detect = fraction("--detect")


# -- the command ---------------------------------------------------------------------

def run(args: argparse.Namespace, extra: list[str]) -> int:
    """Ctrl-C: 130, the worktree removed (and said only when it was)."""
    scratch = Scratch()
    try:
        return _compare(args, extra, scratch)
    except KeyboardInterrupt:
        print(f"opprof: interrupted{scratch.said()}", file=sys.stderr)
        return 130


@dataclass
class Scratch:
    """Whether the ref form made its temporary folder, and what of it could not be
    removed (a folder, a worktree still registered with git): the messages say only
    what is true."""

    made: bool = False
    left: list[str] = field(default_factory=list)

    def said(self) -> str:
        """The interruption line's ending (what could not be removed was said already)."""
        return "; the temporary worktree was removed" if self.made and not self.left else ""


def _compare(args: argparse.Namespace, extra: list[str], scratch: Scratch) -> int:
    outputs = [Output(flag, path) for flag, path in (("--json", args.json),
                                                     ("--markdown", args.markdown)) if path]
    for output in outputs:
        why = problem(output)
        if why is not None:
            raise UsageProblem(f"{output.flag} {output.path}: {why}")
    form, args.ref, extra = _form(args, extra)
    inputs = [Path(args.ref), *map(Path, extra[:1])] if form == "files" else []
    clashing = clash(outputs, inputs=inputs)
    if clashing is not None:
        raise UsageProblem(f"{clashing[0].flag} {clashing[0].path}: {clashing[1]}")
    failures: list[str] = []
    if form == "files":
        report = _files(args, extra)
    else:
        report, failures = _pairs_of_processes(args, extra, scratch)
    if args.strict_effect is not None:
        report = replace(report, strict_effect=report.detect if args.strict_effect < 0
                         else args.strict_effect)
    from ..render import compare as render

    print(render.text(report))
    for line in failures:
        print(line)
    write_files([(output.flag, output.path, render.to_json(report)
                  if output.flag == "--json" else render.markdown(report))
                 for output in outputs])  # both, or neither
    for output in outputs:
        print(f"opprof: wrote {output.path}")
    if failures:
        print(f"opprof: {len(failures)} test(s) failed at a side and were not compared: "
              "the comparison fails", file=sys.stderr)
        return 1
    blind = render.blind_tests(report) if report.strict_effect is not None else []
    if blind:
        print(f"opprof: {len(blind)} test(s) could not show a slowdown of "
              f"{report.strict_effect:.0%} (--strict-effect): the comparison fails",
              file=sys.stderr)
        return 1
    return 1 if report.count("regressed") else 0


def _form(args: argparse.Namespace, extra: list[str]) -> tuple[str, str | None, list[str]]:
    """("files" or "pairs", REF or BASE.json or None, pytest's arguments), from the
    arguments argparse left: REF comes first among them. Under ``--base-python`` or
    ``--head-python`` a first argument is REF only when it names a commit and no path
    (``opprof compare --base-python A tests/perf`` selects tests)."""
    first = extra[0] if extra and not extra[0].startswith("-") else None
    if args.base_python is None and args.head_python is None:
        if first is None:
            raise UsageProblem("give what to compare with first: a REF (commit, branch or "
                               "tag), two results files, or --base-python PYTHON, before "
                               "pytest's arguments (opprof compare --help shows each form)")
        return ("files" if _files_form(first) else "pairs"), first, extra[1:]
    if first is None or not _names_commit(first):
        if first is not None and first.endswith(".json") and Path(first).is_file():
            raise UsageProblem(f"{first}: two results files were measured already; "
                               "--base-python and --head-python run the tests, so they take "
                               "a REF or pytest's arguments, not results files")
        return "pairs", None, extra
    if os.path.exists(first.split("::", 1)[0]) and not first.startswith(("heads/", "tags/")):
        raise UsageProblem(f"{first!r} is both a path and a git ref: write ./{first} to "
                           f"select the tests, or {_commit_of(first)} to compare with the "
                           "ref")
    return "pairs", first, extra[1:]


def _files_form(ref: str) -> bool:
    """Whether ``opprof compare REF ...`` compares two results files. The rule, on the
    first argument alone (never on a pytest argument such as ``--benchmark-json=x.json``):
    a file of that name exists, or the name ends in ``.json`` and names no commit.
    A name that is both an existing file and a git ref (a branch ``feature.json``)
    is refused: ``./feature.json`` names the file, ``heads/feature.json`` the branch."""
    exists = Path(ref).is_file()
    if not exists and not ref.endswith(".json"):
        return False
    names_commit = _names_commit(ref)
    if exists and names_commit and not ref.startswith(("./", "/", "../")):
        raise UsageProblem(f"{ref!r} is both a file and a git ref: write ./{ref} to compare "
                           f"the results file, or {_commit_of(ref)} to compare with the ref")
    return exists or not names_commit


def _commit_of(ref: str) -> str:
    """``a1b2c3d (its commit)``: what names a ref's commit and no file, whatever the ref
    is (``HEAD`` or ``HEAD~1`` have no ``heads/`` name; a tag's is ``tags/``)."""
    code, out = _git(["rev-parse", "--short", "--verify", "--quiet", f"{ref}^{{commit}}"],
                     Path.cwd())
    commit = out.strip()
    return f"{commit} (its commit)" if code == 0 and re.fullmatch(r"[0-9a-f]{4,64}", commit) \
        else "its commit id"


def _names_commit(ref: str) -> bool:
    try:
        code, _ = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], Path.cwd())
    except OSError:  # no git
        return False
    return code == 0


def _files(args: argparse.Namespace, extra: list[str]) -> Report:
    from ..store.results import load_records

    if len(extra) != 1 or any(x is not None for x in (args.pairs, args.setup,
                                                      args.max_pairs)):
        raise UsageProblem("two results files take no pytest arguments, --pairs, --max-pairs "
                           "or --setup: opprof compare BASE.json HEAD.json")
    runs = []
    if not extra[0].endswith(".json") and not Path(extra[0]).is_file():
        raise UsageProblem(f"{extra[0]}: no such results file (opprof compare BASE.json "
                           "HEAD.json compares two results files)")
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
    unlike = _unlike(runs[0], runs[1], ("base", args.ref), ("head", extra[0]))
    if unlike is not None:
        raise CommandError(f"{unlike}: the files cannot be compared op by op")
    if args.tolerance is None:  # the files' measure's, unless the ini file says otherwise
        taken = {measures.of(p.measure, p.unit) for run in runs for p in run.values()}
        settings = _settings([])
        args.tolerance = (settings.tolerance_of_measure(taken.pop()) if len(taken) == 1
                          else settings.tolerance)
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


def _git(args: list[str], cwd: Path) -> tuple[int, str]:
    """git in a process group of its own: a git that starts another, as ``worktree add``
    may, is ended with it."""
    return run_command(["git", *args], cwd=cwd)


def _pairs_of_processes(args: argparse.Namespace, extra: list[str],
                        scratch: Scratch) -> tuple[Report, list[str]]:
    """The pairs forms (REF, environments, or both): the report, and a line for each
    test that failed at a side (not compared)."""
    here = Path.cwd().resolve()
    if args.pairs is not None and (args.max_pairs is not None or args.detect is not None):
        raise UsageProblem("--pairs N runs N pairs; --detect and --max-pairs size the run "
                           "instead: give one or the other")
    probed = _environments(args, here)
    envs = None if probed is None else (probed[0].environment, probed[1].environment)
    pythons = (None, None) if envs is None else (envs[0].python, envs[1].python)
    if args.ref is None:  # both sides in the working tree, each under its interpreter
        assert envs is not None
        if args.setup:
            raise UsageProblem("--setup runs in each side's tree, and the environments share "
                               "the working tree: build there first, or give a REF")
        extra = _expanded(extra, here)
        sides = {name: Side(name, here, extra, _activated(env), env.python)
                 for name, env in zip(("base", "head"), envs, strict=True)}
        return _run_pairs(args, sides, (envs[0].python, envs[1].python),
                          {name: f"{name} ({side.python})" for name, side in sides.items()},
                          envs, _settings(extra))
    code, top_out = _git(["rev-parse", "--show-toplevel"], here)
    if code != 0:
        raise UsageProblem(f"{here} is not in a git repository: opprof compare REF compares "
                           "with a commit of one (or give two results files)")
    top = Path(top_out.strip().splitlines()[-1]).resolve()
    code, sha_out = _git(["rev-parse", "--verify", "--quiet", f"{args.ref}^{{commit}}"], here)
    if code != 0:
        raise UsageProblem(f"{args.ref!r} is not a commit, branch or tag of {top} (git "
                           "rev-parse failed)")
    sha = sha_out.strip().splitlines()[-1]
    inside = here.relative_to(top)
    extra = _expanded(extra, here)
    view = _view(extra)
    if view is not None:
        _check_selection(view, here, top)
    under = ("", "") if envs is None else (f" under {envs[0].python}",
                                           f" under {envs[1].python}")
    labels = (f"{args.ref} ({sha[:10]}){under[0]}", f"working tree{under[1]}")
    installs = (environments.editable_here() if probed is None else
                [pair for side in probed for pair in side.editable])
    editable = sorted({name for name, path in installs if _inside(path, top)})
    with _worktree(here, sha, scratch) as tree:
        base_dir = tree / inside
        if not base_dir.is_dir():
            raise UsageProblem(f"{inside} does not exist at {args.ref}: run opprof compare "
                               "from a folder both sides have")
        base_env = {**_environment_at(top, tree)}
        if envs is not None:
            base_env.update(_activated(envs[0]))
        _say_base_imports_the_working_tree(editable, pythons[0], base_dir, base_env,
                                           (here, top, tree))
        sides = {"base": Side("base", base_dir, _at(extra, top, tree), base_env, pythons[0]),
                 "head": Side("head", here, extra,
                              {} if envs is None else _activated(envs[1]), pythons[1])}
        if args.setup:
            for side in sides.values():
                _setup(args.setup, side)
        shown = {"base": f"base ({args.ref} at {sha[:10]}){under[0]}",
                 "head": f"head (working tree){under[1]}"}
        settings = view.settings if view is not None else _settings([])
        return _run_pairs(args, sides, labels, shown, envs, settings)


def _run_pairs(args: argparse.Namespace, sides: Mapping[str, Side], labels: tuple[str, str],
               shown: Mapping[str, str], envs: tuple[Environment, Environment] | None,
               settings: Settings) -> tuple[Report, list[str]]:
    """The pairs of processes, sized from the first pairs unless ``--pairs``."""
    if args.tolerance is None:
        args.tolerance = settings.tolerance
    detect = _detect_of(args)
    most = args.max_pairs or MAX_PAIRS
    # figures that repeat (instruction counts): one pair shows them, more cost its time
    counts = measures.defaults_of(settings.measure).repeats
    planned = args.pairs or (1 if counts else min(FIRST_PAIRS, most))
    runs: dict[str, list[Run]] = {"base": [], "head": []}
    failed: dict[str, dict[str, str]] = {"base": {}, "head": {}}
    p = 0
    while p < planned:
        # ABBA order: whatever favours the second process of a pair favours each side
        for name in ("base", "head") if p % 2 == 0 else ("head", "base"):
            print(f"opprof: pair {p + 1} of {planned}: {shown[name]}", flush=True)
            run, side_failed = _profiled(sides[name])
            runs[name].append(run)
            for nodeid, why in side_failed.items():
                failed[name].setdefault(nodeid, f"pair {p + 1}: {why}")
        _check_alike(runs, shown)
        if envs is not None and args.ref is None:
            _check_same_tests(runs, failed)
        p += 1
        judged = _judged(runs, failed)
        if p == planned and args.pairs is None and p < most and not counts \
                and judged["base"][0]:
            needed = pairs_needed(compare_runs(judged["base"], judged["head"],
                                               mode="pairs", labels=labels,
                                               tolerance=args.tolerance, detect=detect))
            if needed > p:
                planned = min(needed, most)
                cap = " (--max-pairs)" if needed > most else ""
                print(f"opprof: {p} pairs show how far the ops move between processes; "
                      f"{needed} pairs let nine in ten ops of every test show a "
                      f"{detect:.0%} slowdown: running {planned}{cap}", flush=True)
    judged = _judged(runs, failed)
    lines = [f"opprof: test {nodeid} failed at {name} ({why}): not compared"
             for name in ("base", "head") for nodeid, why in sorted(failed[name].items())]
    report = compare_runs(judged["base"], judged["head"], mode="pairs", labels=labels,
                          tolerance=args.tolerance, detect=detect)
    return replace(report, environments=envs), lines


def _environments(args: argparse.Namespace,
                  here: Path) -> tuple[environments.Probed, environments.Probed] | None:
    """Each side's environment under ``--base-python``/``--head-python`` (the other
    defaulting to this interpreter), each asked once and refused in one line when it
    cannot run a side; None when neither flag was given."""
    if args.base_python is None and args.head_python is None:
        return None
    found = []
    for flag, given in (("--base-python", args.base_python),
                        ("--head-python", args.head_python)):
        try:
            python = sys.executable if given is None else environments.resolve(flag, given)
            probed = environments.probe(flag, python, here)
        except environments.Refused as exc:
            raise UsageProblem(str(exc)) from None
        why = environments.refusal(flag, probed)
        if why is not None:
            raise UsageProblem(why)
        found.append(probed)
    return found[0], found[1]


def _activated(env: Environment) -> dict[str, str]:
    """The side's environment as activating it would make it: its interpreter's folder
    first on PATH (a test's ``subprocess.run(["python", ...])``, a console script,
    ``--setup``'s ``pip``), and VIRTUAL_ENV naming it when it is a virtual environment."""
    changes = {"PATH": os.pathsep.join([str(Path(env.python).parent),
                                        os.environ.get("PATH", os.defpath)])}
    if env.venv:
        changes["VIRTUAL_ENV"] = env.venv
    return changes


def _inside(path: str | Path, top: Path) -> bool:
    """Whether ``path``, its links resolved, is ``top`` or lies in it."""
    real = Path(os.path.realpath(path))
    return real == top or top in real.parents


def _check_same_tests(runs: Mapping[str, list[Run]],
                      failed: Mapping[str, Mapping[str, str]]) -> None:
    """Both environments ran the same tests (one folder, one selection: a test only one
    side has is a parametrization or a skip that depends on what is installed), else
    one line naming the difference."""
    ids = {name: set().union(*runs[name]) | set(failed[name]) for name in ("base", "head")}
    if ids["base"] == ids["head"]:
        return
    parts = []
    for name, other in (("base", "head"), ("head", "base")):
        only = sorted(ids[name] - ids[other])
        if only:
            more = f" and {len(only) - 3} more" if len(only) > 3 else ""
            parts.append(f"{name} only: {', '.join(only[:3])}{more}")
    raise UsageProblem(f"the environments ran different tests ({'; '.join(parts)}): "
                       "select the tests both have (-k, or their node ids)")


@dataclass(frozen=True)
class Side:
    """Where and how one side's processes run: its pytest arguments and environment
    changes (PYTEST_ADDOPTS, PYTHONPATH) with their absolute paths into the repository
    pointing into its tree; its interpreter (None: this one)."""

    name: str
    folder: Path
    args: list[str]
    env: Mapping[str, str]
    python: str | None = None


def _view(extra: list[str]) -> PytestView | None:
    """How pytest here sees the arguments; None when it refuses them (the first
    process names why)."""
    with contextlib.suppress(UsageProblem):
        return pytest_view(extra)
    return None


def _settings(pytest_args: list[str]) -> Settings:
    """The plugin's settings (the tolerance, the measure) as pytest sees ``pytest_args``
    here; arguments pytest refuses are left for the first process to name (the ini
    file's settings alone are taken)."""
    for args in ([pytest_args, []] if pytest_args else [[]]):
        view = _view(args)
        if view is not None:
            return view.settings
    return Settings()


def _expanded(extra: list[str], here: Path) -> list[str]:
    """``@FILE`` arguments read here, once, as the re-run reads them, so that the paths
    they name are seen and mapped as the command line's; blank lines left out, and a
    file that cannot be read refused before any process starts (the re-run leaves it)."""
    for arg in (args := expanded(extra, here)):
        if arg.startswith("@") and len(arg) > 1:
            try:
                (here / arg[1:]).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageProblem(f"{arg}: cannot read the arguments file ({exc})") from None
    return [arg for arg in args if arg.strip()]


def _check_selection(view: PytestView, here: Path, top: Path) -> None:
    """Every test path (from the command line, @FILE, PYTEST_ADDOPTS or addopts) lies
    inside the repository: a path outside it would be the same file on both sides."""
    for arg in view.positional:
        if not _inside(here / arg.split("::", 1)[0], top):
            raise UsageProblem(f"{arg}: outside the repository {top}, so both sides would run "
                               "the same file; name tests inside the repository")


def _mapped(path: str, top: Path, tree: Path) -> str | None:
    """``path`` (absolute, perhaps ``FILE::TEST``) inside the repository ``top``, as
    the same path in ``tree``; None when it is no such path."""
    if not os.path.isabs(path):
        return None
    file, sep, rest = path.partition("::")
    if not _inside(file, top):
        return None
    return f"{tree / Path(os.path.realpath(file)).relative_to(top)}{sep}{rest}"


def _at(args: Sequence[str], top: Path, tree: Path) -> list[str]:
    """The arguments for the base side: every absolute path into the repository (an
    argument, an option's ``=VALUE``, ``@FILE``) pointing into the worktree instead,
    so that ``opprof compare HEAD /abs/test_x.py`` runs each side's own file."""
    out = []
    for arg in args:
        for prefix in ("", "@", *(arg[:i + 1] for i, c in enumerate(arg) if c == "=")):
            if not arg.startswith(prefix):
                continue
            moved = _mapped(arg[len(prefix):], top, tree)
            if moved is not None:
                arg = prefix + moved
                break
        out.append(arg)
    return out


def _say_base_imports_the_working_tree(editable: list[str], python: str | None, base_dir: Path,
                                       env: Mapping[str, str],
                                       where: tuple[Path, Path, Path]) -> None:
    """A line for each module of a distribution installed in editable mode from this
    repository that the base side would import from the working tree, not from its own
    tree (a src layout: the editable install points into the working tree's ``src``, and
    the side's folder does not hold the package); nothing where it imports its own (a
    flat layout: the folder it runs in comes first on sys.path)."""
    if not editable:
        return
    here, top, tree = where
    found = environments.imported_from(python, editable, base_dir, env)
    for module, places in sorted(found.items()):
        stray = [p for p in places if p and _inside(p, top) and not _inside(p, tree)]
        if not stray:
            continue
        folder = os.path.relpath(Path(stray[0]).parent, here)
        print(f"opprof: the base side would import {module} from the working tree "
              f"({stray[0]}), not from its own tree: it is installed in editable mode from "
              f"this repository and is not found from the folder a side runs in; give it "
              f"by a relative PYTHONPATH instead (PYTHONPATH={shlex.quote(folder)} "
              "opprof compare ...)", flush=True)


def _environment_at(top: Path, tree: Path) -> dict[str, str]:
    """PYTEST_ADDOPTS and PYTHONPATH for the base side, their absolute paths into the
    repository pointing into the worktree (a src layout given as PYTHONPATH=$PWD/src
    imports each side's own package)."""
    env = {}
    addopts = os.environ.get("PYTEST_ADDOPTS", "")
    if addopts:
        env["PYTEST_ADDOPTS"] = shlex.join(_at(shlex.split(addopts), top, tree))
    pythonpath = os.environ.get("PYTHONPATH", "")
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(_mapped(entry, top, tree) or entry
                                            for entry in pythonpath.split(os.pathsep))
    return env


def _unlike(base: Mapping[str, Profile], head: Mapping[str, Profile],
            *labels: tuple[str, str]) -> str | None:
    """Why ``base`` and ``head`` were not measured alike (another measure: the sides'
    ini files differ), one line; None when they were."""
    for nodeid in sorted(base.keys() & head.keys()):
        b, h = (f"--opprof-measure={p[nodeid].measure}" for p in (base, head))
        if b != h:
            (bn, bl), (hn, hl) = labels
            return (f"{nodeid} was measured with {b} at {bn} ({bl}) but {h} at {hn} "
                    f"({hl})")
    return None


def _check_alike(runs: Mapping[str, list[Run]], shown: Mapping[str, str]) -> None:
    if not runs["base"] or not runs["head"]:
        return
    unlike = _unlike(runs["base"][-1], runs["head"][-1], ("base", shown["base"]),
                     ("head", shown["head"]))
    if unlike is not None:
        raise CommandError(f"{unlike}: the sides' times are not comparable; set both with "
                           "--opprof-measure=... on the command line")


def _judged(runs: Mapping[str, list[Run]],
            failed: Mapping[str, Mapping[str, str]]) -> dict[str, list[Run]]:
    """The runs less every test that failed at either side, in any process."""
    gone = {nodeid for side in failed.values() for nodeid in side}
    return {name: [{n: p for n, p in run.items() if n not in gone} for run in side_runs]
            for name, side_runs in runs.items()}


@contextlib.contextmanager
def _worktree(repo: Path, sha: str, scratch: Scratch) -> Iterator[Path]:
    """A detached worktree of ``sha`` in a new temporary folder, removed and
    unregistered after whatever happens meanwhile, also an interrupted ``git worktree
    add``. Ctrl-C and SIGTERM do not cut the removal (they are delivered after)."""
    with deferred():
        folder = Path(tempfile.mkdtemp(prefix="opprof-compare-"))
        scratch.made = True
    path = folder / "base"
    try:
        code, out = _git(["worktree", "add", "--detach", "--quiet", str(path), sha], repo)
        if code != 0:
            raise CommandError(f"git worktree add failed: {last_line(out)}")
        yield path
    finally:
        with deferred():
            scratch.left = _remove_worktree(repo, path, folder)
        if scratch.left:
            print(f"opprof: could not remove {', '.join(scratch.left)}: remove it, then run "
                  "git worktree prune", file=sys.stderr)


def _remove_worktree(repo: Path, path: Path, folder: Path) -> list[str]:
    """The worktree at ``path`` unregistered (also when locked, as an interrupted
    ``git worktree add`` leaves it) and ``folder`` removed; what is left."""
    with contextlib.suppress(OSError):
        _git(["worktree", "remove", "--force", "--force", str(path)], repo)
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        if _registered(repo, path):
            _git(["worktree", "unlock", str(path)], repo)
        _git(["worktree", "prune"], repo)
    left = [str(folder)] if folder.exists() else []
    with contextlib.suppress(OSError):
        if _registered(repo, path):
            left.append(f"the worktree {path} registered with git")
    return left


def _registered(repo: Path, path: Path) -> bool:
    code, out = _git(["worktree", "list", "--porcelain"], repo)
    return code == 0 and any(line == f"worktree {path}" or
                             line == f"worktree {os.path.realpath(path)}"
                             for line in out.splitlines())


def _setup(command: str, side: Side) -> None:
    """``--setup`` in the side's tree and environment (its interpreter's folder first on
    PATH: ``python -m pip install .`` installs there), in a process group of its own."""
    print(f"opprof: setup ({side.name}): {command}", flush=True)
    code, out = run_command(["/bin/sh", "-c", command], cwd=side.folder, env=dict(side.env))
    if code != 0:
        raise CommandError(f"--setup failed in the {side.name} tree {side.folder} (exit "
                           f"code {code}: {last_line(out)})")


def _profiled(side: Side) -> tuple[Run, dict[str, str]]:
    """One pytest process of ``side``: its profiles by node id, and the tests that
    failed there (node id -> pytest's line)."""
    child = run_pytest(["-q", "-p", "no:cacheprovider", *side.args],
                       cwd=side.folder, env={"PYTHONDONTWRITEBYTECODE": "1", **side.env},
                       records=True, python=side.python)
    code, last, at = child.code, child.last, side.name
    startup = child.startup
    if code == 4 and startup is not None:  # exit 4 is also a conftest's import error
        raise CommandError(f"pytest could not start at {at}: {startup}")
    if code == 4:
        raise UsageProblem(f"pytest refused the arguments at {at} ({last})")
    if code == 2:
        why = startup or next(iter(f"{n}: {w}" for n, w in child.failed.items()), last)
        raise CommandError(f"pytest could not collect the tests at {at} ({why}); "
                           "fix the error, or name tests that exist on both sides")
    if code == 5:
        raise UsageProblem(f"pytest collected no tests at {at}: name the tests to compare")
    if code not in (0, 1) or (child.records is None and not child.records_problem):
        raise CommandError(f"pytest failed at {at} (exit code {code}: {last})")
    if child.records is None:
        raise CommandError(child.records_problem)
    failed = dict(child.failed)
    # a profile from a call that did not pass measured a test that did not run through
    failed.update({r.nodeid: "its call failed" for r in child.records
                   if not r.passed and r.nodeid not in failed})
    return ({r.profile.nodeid: r.profile for r in child.records if r.nodeid not in failed},
            failed)
