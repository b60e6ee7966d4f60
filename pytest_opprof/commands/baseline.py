"""``opprof baseline update | show | prune``: the stored baselines from the shell.

``update`` runs pytest in new processes into a staging folder and commits it; which run
replaces which and what is committed or pruned is the store's policy
(:mod:`pytest_opprof.store.policy`).
"""

from __future__ import annotations

import argparse
import shlex
import uuid
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pytest

from ..judge import agreement, rule
from ..judge.config import BASELINE_RUNS, BLIND, GATE_SEES_QUANTILE
from ..judge.gate import gate_config
from ..judge.rule import GateConfig
from ..measure import measures
from ..model.conditions import describe as describe_conditions
from ..model.conditions import remedies
from ..render import display_name, duration
from ..render.text import paddle_table, singa_ops, stat_table, wall_line
from ..render.verdicts import more_data, spread
from ..run.launcher import run_pytest
from ..run.options import BATCH_VARIABLE
from ..signals import held
from ..stats.power import blind, sees
from ..store import policy
from ..store.baseline import MAX_RUNS, OUTLYING_OPS, Baseline, BaselineError, BaselineStore
from .common import (
    CommandError,
    Resolver,
    UsageProblem,
    add_store_arguments,
    in_process,
    pytest_view,
    stores,
    whole_number,
)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    baseline = commands.add_parser(
        "baseline", help="update, show or prune stored baselines",
        usage="opprof baseline {update,show,prune} ...",
        description="The stored per-op baselines of this machine: update takes new ones in "
                    "new pytest processes, show prints them, prune removes those of tests "
                    "that are gone. opprof baseline ACTION --help says more.")
    baseline.set_defaults(help_parser=baseline, run=run, takes_pytest_args=False)
    actions = baseline.add_subparsers(dest="action", metavar="ACTION")

    update_parser = actions.add_parser(
        "update", help="run pytest N times, each in a new process, and store the profiled "
                       "tests that passed as their baselines on this machine",
        usage="opprof baseline update [--runs N] [PYTEST ARGS...]",
        description="Runs 'pytest --opprof-update-baseline=replace PYTEST ARGS' --runs times, "
                    "each in a new process, so that the gate learns each op's spread between "
                    "processes. A run whose ops sit far from the test's other runs (taken "
                    "while the machine was busy) is taken again, once; ops whose runs still "
                    "disagree are named. The runs go to a staging folder; only when all of "
                    "them passed are the new baselines committed to the store: the command "
                    "completes or changes nothing. Unrecognised arguments go to pytest.")
    runs = whole_number("--runs", 1, MAX_RUNS, f" (a baseline keeps the last {MAX_RUNS} runs)")
    update_parser.add_argument("--runs", default=None, metavar="N", type=runs,
                               help=f"separate pytest processes to take (default {BASELINE_RUNS}"
                                    f"{_other_runs()})")
    update_parser.set_defaults(takes_pytest_args=True)

    show_parser = actions.add_parser(
        "show", help="print stored baselines: a list, or one test's ops in the verbosity-2 "
                     "formats",
        usage="opprof baseline show [TEST] [--dir DIR] [--machine-key KEY]",
        description="Without TEST, lists the stored baselines of every machine (or KEY's). "
                    "With TEST (a node id, or part of one), prints that test's runs (date, "
                    "commit, run conditions) and per op its median, spread between runs and "
                    "detectable effect, then the verbosity-2 formats.")
    show_parser.add_argument("test", nargs="?", default=None, metavar="TEST",
                             help="a node id, or part of one, to print in full")
    add_store_arguments(show_parser)
    prune_parser = actions.add_parser(
        "prune", help="remove the baselines of tests that no longer exist (dry run unless "
                      "--apply)",
        usage="opprof baseline prune [--apply] [--dir DIR] [--machine-key KEY] "
              "[PYTEST ARGS...]",
        description="Collects the tests with 'pytest --collect-only PYTEST ARGS' and lists "
                    "this machine's stored baselines whose test is provably gone: its file "
                    "no longer exists under the rootdir, or its file was collected in full "
                    "(not narrowed by FILE::TEST; -k and -m do not count) without any test "
                    "of its function (a parameter this machine cannot see, such as "
                    "test_step[cuda] on a machine without CUDA, is kept; a pytest-repeat "
                    "repetition is its test). Other machines' folders are left alone "
                    "unless --all-machines. Unrecognised arguments go to pytest.")
    prune_parser.add_argument("--apply", action="store_true",
                              help="delete them (default: only list)")
    prune_parser.add_argument("--all-machines", action="store_true",
                              help="judge every machine's folder against this machine's "
                                   "collection (default: only this machine's, "
                                   "--machine-key or opprof_machine_key, else the key the "
                                   "plugin gives this machine)")
    add_store_arguments(prune_parser)
    prune_parser.set_defaults(takes_pytest_args=True)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    if args.action == "update":
        return update(args.runs, extra)
    if args.action == "show":
        view = pytest_view([])
        return show(args.dir or view.settings.baseline_dir,
                    args.machine_key or view.settings.machine_key, args.test,
                    view.settings.given_tolerance)
    return prune(args.dir, args.machine_key, extra, args.apply, args.all_machines)


