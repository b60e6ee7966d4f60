"""``opprof history``: each op's figure across the stored runs, and where it stepped.

``pytest --opprof-update-baseline=append`` (on the main branch, once per commit) grows each
test's stored baseline run by run, each with its date and commit; this command reads those
runs in date order and finds for each op where its median stepped
(:mod:`pytest_opprof.judge.changepoints`).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from ..errors import OpprofError
from ..judge.changepoints import history_of, require_ruptures
from ..render import display_name
from ..render.charts import NEEDS_MATPLOTLIB
from ..render.history import ASCII_SPARKS, SPARKS, render_text, to_json
from ..run.options import parse_fraction
from ..run.outputs import Output, clash, problem, write_files
from ..store.baseline import BaselineError
from .common import add_store_arguments, pytest_view, stores


def _spark_chars() -> str:
    """Block characters where the terminal's encoding has them, else ASCII."""
    try:
        SPARKS.encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return ASCII_SPARKS
    return SPARKS


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "history", help="each op's time across the stored runs (pytest "
                        "--opprof-update-baseline=append), and the commits where it stepped "
                        "(needs ruptures: the 'history' extra)",
        usage="opprof history [TEST] [--tolerance X] [--json PATH] [--html PATH] "
              "[--dir DIR] [--machine-key KEY]",
        description="Reads the runs of each stored baseline in date order (grown by pytest "
                    "--opprof-update-baseline=append, one run per commit; the last 20 kept), "
                    "finds where each op's median stepped (PELT from ruptures, penalised "
                    "by the op's noise) and names the commit. A step is reported beyond the "
                    "noise and the tolerance, held by the runs after it; where all ops "
                    "moved together it says so. Timed runs lose only what all ops shared "
                    "in one run alone (the machine's); counts lose nothing.")
    parser.set_defaults(run=run, takes_pytest_args=False)
    parser.add_argument("test", nargs="?", default=None, metavar="TEST",
                        help="a node id, or part of one (default: every test)")
    parser.add_argument("--tolerance", type=parse_fraction, default=None, metavar="X",
                        help="the smallest step reported, such as 0.05 or 5%% (default: the "
                             "gate's, opprof_tolerance, else each measure's own)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write the history as JSON (fields: pydoc "
                             "pytest_opprof.render.history)")
    parser.add_argument("--html", type=Path, default=None, metavar="PATH",
                        help="also draw each op's trend with its steps as a self-contained "
                             "HTML file (needs matplotlib: the 'report' extra)")
    add_store_arguments(parser)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    """The store found as ``opprof baseline show`` finds it, the tolerance each measure's
    unless given; 1 when a baseline file could not be read (the rest still shown)."""
    require_ruptures()
    view = pytest_view([])
    root = args.dir or view.settings.baseline_dir
    found = stores(root, args.machine_key or view.settings.machine_key)
    given = args.tolerance or view.settings.given_tolerance
    outputs = [Output(flag, path) for flag, path in (("--json", args.json),
                                                     ("--html", args.html)) if path]
    for output in outputs:
        why = problem(output)
        if why is None and output.flag == "--html" and \
                importlib.util.find_spec("matplotlib") is None:
            why = NEEDS_MATPLOTLIB
        if why is not None:
            raise OpprofError(f"{output.flag} {output.path}: {why}")
    clashing = clash(outputs, folders=[store.folder for store in found])
    if clashing is not None:
        raise OpprofError(f"{clashing[0].flag} {clashing[0].path}: {clashing[1]}")
    tests, unreadable = [], []
    for store in found:
        for _, entry in store.entries():
            if isinstance(entry, BaselineError):
                unreadable.append(str(entry))
            elif args.test is None or args.test in entry.nodeid:
                tests.append(history_of(entry, given))
    if not tests and not unreadable:
        if args.test is not None:
            raise OpprofError(f"no stored baseline matches {args.test!r} under {root}")
        raise OpprofError(f"{root}: no stored runs (grow a history with pytest "
                          "--opprof-update-baseline=append on each commit)")
    chars = _spark_chars()
    for line in unreadable:
        print(f"unreadable: {display_name(line)}")
    for test in tests:
        print(render_text(test, chars))
    files = []
    if args.json is not None:
        files.append(("--json", args.json, to_json(tests, given, unreadable)))
    if args.html is not None:
        from ..render.history_html import render_history

        files.append(("--html", args.html, render_history(tests)))
    write_files(files)  # both, or neither
    for _, path, _ in files:
        print(f"opprof: wrote {path}")
    return 1 if unreadable else 0
