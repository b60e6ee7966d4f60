"""The ``opprof`` command: baselines, reports, comparisons and histories from the shell.

Each command is a module of :mod:`pytest_opprof.commands` (``add_parser``, ``run``);
this module builds the parser, dispatches, and prints each error as one line. Exit
status: 0 done, 1 failed, 2 a usage error, 130 Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys
import warnings
from collections.abc import Sequence

from ._version import __version__
from .commands import baseline, compare, history, report
from .commands.common import CommandError, UsageProblem
from .errors import OpprofError
from .run.launcher import sigterm_as_ctrl_c

#: The commands, in the order ``opprof --help`` lists them.
COMMANDS = (baseline, report, history, compare)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opprof",
        description="pytest-opprof: per-op profiling and regression gate for array code. "
                    "Profiling and gating run inside pytest (pytest --opprof-verbosity=2); "
                    "this command manages the stored baselines, compares a change op by op "
                    "with a git ref, another Python environment (compare --base-python: a "
                    "dependency upgrade) or two results files, and shows each op's history.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.set_defaults(help_parser=parser)  # what a command given without its action prints
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def _any_encoding() -> None:
    """An op named ``注意力`` prints as ``\\u6ce8...`` on a stream that cannot encode it
    (``LANG=C``, ``PYTHONIOENCODING=ascii``), not a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError, io.UnsupportedOperation):
                reconfigure(errors="backslashreplace")


#: The exit status of a command whose output was closed early (``opprof history | head``):
#: a shell's for a process ended by SIGPIPE (128 + 13).
BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """The command; its output closed early (``| head``) ends it quietly (its children
    ended, its temporary files removed on the way out, as on any error)."""
    _any_encoding()
    try:
        code = _main(argv)
        sys.stdout.flush()  # what is still buffered meets the closed pipe here, not at exit
        return code
    except BrokenPipeError:
        # stdout to the null device: Python's flush at exit would otherwise meet the
        # closed pipe again and print "Exception ignored ... BrokenPipeError"
        with contextlib.suppress(OSError, ValueError):  # ValueError: a captured stdout
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        return BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "takes_pytest_args", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None or (args.command == "baseline" and args.action is None):
        args.help_parser.print_help(sys.stderr)  # a usage error, as argparse's own
        return 2
    # Warnings of the libraries a command uses (numpy's on an empty slice, matplotlib's)
    # are not the user's to act on: not shown, unless asked for (python -W, PYTHONWARNINGS).
    with sigterm_as_ctrl_c(), warnings.catch_warnings():
        if not sys.warnoptions:
            warnings.simplefilter("ignore")
            # matplotlib's own notices (a font cache built, a config folder not writable)
            # come through logging, not warnings
            logging.getLogger("matplotlib").setLevel(logging.ERROR)
        try:
            return int(args.run(args, extra))
        except (CommandError, OpprofError) as exc:
            print(f"opprof: {exc}", file=sys.stderr)
            return 2 if isinstance(exc, UsageProblem) else 1
        except KeyboardInterrupt:
            print("opprof: interrupted; nothing was stored or removed", file=sys.stderr)
            return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
