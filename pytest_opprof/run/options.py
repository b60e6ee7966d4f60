"""Flags, their ini twins and the marker, resolved once into frozen settings.

Precedence: the per-test marker, then the command line, then the ini file,
then the defaults below. The output flags come from the output registry
(:data:`pytest_opprof.run.outputs.RUN_OUTPUTS`).
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import OpprofError
from ..judge.config import TOLERANCE
from ..measure import measures
from . import outputs

if TYPE_CHECKING:
    from ..model.hints import Retake

DEFAULT_VERBOSITY = 0
#: The first iteration pays for compilation, allocation and cold caches.
DEFAULT_SKIP = 1
DEFAULT_ITERATIONS = 20
DEFAULT_MEASURE = measures.AUTO
#: The ini value the measure replaced (the device follows from the measure): refused.
GONE_INI = "opprof_backend"
DEFAULT_BASELINE_DIR = ".opprof"
#: The most iterations a test may run or skip: beyond it a value is a typo, not a plan.
MAX_ITERATIONS = 1_000_000
#: The longest shown excerpt of a bad value in an error line.
SHOWN_CHARS = 60
#: Set by pytest-opprof for the pytest processes it starts: a child's folder (read where
#: the child plugin, :mod:`.child`, is loaded) and the batch of an update's runs.
CHILD_VARIABLE = "PYTEST_OPPROF_CHILD"
CHILD_PLUGIN = "pytest_opprof.run.child"
CHILD_RECORDS = "records.json"
#: The node ids a child is to run, in its folder (a JSON list): never its command line.
CHILD_NODEIDS = "nodeids.json"
#: Set for every process pytest-opprof starts: the folder its starter removes once the
#: child's whole group has ended; every temporary folder the child makes goes in it.
SCRATCH_VARIABLE = "PYTEST_OPPROF_SCRATCH"
#: Set (with the child plugin loaded) for the child that takes a measure's figures for
#: its parent (``run.counting``); never passed on to the processes a child starts.
COUNTING_VARIABLE = "PYTEST_OPPROF_COUNTING"
BATCH_VARIABLE = "PYTEST_OPPROF_BATCH"

HELP_VERBOSITY = (
    "opprof report: 0 none (profiles are still taken), 1 forward/backward time per "
    "iteration, 2 also every op in graph order and a per-op-type table "
    f"(default {DEFAULT_VERBOSITY})"
)
HELP_SKIP = ("leave the first N iterations of each profiled test out of every figure "
             f"(default {DEFAULT_SKIP}; gpu_profiler.iterations(n, skip=k) sets it in code)")
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
HELP_UPDATE = ("write the baselines of the profiled tests that ran and passed, instead of "
               "gating: replace (the default) the stored runs, or append this run to them "
               "(the last 20 are kept: a history of how the machine varies, for main-branch CI)")
HELP_TOLERANCE = ("the smallest drift-corrected slowdown of an op that fails its test, as a "
                  "fraction or percentage (default " + ", ".join(
                      [f"{TOLERANCE:.0%}", *(
                          f"{m.gate.tolerance:.0%} under --opprof-measure={m.name}"
                          for m in measures.listed() if m.gate.tolerance != TOLERANCE)])
                  + ")").replace("%", "%%")
HELP_STRICT = ("a comma list: ops (new or missing ops fail their test), unjudged (fail the "
               "session, exit code 1, when a gated test could not be judged: no baseline on "
               "this machine, other run conditions, an absurd drift, nothing counted; the "
               "tests' own outcomes stand and the summary names each: for CI), an effect such "
               "as 25%% (also fail it when a test's gate could see only slowdowns beyond it; "
               "implies unjudged); bare: unjudged")
HELP_NO_CONFIRM = ("fail on the first run's evidence alone, without re-running a test whose "
                   "op looks regressed in a new process to confirm it")
HELP_NO_GATE = "profile and report only: compare nothing with the baselines"


def shown(value: Any) -> str:
    """``value`` as an error line shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS - 3]}..."


