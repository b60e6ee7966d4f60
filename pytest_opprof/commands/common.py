"""What every ``opprof`` command shares: its two ways to end, argument types, the
arguments that find the store (``--dir``, ``--machine-key``) and the pytest view.

Each command is a module of this folder with an ``add_parser(commands)`` that adds its
sub-parser, its ``run(args, extra)`` set as the parser's ``run`` default.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..model import hints
from ..model.words import display_name
from ..run.gating import baseline_key
from ..run.launcher import PLUGIN_ARGS, last_line, startup_error
from ..run.options import DEFAULT_BASELINE_DIR, Settings, whole_number
from ..run.session import this_machine
from ..store.baseline import BaselineStore
from ..store.files import safe_name

__all__ = ["CommandError", "PytestView", "Resolver", "UsageProblem", "add_store_arguments",
           "in_process", "pytest_view", "stores", "whole_number"]

class CommandError(Exception):
    """Ends the command with its message on one line, exit status 1."""


class UsageProblem(CommandError):
    """The arguments are wrong: exit status 2."""


def add_store_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--dir", type=Path, default=None,
                     help="the baseline directory (default: pytest's, as the plugin "
                          f"finds it: opprof_baseline_dir, else {DEFAULT_BASELINE_DIR}/ "
                          "at the rootdir)")
    sub.add_argument("--machine-key", default=None, metavar="KEY",
                     help="only this machine's baselines (default: opprof_machine_key, "
                          "else every machine)")


def stores(root: Path, machine_key: str | None) -> list[BaselineStore]:
    """CommandError when there are none."""
    if not root.exists():
        take = hints.stored(str(root), machine_key).command()
        raise CommandError(f"{root}: no baseline directory here (use --dir, or create "
                           f"baselines with `{display_name(take)}`)")
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


# -- what pytest would do: the plugin's own resolution, in this process ------------------

#: The options ``opprof baseline update`` sets itself: given too, they would contradict it.
OWN_OPTIONS = {"opprof_update_baseline": "--opprof-update-baseline",
               "opprof_no_gate": "--opprof-no-gate"}


@dataclass(frozen=True)
class PytestView:
    """The settings, rootdir and selection pytest resolves from the arguments and the
    ini file, by the plugin's own code: the CLI finds what the plugin finds."""

    settings: Settings
    rootdir: Path
    own_options: tuple[str, ...]  # given, from :data:`OWN_OPTIONS`
    narrowed: frozenset[str]  # :func:`_narrowed`
    #: The test paths given (the command line's, ``@FILE``'s, PYTEST_ADDOPTS', addopts').
    positional: tuple[str, ...] = ()


class Resolver:
    """A pytest plugin that records the configuration, and collects when asked."""

    def __init__(self, collect: bool, machine: bool = False) -> None:
        self.collect = collect
        self.find_machine = machine  # this machine's key, after collection
        self.machine: str | None = None
        self.machine_problem = ""
        self.view: PytestView | None = None
        #: The collected node ids, and each one's baseline key (a pytest-repeat
        #: repetition ``test_x[1-2]`` is stored as ``test_x``).
        self.items: set[str] = set()
        self.files: set[str] = set()
        self.errors: list[str] = []
        self.interrupted = False

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # pytest catches Ctrl-C and SIGTERM itself; its "Interrupted: 1 error during
        # collection" is a KeyboardInterrupt too
        self.interrupted = not isinstance(excinfo.value, pytest.Session.Interrupted)

    @pytest.hookimpl(tryfirst=True)
    def pytest_cmdline_main(self, config: pytest.Config) -> int | None:
        self.view = PytestView(
            settings=Settings.from_pytest_config(config), rootdir=config.rootpath,
            own_options=tuple(flag for dest, flag in OWN_OPTIONS.items()
                              if config.getoption(dest, None)),
            narrowed=_narrowed(config),
            positional=tuple(str(a) for a in config.option.file_or_dir or ()))
        return None if self.collect else 0  # a first-result hook: 0 ends pytest here

    def pytest_itemcollected(self, item: pytest.Item) -> None:
        self.items.add(item.nodeid)  # before -k, -m and --deselect leave some out
        self.items.add(baseline_key(item))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.find_machine:
            try:
                self.machine = this_machine(session.config)
            except pytest.UsageError as exc:
                self.machine_problem = last_line(str(exc))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # its last line names the error ("E   SyntaxError: ...")
            lines = str(report.longrepr).strip().splitlines()
            self.errors.append(lines[-1].strip() if lines else report.nodeid)
        elif report.passed and "::" not in report.nodeid:
            self.files.add(report.nodeid)


def _narrowed(config: pytest.Config) -> frozenset[str]:
    """The test files (as node ids) that ``file.py::test`` arguments narrow."""
    found = set()
    for arg in config.args:
        if "::" not in arg:
            continue
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve()
        with contextlib.suppress(ValueError):
            found.add(path.relative_to(config.rootpath.resolve()).as_posix())
    return frozenset(found)


def in_process(args: list[str], resolver: Resolver) -> int:
    """pytest.main with ``resolver``; its output kept; its usage errors one line."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = pytest.main([*PLUGIN_ARGS, *args], plugins=[resolver])
    if resolver.interrupted:  # pytest caught Ctrl-C or SIGTERM itself: not its error
        raise KeyboardInterrupt
    startup = startup_error(out.getvalue() + err.getvalue())
    if code == pytest.ExitCode.USAGE_ERROR and startup is not None:  # also exit status 4
        raise CommandError(f"pytest could not start: {startup}")
    if code == pytest.ExitCode.USAGE_ERROR or resolver.view is None:
        raise UsageProblem(f"pytest refused the arguments: {last_line(err.getvalue())}")
    return int(code)


def pytest_view(pytest_args: list[str]) -> PytestView:
    """How pytest and the plugin see ``pytest_args``; nothing is collected or run."""
    resolver = Resolver(collect=False)
    in_process(["-p", "no:cacheprovider", *pytest_args], resolver)
    assert resolver.view is not None
    return resolver.view
