"""The measures: what an op's figure is (``--opprof-measure``), each one registered object
that owns everything that differs between figures; the session, the gate, the commands
and the renderers ask it, and none of them spells a name. Modelled on pytest-codspeed's
instruments (docs/architecture.md, "The measure objects").

The class says what the figures are, read without starting anything (a stored profile's
measure, found by its name); an instance is the measure started in this process. A
``conftest.py`` adds one with :func:`register` (tests/test_own_measure.py). Importing
this package is cheap (``--help`` reads :func:`choices`): each measure loads its timer,
and numpy or CuPy with it, when it starts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ...errors import OpprofError
from ...model import conditions as run_conditions
from ...model.words import Unit, amount

if TYPE_CHECKING:
    from ...model.profile import Profile
    from ..timers.base import Timer

#: The smallest drift-corrected slowdown that may fail an op of a timed measure (see
#: benchmarks/RESULTS.md); the judges' default (``judge.config``) too.
TOLERANCE = 0.05
#: The runs ``opprof baseline update`` takes by default (each a new process).
BASELINE_RUNS = 5
#: The choice that takes the first measure of :data:`AUTO_ORDER` that starts here.
AUTO = "auto"
AUTO_ORDER = ("kernel", "events", "time")


class Unavailable(OpprofError):
    """A measure cannot run here: ``why`` (one line) and what to do instead. ``said``:
    whether ``auto`` says why it fell back (a GPU without kernel time is worth a line; a
    machine with no GPU is not)."""

    def __init__(self, why: str, advice: str = "", *, said: bool = True) -> None:
        super().__init__(why)
        self.why = why
        self.advice = advice
        self.said = said


@dataclass(frozen=True)
class GateSettings:
    """How the gate judges a measure's figures, in its unit (``judge.gate.gate_config``)."""

    #: A slowdown must also exceed this much per call, drift-corrected.
    floor: float
    #: An op's median's relative spread between processes where none is measured, and
    #: the least a measured one is taken to be.
    tau_prior: float
    tau_floor: float
    #: Absolute jitter per call, so short ops get a wider margin.
    jitter: float
    #: The smallest slowdown that may fail an op when none is given.
    tolerance: float = TOLERANCE
    #: Fewer counted samples than this in a run: the op is not judged.
    min_samples: int = 5
    #: Whether a rank test guards against one odd run (figures that repeat need none).
    rank_test: bool = True
    #: Whether the machine's speed moves the figures: the drift is corrected, and ops that
    #: grew together leave the test unjudged (a busy machine, not the code).
    drift: bool = True
    #: How much more real runs spread than baseline runs taken back to back show.
    spread_inflation: float = 1.5
    #: Whether a suspected regression is confirmed by profiling the test again in a new
    #: process (figures that repeat would show the same, at the same cost).
    confirms: bool = True


