"""Flags, their ini twins and the marker, resolved once into frozen settings.

Precedence: the per-test marker, then the command line, then the ini file,
then the defaults below.
"""

from __future__ import annotations

import argparse
import math
import numbers
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..errors import OpprofError
from ..judge.config import TOLERANCE
from ..measure import measures

DEFAULT_VERBOSITY = 0
#: The first iteration pays for compilation, allocation and cold caches.
DEFAULT_SKIP = 1
DEFAULT_ITERATIONS = 20
DEFAULT_MEASURE = measures.AUTO
#: The ini value the measure replaced (the device follows from the measure): refused.
GONE_INI = "opprof_backend"
#: The smallest drift-corrected slowdown that may fail a test; see benchmarks/RESULTS.md.
DEFAULT_TOLERANCE = TOLERANCE
DEFAULT_BASELINE_DIR = ".opprof"
#: The most iterations a test may run or skip: beyond it a value is a typo, not a plan.
MAX_ITERATIONS = 1_000_000
#: The longest shown excerpt of a bad value in an error line.
SHOWN_CHARS = 60

HELP_VERBOSITY = (
    "opprof report: 0 none (profiles are still taken), 1 forward/backward time per "
    "iteration, 2 also every op in graph order and a per-op-type table "
    f"(default {DEFAULT_VERBOSITY})"
)
HELP_SKIP = ("leave the first N iterations of each profiled test out of every figure "
             f"(default {DEFAULT_SKIP})")
HELP_ITERATIONS = ("iterations run by gpu_profiler.iterations() when neither the call nor "
                   f"the marker gives a number (default {DEFAULT_ITERATIONS})")
HELP_MEASURE = ("what an op's figure is: " + ", ".join(
    [f"{measures.AUTO} (kernel where CUPTI starts on a GPU, else events on a GPU, else "
     "time on the CPU)",
     *(f"{m.name} ({m.help})" for m in measures.listed())]).replace("%", "%%")
    + f" (default {DEFAULT_MEASURE})")
HELP_BASELINE_DIR = (f"where per-op baselines are kept (default {DEFAULT_BASELINE_DIR}/ at the "
                     "rootdir); one folder per machine key")
HELP_MACHINE_KEY = ("the machine key that namespaces baselines (default: measure and device, "
                    "e.g. 'cpu-AMD EPYC (2 cores)'); set one name for a fleet of identical runners")
HELP_UPDATE = "write the baselines of the profiled tests that ran and passed, instead of gating"
HELP_APPEND = ("like --opprof-update-baseline, but add this run to the stored runs (the last "
               "20 are kept) instead of replacing them: a history that learns how the "
               "machine varies over time (for main-branch CI)")
HELP_BATCH = ("runs of one baseline update share this id and are kept together "
              "(set by opprof baseline update --runs N)")
HELP_TOLERANCE = ("the smallest drift-corrected slowdown of an op that fails its test, as a "
                  "fraction or percentage (default " + ", ".join(
                      [f"{DEFAULT_TOLERANCE:.0%}", *(
                          f"{m.gate.tolerance:.0%} under --opprof-measure={m.name}"
                          for m in measures.listed() if m.gate.tolerance != DEFAULT_TOLERANCE)])
                  + ")").replace("%", "%%")
HELP_STRICT = "fail tests whose ops are new or missing against the baseline"
HELP_STRICT_RUN = ("fail the session (exit code 1) when a gated test could not be judged: no "
                   "baseline on this machine, other run conditions than its baseline's, an "
                   "absurd drift, no counted iteration, no op compared, gpu_profiler used "
                   "without iterations(); the tests' own outcomes stay as they are, and the "
                   "summary names each such test (for CI)")
HELP_STRICT_EFFECT = ("fail the session also when a test's gate could see only slowdowns "
                      "beyond PCT for its median op (its 'could only see slowdowns over' "
                      "line), e.g. 25%%; turns --opprof-strict on")