def whole_number(what: str, lowest: int, highest: int, why: str = "") -> Callable[[str], int]:
    """An argparse type; ``why`` says where the bounds come from."""
    expected = (f"a whole number from {lowest} to {highest}" if highest - lowest > 3 else
                ", ".join(str(v) for v in range(lowest, highest)) + f" or {highest}") + why

    def parse(text: str) -> int:
        """A flag's text, or a whole number given in code (numpy's too; a bool or a
        float is no count: ``int(2.5)`` would be 2)."""
        from ..model.words import whole

        try:
            number = int(text) if isinstance(text, str) else whole(text)
        except ValueError:
            number = None
        value = lowest - 1 if number is None else number
        if not lowest <= value <= highest:
            raise argparse.ArgumentTypeError(f"{what} must be {expected}, not {shown(text)}")
        return value

    return parse


_verbosity = whole_number("the verbosity", 0, 2)
_skip = whole_number("the number of skipped iterations", 0, MAX_ITERATIONS)
_iterations = whole_number("the number of iterations", 1, MAX_ITERATIONS)


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


def fraction(what: str) -> Callable[[str], float]:
    return lambda text: parse_fraction(text, what)


def _is_number(value: Any) -> bool:
    """What a marker may give as a number: numpy's too, not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


_UNITS_NS = {"ns": 1.0, "us": 1e3, "\u00b5s": 1e3, "ms": 1e6, "s": 1e9}
_DURATION = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(ns|us|\u00b5s|ms|s)\s*$")


def parse_duration_ns(value: Any, what: str) -> float:
    """``"2ms"``, ``"300us"``, ``"1.5s"``, ``"500ns"`` or a number of seconds -> ns."""
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


_tolerance = fraction("the tolerance")


@dataclass(frozen=True)
class Strictness:
    """``--opprof-strict`` (:data:`HELP_STRICT`)."""

    ops: bool = False
    unjudged: bool = False
    effect: float | None = None


def parse_strict(text: str) -> Strictness:
    words = [word.strip() for word in str(text).split(",")]
    effects = [parse_fraction(w, "the strict effect") for w in words if w[:1] in _DIGITS]
    for word in words:
        if word not in ("ops", "unjudged") and word[:1] not in _DIGITS:
            raise argparse.ArgumentTypeError(
                f"{shown(word)} is not ops, unjudged or an effect such as 25%{_path(word)}")
    if len(effects) > 1:
        raise argparse.ArgumentTypeError(f"{shown(text)} gives {len(effects)} effects; give one")
    effect = effects[0] if effects else None
    return Strictness("ops" in words, "unjudged" in words or effect is not None, effect)


_DIGITS = tuple("0123456789.")


def _path(word: str) -> str:
    """What to do when a flag's optional value swallowed a test path."""
    exists = bool(word) and os.path.exists(word.split("::")[0])
    return " (put a test path before this flag)" if exists else ""


def _update_mode(text: str) -> str:
    if text not in ("replace", "append"):
        raise argparse.ArgumentTypeError(f"{shown(text)} is not replace or append{_path(text)}")
    return text


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("opprof", "per-op profiling (pytest-opprof)")
    group.addoption("--opprof-verbosity", type=_verbosity, default=None, metavar="N",
                    help=HELP_VERBOSITY)
    group.addoption("--opprof-skip", type=_skip, default=None, metavar="N", help=HELP_SKIP)
    # no choices here: a conftest.py may register a measure (checked in Settings)
    group.addoption("--opprof-measure", default=None, metavar="NAME", help=HELP_MEASURE)
    group.addoption("--opprof-baseline-dir", default=None, metavar="DIR", help=HELP_BASELINE_DIR)
    group.addoption("--opprof-machine-key", default=None, metavar="NAME", help=HELP_MACHINE_KEY)
    group.addoption("--opprof-update-baseline", type=_update_mode, nargs="?", const="replace",
                    default=None, metavar="replace|append", help=HELP_UPDATE)
    group.addoption("--opprof-tolerance", type=_tolerance, default=None, metavar="X",
                    help=HELP_TOLERANCE)
    group.addoption("--opprof-strict", type=parse_strict, nargs="?", const=Strictness(
        unjudged=True), default=None, metavar="ops,unjudged,PCT", help=HELP_STRICT)
    for output in outputs.RUN_OUTPUTS:
        group.addoption(output.flag, default=None, metavar=output.metavar, help=output.help)
    group.addoption("--opprof-no-confirm", action="store_true", default=False,
                    help=HELP_NO_CONFIRM)
    group.addoption("--opprof-no-gate", action="store_true", default=False, help=HELP_NO_GATE)
    for name, text in INI_VALUES.items():
        # argparse %-formats a flag's help ("5%%" prints "5%"); an ini value's is printed raw
        parser.addini(name, text.replace("%%", "%"), default="")
    parser.addini(GONE_INI, "removed: set opprof_measure instead", default="")


