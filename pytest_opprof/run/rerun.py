"""The confirmation re-run: one test profiled again in a new pytest process.

The new process must measure the same workload as the first, so it gets the user's
own arguments (a conftest option that sizes the workload, ``-p``, ``-o``, ``--count``)
from ``config.invocation_params.args``, less what would change what runs or write the
user's files: the positional test selection (the node id replaces it), the output and
cache flags, xdist's worker flags and every ``--opprof-*`` flag (the re-run only
profiles, and says so with its own flags).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..model.profile import Profile
from .launcher import run_pytest

if TYPE_CHECKING:
    from ..model.verdict import OpVerdict

#: Flags left out of the re-run: they write (or empty) the user's files, change which
#: tests run or how, or stop for a person. A flag is dropped with its value.
DROPPED = frozenset({
    "--junitxml", "--junit-xml", "--junit-prefix", "--html", "--self-contained-html",
    "--result-log", "--resultlog", "--report-log", "--json-report-file",
    "--benchmark-json", "--benchmark-save", "--benchmark-autosave", "--benchmark-histogram",
    "--benchmark-cprofile-dump", "--benchmark-compare", "--benchmark-compare-fail",
    "-n", "--numprocesses", "--dist", "--maxprocesses", "--tx", "-d", "--looponfail", "-f",
    "--lf", "--last-failed", "--ff", "--failed-first", "--nf", "--new-first", "--sw",
    "--stepwise", "--sw-skip", "--stepwise-skip", "--cache-clear", "--lfnf",
    "--last-failed-no-failures", "--pdb", "--pdbcls", "--trace",
    "--basetemp",  # pytest empties it at start: the re-run would delete the run's tmp_path
    "--cov", "--cov-report", "--cov-append", "--cov-fail-under", "--cov-config",
    "--cov-branch", "--cov-context",
})
#: Dropped as a family: any flag starting with one of these.
DROPPED_PREFIXES = ("--opprof-",)
#: The ``--opprof-*`` flags dropped from addopts and PYTEST_ADDOPTS (which the re-run
#: reads again, as it reads the ini file): those that write the user's files or the
#: store. The others (the iterations, the measure) keep measuring as the first run did.
DROPPED_FROM_ADDOPTS = frozenset({
    "--opprof-json", "--opprof-markdown", "--opprof-trace", "--opprof-html",
    "--opprof-update-baseline", "--opprof-append-baseline", "--opprof-baseline-batch",
    "--opprof-profile-out"})


def _takes_value(config: pytest.Config, flag: str) -> bool:
    """Whether ``flag``, written without ``=``, takes the next argument as its value
    (pytest's own argument parser knows; an unknown flag is taken to have none)."""
    parser = getattr(getattr(config, "_parser", None), "optparser", None)
    actions = getattr(parser, "_option_string_actions", {})
    action = actions.get(flag)
    return action is not None and action.nargs != 0


def _dropped(flag: str) -> bool:
    name = flag.split("=", 1)[0]
    return name in DROPPED or name.startswith(DROPPED_PREFIXES)


def _dropped_from_addopts(flag: str) -> bool:
    name = flag.split("=", 1)[0]
    return name in DROPPED or name in DROPPED_FROM_ADDOPTS


def user_args(config: pytest.Config) -> list[str]:
    """The command line the user gave (``@FILE`` arguments read), less the positional
    test selection and the flags in :data:`DROPPED` (each with its value)."""
    args = _expanded([str(a) for a in config.invocation_params.args],
                     Path(config.invocation_params.dir))
    return _kept(config, args, _dropped)


def _kept(config: pytest.Config, args: Sequence[str],
          dropped: Callable[[str], bool]) -> list[str]:
    """``args`` less the test paths pytest took from them and the flags ``dropped``
    names (each with its value)."""
    positional = {str(p) for p in config.option.file_or_dir or ()}
    kept: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        takes = arg.startswith("-") and "=" not in arg and _takes_value(config, arg)
        chunk = list(args[i:i + 2]) if takes else [arg]
        i += len(chunk)
        if arg == "--":  # the rest are positionals
            break
        if (arg.startswith("-") and dropped(arg)) or (arg in positional
                                                      and not arg.startswith("-")):
            continue
        kept += chunk
    return kept


def _expanded(args: list[str], folder: Path, depth: int = 0) -> list[str]:
    """``@FILE`` arguments replaced by the file's lines (pytest's own reading: one
    argument a line), so that the test paths they give are seen and left out."""
    out: list[str] = []
    for arg in args:
        if arg.startswith("@") and len(arg) > 1 and depth < 10:
            try:
                lines = (folder / arg[1:]).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                out.append(arg)  # pytest said what was wrong with it in the first run
                continue
            out += _expanded(lines, folder, depth + 1)
        else:
            out.append(arg)
    return out


def selection_free(config: pytest.Config) -> tuple[list[str], dict[str, str]]:
    """What keeps the child's selection to the node ids it is given: ``-o addopts=``
    and ``PYTEST_ADDOPTS`` without the test paths (and the flags that write the user's
    files) that the ini file's addopts and the environment would add again; nothing
    where they add none."""
    args: list[str] = []
    env: dict[str, str] = {}
    addopts = [str(a) for a in config.getini("addopts") or ()]
    kept = _kept(config, addopts, _dropped_from_addopts)
    if kept != addopts:
        args = ["-o", f"addopts={shlex.join(kept)}"]
    environment = os.environ.get("PYTEST_ADDOPTS", "")
    if environment.strip():
        words = shlex.split(environment)
        kept = _kept(config, words, _dropped_from_addopts)
        if kept != words:
            env["PYTEST_ADDOPTS"] = shlex.join(kept)
    return args, env


def node_arg(config: pytest.Config, nodeid: str) -> str:
    """The node id as a command-line argument from the invocation folder (node ids
    are relative to the rootdir; the re-run starts where the user started)."""
    path, sep, rest = nodeid.partition("::")
    return f"{Path(config.rootpath, path)}{sep}{rest}"


def command(config: pytest.Config, nodeid: str, *, measure: str, skip: int,
            profile_out: Path | None = None) -> list[str]:
    """The re-run's pytest arguments: the user's, then the node id and the flags that
    make it profile the one test (and write its records to ``profile_out``; the
    launcher names that file itself)."""
    return profiling(config, [nodeid], measure=measure, skip=skip, profile_out=profile_out)


def profiling(config: pytest.Config, nodeids: Sequence[str], *, measure: str, skip: int,
              profile_out: Path | None = None) -> list[str]:
    """The arguments of a child that only profiles ``nodeids`` as this run would (the
    re-run, the child of a measure taken in one): the user's, the node ids, and the flags
    that make it profile with ``measure`` (the first run's, not auto's choice of the
    moment), serially, without gating or writing the user's files."""
    args = [*user_args(config), *(node_arg(config, n) for n in nodeids),
            "-q", "-p", "no:cacheprovider", f"--rootdir={config.rootpath}",
            f"--opprof-measure={measure}", f"--opprof-skip={skip}", "--opprof-verbosity=0",
            "--opprof-no-gate"]
    if profile_out is not None:
        args.append(f"--opprof-profile-out={profile_out}")
    if config.inipath is not None:
        args += ["-c", str(config.inipath)]
    if config.pluginmanager.hasplugin("xdist"):
        args += ["-n", "0"]  # no workers, whatever addopts say
    return args + selection_free(config)[0]


def reason(suspects: Sequence[OpVerdict]) -> str:
    """``relu (OP_ID 3) +40.0%, conv2d (OP_ID 0) +12.5%``: what looks regressed."""
    from ..render import percent
    from ..render.verdicts import op_name

    return ", ".join(f"{op_name(v)} {percent(v.corrected_ratio)}" for v in suspects)


def announce(config: pytest.Config, nodeid: str, suspects: Sequence[OpVerdict]) -> None:
    """The line that says a test is being run again, and why, in the normal output."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return  # an xdist worker: its terminal is not the user's
    reporter.ensure_newline()
    reporter.write_line(f"opprof: re-running {nodeid} in a new process to confirm: "
                        f"{reason(suspects)}")


def profile_again(config: pytest.Config, nodeid: str, *, measure: str, skip: int,
                  timeout: float) -> Profile | None:
    """The test's profile from a new process (its last profile from a call that
    passed, checked to be this node id's), or None when it gave none (the first run's
    verdict then stands)."""
    args = command(config, nodeid, measure=measure, skip=skip)
    try:
        child = run_pytest(args, cwd=config.invocation_params.dir, records=True,
                           timeout=timeout, env=selection_free(config)[1])
    except OSError:
        return None
    # this test's profile only: whatever else the child ran is no evidence for it
    passed = [r.profile for r in child.records or () if r.passed and r.nodeid == nodeid]
    return passed[-1] if passed else None