# -- update ------------------------------------------------------------------------------

def update(runs: int | None, pytest_args: list[str]) -> int:
    """Run pytest ``runs`` times into a staging folder, take again the runs that
    disagree with their test's others, then commit every new baseline at once."""
    view = pytest_view(pytest_args)
    if runs is None:
        runs = measures.defaults_of(view.settings.measure).baseline_runs
    if view.own_options:
        raise UsageProblem(f"{', '.join(view.own_options)}: opprof baseline update sets "
                           "this itself; leave it out")
    root = view.settings.baseline_dir
    batch = uuid.uuid4().hex[:12]
    staging = policy.open_staging(root, batch)
    try:
        _take(staging, batch, pytest_args,
              [f"baseline run {run} of {runs}" for run in range(1, runs + 1)])
        retaken, unreliable = _retake_disagreeing(staging, batch, pytest_args, runs,
                                                  view.settings.tolerance)
        with held():
            stored = policy.commit(staging, root, batch)
    finally:
        with held():  # a second Ctrl-C does not leave half a staging folder
            policy.discard(staging)
    if not stored:
        raise CommandError("the runs stored no baseline: no test that passed used the "
                           "gpu_profiler fixture; name the profiled tests")
    for line in unreliable:
        print(line)
    kept = (f"; a baseline keeps its latest {MAX_RUNS}, so {MAX_RUNS} of them are kept"
            if runs > MAX_RUNS else "")
    print(f"opprof: baselines of {stored} test(s) stored, from {runs} run(s)"
          + (f" ({retaken} re-taken)" if retaken else "") + kept)
    return 0


def _take(folder: Path, batch: str, pytest_args: list[str], labels: list[str]) -> None:
    """One pytest process per label, each storing its baselines into ``folder``."""
    for label in labels:
        print(f"opprof: {label}: pytest --opprof-update-baseline=replace "
              + " ".join(pytest_args), flush=True)
        child = run_pytest(["--opprof-update-baseline=replace", *pytest_args,
                            f"--opprof-baseline-dir={folder}"], env={BATCH_VARIABLE: batch},
                           echo=True)
        _check_run(child.code, child.last, label, child.startup)