HELP_JSON = "write every profiled test's result (profile, verdicts, machine) to this JSON file"
HELP_NO_CONFIRM = ("fail on the first run's evidence alone, without re-running a test whose "
                   "op looks regressed in a new process to confirm it")
HELP_NO_GATE = "profile and report only: compare nothing with the baselines"
HELP_MARKDOWN = ("write a Markdown summary (regressions, improvements, new and missing ops) "
                 "to PATH, e.g. $GITHUB_STEP_SUMMARY")
HELP_TRACE = ("write one Chrome trace (Perfetto, chrome://tracing) per profiled test into "
              "DIR")
HELP_HTML = "write a self-contained HTML report with charts to PATH (needs matplotlib)"
HELP_PROFILE_OUT = ("write the records of the profiled tests to this file (used by "
                    "pytest-opprof's own child processes: re-runs, opprof compare)")


def whole_number(what: str, minimum: int, maximum: int = MAX_ITERATIONS) -> Callable[[str], int]:
    """A parser for a whole number in [minimum, maximum]; its errors name ``what``."""
    if maximum - minimum > 3:
        expected = f"a whole number from {minimum} to {maximum}"
    else:
        expected = ", ".join(str(v) for v in range(minimum, maximum)) + f" or {maximum}"

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:  # also a number past Python's int-string limit
            value = None
        if value is None or not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{what} must be {expected}, not {shown(text)}")
        return value

    return parse


def shown(value: Any) -> str:
    """``value`` as an error line may show it: a short repr, whatever it is (an int
    past the int-string limit has no repr; a long one would flood the line)."""
    try:
        text = repr(value)
    except Exception:  # an int past the limit, or an object with a broken __repr__
        if isinstance(value, int):
            return f"an integer of {value.bit_length()} bits"
        return f"a {type(value).__name__} too large to show"
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS - 3]}..."


_verbosity = whole_number("the verbosity", 0, 2)
_skip = whole_number("the number of skipped iterations", 0)
_iterations = whole_number("the number of iterations", 1)


def parse_fraction(value: Any, what: str = "the tolerance") -> float:
    """``0.05``, ``"0.05"`` or ``"5%"`` -> 0.05; must lie in (0, 10]. A bare number of 1
    or more is refused: ``5`` meant as 5% would be 500% (a 2x regression passing), so
    a tolerance that large is written as a percentage (``500%``)."""
    percentage = False
    try:
        if isinstance(value, str):
            text = value.strip()
            percentage = text.endswith("%")
            fraction = float(text[:-1]) / 100 if percentage else float(text)
        elif _is_number(value):
            fraction = float(value)
        else:
            raise ValueError
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"{what} must be a fraction or a percentage such as 0.05 or 5%, not {shown(value)}"
        ) from None
    if not (math.isfinite(fraction) and 0 < fraction <= 10):
        raise argparse.ArgumentTypeError(
            f"{what} must lie between 0 and 1000%, not {shown(value)}")
    if not percentage and fraction >= 1:
        raise argparse.ArgumentTypeError(
            f"{what} {shown(value)} is a fraction, {fraction:.0%}: write {fraction:g}% or "
            f"{fraction / 100:g} for {fraction:g} percent (or {fraction:.0%} if that is meant)")
    return fraction