#: The ini values, each the twin of a flag: name -> help.
INI_VALUES = {"opprof_verbosity": HELP_VERBOSITY, "opprof_skip": HELP_SKIP,
              "opprof_iterations": HELP_ITERATIONS, "opprof_measure": HELP_MEASURE,
              "opprof_baseline_dir": HELP_BASELINE_DIR,
              "opprof_machine_key": HELP_MACHINE_KEY, "opprof_tolerance": HELP_TOLERANCE,
              "opprof_strict": HELP_STRICT}


def requested(config: pytest.Config) -> bool:
    """Whether this run asks for opprof: an ``--opprof-*`` flag or an ``opprof_*`` ini
    value is set, or it is a child of pytest-opprof's (whose records are asked for). If
    not, the plugin stays inert until a test uses its fixture."""
    return any(name.startswith("opprof_") and value not in (None, False, "")
               for name, value in vars(config.option).items()) \
        or any(str(config.getini(name) or "").strip() for name in (*INI_VALUES, GONE_INI)) \
        or config.pluginmanager.has_plugin(CHILD_PLUGIN)


#: Flags that contradict each other: (flag, flag, why). Only flags typed on the command
#: line: an ini value or ``addopts`` is a project's standing default, which a flag may
#: override (``--opprof-no-gate`` turns a standing ``--opprof-strict`` off).
CONFLICTS = (
    ("--opprof-update-baseline", "--opprof-no-gate",
     "updating baselines is the gate's work; drop one of them"),
    ("--opprof-no-gate", "--opprof-strict",
     "strict mode is about what the gate judged and the gate is off; drop one of them"),
    ("--opprof-no-gate", "--opprof-tolerance",
     "the tolerance is the gate's and the gate is off; drop one of them"),
)


def refuse_conflicts(config: pytest.Config) -> None:
    """One usage error line for the first pair of typed flags that contradict."""
    typed = {str(arg).split("=", 1)[0] for arg in config.invocation_params.args}
    for first, second, why in CONFLICTS:
        if first in typed and second in typed:
            raise pytest.UsageError(f"{first} and {second} contradict: {why}")


def setting(config: pytest.Config, name: str, value: Any) -> str:
    """The setting ``name`` as the user gave it, for a line about a problem with it: the
    flag (``--opprof-measure=kernel``), the override (``-o opprof_measure=kernel``) or
    the ini file's line (``ini option opprof_measure = 'kernel' in tox.ini``)."""
    if config.getoption(name, None) is not None:  # the flag --opprof-x has the dest opprof_x
        return f"--{name.replace('_', '-')}={value}"
    overrides = getattr(config.option, "override_ini", None) or ()
    if any(str(o).split("=", 1)[0].strip() == name for o in overrides):
        return f"-o {name}={value}"
    where = f" in {config.inipath.name}" if config.inipath else ""
    return f"ini option {name} = {shown(value)}{where}"


def _resolve(config: pytest.Config, name: str, parse: Callable[[str], Any], default: Any) -> Any:
    """The flag if given, else its ini twin (validated here), else ``default``."""
    value = config.getoption(name, None)  # the flag --opprof-x has the dest opprof_x
    if value is not None:
        return value
    raw = str(config.getini(name) or "").strip()
    try:
        return parse(raw) if raw else default
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"{setting(config, name, raw)}: {exc}") from None


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
    gone = str(config.getini(GONE_INI) or "").strip()
    if gone:
        choices = ", ".join(measures.choices())
        raise pytest.UsageError(f"{setting(config, GONE_INI, gone)}: is gone, set "
                                f"opprof_measure instead ({choices}; {measures.backends()})")
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
    raw = str(config.getini("opprof_baseline_dir") or "").strip()
    if flag:
        return Path(config.invocation_params.dir, flag)
    return Path(config.inipath.parent if config.inipath and raw else config.rootpath,
                raw or DEFAULT_BASELINE_DIR)