def _retake_disagreeing(staging: Path, batch: str, pytest_args: list[str], runs: int,
                        tolerance: float) -> tuple[int, list[str]]:
    """Runs that disagree with their test's others (taken while the machine was busy)
    are taken again, once: as many new runs as the test with the most such runs needs,
    shared by every test. Where the runs still disagree, the runs far off name their ops
    in their meta (``opprof baseline show`` says so). Returns how many runs were re-taken,
    and one line per test still disagreeing."""
    found = [(store, baseline, agreement.check([r.samples() for r in baseline.runs],
                                               _config(baseline, tolerance)))
             for store, baseline in policy.staged(staging)]
    disagreeing = [(store, baseline, agreed) for store, baseline, agreed in found
                   if not agreed.agrees]
    retake = max((len(agreed.outliers) for *_, agreed in disagreeing), default=0)
    if not retake:
        return 0, []
    print(_far_line([(baseline.nodeid, agreed.outliers) for _, baseline, agreed in disagreeing],
                    retake), flush=True)
    again = policy.again_folder(staging)
    _take(again, batch, pytest_args, [f"extra baseline run {k} of {retake}"
                                      for k in range(1, retake + 1)])
    unreliable = []
    for store, baseline, agreed in disagreeing:
        policy.replace_runs(baseline, list(agreed.outliers),
                            policy.runs_taken_again(again, store, baseline.nodeid))
        agreed = agreement.check([r.samples() for r in baseline.runs],
                                 _config(baseline, tolerance))
        policy.mark_outlying(baseline, agreed.outliers)
        store.save(baseline)
        if not agreed.agrees:
            unreliable.append(_unreliable_line(baseline.nodeid, agreed, runs, pytest_args))
    return retake, unreliable


#: The tests a line names by their runs far off; the others are counted.
FAR_TESTS_SHOWN = 3


def _far_line(far: list[tuple[str, Collection[int]]], retake: int) -> str:
    """``opprof: run 2 of t.py::a and runs 1, 3 of t.py::b sit far from their test's other
    runs (a busy machine?); taking 2 more runs: ...`` (``far``: 0-based run indices)."""
    def runs_of(nodeid: str, indices: Collection[int]) -> str:
        numbers = ", ".join(str(j + 1) for j in sorted(indices))
        return f"{'run' if len(indices) == 1 else 'runs'} {numbers} of {display_name(nodeid)}"

    named = [runs_of(nodeid, indices) for nodeid, indices in far[:FAR_TESTS_SHOWN]]
    if len(far) > FAR_TESTS_SHOWN:
        rest = far[FAR_TESTS_SHOWN:]
        named.append(f"{sum(len(i) for _, i in rest)} run(s) of {len(rest)} other test(s)")
    which = ", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else named[0]
    new = "1 more run" if retake == 1 else f"{retake} more runs"
    if len(far) == 1:
        one = len(far[0][1]) == 1
        return (f"opprof: {which} {'sits' if one else 'sit'} far from the test's other runs "
                f"(a busy machine?); taking {new} to replace {'it' if one else 'them'}")
    replaced = ("it replaces each test's far run" if retake == 1 else
                "each test's far runs are replaced by as many of them")
    return (f"opprof: {which} sit far from their test's other runs (a busy machine?); "
            f"taking {new}: {replaced}")


def _unreliable_line(nodeid: str, agreed: agreement.Agreement, runs: int,
                     pytest_args: list[str]) -> str:
    names = sorted({display_name(name) for name, _ in agreed.ops()})
    which = (f"op {names[0]} of {display_name(nodeid)} disagrees" if len(names) == 1 else
             f"ops {', '.join(names)} of {display_name(nodeid)} disagree")
    command = shlex.join(["opprof", "baseline", "update", "--runs", str(max(runs, BASELINE_RUNS)),
                          *pytest_args])
    return (f"opprof: {which} between runs (spread {max(agreed.spread.values()):.0%}): the "
            f"machine was busy? the gate is blind to slowdowns within that spread; re-run "
            f"`{command}` on a quiet machine")


def _check_run(code: int, last: str, label: str, startup: str | None = None) -> None:
    if code in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERRUPTED) and startup:
        # a conftest that cannot be imported (exit 4, as a usage error), a collection error
        raise CommandError(f"{label}: pytest ran no test ({startup}); nothing was stored: "
                           "fix the error and rerun")
    if code == pytest.ExitCode.USAGE_ERROR:
        raise UsageProblem(f"pytest refused the arguments ({last}); nothing was stored")
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        raise UsageProblem("pytest collected no tests: name the tests to take baselines "
                           "of; nothing was stored")
    if code != 0:
        raise CommandError(f"{label} failed (pytest exit code {code}: "
                           f"{last}); nothing was stored: fix the failures and rerun")


