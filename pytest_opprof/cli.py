"""The ``opprof`` command: baselines from the shell.

    opprof baseline update [--runs N] [PYTEST ARGS...]
    opprof baseline show [TEST] [--dir DIR] [--machine-key KEY]
    opprof baseline prune [--apply] [--dir DIR] [--machine-key KEY] [PYTEST ARGS...]
    opprof report RESULTS.json [-o report.html]
    opprof compare REF [--pairs N] [...] [PYTEST ARGS...]   (see pytest_opprof/compare.py)
    opprof compare BASE.json HEAD.json [...]
    opprof history [TEST] [--dir DIR] [--machine-key KEY] [--json PATH] [--html PATH]

Every command ends an error with one line that says what to do, and exits 0 when it
did what was asked, 1 on a failure, 2 on a usage error (130 on Ctrl-C). The baseline
folder, machine key and rootdir are found by pytest and the plugin's own code, from the
same arguments and ini file (``--dir`` and ``--machine-key`` override them).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from ._version import __version__
from .commands import history
from .commands.common import CommandError, UsageProblem, last_line, whole_number
from .errors import OpprofError
from .judge import agreement, changepoints, rule
from .judge.config import BLIND, GATE_SEES_QUANTILE
from .judge.gate import gate_config
from .judge.rule import GateConfig
from .model.conditions import describe as describe_conditions
from .render import display_name, duration
from .render.text import paddle_table, singa_ops, stat_table, wall_line
from .run.options import DEFAULT_BASELINE_DIR, DEFAULT_TOLERANCE, Settings
from .stats.power import blind, sees
from .store.baseline import (
    OUTLYING_OPS,
    STAGING_PREFIX,
    Baseline,
    BaselineError,
    BaselineRun,
    BaselineStore,
    obstacle,
)
from .store.files import safe_name

DEFAULT_RUNS = 5


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opprof",
        description="pytest-opprof: per-op profiling and regression gate for array code. "
                    "Profiling and gating run inside pytest (pytest --opprof-verbosity=2); "
                    "this command manages the stored baselines, compares a change with a git "
                    "ref or two results files op by op, and shows each op's history.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.set_defaults(help_parser=parser)  # what a command given without its action prints
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    baseline = commands.add_parser("baseline", help="update, show or prune stored baselines")
    baseline.set_defaults(help_parser=baseline)
    actions = baseline.add_subparsers(dest="action", metavar="ACTION")

    update = actions.add_parser(
        "update", help="run pytest N times, each in a new process, and store the profiled "
                       "tests that passed as their baselines on this machine",
        description="Runs 'pytest --opprof-update-baseline PYTEST ARGS' --runs times, each in "
                    "a new process, so that the gate learns each op's spread between "
                    "processes. A run whose ops sit far from the test's other runs (taken "
                    "while the machine was busy) is taken again, once; ops whose runs still "
                    "disagree are named. The runs go to a staging folder; only when all of "
                    "them passed are the new baselines committed to the store: the command "
                    "completes or changes nothing. Unrecognised arguments go to pytest.")
    update.add_argument("--runs", type=whole_number("--runs"), default=DEFAULT_RUNS, metavar="N",
                        help=f"separate pytest processes to take (default {DEFAULT_RUNS})")

    def where(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--dir", type=Path, default=None,
                         help="the baseline directory (default: pytest's, as the plugin "
                              f"finds it: opprof_baseline_dir, else {DEFAULT_BASELINE_DIR}/ "
                              "at the rootdir)")
        sub.add_argument("--machine-key", default=None,
                         help="only this machine's baselines (default: opprof_machine_key, "
                              "else every machine)")

    show = actions.add_parser("show", help="print stored baselines: a list, or one test's "
                                           "ops in the verbosity-2 formats")
    show.add_argument("test", nargs="?", default=None,
                      help="a node id, or part of one, to print in full")
    where(show)
    prune = actions.add_parser(
        "prune", help="remove the baselines of tests that no longer exist (dry run unless "
                      "--apply)",
        description="Collects the tests with 'pytest --collect-only PYTEST ARGS' and lists "
                    "stored baselines whose test is provably gone: its file no longer exists "
                    "under the rootdir, or its file was collected in full (not narrowed by "
                    "FILE::TEST; -k and -m do not count) without it. Unrecognised arguments "
                    "go to pytest.")
    prune.add_argument("--apply", action="store_true", help="delete them (default: only list)")
    where(prune)

    report = commands.add_parser(
        "report", help="draw a results file (pytest --opprof-json) as a self-contained HTML "
                       "report with charts (needs matplotlib: the 'report' extra)")
    report.add_argument("results", type=Path, help="the results JSON file")
    report.add_argument("-o", "--output", type=Path, default=Path("opprof-report.html"),
                        help="the HTML file to write (default opprof-report.html)")

    history_parser = commands.add_parser(
        "history", help="each op's time across the stored runs (pytest "
                        "--opprof-append-baseline), and the commits where it stepped "
                        "(needs ruptures: the 'history' extra)",
        description="Reads the runs of each stored baseline in date order (grown by "
                    "pytest --opprof-append-baseline, one run per commit; the last 20 kept), "
                    "takes each run's machine drift out, finds where each op's median "
                    "stepped (PELT from ruptures, penalised by the op's noise) and names "
                    "the commit. Steps under the noise or the tolerance are not reported.")
    history.add_arguments(history_parser)
    where(history_parser)

    from .commands import compare

    compare.add_parser(commands)
    return parser





def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    action = getattr(args, "action", None)
    if args.command == "compare":
        from .commands import compare

        return _guarded(lambda: compare.run(args, extra))
    if extra and action not in ("update", "prune"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "report":
        return _guarded(lambda: report(args.results, args.output))
    if args.command == "history":
        return _guarded(lambda: _history(args))
    if args.command is None or action is None:  # a usage error, as argparse's own
        args.help_parser.print_help(sys.stderr)
        return 2
    return _guarded(lambda: _baseline(args, extra))


def _guarded(run: Callable[[], int]) -> int:
    """Runs a command; its errors are one line on stderr: exit status 1, 2 for a usage
    error, 130 on Ctrl-C or SIGTERM (the store left as it was)."""
    with _sigterm_as_ctrl_c():
        try:
            return run()
        except UsageProblem as exc:
            print(f"opprof: {exc}", file=sys.stderr)
            return 2
        except (CommandError, OpprofError) as exc:
            print(f"opprof: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("opprof: interrupted; nothing was stored or removed", file=sys.stderr)
            return 130


class Terminated(KeyboardInterrupt):
    """SIGTERM: a cancelled CI job, a kill."""


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM is handled as Ctrl-C while a command runs: its child processes stopped,
    its temporary worktree removed, the store as it was (by default SIGTERM ends Python
    at once, cleaning nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def report(results: Path, output: Path) -> int:
    from .render.html import render_tests
    from .run.outputs import Output, problem, write
    from .store.results import load

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
        view = pytest_view([])
        return show(args.dir or view.settings.baseline_dir,
                    args.machine_key or view.settings.machine_key, args.test,
                    view.settings.tolerance)
    return prune(args.dir, args.machine_key, extra, args.apply)


def _history(args: argparse.Namespace) -> int:
    """``opprof history``: the store found as ``opprof baseline show`` finds it."""
    changepoints.require_ruptures()
    view = pytest_view([])
    root = args.dir or view.settings.baseline_dir
    stores = _stores(root, args.machine_key or view.settings.machine_key)
    return history.run(stores, root, args, args.tolerance or view.settings.tolerance)


# -- what pytest would do: the plugin's own resolution, in this process ------------------

#: The options ``opprof baseline update`` sets itself: given too, they would contradict it.
_OWN_OPTIONS = {"opprof_update_baseline": "--opprof-update-baseline",
                "opprof_append_baseline": "--opprof-append-baseline",
                "opprof_baseline_batch": "--opprof-baseline-batch",
                "opprof_no_gate": "--opprof-no-gate"}


@dataclass(frozen=True)
class PytestView:
    """The settings, rootdir and selection pytest resolves from the arguments and the
    ini file, by the plugin's own code: the CLI finds what the plugin finds."""

    settings: Settings
    rootdir: Path
    #: The ``--opprof-*`` options among the arguments (and addopts) that update sets itself.
    own_options: tuple[str, ...]
    #: Test files the arguments narrow to some of their tests (``file.py::test``).
    narrowed: frozenset[str]