@dataclass(frozen=True)
class Settings:
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
    baseline_batch: str = ""  # shared by the runs of one opprof baseline update
    tolerance: float = TOLERANCE
    #: The tolerance the flag or the ini file gave; None: each measure's default.
    given_tolerance: float | None = None
    #: ``--opprof-strict``: ``ops``; ``unjudged`` (``strict``) and its effect.
    strict_ops: bool = False
    strict: bool = False
    strict_effect: float | None = None
    #: flag (of ``outputs.RUN_OUTPUTS``) -> path
    outputs: Mapping[str, Path] = field(default_factory=dict)
    confirm: bool = True
    gate: bool = True
    #: Where a child started by pytest-opprof, which only profiles, writes its records.
    profile_out: Path | None = None
    #: Whether the run is a CI job's (``CI`` set, as every CI service sets it): a time
    #: gate blind beyond judge.config.BLIND reports its regressions there, fails none.
    ci: bool = False

    @property
    def strict_applies(self) -> bool:
        """An update judges nothing; a child that only profiles is not gated."""
        return self.strict and self.gate and not self.update_baseline

    def tolerance_of_measure(self, measure: type[measures.Measure]) -> float:
        """The one given, else the measure's default (for a command reading stored
        counts under a time session)."""
        return measure.gate.tolerance if self.given_tolerance is None \
            else self.given_tolerance

    @classmethod
    def from_pytest_config(cls, config: pytest.Config) -> Settings:
        machine_key = _resolve(config, "opprof_machine_key", str.strip, None) or None
        measure = _measure_of(config)
        given = _resolve(config, "opprof_tolerance", _tolerance, None)
        strict = _resolve(config, "opprof_strict", parse_strict, Strictness())
        update = config.getoption("opprof_update_baseline", None)
        child = os.environ.get(CHILD_VARIABLE, "") \
            if config.pluginmanager.has_plugin(CHILD_PLUGIN) else ""
        return cls(
            verbosity=_resolve(config, "opprof_verbosity", _verbosity, DEFAULT_VERBOSITY),
            skip=_resolve(config, "opprof_skip", _skip, DEFAULT_SKIP),
            iterations=_resolve(config, "opprof_iterations", _iterations, DEFAULT_ITERATIONS),
            measure=measure,
            baseline_dir=_baseline_dir(config),
            machine_key=machine_key,
            update_baseline=update is not None,
            append_baseline=update == "append",
            baseline_batch=os.environ.get(BATCH_VARIABLE, ""),
            tolerance=measures.defaults_of(measure).gate.tolerance if given is None else given,
            given_tolerance=given,
            strict_ops=strict.ops,
            strict=strict.unjudged,
            strict_effect=strict.effect,
            outputs={o.flag: Path(config.invocation_params.dir, path)
                     for o in outputs.RUN_OUTPUTS
                     if (path := config.getoption(outputs.dest(o.flag), None))},
            confirm=not config.getoption("opprof_no_confirm", False),
            gate=not (config.getoption("opprof_no_gate", False) or child),  # a child profiles
            profile_out=Path(child, CHILD_RECORDS) if child else None,
            ci=os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"),
        )


