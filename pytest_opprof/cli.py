"""The ``opprof`` command: baselines, reports, comparisons and histories from the shell.

    opprof baseline update [--runs N] [PYTEST ARGS...]
    opprof baseline show [TEST] [--dir DIR] [--machine-key KEY]
    opprof baseline prune [--apply] [--dir DIR] [--machine-key KEY] [PYTEST ARGS...]
    opprof report RESULTS.json [-o report.html]
    opprof compare REF [--pairs N] [...] [PYTEST ARGS...]
    opprof compare BASE.json HEAD.json [...]
    opprof history [TEST] [--dir DIR] [--machine-key KEY] [--json PATH] [--html PATH]

Each command is a module of :mod:`pytest_opprof.commands` (its ``add_parser`` and
``run``); this module builds the parser from them, dispatches, and prints each error as
one line that says what to do. Every command exits 0 when it did what was asked, 1 on a
failure, 2 on a usage error (130 on Ctrl-C or SIGTERM). The baseline folder, machine key,
tolerance and rootdir are found by pytest and the plugin's own code, from the same
arguments and ini file (``--dir`` and ``--machine-key`` override them).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Callable, Sequence

from ._version import __version__
from .commands import baseline, compare, history, report
from .commands.common import CommandError, UsageProblem
from .errors import OpprofError
from .run.launcher import Terminated, sigterm_as_ctrl_c

__all__ = ["Terminated", "build_parser", "main"]

#: The commands, in the order ``opprof --help`` lists them.
COMMANDS = (baseline, report, history, compare)


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
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def _any_encoding() -> None:
    """What the commands print survives a stream that cannot encode it (``LANG=C``,
    ``PYTHONIOENCODING=ascii``): an op named ``注意力`` prints as ``\\u6ce8...``, not
    a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError, io.UnsupportedOperation):
                reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    _any_encoding()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "takes_pytest_args", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None or (args.command == "baseline" and args.action is None):
        args.help_parser.print_help(sys.stderr)  # a usage error, as argparse's own
        return 2
    return _guarded(lambda: int(args.run(args, extra)))


def _guarded(run: Callable[[], int]) -> int:
    """Runs a command; its errors are one line on stderr: exit status 1, 2 for a usage
    error, 130 on Ctrl-C or SIGTERM (the store left as it was)."""
    with sigterm_as_ctrl_c():
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