class _Resolver:
    """A pytest plugin that records the configuration, and collects when asked."""

    def __init__(self, collect: bool) -> None:
        self.collect = collect
        self.view: PytestView | None = None
        self.items: set[str] = set()
        self.files: set[str] = set()
        self.errors: list[str] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_cmdline_main(self, config: pytest.Config) -> int | None:
        self.view = PytestView(
            settings=Settings.from_pytest_config(config), rootdir=config.rootpath,
            own_options=tuple(flag for dest, flag in _OWN_OPTIONS.items()
                              if config.getoption(dest, None)),
            narrowed=_narrowed(config))
        return None if self.collect else 0  # a first-result hook: 0 ends pytest here

    def pytest_itemcollected(self, item: pytest.Item) -> None:
        self.items.add(item.nodeid)  # before -k, -m and --deselect leave some out

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # its last line names the error ("E   SyntaxError: ...")
            lines = str(report.longrepr).strip().splitlines()
            self.errors.append(lines[-1].strip() if lines else report.nodeid)
        elif report.passed and "::" not in report.nodeid:
            self.files.add(report.nodeid)


def _narrowed(config: pytest.Config) -> frozenset[str]:
    """The files (as node ids) that ``file.py::test`` arguments collect only in part."""
    found = set()
    for arg in config.args:
        if "::" not in arg:
            continue
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve()
        with contextlib.suppress(ValueError):
            found.add(path.relative_to(config.rootpath.resolve()).as_posix())
    return frozenset(found)