def retake(config: pytest.Config, settings: Settings, measure: str) -> Retake:
    """``opprof baseline update`` for this run (:mod:`pytest_opprof.model.hints`): the
    ini file, rootdir and ``-o`` overrides it was started with (they select its tests),
    its xdist workers, and the settings its baselines depend on as this run resolved
    them (a flag, an ini value or an override alike): the measure it took, the machine
    key and baseline folder given, the iterations and skip where not the defaults."""
    from ..model import hints

    option = config.option
    given: list[str] = []
    if getattr(option, "inifilename", None):
        given += ["-c", str(option.inifilename)]
    if getattr(option, "rootdir", None):
        given.append(hints.flag("--rootdir", option.rootdir))
    for override in getattr(option, "override_ini", None) or ():
        if not str(override).startswith("opprof_"):  # those are carried as flags below
            given += ["-o", str(override)]
    given += hints.workers_flags(_workers(config))
    given.append(hints.flag("--opprof-measure", measure))
    if settings.machine_key is not None:
        given.append(hints.flag("--opprof-machine-key", settings.machine_key))
    start = config.invocation_params.dir
    if settings.baseline_dir != Path(config.rootpath, DEFAULT_BASELINE_DIR):
        given.append(hints.flag("--opprof-baseline-dir",
                                os.path.relpath(settings.baseline_dir, start)))
    if settings.iterations != DEFAULT_ITERATIONS:
        given += ["-o", f"opprof_iterations={settings.iterations}"]  # an ini value only
    if settings.skip != DEFAULT_SKIP:
        given.append(hints.flag("--opprof-skip", settings.skip))
    where = Path(os.path.relpath(config.rootpath, start)).as_posix()
    return hints.Retake(tuple(given), where)


def _workers(config: pytest.Config) -> int | None:
    """The run's xdist workers: a worker is told; the controller started ``--tx``'s."""
    workerinput = getattr(config, "workerinput", None)
    if isinstance(workerinput, dict):
        count = str(workerinput.get("workercount", ""))
        return int(count) if count.isdecimal() else None
    started = getattr(config.option, "tx", None) if getattr(config.option, "numprocesses",
                                                            None) else None
    return len(started) if isinstance(started, list) else None


@dataclass(frozen=True)
class TestSettings:
    """The session's settings under one test's marker."""

    __test__ = False  # not a pytest test class

    skip: int
    iterations: int
    tolerance: float = TOLERANCE
    tolerances: Mapping[str, float] = field(default_factory=dict)
    #: op name -> the most its median may take, in ns
    budgets: Mapping[str, float] = field(default_factory=dict)


MARKER_HELP = ("opprof(skip=N, iterations=N, tolerance=X or {op: X}, max_time={op: '2ms'}): "
               "per-test pytest-opprof settings: skipped iterations, the default iteration "
               "count of gpu_profiler.iterations(), the gate's tolerance (overall or per op) "
               "and absolute per-op time budgets")

#: The marker's counts: argument -> (what it is, its least value).
_COUNT_ARGS = {"skip": ("the number of skipped iterations", 0),
               "iterations": ("the number of iterations", 1)}
_MARKER_ARGS = (*_COUNT_ARGS, "max_time", "tolerance")


def _op_mapping(where: str, key: str, value: Any,
                parse: Callable[[Any, str], float]) -> dict[str, float]:
    if not isinstance(value, Mapping) or not value:
        raise OpprofError(f"{where}: {key} must be a non-empty dict of op name to value, "
                          f"not {shown(value)}")
    bad = [name for name in value if not isinstance(name, str) or not name]
    if bad:
        raise OpprofError(f"{where}: {key} has an op name {shown(bad[0])}; use op names "
                          "(strings)")
    try:
        return {name: parse(item, f"{key}[{shown(name)}]") for name, item in value.items()}
    except argparse.ArgumentTypeError as exc:
        raise OpprofError(f"{where}: {exc}") from None


def test_settings(item: pytest.Item, settings: Settings) -> TestSettings:
    """OpprofError for a bad ``opprof`` marker."""
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
    try:
        if key in _COUNT_ARGS:  # an int or np.int64: not "10", not 2.0, not True
            from ..model.words import whole

            what, lowest = _COUNT_ARGS[key]
            number = whole(value)
            if number is None or not lowest <= number <= MAX_ITERATIONS:
                raise argparse.ArgumentTypeError(
                    f"{what} must be a whole number from {lowest} to {MAX_ITERATIONS}")
            return number
        if key == "max_time":
            return _op_mapping(where, key, value, parse_duration_ns)
        if isinstance(value, Mapping):  # tolerance per op
            return _op_mapping(where, key, value, parse_fraction)
        return parse_fraction(value, "the tolerance")
    except argparse.ArgumentTypeError as exc:
        raise OpprofError(f"{where}: {key}={shown(value)}: {exc}") from None