def _is_number(value: Any) -> bool:
    """A real number (numpy's too), not a bool: what a marker may give as a number."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


_UNITS_NS = {"ns": 1.0, "us": 1e3, "\u00b5s": 1e3, "ms": 1e6, "s": 1e9}
_DURATION = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(ns|us|\u00b5s|ms|s)\s*$")


def parse_duration_ns(value: Any, what: str) -> float:
    """``"2ms"``, ``"300us"``, ``"1.5s"``, ``"500ns"`` or a number of seconds -> ns (> 0)."""
    match = _DURATION.match(value) if isinstance(value, str) else None
    try:
        if match:
            ns = float(match.group(1)) * _UNITS_NS[match.group(2)]
        elif _is_number(value):
            ns = float(value) * 1e9
        else:
            raise ValueError
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"{what} must be a duration such as '2ms', '300us', '1.5s' or a number of "
            f"seconds, not {shown(value)}") from None
    if not (math.isfinite(ns) and ns > 0):
        raise argparse.ArgumentTypeError(
            f"{what} must be a positive duration, not {shown(value)}")
    return ns


def _tolerance(text: str) -> float:
    return parse_fraction(text)


def _strict_effect(text: str) -> float:
    return parse_fraction(text, "the strict effect")


def _yes_no(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"must be true or false, not {shown(text)}")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("opprof", "per-op profiling (pytest-opprof)")
    group.addoption("--opprof-verbosity", type=_verbosity, default=None, metavar="N",
                    help=HELP_VERBOSITY)
    group.addoption("--opprof-skip", type=_skip, default=None, metavar="N", help=HELP_SKIP)
    # no choices here: a conftest.py may register a measure (checked in Settings)
    group.addoption("--opprof-measure", default=None, metavar="NAME", help=HELP_MEASURE)
    group.addoption("--opprof-baseline-dir", default=None, metavar="DIR", help=HELP_BASELINE_DIR)
    group.addoption("--opprof-machine-key", default=None, metavar="NAME", help=HELP_MACHINE_KEY)
    group.addoption("--opprof-update-baseline", action="store_true", default=False,
                    help=HELP_UPDATE)
    group.addoption("--opprof-append-baseline", action="store_true", default=False,
                    help=HELP_APPEND)
    # internal: set by pytest-opprof's own child processes, hidden from --help
    group.addoption("--opprof-baseline-batch", default="", metavar="ID", help=argparse.SUPPRESS)
    group.addoption("--opprof-tolerance", type=_tolerance, default=None, metavar="X",
                    help=HELP_TOLERANCE)
    group.addoption("--opprof-strict-ops", action="store_true", default=None, help=HELP_STRICT)
    group.addoption("--opprof-strict", action="store_true", default=None,
                    help=HELP_STRICT_RUN)
    group.addoption("--opprof-strict-effect", type=_strict_effect, default=None,
                    metavar="PCT", help=HELP_STRICT_EFFECT)
    group.addoption("--opprof-json", default=None, metavar="PATH", help=HELP_JSON)
    group.addoption("--opprof-markdown", default=None, metavar="PATH", help=HELP_MARKDOWN)
    group.addoption("--opprof-trace", default=None, metavar="DIR", help=HELP_TRACE)
    group.addoption("--opprof-html", default=None, metavar="PATH", help=HELP_HTML)
    group.addoption("--opprof-no-confirm", action="store_true", default=False,
                    help=HELP_NO_CONFIRM)
    group.addoption("--opprof-no-gate", action="store_true", default=False, help=HELP_NO_GATE)
    group.addoption("--opprof-profile-out", default=None, metavar="PATH",
                    help=argparse.SUPPRESS)  # internal, as --opprof-baseline-batch
    for name, text in INI_VALUES.items():
        # argparse %-formats a flag's help ("5%%" prints "5%"); an ini value's is printed raw
        parser.addini(name, text.replace("%%", "%"), default="")
    parser.addini(GONE_INI, "removed: set opprof_measure instead", default="")


#: The ini values, each the twin of a flag: name -> help.
INI_VALUES = {
    "opprof_verbosity": HELP_VERBOSITY,
    "opprof_skip": HELP_SKIP,
    "opprof_iterations": HELP_ITERATIONS,
    "opprof_measure": HELP_MEASURE,
    "opprof_baseline_dir": HELP_BASELINE_DIR,
    "opprof_machine_key": HELP_MACHINE_KEY,
    "opprof_tolerance": HELP_TOLERANCE,
    "opprof_strict_ops": HELP_STRICT,
    "opprof_strict": HELP_STRICT_RUN,
    "opprof_strict_effect": HELP_STRICT_EFFECT,
}


def requested(config: pytest.Config) -> bool:
    """Whether this run asks for opprof: an ``--opprof-*`` flag or an ``opprof_*`` ini
    value is set. If not, the plugin stays inert until a test uses its fixture."""
    flags = vars(config.option)
    if any(name.startswith("opprof_") and value not in (None, False, "")
           for name, value in flags.items()):
        return True
    return any(str(config.getini(name) or "").strip() for name in (*INI_VALUES, GONE_INI))


#: Flags that contradict each other: (flag, flag, why). Only flags: an ini value is a
#: project's standing default, which a flag may override.
CONFLICTS = (
    ("opprof_update_baseline", "opprof_no_gate",
     "updating baselines is the gate's work; drop one of them"),
    ("opprof_append_baseline", "opprof_no_gate",
     "updating baselines is the gate's work; drop one of them"),
    ("opprof_update_baseline", "opprof_append_baseline",
     "--opprof-append-baseline already updates (adding a run); give one of them"),
    ("opprof_no_gate", "opprof_strict_ops",
     "strict ops are a gate rule and the gate is off; drop one of them"),
    ("opprof_no_gate", "opprof_tolerance",
     "the tolerance is the gate's and the gate is off; drop one of them"),
    ("opprof_no_gate", "opprof_strict",
     "strict mode fails the tests the gate could not judge and the gate is off; drop one "
     "of them"),
    ("opprof_no_gate", "opprof_strict_effect",
     "strict mode fails the tests the gate could not judge and the gate is off; drop one "
     "of them"),
)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def refuse_conflicts(config: pytest.Config) -> None:
    """One usage error line for the first pair of given flags that contradict."""
    given = {name for name, value in vars(config.option).items()
             if name.startswith("opprof_") and value not in (None, False, "")}
    for first, second, why in CONFLICTS:
        if first in given and second in given:
            raise pytest.UsageError(f"{_flag(first)} and {_flag(second)} contradict: {why}")
    if "opprof_baseline_batch" in given and not given & {"opprof_update_baseline",
                                                          "opprof_append_baseline"}:
        raise pytest.UsageError("--opprof-baseline-batch names the runs of a baseline update; "
                                "give it with --opprof-update-baseline")


def _resolve(config: pytest.Config, name: str, parse: Callable[[str], Any], default: Any) -> Any:
    """The flag if given, else its ini twin (validated here), else ``default``."""
    value = config.getoption(name, None)  # the flag --opprof-x has the dest opprof_x
    if value is not None:
        return value
    raw = str(config.getini(name) or "").strip()
    if not raw:
        return default
    try:
        return parse(raw)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option {name} = {shown(raw)}: {exc}") from None


def _measure(text: str) -> str:
    """A registered measure's name, or ``auto`` (after the conftest files have loaded:
    one of them may register a measure)."""
    if text != measures.AUTO:
        try:
            measures.named(text)
        except OpprofError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _measure_of(config: pytest.Config) -> str:
    """``--opprof-measure``, else ``opprof_measure``, checked; the ini value it replaced
    is refused in one line."""
    if str(config.getini(GONE_INI) or "").strip():
        choices = ", ".join(measures.choices())
        raise pytest.UsageError(f"ini option {GONE_INI} is gone: set opprof_measure instead "
                                f"({choices}; time for cpu, events or kernel for cuda)")
    flag = config.getoption("opprof_measure", None)
    if flag is None:
        return str(_resolve(config, "opprof_measure", _measure, DEFAULT_MEASURE))
    try:
        return _measure(flag)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"--opprof-measure: {exc}") from None


def _baseline_dir(config: pytest.Config) -> Path:
    """The flag relative to where pytest was started; the ini value relative to the ini
    file's folder; by default .opprof/ at the rootdir."""
    flag = config.getoption("opprof_baseline_dir", None)
    if flag:
        return Path(config.invocation_params.dir, flag)
    raw = str(config.getini("opprof_baseline_dir") or "").strip()
    if raw:
        base = config.inipath.parent if config.inipath else config.rootpath
        return Path(base, raw)
    return Path(config.rootpath, DEFAULT_BASELINE_DIR)