class Measure(ABC):
    """One way to take an op's figure. See the module's docstring."""

    #: What ``--opprof-measure`` calls it, and what profiles and baselines record.
    name: ClassVar[str]
    #: What ``--help`` says of it; one without help (the tests' fakes) is not offered.
    help: ClassVar[str] = ""
    unit: ClassVar[Unit] = Unit.NANOSECONDS
    #: For counts: what is counted, and its short form (``3.42M instr``).
    counts: ClassVar[tuple[str, str]] = ("", "")
    #: What an op's figure is (``kernel time``) and where it comes from (``CUPTI ...``).
    figure: ClassVar[str]
    source: ClassVar[str] = ""
    gate: ClassVar[GateSettings]
    baseline_runs: ClassVar[int] = BASELINE_RUNS
    #: The start of the machine key of its baselines (the device follows).
    key: ClassVar[str]
    #: The (backend, measure) pairs that stood for it in baselines of schema 2 and results
    #: files of schema 1.
    formerly: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: Whether the reference probe's time tracks the speed its figures move with (a
    #: virtual clock's or counts' do not).
    probed: ClassVar[bool] = True
    #: Whether its figures repeat between processes (counts): ``opprof compare`` judges
    #: one pair enough, without a drift.
    repeats: ClassVar[bool] = False
    #: Whether unpinned BLAS threads contend for its cores (host time): the header says so.
    threads_matter: ClassVar[bool] = False

    #: Where the figures are taken: ``AMD EPYC (2 cores)``, ``NVIDIA H200 (device 0)``.
    device: str = ""
    #: Why ``auto`` did not take the measure it tried first (one line), or "".
    passed_over: str = ""
    #: Whether this process is the child that takes the figures for its parent.
    in_child: bool = False

    def __init__(self, worker: int | None = None) -> None:  # noqa: B027 - most need nothing
        """Start the measure (``worker``: the xdist worker's number), or :class:`Unavailable`."""

    @property
    def xp(self) -> ModuleType:
        import numpy

        return numpy

    @abstractmethod
    def timer(self, skip: int) -> Timer:
        """A new timer for one test, whose loop skips ``skip`` iterations."""

    def probe_ns(self) -> float | None:
        """The reference probe's time now (ns): how fast the machine runs, by work the
        code under test does not touch; None where no machine speed moves the figures."""
        if not self.probed:
            return None
        from ..probe import reference_probe

        return reference_probe(self.xp)

    def header(self) -> str:
        """The run header's line: what it takes, what it cannot see, why ``auto`` took it."""
        line = f"opprof: measure {self.name} ({self.figure} from {self.source})"
        return f"{line}: {self.passed_over}" if self.passed_over else line

    def machine_key(self) -> str:
        """Where its baselines are stored, unless ``opprof_machine_key`` names a place."""
        return f"{self.key}-{self.device}"

    def conditions(self, workerinput: Any) -> run_conditions.Conditions:
        """What its figures were taken under, compared with the baseline's."""
        return run_conditions.current(workerinput, measure=self.name, device=self.device)

    #: Iterations counted after the skipped ones by a child that takes the figures (0:
    #: the tests' own processes take them), and what the child runs under.
    child_counts: ClassVar[int] = 0
    child_tool: ClassVar[str] = ""

    def child_command(self, out: Path) -> tuple[list[str], dict[str, str]]:
        """The child's wrapper command and what its environment adds (``out``: the prefix
        of the files it leaves)."""
        raise NotImplementedError(f"measure {self.name!r} takes no child")

    @classmethod
    def unsteady(cls, profile: Profile) -> str | None:
        """What did not repeat in a test whose figures should (which op, how far), or
        None; the run says :attr:`unsteady_words` once for all such tests."""
        return None

    #: Why tests named by :meth:`unsteady` cannot be judged as finely as the others.
    unsteady_words: ClassVar[str] = "figures that should repeat did not"

    @classmethod
    def amount(cls, value: float | None) -> str:
        return amount(value, cls.unit, cls.counts[1])


M = TypeVar("M", bound=type[Measure])
_REGISTRY: dict[str, type[Measure]] = {}


def register(measure: M) -> M:
    """A class decorator: ``--opprof-measure`` takes ``measure``. The same class registered
    again (a ``conftest.py`` imported anew) replaces itself; another of its name is refused."""
    name = getattr(measure, "name", "")
    if not isinstance(name, str) or not name or name == AUTO or not name.isprintable():
        raise OpprofError(f"{measure.__qualname__}: a measure's name is a printable word "
                          f"other than 'auto', not {name!r}")
    found = _REGISTRY.get(name)
    if found is not None and (found.__module__, found.__qualname__) != (
            measure.__module__, measure.__qualname__):
        raise OpprofError(f"measure {name!r} is registered by {found.__module__}."
                          f"{found.__qualname__} already; give {measure.__qualname__} "
                          "another name")
    _REGISTRY[name] = measure
    return measure


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def listed() -> tuple[type[Measure], ...]:
    return tuple(m for m in _REGISTRY.values() if m.help)