def _in_process(args: list[str], resolver: _Resolver) -> int:
    """pytest.main with ``resolver``; its output kept; its usage errors one line."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = pytest.main(args, plugins=[resolver])
    if code == pytest.ExitCode.USAGE_ERROR or resolver.view is None:
        raise UsageProblem(f"pytest refused the arguments: {last_line(err.getvalue())}")
    return int(code)


def pytest_view(pytest_args: list[str]) -> PytestView:
    """How pytest and the plugin see ``pytest_args``; nothing is collected or run."""
    resolver = _Resolver(collect=False)
    _in_process(["-p", "no:cacheprovider", *pytest_args], resolver)
    assert resolver.view is not None
    return resolver.view





# -- update ------------------------------------------------------------------------------

def _run_pytest(args: list[str]) -> tuple[int, str]:
    """pytest in a new process, its output passed on as it comes; its exit code and
    what it said last (see :func:`_last_line`). Ctrl-C (KeyboardInterrupt) stops it
    before passing on."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen([sys.executable, "-m", "pytest", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace",
                          env=env) as proc:
        tail: collections.deque[str] = collections.deque(maxlen=20)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                tail.append(line)
        except BaseException:
            proc.kill()
            raise
    return proc.returncode, last_line("".join(tail))


def update(runs: int, pytest_args: list[str]) -> int:
    """Run pytest ``runs`` times into a staging folder, take again the runs that
    disagree with their test's others, then commit every test's new baseline at once:
    the command completes or leaves the store as it was."""
    view = pytest_view(pytest_args)
    if view.own_options:
        raise UsageProblem(f"{', '.join(view.own_options)}: opprof baseline update sets "
                           "this itself; leave it out")
    root = view.settings.baseline_dir
    batch = uuid.uuid4().hex[:12]
    staging = root / f"{STAGING_PREFIX}{batch}"
    _make_folder(staging)
    try:
        _take(staging, batch, pytest_args,
              [f"baseline run {run} of {runs}" for run in range(1, runs + 1)])
        retaken, unreliable = _retake_disagreeing(staging, batch, pytest_args, runs,
                                                  view.settings.tolerance)
        with _sigint_deferred():
            stored = _commit(staging, root, batch)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not stored:
        raise CommandError("the runs stored no baseline: no test that passed used the "
                           "gpu_profiler fixture; name the profiled tests")
    for line in unreliable:
        print(line)
    print(f"opprof: baselines of {stored} test(s) stored, from {runs} run(s)"
          + (f" ({retaken} re-taken)" if retaken else ""))
    return 0


def _take(folder: Path, batch: str, pytest_args: list[str], labels: list[str]) -> None:
    """One pytest process per label, each storing its baselines into ``folder``."""
    for label in labels:
        print(f"opprof: {label}: pytest --opprof-update-baseline " + " ".join(pytest_args),
              flush=True)
        code, last = _run_pytest(["--opprof-update-baseline", f"--opprof-baseline-batch={batch}",
                                  *pytest_args, f"--opprof-baseline-dir={folder}"])
        _check_run(code, last, label)


