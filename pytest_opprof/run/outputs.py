"""The one writer of the files a run asks for (``--opprof-json``, ``--opprof-markdown``,
``--opprof-trace``, ``--opprof-html``).

Each path is checked when the session starts (:func:`check`), so that a bad path or a
missing matplotlib is one line before any test runs, not a failure after the whole
run. At the end, :func:`write_all` renders and writes each file the same way:
folders made, :func:`~pytest_opprof.store.files.atomic_write` (the umask honoured, a symbolic
link written through, a special file refused), and an error is one line naming the flag.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import OpprofError
from ..render.charts import NEEDS_MATPLOTLIB
from ..store.files import atomic_write, output_problem

if TYPE_CHECKING:
    from ..judge.strict import Unjudged
    from ..model.records import TestRecord
    from ..model.runinfo import RunInfo
    from .options import Settings

#: Where no output may go: devices and process files (``/dev/stdout``, ``/proc/self/fd/1``)
#: are not files to replace, whatever they reach now.
SPECIAL_ROOTS = (Path("/dev"), Path("/proc"))


@dataclass(frozen=True)
class Output:
    flag: str
    path: Path
    #: A folder of files (one per test) rather than one file.
    folder: bool = False


def wanted(settings: Settings) -> list[Output]:
    """The outputs the run asks for, in the order they are written."""
    asked = (("--opprof-json", settings.json_path, False),
             ("--opprof-markdown", settings.markdown_path, False),
             ("--opprof-trace", settings.trace_dir, True),
             ("--opprof-html", settings.html_path, False))
    return [Output(flag, path, folder) for flag, path, folder in asked if path is not None]


def problem(output: Output) -> str | None:
    """Why ``output`` cannot be written, or None; nothing is created."""
    if any(p == root or root in p.parents for root in SPECIAL_ROOTS
           for p in (Path(os.path.abspath(output.path)), Path(os.path.realpath(output.path)))):
        return "names a device or process file, not a file to write; name a regular file"
    if output.flag == "--opprof-html" and importlib.util.find_spec("matplotlib") is None:
        return NEEDS_MATPLOTLIB
    path = Path(output.path)
    if output.folder or path.parent.is_dir() or path.is_symlink():
        return output_problem(path, folder=output.folder)
    if path.parent.exists():  # there, and not a folder
        return f"{path.parent} is a file, not a folder"
    return output_problem(path.parent, folder=True)  # the writer makes the folders


def check(settings: Settings) -> None:
    """Every output the run asks for, checked before any test runs: OpprofError, one
    line naming the flag, for the first that cannot be written."""
    for output in wanted(settings):
        why = problem(output)
        if why is not None:
            raise OpprofError(f"{output.flag}={output.path}: {why}")


def write(flag: str, path: Path, text: str) -> None:
    """``text`` into the file ``path``, its folders made; OpprofError naming ``flag``."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(Path(path), text)
    except OSError as exc:
        raise OpprofError(f"{flag}={path}: cannot write ({exc})") from None


def write_all(settings: Settings, records: list[TestRecord], run_info: RunInfo,
              strict: list[Unjudged] | None = None) -> None:
    """Render and write every output the run asks for; the reports' one view of each
    test is built once, for all of them. ``strict``: strict mode's verdict (the tests it
    fails the session for), when it applies; the results file says it."""
    from ..render import html, markdown, results_json, trace
    from ..stats.reports import report_of

    outputs = wanted(settings)
    if any(o.flag == "--opprof-json" for o in outputs):
        run_info = run_info.with_machine_info()  # only the results file holds it
    reports = [report_of(r) for r in records] if any(not o.folder for o in outputs) else []
    for output in outputs:
        if output.folder:
            for record in records:
                write(output.flag, output.path / trace.file_name(record.nodeid),
                      trace.render(record))
            continue
        if output.flag == "--opprof-json":
            write(output.flag, output.path, results_json.render_reports(
                reports, run_info, strict=strict, strict_effect=settings.strict_effect))
            continue
        render = {"--opprof-markdown": markdown.render_reports,
                  "--opprof-html": html.render_tests}[output.flag]
        write(output.flag, output.path, render(reports, run_info))
