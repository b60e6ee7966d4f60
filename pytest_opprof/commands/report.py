"""``opprof report RESULTS.json [-o report.html]``: a results file drawn as HTML."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..run.outputs import Output, clash, problem, write
from .common import CommandError


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = commands.add_parser(
        "report", help="draw a results file (pytest --opprof-json) as a self-contained HTML "
                       "report with charts (needs matplotlib: the 'report' extra)",
        usage="opprof report RESULTS.json [-o REPORT.html]",
        description="Draws a results file written by pytest --opprof-json as one "
                    "self-contained HTML file: per test, a table of its ops (baseline and "
                    "current medians, drift-corrected change, verdict) and charts of every "
                    "op against its baseline, the ops that moved most per iteration and the "
                    "phase split, as inline SVG (no script, no network). Needs matplotlib "
                    "(the 'report' extra). The file is written atomically; the results file "
                    "is only read.")
    sub.add_argument("results", type=Path, metavar="RESULTS.json",
                     help="the results file (pytest --opprof-json)")
    sub.add_argument("-o", "--output", type=Path, default=Path("opprof-report.html"),
                     metavar="REPORT.html",
                     help="the HTML file to write (default opprof-report.html)")
    sub.set_defaults(run=run, takes_pytest_args=False)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from ..render.html import render_tests
    from ..store.results import load

    results, output = args.results, args.output
    why = problem(Output("-o", output))
    if why is None and (clashing := clash([Output("-o", output)], inputs=[results])):
        why = clashing[1]
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