def _retake_disagreeing(staging: Path, batch: str, pytest_args: list[str], runs: int,
                        tolerance: float) -> tuple[int, list[str]]:
    """Runs that disagree with their test's other runs (agreement.py: taken while the
    machine was busy) are taken again, each in a new process, once: as many new runs
    as the test with the most such runs needs (fewer than ``runs``). A new run replaces a
    disagreeing one in the staged baseline; where the runs still disagree, the runs
    that sit far off name their ops in their meta (``opprof baseline show`` says so).
    Returns how many runs were re-taken, and one line per test still disagreeing."""
    staged = [(store, baseline) for store in BaselineStore.every_machine(staging)
              for _, baseline in store.entries() if isinstance(baseline, Baseline)]
    found = [(store, baseline, agreement.check([r.samples() for r in baseline.runs],
                                               _config(baseline, tolerance)))
             for store, baseline in staged]
    disagreeing = [(store, baseline, agreed) for store, baseline, agreed in found
                   if not agreed.agrees]
    retake = max((len(agreed.outliers) for *_, agreed in disagreeing), default=0)
    if not retake:
        return 0, []
    far = sorted({j + 1 for *_, agreed in disagreeing for j in agreed.outliers})
    print(f"opprof: run(s) {', '.join(map(str, far))} of {len(disagreeing)} test(s) sit far "
          f"from their other runs (a busy machine?); taking {retake} run(s) again", flush=True)
    again = staging / ".again"  # a dot folder: not a machine folder, never committed
    _take(again, batch, pytest_args, [f"extra baseline run {k} of {retake}"
                                      for k in range(1, retake + 1)])
    unreliable = []
    for store, baseline, agreed in disagreeing:
        for j, run in zip(agreed.outliers, _runs_taken_again(again, store, baseline.nodeid),
                          strict=False):
            baseline.runs[j] = run
        agreed = agreement.check([r.samples() for r in baseline.runs],
                                 _config(baseline, tolerance))
        for j, keys in agreed.outliers.items():
            baseline.runs[j].meta[OUTLYING_OPS] = sorted({name for name, _ in keys})
        store.save(baseline)
        if not agreed.agrees:
            unreliable.append(_unreliable_line(baseline.nodeid, agreed, runs, pytest_args))
    return retake, unreliable


def _runs_taken_again(folder: Path, store: BaselineStore, nodeid: str) -> list[BaselineRun]:
    """The runs of ``nodeid`` that the extra runs into ``folder`` stored for ``store``'s
    machine (none when it did not run again: skipped, or deselected by chance)."""
    again = BaselineStore(folder, store.machine, folder=folder / store.folder.name)
    try:
        found = again.load(nodeid)
    except BaselineError:
        return []
    return found.runs if found is not None else []


def _config(baseline: Baseline, tolerance: float) -> GateConfig:
    """The rule's settings for the backend and measure the baseline was taken with."""
    measure = (baseline.conditions() or {}).get("measure")
    return gate_config(str(baseline.runs[-1].meta.get("backend", "cpu")), tolerance, {},
                       measure if isinstance(measure, str) else None)


def _unreliable_line(nodeid: str, agreed: agreement.Agreement, runs: int,
                     pytest_args: list[str]) -> str:
    """What to tell of a test whose runs still disagree after they were taken again."""
    names = sorted({display_name(name) for name, _ in agreed.ops()})
    which = (f"op {names[0]} of {display_name(nodeid)} disagrees" if len(names) == 1 else
             f"ops {', '.join(names)} of {display_name(nodeid)} disagree")
    command = shlex.join(["opprof", "baseline", "update", "--runs", str(max(runs, DEFAULT_RUNS)),
                          *pytest_args])
    return (f"opprof: {which} between runs (spread {max(agreed.spread.values()):.0%}): the "
            f"machine was busy? the gate is blind to slowdowns within that spread; re-run "
            f"`{command}` on a quiet machine")


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True)
    except OSError as exc:
        raise CommandError(obstacle(folder) or f"{folder}: cannot create ({exc}); make its "
                           "folder writable or choose another with --opprof-baseline-dir") \
            from None