@dataclass(frozen=True)
class Settings:
    """The session-wide settings, resolved once."""

    verbosity: int = DEFAULT_VERBOSITY
    skip: int = DEFAULT_SKIP
    iterations: int = DEFAULT_ITERATIONS
    #: The measure's name, or ``auto`` (resolved when the session starts it).
    measure: str = DEFAULT_MEASURE
    baseline_dir: Path = Path(DEFAULT_BASELINE_DIR)
    #: None: derived from the measure and device once the measure has started.
    machine_key: str | None = None
    update_baseline: bool = False
    append_baseline: bool = False
    baseline_batch: str = ""
    tolerance: float = DEFAULT_TOLERANCE
    #: The tolerance the flag or the ini file gave; None: each measure's default.
    given_tolerance: float | None = None
    strict_ops: bool = False
    #: Fail the session when a gated test could not be judged (``--opprof-strict``), and
    #: also when its median op's detectable effect is beyond ``strict_effect``.
    strict: bool = False
    strict_effect: float | None = None
    json_path: Path | None = None
    markdown_path: Path | None = None
    trace_dir: Path | None = None
    html_path: Path | None = None
    confirm: bool = True
    gate: bool = True
    profile_out: Path | None = None

    @property
    def strict_applies(self) -> bool:
        """Whether strict mode judges this run: it is asked for, the gate is on and the
        run gates (an update judges nothing; a child that only profiles is not gated)."""
        return self.strict and self.gate and not self.update_baseline

    def tolerance_for(self, measure: type[measures.Measure]) -> float:
        """The tolerance figures of ``measure`` are judged at: the one given, else the
        measure's default (a command reading stored counts under a time session)."""
        return measure.gate.tolerance if self.given_tolerance is None \
            else self.given_tolerance

    @classmethod
    def from_pytest_config(cls, config: pytest.Config) -> Settings:
        def path(option: str) -> Path | None:
            value = config.getoption(option, None)
            return Path(config.invocation_params.dir, value) if value else None


        machine_key = _resolve(config, "opprof_machine_key", str.strip, None) or None
        measure = _measure_of(config)
        given = _resolve(config, "opprof_tolerance", _tolerance, None)
        strict_effect = _resolve(config, "opprof_strict_effect", _strict_effect, None)
        return cls(
            verbosity=_resolve(config, "opprof_verbosity", _verbosity, DEFAULT_VERBOSITY),
            skip=_resolve(config, "opprof_skip", _skip, DEFAULT_SKIP),
            iterations=_resolve(config, "opprof_iterations", _iterations, DEFAULT_ITERATIONS),
            measure=measure,
            baseline_dir=_baseline_dir(config),
            machine_key=machine_key,
            update_baseline=bool(config.getoption("opprof_update_baseline", False)
                                 or config.getoption("opprof_append_baseline", False)),
            append_baseline=bool(config.getoption("opprof_append_baseline", False)),
            baseline_batch=str(config.getoption("opprof_baseline_batch", "") or ""),
            tolerance=measures.defaults_of(measure).gate.tolerance if given is None else given,
            given_tolerance=given,
            strict_ops=_resolve(config, "opprof_strict_ops", _yes_no, False),
            strict=bool(_resolve(config, "opprof_strict", _yes_no, False)
                        or strict_effect is not None),
            strict_effect=strict_effect,
            json_path=path("opprof_json"),
            markdown_path=path("opprof_markdown"),
            trace_dir=path("opprof_trace"),
            html_path=path("opprof_html"),
            confirm=not config.getoption("opprof_no_confirm", False),
            gate=not config.getoption("opprof_no_gate", False),
            profile_out=path("opprof_profile_out"),
        )