def choices() -> tuple[str, ...]:
    return (AUTO, *(m.name for m in listed()))


def named(name: str) -> type[Measure]:
    found = _REGISTRY.get(name)
    if found is None:
        shown = repr(name if len(name) <= 40 else name[:37] + "...")
        raise OpprofError(f"unknown measure {shown}; choose one of {', '.join(choices())} "
                          "(or register it in a conftest.py)")
    return found


def defaults_of(name: str) -> type[Measure]:
    """The measure a setting names, for its defaults before it starts: ``auto``'s are
    those of the measure it always falls back to, which every one it may take shares."""
    return named(AUTO_ORDER[-1] if name == AUTO else name)


def of(name: str, unit: Unit) -> type[Measure]:
    """The measure a stored profile or baseline names; one not registered here (by a
    conftest.py not loaded) is read by its unit alone."""
    found = _REGISTRY.get(name)
    if found is not None and found.unit is unit:
        return found
    return _StoredCounts if unit is Unit.COUNT else _Stored


def backends() -> str:
    """What each value of the gone ``--opprof-backend`` became: ``time for cpu, events or
    kernel for cuda`` (the timing measures offered, by the backend they stand for)."""
    found: dict[str, list[str]] = {}
    for m in listed():
        if m.unit is Unit.NANOSECONDS:
            for backend, _ in m.formerly:
                found.setdefault(backend, []).append(m.name)
    return ", ".join(f"{' or '.join(names)} for {backend}" for backend, names in found.items())


def former(backend: str, measure: str | None) -> tuple[str, Unit]:
    """The measure (name, unit) that a file's (backend, measure) of before measures were
    objects stands for; the backend itself where none was (a later, unknown backend)."""
    pair = (backend, measure or "events")
    found = next((m for m in _REGISTRY.values() if pair in m.formerly), None)
    return (backend, Unit.NANOSECONDS) if found is None else (found.name, found.unit)


def start(name: str, worker: int | None = None) -> Measure:
    """The measure ``name`` started here (``auto`` by :data:`AUTO_ORDER`), or
    :class:`Unavailable`."""
    if name != AUTO:
        return named(name)(worker)
    passed_over = ""
    for candidate in AUTO_ORDER:
        measure = named(candidate)
        try:
            started = measure(worker)
        except Unavailable as exc:
            if exc.said and not passed_over:
                passed_over = f"{measure.figure} unavailable: {exc.why}"
            continue
        started.passed_over = passed_over
        return started
    raise Unavailable(f"none of {', '.join(AUTO_ORDER)} can run here")


class _Stored(Measure):
    """A measure not registered here, known by its unit: shown as it, judged as a time."""

    name = "stored"
    figure = "time"
    gate = GateSettings(floor=0.0, tau_prior=0.025, tau_floor=0.005,
                        jitter=0.0)
    key = "stored"

    def timer(self, skip: int) -> Timer:
        raise Unavailable(f"measure {self.name!r} is not registered here")


class _StoredCounts(_Stored):
    unit = Unit.COUNT
    counts = ("counts", "")
    figure = "count"
    gate = GateSettings(floor=0.0, tau_prior=0.0005, tau_floor=0.0001,
                        jitter=0.0, min_samples=1, rank_test=False, drift=False,
                        spread_inflation=1.0, confirms=False)
    repeats = True


# the built-in measures register themselves, in the order --help offers them
# isort: off
from . import host, events, kernel, instructions, fake  # noqa: E402, F401
# isort: on

__all__ = ["AUTO", "AUTO_ORDER", "BASELINE_RUNS", "TOLERANCE", "GateSettings", "Measure",
           "Unavailable", "choices", "defaults_of", "former", "listed", "named", "names", "of",
           "register", "start"]
