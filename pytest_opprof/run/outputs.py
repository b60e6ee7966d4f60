"""The one writer of the files a run asks for (``--opprof-json``, ``--opprof-markdown``,
``--opprof-trace``, ``--opprof-html``).

Each path is checked when the session starts (:func:`check`), so that a bad path or a
missing matplotlib is one line before any test runs, not a failure after the whole
run. At the end, :func:`write_all` renders and writes each file the same way:
folders made, :func:`~pytest_opprof.store.files.replace_all` (the umask honoured, a symbolic
link written through, a special file refused), and an error is one line naming the flag.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import OpprofError
from ..render.charts import NEEDS_MATPLOTLIB
from ..store.files import machine_folders, output_problem, replace_all, write_problem

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
    line naming the flag, for the first that cannot be written, or that would write
    over a stored baseline or another output's file."""
    outputs = wanted(settings)
    if not outputs:  # the common gated run: no baseline folder listed at start-up
        return
    for output in outputs:
        why = problem(output)
        if why is not None:
            raise OpprofError(f"{output.flag}={output.path}: {why}")
    clashing = clash(outputs, folders=machine_folders(settings.baseline_dir))
    if clashing is not None:
        output, why = clashing
        raise OpprofError(f"{output.flag}={output.path}: {why}")


#: What every baseline file holds near its start (any schema version of it).
BASELINE_MARK = b'"pytest-opprof/baseline/'


def clash(outputs: Sequence[Output], inputs: Sequence[Path] = (),
          folders: Sequence[Path] = ()) -> tuple[Output, str] | None:
    """The first output that would destroy what the command reads or keeps, and why:
    it is one of ``inputs`` (the same file, by inode or resolved path), the file of an
    earlier output, an existing baseline file (``opprof history --json`` onto one), or
    inside one of ``folders`` (a machine's baseline folder, whose files are all read as
    baselines). None
    when no output does. Nothing is created."""
    for k, output in enumerate(outputs):
        for path in inputs:
            if same_file(output.path, path):
                return output, f"is {path}, which this command reads; write it elsewhere"
        for earlier in outputs[:k]:
            if same_file(output.path, earlier.path):
                return output, f"is also {earlier.flag}'s file; give each output its own"
        if output.folder:
            continue
        if is_baseline(output.path):
            return output, "is a stored baseline; write the output elsewhere"
        for folder in folders:
            if _inside(output.path, folder):
                return output, (f"is inside the baseline folder {folder}, whose files are "
                                "read as baselines; write the output elsewhere")
    return None


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: by inode when both exist (hard links,
    bind mounts), else by their resolved paths (``./r.json`` and ``r.json``, a link)."""
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def is_baseline(path: Path) -> bool:
    """Whether ``path`` is a regular file whose first line names a baseline schema."""
    try:
        if not Path(path).is_file():
            return False
        with open(path, "rb") as f:
            return BASELINE_MARK in f.read(1 << 16).split(b"\n", 1)[0]
    except OSError:
        return False


def _inside(path: Path, folder: Path) -> bool:
    real, top = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return top in real.parents


def write(flag: str, path: Path, text: str) -> None:
    """``text`` into the file ``path``, its folders made; OpprofError naming ``flag``."""
    write_files([(flag, Path(path), text)])


def write_files(files: Sequence[tuple[str, Path, str]]) -> None:
    """Every (flag, path, text) written, or none (:func:`replace_all`: a full disk at the
    second file leaves the first as it was), their folders made; OpprofError naming the
    flag and the file it stopped at."""
    flags = {str(Path(path)): flag for flag, path, _ in files}
    try:
        for _, path, _ in files:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                exc.filename, exc.filename2 = str(Path(path)), None  # the output, by its flag
                raise
        replace_all([(Path(path), text) for _, path, text in files])
    except OSError as exc:
        where = str(exc.filename) if exc.filename else str(files[0][1])
        flag = flags.get(where, files[0][0])
        raise OpprofError(f"{flag}={where}: cannot write {write_problem(exc)}") from None


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
    files: list[tuple[str, Path, str]] = []
    for output in outputs:
        if output.folder:
            files += [(output.flag, output.path / trace.file_name(record.nodeid),
                       trace.render(record)) for record in records]
            continue
        if output.flag == "--opprof-json":
            text = results_json.render_reports(reports, run_info, strict=strict,
                                               strict_effect=settings.strict_effect)
            _check_results_size(output, text)
        else:
            render = {"--opprof-markdown": markdown.render_reports,
                      "--opprof-html": html.render_tests}[output.flag]
            text = render(reports, run_info)
        files.append((output.flag, output.path, text))
    write_files(files)  # every file, or none


def _check_results_size(output: Output, text: str) -> None:
    """A results file ``opprof report`` and ``compare`` would refuse is not written."""
    from ..model.jsontext import MAX_BYTES

    if len(text) > MAX_BYTES // 4 and len(text.encode()) > MAX_BYTES:
        raise OpprofError(f"{output.flag}={output.path}: the results are "
                          f"{len(text.encode()) / 2**20:.0f} MB, more than opprof report and "
                          f"compare read ({MAX_BYTES // 2**20} MB): not written; "
                          "profile fewer tests, ops or iterations per run")