@dataclass(frozen=True)
class TestSettings:
    """What applies to one test: the session's settings under its marker."""

    __test__ = False  # not a pytest test class

    skip: int
    iterations: int
    #: The default tolerance and per-op-name exceptions.
    tolerance: float = DEFAULT_TOLERANCE
    tolerances: Mapping[str, float] = field(default_factory=dict)
    #: Absolute budgets: op name -> the most its median may take, in ns.
    budgets: Mapping[str, float] = field(default_factory=dict)


MARKER_HELP = ("opprof(skip=N, iterations=N, tolerance=X or {op: X}, max_time={op: '2ms'}): "
               "per-test pytest-opprof settings: skipped iterations, the default iteration "
               "count of gpu_profiler.iterations(), the gate's tolerance (overall or per op) "
               "and absolute per-op time budgets")

_COUNT_ARGS: dict[str, tuple[str, int]] = {
    # argument: (what it is, its minimum)
    "skip": ("the number of skipped iterations", 0),
    "iterations": ("the number of iterations", 1),
}
_MARKER_ARGS = (*_COUNT_ARGS, "max_time", "tolerance")


def _op_mapping(where: str, key: str, value: Any,
                parse: Callable[[Any, str], float]) -> dict[str, float]:
    if not isinstance(value, Mapping) or not value:
        raise OpprofError(f"{where}: {key} must be a non-empty dict of op name to value, "
                          f"not {shown(value)}")
    parsed = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise OpprofError(f"{where}: {key} has an op name {shown(name)}; "
                              "use op names (strings)")
        try:
            parsed[name] = parse(item, f"{key}[{shown(name)}]")
        except argparse.ArgumentTypeError as exc:
            raise OpprofError(f"{where}: {exc}") from None
    return parsed