def _check_run(code: int, last: str, label: str) -> None:
    if code == pytest.ExitCode.USAGE_ERROR:
        raise UsageProblem(f"pytest refused the arguments ({last}); nothing was stored")
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        raise UsageProblem("pytest collected no tests: name the tests to take baselines "
                           "of; nothing was stored")
    if code != 0:
        raise CommandError(f"{label} failed (pytest exit code {code}: "
                           f"{last}); nothing was stored: fix the failures and rerun")


def _commit(staging: Path, root: Path, batch: str) -> int:
    """Every staged machine folder copied into the store; the number of tests whose
    stored baseline now holds this batch (read back, not assumed)."""
    stored = 0
    for staged in BaselineStore.every_machine(staging):
        store = BaselineStore(root, staged.machine, folder=root / staged.folder.name)
        for baseline in store.commit(staged):
            with contextlib.suppress(BaselineError):
                kept = store.load(baseline.nodeid)
                stored += kept is not None and kept.batch == batch
    return stored


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM are ignored while the store is written: a commit is not left
    half done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = [(sig, signal.signal(sig, signal.SIG_IGN))
                for sig in (signal.SIGINT, signal.SIGTERM)]
    try:
        yield
    finally:
        for sig, handler in previous:
            signal.signal(sig, handler)


# -- show and prune ------------------------------------------------------------------------

def _stores(root: Path, machine_key: str | None) -> list[BaselineStore]:
    if not root.exists():
        raise CommandError(f"{root}: no baseline directory here (use --dir, or create "
                           "baselines with opprof baseline update)")
    if not root.is_dir():
        raise CommandError(f"{root}: is a file, not a baseline directory (use --dir)")
    if machine_key is not None:
        store = BaselineStore(root, machine_key)
        if store.folder.exists() and not store.folder.is_dir():
            raise CommandError(f"{store.folder}: is a file where the baselines of machine "
                               f"{machine_key!r} should be; move it away")
        if not store.folder.is_dir():
            raise CommandError(f"{root}: no baselines for machine {machine_key!r} "
                               f"(folder {safe_name(machine_key)})")
        return [store]
    return BaselineStore.every_machine(root)


def show(root: Path, machine_key: str | None, test: str | None,
         tolerance: float = DEFAULT_TOLERANCE) -> int:
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
            print(_describe(entry, tolerance) if test is not None else _list_line(entry, path))
    if test is not None and not matched:
        raise CommandError(f"no stored baseline matches {test!r} under {root}")
    return 1 if broken else 0


def _list_line(b: Baseline, path: Path) -> str:
    last = b.runs[-1]
    outlying = _outlying(b)
    return (f"{b.machine}  {b.nodeid}  {len(b.runs)} run(s), {last.n_ops} ops, "
            f"{last.meta.get('date', '?')}  [{path.name}]"
            + (f"  runs disagree on {len(outlying)} op(s)" if outlying else ""))


def _outlying(b: Baseline) -> list[str]:
    """The ops on which some run sat far from the others, as the update recorded."""
    return sorted({name for run in b.runs for name in run.meta.get(OUTLYING_OPS, [])})


def _describe(b: Baseline, tolerance: float) -> str:
    lines = [f"{b.nodeid} on machine {b.machine!r}: {len(b.runs)} run(s)"]
    for i, run in enumerate(b.runs, 1):
        commit = run.meta.get("commit") or {}
        commit_id = commit.get("id", "?") if isinstance(commit, dict) else "?"
        probe = run.meta.get("probe_ns")
        outlying = run.meta.get(OUTLYING_OPS)
        lines.append(
            f"  run {i}: {run.meta.get('date', '?')}, commit {str(commit_id)[:12]}, "
            f"{run.meta.get('counted', '?')} counted iterations (skip {run.meta.get('skip', '?')})"
            + (f", probe {duration(probe)}" if isinstance(probe, (int, float)) else "")
            + (f"; far from the other runs on {', '.join(map(display_name, outlying))}"
               if outlying else ""))
        conditions = run.meta.get("conditions")
        lines.append("    conditions: " + (describe_conditions(conditions) if conditions
                                             else "not recorded (judged under any)"))
    profile = b.to_profile()
    lines += ["", *_noise_lines(b, tolerance), "",
              "Latest run:", singa_ops(profile), "", paddle_table(profile), "",
              wall_line(profile), ""]
    return "\n".join(lines)


