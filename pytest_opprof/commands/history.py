"""``opprof history``: each op's time across the stored runs, and where it stepped.

    opprof history [TEST] [--dir DIR] [--machine-key KEY] [--tolerance X]
                   [--json PATH] [--html PATH]

``pytest --opprof-update-baseline=append`` (on the main branch, once per commit) grows each
test's stored baseline run by run, each run with its date and commit (see
:mod:`pytest_opprof.store.baseline`; the last 20 are kept). This command reads those runs,
in date order, and finds for each op where its median stepped.

How steps are found: :mod:`pytest_opprof.judge.changepoints`; the JSON file's fields:
:mod:`pytest_opprof.render.history`.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import OpprofError
from ..judge.changepoints import history_of, require_ruptures
from ..model.history import History
from ..render import display_name
from ..render.charts import NEEDS_MATPLOTLIB
from ..render.history import ASCII_SPARKS, SPARKS, render_text, to_json
from ..run.options import parse_fraction
from ..run.outputs import Output, clash, problem, write_files
from ..store.baseline import BaselineError, BaselineStore
from .common import add_store_arguments, pytest_view, stores


def _spark_chars() -> str:
    """Block characters where the terminal's encoding has them, else ASCII."""
    try:
        SPARKS.encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return ASCII_SPARKS
    return SPARKS


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``opprof history`` and its arguments."""
    parser = commands.add_parser(
        "history", help="each op's time across the stored runs (pytest "
                        "--opprof-update-baseline=append), and the commits where it stepped "
                        "(needs ruptures: the 'history' extra)",
        usage="opprof history [TEST] [--tolerance X] [--json PATH] [--html PATH] "
              "[--dir DIR] [--machine-key KEY]",
        description="Reads the runs of each stored baseline in date order (grown by pytest "
                    "--opprof-update-baseline=append, one run per commit; the last 20 kept), "
                    "takes each run's machine drift out, finds where each op's median "
                    "stepped (PELT from ruptures, penalised by the op's noise) and names "
                    "the commit. Steps under the noise or the tolerance are not reported.")
    parser.set_defaults(run=run, takes_pytest_args=False)
    parser.add_argument("test", nargs="?", default=None, metavar="TEST",
                        help="a node id, or part of one (default: every test)")
    parser.add_argument("--tolerance", type=parse_fraction, default=None, metavar="X",
                        help="the smallest step reported, such as 0.05 or 5%% (default: the "
                             "gate's, opprof_tolerance)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write the history as JSON (fields: pydoc "
                             "pytest_opprof.render.history)")
    parser.add_argument("--html", type=Path, default=None, metavar="PATH",
                        help="also draw each op's trend with its steps as a self-contained "
                             "HTML file (needs matplotlib: the 'report' extra)")
    add_store_arguments(parser)


def check_outputs(json_path: Path | None, html_path: Path | None,
                  folders: Sequence[Path] = ()) -> None:
    """Each file asked for can be written (and drawn), and writes over no stored
    baseline (nor into a machine's baseline folder of ``folders``): OpprofError, one
    line, if not."""
    outputs = [Output(flag, path) for flag, path in (("--json", json_path),
                                                     ("--html", html_path)) if path]
    for output in outputs:
        why = problem(output)
        if why is None and output.flag == "--html" and \
                importlib.util.find_spec("matplotlib") is None:
            why = NEEDS_MATPLOTLIB
        if why is not None:
            raise OpprofError(f"{output.flag} {output.path}: {why}")
    clashing = clash(outputs, folders=folders)
    if clashing is not None:
        raise OpprofError(f"{clashing[0].flag} {clashing[0].path}: {clashing[1]}")


def collect(stores: list[BaselineStore], test: str | None, tolerance: float,
            ) -> tuple[list[History], list[str]]:
    """The history of each stored test (matching ``test``), and a line for each file
    that could not be read."""
    found, unreadable = [], []
    for store in stores:
        for _, entry in store.entries():
            if isinstance(entry, BaselineError):
                unreadable.append(str(entry))
            elif test is None or test in entry.nodeid:
                found.append(history_of(entry, tolerance))
    return found, unreadable


def run(args: argparse.Namespace, extra: list[str]) -> int:
    """``opprof history``: the store found as ``opprof baseline show`` finds it, the
    tolerance the gate's (``opprof_tolerance``) unless given."""
    require_ruptures()
    view = pytest_view([])
    root = args.dir or view.settings.baseline_dir
    found = stores(root, args.machine_key or view.settings.machine_key)
    return show(found, root, args, args.tolerance or view.settings.tolerance)


def show(stores: list[BaselineStore], root: Path, args: argparse.Namespace,
         tolerance: float) -> int:
    """The history of the stored tests printed, and written to the files asked for;
    1 when a baseline file could not be read (the rest still shown)."""
    require_ruptures()
    check_outputs(args.json, args.html, [store.folder for store in stores])
    tests, unreadable = collect(stores, args.test, tolerance)
    if not tests and not unreadable:
        if args.test is not None:
            raise OpprofError(f"no stored baseline matches {args.test!r} under {root}")
        raise OpprofError(f"{root}: no stored runs (grow a history with pytest "
                          "--opprof-update-baseline=append on each commit)")
    chars = _spark_chars()
    for line in unreadable:
        print(f"unreadable: {display_name(line)}")
    for test in tests:
        print(render_text(test, tolerance, chars))
    files = []
    if args.json is not None:
        files.append(("--json", args.json, to_json(tests, tolerance, unreadable)))
    if args.html is not None:
        from ..render.history_html import render_history

        files.append(("--html", args.html, render_history(tests, tolerance)))
    write_files(files)  # both, or neither
    for _, path, _ in files:
        print(f"opprof: wrote {path}")
    return 1 if unreadable else 0