def test_settings(item: pytest.Item, settings: Settings) -> TestSettings:
    """The settings for ``item``; a bad ``opprof`` marker raises :class:`OpprofError`."""
    values: dict[str, Any] = {}
    for mark in reversed(list(item.iter_markers("opprof"))):  # the closest marker wins
        where = f"@pytest.mark.opprof on {item.nodeid}"
        if mark.args:
            raise OpprofError(f"{where}: takes keyword arguments only "
                              f"({', '.join(sorted(_MARKER_ARGS))}), got {shown(mark.args)}")
        for key, value in mark.kwargs.items():
            if key not in _MARKER_ARGS:
                raise OpprofError(f"{where}: unknown argument {shown(key)}; "
                                  f"accepted: {', '.join(sorted(_MARKER_ARGS))}")
            values[key] = _marker_value(where, key, value)
    tolerance = values.get("tolerance", settings.tolerance)
    return TestSettings(
        skip=values.get("skip", settings.skip),
        iterations=values.get("iterations", settings.iterations),
        tolerance=tolerance if isinstance(tolerance, float) else settings.tolerance,
        tolerances=tolerance if isinstance(tolerance, dict) else {},
        budgets=values.get("max_time", {}),
    )


def _marker_value(where: str, key: str, value: Any) -> Any:
    if key in _COUNT_ARGS:
        what, minimum = _COUNT_ARGS[key]
        if (isinstance(value, bool) or not isinstance(value, int)
                or not minimum <= value <= MAX_ITERATIONS):
            raise OpprofError(f"{where}: {key}={shown(value)}: {what} must be a whole "
                              f"number from {minimum} to {MAX_ITERATIONS}")
        return value
    if key == "max_time":
        return _op_mapping(where, key, value, parse_duration_ns)
    if isinstance(value, Mapping):  # tolerance per op
        return _op_mapping(where, key, value, parse_fraction)
    try:
        return parse_fraction(value, f"tolerance={shown(value)}: the tolerance")
    except argparse.ArgumentTypeError as exc:
        raise OpprofError(f"{where}: {exc}") from None