# -- show ---------------------------------------------------------------------------------

def show(root: Path, machine_key: str | None, test: str | None,
         tolerance: float | None = None) -> int:
    """Every stored baseline (a line each), or those matching ``test`` described;
    ``tolerance`` None: each baseline's measure's default."""
    broken = matched = 0
    for store in stores(root, machine_key):
        for path, entry in store.entries():
            if isinstance(entry, BaselineError):
                broken += 1
                print(f"unreadable: {display_name(str(entry))}")
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
    outlying = {name for run in b.runs for name in run.meta.get(OUTLYING_OPS, [])}
    return (f"{display_name(b.machine)}  {display_name(b.nodeid)}  {len(b.runs)} run(s), "
            f"{last.n_ops} ops, {_field(last.meta.get('date'))}  [{display_name(path.name)}]"
            + (f"  runs disagree on {len(outlying)} op(s)" if outlying else ""))


def _field(value: object) -> str:
    """A stored field escaped: a forged ``\\n`` or ESC in a date prints as its escape."""
    return "?" if value is None else display_name(str(value))


def _describe(b: Baseline, given: float | None) -> str:
    tolerance = _measure(b).gate.tolerance if given is None else given
    lines = [f"{display_name(b.nodeid)} on machine '{display_name(b.machine)}': "
             f"{len(b.runs)} run(s)"]
    reference = b.reference()
    for i, run in enumerate(b.runs, 1):
        commit = run.meta.get("commit") or {}
        commit_id = commit.get("id", "?") if isinstance(commit, dict) else "?"
        probe = run.meta.get("probe_ns")
        outlying = run.meta.get(OUTLYING_OPS)
        lines.append(
            f"  run {i}: {_field(run.meta.get('date'))}, commit {_field(commit_id)[:12]}, "
            f"{run.meta.get('counted', '?')} counted iterations (skip {run.meta.get('skip', '?')})"
            + (f", probe {duration(probe)}" if isinstance(probe, (int, float)) else "")
            + (f"; far from the other runs on {', '.join(map(display_name, outlying))}"
               if outlying else "")
            + ("" if any(run is kept for kept in reference.runs) else
               "; appended at another commit: history, not the gate's reference"))
        conditions = run.meta.get("conditions")
        lines.append("    conditions: " + (describe_conditions(conditions) if conditions
                                             else "not recorded (judged under any)"))
    profile = b.to_profile()
    lines += ["", *_noise_lines(reference, tolerance), "",
              "Latest run:", singa_ops(profile), "", paddle_table(profile), "",
              wall_line(profile), ""]
    return "\n".join(lines)


def _other_runs() -> str:
    """``; 2 under --opprof-measure=instructions``: the measures whose default differs."""
    other = [f"{m.baseline_runs} under --opprof-measure={m.name}" for m in measures.listed()
             if m.baseline_runs != BASELINE_RUNS]
    return f"; {', '.join(other)}" if other else ""


def _config(baseline: Baseline, tolerance: float) -> GateConfig:
    return gate_config(_measure(baseline).gate, tolerance)


def _measure(b: Baseline) -> type[measures.Measure]:
    """The measure the baseline's latest run was taken with."""
    return measures.of(b.measure(), b.unit())


def _slowdown(effect: float) -> str:
    """+26%; beyond ten times slower only a bound: an op whose runs disagree by several
    times gets margins of thousands of percent, where the figure no longer tells more."""
    return f"+{effect:.0%}" if effect <= 10 else ">+1000%"