def _slowdown(effect: float) -> str:
    """+26%; beyond ten times slower only a bound: an op whose runs disagree by several
    times gets margins of thousands of percent, where the figure no longer tells more."""
    return f"+{effect:.0%}" if effect <= 10 else ">+1000%"


def _noise_lines(b: Baseline, tolerance: float) -> list[str]:
    """Per op, what the gate sees in these runs: the median, the spread of the op's
    median between runs and the smallest slowdown it would catch (rule.noise); and a
    line saying what would help when the typical op's is beyond the gate's blindness limit
    (``judge.config.BLIND``)."""
    samples = b.samples()
    noise = rule.noise(samples, _config(b, tolerance))
    if not noise:
        return ["What the gate sees: no op has samples enough to judge"]
    ids = b.op_ids()
    rows = [[f"OP_ID{ids[key]}. {display_name(key[0])}",
             f"median={duration(float(np.median([np.median(r) for r in samples[key]])))}",
             f"spread={op.spread:.1%}", f"detectable={_slowdown(op.detectable)}",
             f"runs={op.runs}"]
            for key, op in sorted(noise.items(), key=lambda item: ids[item[0]])]
    lines = ["What the gate sees (spread: of the op's median between processes; detectable: "
             "the smallest slowdown it catches):", stat_table(rows)]
    typical = sees([op.detectable for op in noise.values()], GATE_SEES_QUANTILE)
    if blind(typical, BLIND):
        runs = max(DEFAULT_RUNS, 2 * len(b.runs))
        lines.append(
            f"opprof: the gate catches only slowdowns of +{typical:.0%} or more in this test's "
            f"typical op; more baseline runs (opprof baseline update --runs {runs}), more "
            "iterations (gpu_profiler.iterations(n)) or pinned BLAS threads (OMP_NUM_THREADS=1) "
            "would help")
    return lines


def prune(root: Path | None, machine_key: str | None, pytest_args: list[str],
          apply: bool) -> int:
    """Remove the baselines whose test is provably gone (see :func:`_gone`), listing
    them first; a dry run unless ``apply``."""
    resolver = _Resolver(collect=True)
    code = _in_process(["--collect-only", "-q", "-p", "no:cacheprovider", *pytest_args],
                       resolver)
    if resolver.errors or code not in (0, 5):
        why = resolver.errors[0] if resolver.errors else f"exit code {code}"
        raise CommandError(f"pytest could not collect the tests ({why}); nothing was pruned")
    assert resolver.view is not None
    view = resolver.view
    root = root or view.settings.baseline_dir
    stores = _stores(root, machine_key or view.settings.machine_key)
    stale = [(path, entry.nodeid) for store in stores for path, entry in store.entries()
             if isinstance(entry, Baseline) and _gone(entry.nodeid, view, resolver)]
    stale += [(path, "temporary file of an interrupted write")
              for store in stores for path in store.stale_temporary_files()]
    stale += [(path, "staging folder of an interrupted update")
              for path in BaselineStore.stale_staging_folders(root)]
    for path, nodeid in stale:
        print(f"{'remove' if apply else 'would remove'}: {nodeid}  [{path}]")
    if not stale:
        print("opprof: no stale baselines")
    elif not apply:
        print(f"opprof: {len(stale)} stale baseline(s); rerun with --apply to remove them")
    else:
        with _sigint_deferred():
            _remove([path for path, _ in stale])
        print(f"opprof: removed {len(stale)} stale baseline(s)")
    return 0


def _gone(nodeid: str, view: PytestView, resolver: _Resolver) -> bool:
    """Provably gone: its file no longer exists under the rootdir, or its file was
    collected in full (not narrowed by ``file.py::test``) without it. A test merely
    deselected (-k, -m) or outside the paths given is kept."""
    if nodeid in resolver.items:
        return False
    module = nodeid.split("::", 1)[0]
    if not (view.rootdir / module).exists():
        return True
    return module in resolver.files and module not in view.narrowed


def _remove(paths: list[Path]) -> None:
    for path in paths:
        try:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue  # removed meanwhile: what was asked holds
        except OSError as exc:
            raise CommandError(f"{path}: cannot remove ({exc}); the baselines listed "
                               "before it were removed") from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
