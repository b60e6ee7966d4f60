"""The output registry, and the one writer of the files a run asks for.

Option registration (:mod:`.options`), this writer and the confirmation re-run
(:mod:`.rerun`, which drops every entry's flag) read :data:`RUN_OUTPUTS`: an output is
one entry and its renderer.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import OpprofError

if TYPE_CHECKING:
    from ..judge.strict import Unjudged
    from ..model.records import TestRecord
    from ..model.reports import TestReport
    from ..model.runinfo import RunInfo

#: Where no output may go: devices and process files (``/dev/stdout``, ``/proc/self/fd/1``)
#: are not files to replace, whatever they reach now.
SPECIAL_ROOTS = (Path("/dev"), Path("/proc"))
#: What every baseline file holds near its start (any schema version of it).
BASELINE_MARK = b'"pytest-opprof/baseline/'


@dataclass
class Results:
    """What every renderer is given."""

    records: Sequence[TestRecord]
    run_info: RunInfo
    strict: list[Unjudged] | None = None
    strict_effect: float | None = None

    @cached_property
    def reports(self) -> list[TestReport]:
        from ..stats.reports import report_of

        return [report_of(r) for r in self.records]


@dataclass(frozen=True)
class RunOutput:
    flag: str  # the option, and the key in ``Settings.outputs``
    metavar: str
    help: str
    #: The text of the file, or of a folder's files (file name -> text).
    render: Callable[[Results], str | Mapping[str, str]]
    folder: bool = False
    #: Why it cannot be rendered here (a missing library); asked at start-up.
    missing: Callable[[], str | None] = lambda: None


def _results_json(results: Results) -> str:
    from ..model.jsontext import MAX_BYTES
    from ..render.results_json import render_reports

    text = render_reports(results.reports, results.run_info.with_machine_info(),
                          strict=results.strict, strict_effect=results.strict_effect)
    size = len(text.encode())
    if size > MAX_BYTES:  # what opprof report and compare would refuse
        raise OpprofError(f"the results are {size / 2**20:.0f} MB, more than opprof report "
                          f"and compare read ({MAX_BYTES // 2**20} MB): not written; "
                          "profile fewer tests, ops or iterations per run")
    return text


def _markdown(results: Results) -> str:
    from ..render.markdown import render_reports

    return render_reports(results.reports, results.run_info)


def _traces(results: Results) -> dict[str, str]:
    from ..render import trace

    return {trace.file_name(r.nodeid): trace.render(r) for r in results.records}


def _html(results: Results) -> str:
    from ..render.html import render_tests

    return render_tests(results.reports, results.run_info)


def _no_matplotlib() -> str | None:
    if importlib.util.find_spec("matplotlib") is not None:
        return None
    from ..render.charts import NEEDS_MATPLOTLIB

    return NEEDS_MATPLOTLIB


#: The outputs of a pytest run, in the order they are written.
RUN_OUTPUTS: tuple[RunOutput, ...] = (
    RunOutput("--opprof-json", "PATH", "write every profiled test's result (profile, "
              "verdicts, machine) to this JSON file", _results_json),
    RunOutput("--opprof-markdown", "PATH", "write a Markdown summary (regressions, "
              "improvements, new and missing ops) to PATH, e.g. $GITHUB_STEP_SUMMARY",
              _markdown),
    RunOutput("--opprof-trace", "DIR", "write one Chrome trace (Perfetto, chrome://tracing) "
              "per profiled test into DIR", _traces, folder=True),
    RunOutput("--opprof-html", "PATH", "write a self-contained HTML report with charts to "
              "PATH (needs matplotlib)", _html, missing=_no_matplotlib),
)


class Settings(Protocol):
    """What the writer reads of the run's settings (``run.options.Settings``)."""

    @property
    def outputs(self) -> Mapping[str, Path]: ...
    @property
    def baseline_dir(self) -> Path: ...
    @property
    def strict_effect(self) -> float | None: ...


def dest(flag: str) -> str:
    """``--opprof-json`` -> ``opprof_json``."""
    return flag[2:].replace("-", "_")


@dataclass(frozen=True)
class Output:
    """A file, or a folder of files, to write, and the flag that named it."""

    flag: str
    path: Path
    folder: bool = False


def wanted(settings: Settings) -> list[tuple[RunOutput, Output]]:
    return [(kind, Output(kind.flag, settings.outputs[kind.flag], kind.folder))
            for kind in RUN_OUTPUTS if kind.flag in settings.outputs]


def problem(output: Output) -> str | None:
    """Why ``output`` cannot be written, or None; nothing is created."""
    from ..store.files import output_problem

    if any(p == root or root in p.parents for root in SPECIAL_ROOTS
           for p in (Path(os.path.abspath(output.path)), Path(os.path.realpath(output.path)))):
        return "names a device or process file, not a file to write; name a regular file"
    path = Path(output.path)
    if output.folder or path.parent.is_dir() or path.is_symlink():
        return output_problem(path, folder=output.folder)
    if path.parent.exists():  # there, and not a folder
        return f"{path.parent} is a file, not a folder"
    return output_problem(path.parent, folder=True)  # the writer makes the folders


def check(settings: Settings) -> None:
    """Before any test runs: OpprofError, one line naming the flag, for the first
    output that cannot be written, or would write over a baseline or another output."""
    from ..store.files import machine_folders

    asked = wanted(settings)
    if not asked:  # the common gated run: no baseline folder listed at start-up
        return
    failing = next(((output, why) for kind, output in asked
                    if (why := kind.missing() or problem(output)) is not None), None)
    failing = failing or clash([output for _, output in asked],
                               folders=machine_folders(settings.baseline_dir))
    if failing is not None:
        raise OpprofError(f"{failing[0].flag}={failing[0].path}: {failing[1]}")


def clash(outputs: Sequence[Output], inputs: Sequence[Path] = (),
          folders: Sequence[Path] = ()) -> tuple[Output, str] | None:
    """The first output that would destroy what the command reads or keeps, and why:
    it is one of ``inputs`` (the same file, by inode or resolved path), the file of an
    earlier output, an existing baseline file, or inside one of ``folders`` (a machine's
    baseline folder, whose files are all read as baselines). Nothing is created."""
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
            if Path(os.path.realpath(folder)) in Path(os.path.realpath(output.path)).parents:
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
        if not Path(path).is_file():  # a FIFO would block the open
            return False
        with open(path, "rb") as f:
            return BASELINE_MARK in f.readline(1 << 16)
    except OSError:
        return False


def write(flag: str, path: Path, text: str) -> None:
    write_files([(flag, Path(path), text)])


def write_files(files: Sequence[tuple[str, Path, str]]) -> None:
    """Every (flag, path, text) written, or none (a full disk at the second file leaves
    the first as it was); OpprofError naming the flag and the file it stopped at."""
    from ..store.files import replace_all, write_problem

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


def write_all(settings: Settings, records: Sequence[TestRecord], run_info: RunInfo,
              strict: list[Unjudged] | None = None) -> None:
    """Every output the run asks for, all or none. ``strict``: strict mode's verdict
    (the tests it fails the session for), where it applies."""
    results = Results(records, run_info, strict, settings.strict_effect)
    files: list[tuple[str, Path, str]] = []
    for kind, output in wanted(settings):
        try:
            made = kind.render(results)
        except OpprofError as exc:
            raise OpprofError(f"{output.flag}={output.path}: {exc}") from None
        if isinstance(made, str):
            files.append((output.flag, output.path, made))
        else:
            files += [(output.flag, output.path / name, text) for name, text in made.items()]
    write_files(files)