def _noise_lines(b: Baseline, tolerance: float) -> list[str]:
    """Per op, what the gate sees in these runs (rule.noise), and what would help when
    the typical op's detectable slowdown is beyond ``BLIND``."""
    samples = b.samples()
    measure = _measure(b)
    noise = rule.noise(samples, _config(b, tolerance))
    if not noise:
        return ["What the gate sees: no op has samples enough to judge"]
    ids = b.op_ids()
    rows = [[f"OP_ID{ids[key]}. {display_name(key[0])}",
             f"median={measure.amount(float(np.median([np.median(r) for r in samples[key]])))}",
             f"spread={spread(op.spread)}", f"detectable={_slowdown(op.detectable)}",
             f"runs={op.runs}"]
            for key, op in sorted(noise.items(), key=lambda item: ids[item[0]])]
    lines = ["What the gate sees (spread: of the op's median between processes; detectable: "
             "the smallest slowdown it catches):", stat_table(rows)]
    typical = sees([op.detectable for op in noise.values()], GATE_SEES_QUANTILE)
    if blind(typical, BLIND):
        # what the runs were taken under: no advice to pin what was pinned
        helps = more_data(len(b.runs)) + remedies(b.conditions())
        lines.append(
            f"opprof: the gate catches only slowdowns of +{typical:.0%} or more in this test's "
            f"typical op; {', '.join(helps[:-1])} or {helps[-1]} would help")
    return lines


# -- prune --------------------------------------------------------------------------------

def _machine_store(root: Path, machine: str | None) -> list[BaselineStore]:
    if machine is None:
        return []
    try:
        return stores(root, machine)
    except CommandError:
        if not root.is_dir():
            raise
        return []  # no baselines of this machine: nothing of it is stale


def prune(root: Path | None, machine_key: str | None, pytest_args: list[str],
          apply: bool, all_machines: bool = False) -> int:
    """Remove the baselines whose test is provably gone (:func:`policy.gone`), listing
    them first; a dry run unless ``apply``. Only this machine's folder (``machine_key``,
    else ``opprof_machine_key``, else the key the plugin gives this machine) unless
    ``all_machines``: another machine's collection may hold tests this one cannot see."""
    if all_machines and machine_key is not None:
        raise UsageProblem("--all-machines and --machine-key choose the folders to prune: "
                           "give one or the other")
    resolver = Resolver(collect=True, machine=not (all_machines or machine_key))
    code = in_process(["--collect-only", "-q", "-p", "no:cacheprovider", *pytest_args],
                      resolver)
    if resolver.errors or code not in (0, 5):
        why = resolver.errors[0] if resolver.errors else f"exit code {code}"
        raise CommandError(f"pytest could not collect the tests ({why}); nothing was pruned")
    assert resolver.view is not None
    view = resolver.view
    root = root or view.settings.baseline_dir
    machine = machine_key or view.settings.machine_key or resolver.machine
    if machine is None and not all_machines:
        raise CommandError(f"cannot tell this machine's key ({resolver.machine_problem}); "
                           "name the folder to prune with --machine-key KEY, or "
                           "--all-machines; nothing was pruned")
    found = stores(root, None) if all_machines else _machine_store(root, machine)
    functions = {policy.function_of(nodeid) for nodeid in resolver.items}
    stale = policy.stale(found, root, lambda nodeid: policy.gone(
        nodeid, view.rootdir, resolver.items, resolver.files, view.narrowed, functions))
    if not all_machines:
        others = [s for s in stores(root, None) if all(s.folder != f.folder for f in found)]
        print(f"opprof: pruning the baselines of machine {display_name(str(machine))!r}"
              + (f"; {len(others)} other machine folder(s) left alone (--all-machines "
                 "judges them too, against this machine's collection)" if others else ""))
    for path, nodeid in stale:
        print(f"{'remove' if apply else 'would remove'}: {nodeid}  [{path}]")
    if not stale:
        print("opprof: no stale baselines")
    elif not apply:
        print(f"opprof: {len(stale)} stale baseline(s); rerun with --apply to remove them")
    else:
        with held():
            policy.remove([path for path, _ in stale], root)
        print(f"opprof: removed {len(stale)} stale baseline(s)")
    return 0
