"""The measures: one registered object each (``pytest_opprof.measure.measures``), found by
name; ``auto`` resolved in order, saying why it passed one over; a measure's name spelled
in no module of the package outside ``measure/``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_opprof
from pytest_opprof.errors import OpprofError
from pytest_opprof.judge.gate import gate_config
from pytest_opprof.measure import measures
from pytest_opprof.measure.measures import GateSettings, Measure, Unavailable, register
from pytest_opprof.measure.timers.cupti import KernelTracer
from pytest_opprof.measure.timers.fake_cupti import ENV
from pytest_opprof.model.words import Unit

PACKAGE = Path(pytest_opprof.__file__).parent
BUILT_IN = ("time", "events", "kernel", "instructions", "fake", "fake-kernel")
#: Strings equal to a measure's name that name something else, by module.
NOT_A_MEASURE = {
    ("model/profile.py", "kernel"),  # a GPU activity's kind (ACTIVITY_KINDS)
    ("render/results_json.py", "kernel"),  # the results schema's field: an op's kernel figures
}


def spelled_names(source: str, names: set[str]) -> list[tuple[int, str]]:
    """Each string constant of ``source`` that is one of ``names``, with its line."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and node.value in names]


def test_no_module_outside_measure_spells_a_measure_name():
    names = {n for n in measures.names()
             if measures.named(n).__module__.startswith("pytest_opprof.")}
    assert set(BUILT_IN) <= names
    found = [f"{relative}:{line}: {value!r}"
             for path in sorted(PACKAGE.rglob("*.py"))
             if (relative := path.relative_to(PACKAGE).as_posix()).split("/")[0] != "measure"
             for line, value in spelled_names(path.read_text(encoding="utf-8"), names)
             if (relative, value) not in NOT_A_MEASURE]
    assert found == [], "ask the measure object instead"


def test_the_name_check_sees_a_comparison_and_a_key():
    assert spelled_names("if m == 'kernel':\n    x = {'time': 1}\n", {"kernel", "time"}) == [
        (1, "kernel"), (2, "time")]


def test_the_choices_offer_auto_and_the_measures_with_help_in_order():
    # then those a conftest.py registered (this process may have loaded some)
    assert measures.choices()[:5] == ("auto", "time", "events", "kernel", "instructions")
    assert {"fake", "fake-kernel"} <= set(measures.names())  # accepted, not offered


def test_an_unknown_name_is_one_line_naming_the_choices():
    with pytest.raises(OpprofError, match=r"^unknown measure 'cycles'; choose one of auto, "
                       r"time, events, kernel, instructions \(or register it in a conftest"):
        measures.named("cycles")


class Ticks(Measure):
    name = "ticks-of-this-test"
    unit = Unit.COUNT
    counts = ("ticks", "t")
    figure = "ticks"
    gate = GateSettings(tolerance=0.02, floor=1.0, tau_prior=0.001, tau_floor=0.001,
                        jitter=1.0, rank_test=False, drift=False)
    key = "ticks"

    def timer(self, skip):
        raise AssertionError("not started here")


def test_register_takes_a_class_once_and_refuses_another_of_its_name():
    assert register(Ticks) is Ticks
    assert register(Ticks) is Ticks  # a conftest.py imported again: the same class
    assert measures.named("ticks-of-this-test") is Ticks
    other = type("Ticks", (Ticks,), {"__module__": "elsewhere"})
    with pytest.raises(OpprofError, match=r"is registered by .*Ticks already; give Ticks "
                                         r"another name"):
        register(other)


@pytest.mark.parametrize("name", ["", "auto", "a\nb"])
def test_register_refuses_a_name_that_is_no_word(name):
    bad = type("Bad", (Ticks,), {"name": name})
    with pytest.raises(OpprofError, match="a measure's name is a printable word other than"):
        register(bad)


def test_a_measure_shows_its_figures_in_its_unit():
    assert measures.named("time").amount(25_100) == "25.1 us"
    assert measures.named("instructions").amount(3_420_000) == "3.42M instr"
    assert Ticks.amount(None) == "-"


def test_a_name_this_process_does_not_know_is_read_by_its_unit():
    assert measures.of("time", Unit.NANOSECONDS) is measures.named("time")
    counted = measures.of("calls-from-elsewhere", Unit.COUNT)
    assert counted.unit is Unit.COUNT and counted.repeats and not counted.gate.drift
    assert measures.of("clock-from-elsewhere", Unit.NANOSECONDS).gate.drift


def test_a_former_backend_and_measure_are_one_measure_now():
    assert measures.former("cpu", "events") == ("time", Unit.NANOSECONDS)
    assert measures.former("cpu", None) == ("time", Unit.NANOSECONDS)
    assert measures.former("cuda", "kernel") == ("kernel", Unit.NANOSECONDS)
    assert measures.former("fake", "kernel") == ("fake-kernel", Unit.NANOSECONDS)
    assert measures.former("cpu", "instructions") == ("instructions", Unit.COUNT)
    assert measures.former("tpu", "events") == ("tpu", Unit.NANOSECONDS)


def test_auto_defaults_are_those_it_always_can_fall_back_to():
    assert measures.defaults_of("auto") is measures.named("time")
    assert measures.defaults_of("instructions").baseline_runs == 2


def test_the_gate_takes_its_settings_from_the_measure():
    counts = gate_config(measures.named("instructions").gate)
    assert (counts.tolerance, counts.drift, counts.rank_alpha, counts.min_samples) == (
        0.01, False, 1.0, 1)
    kernel = gate_config(measures.named("kernel").gate, 0.1, {"relu": 0.2})
    assert (kernel.tolerance, kernel.tolerances, kernel.floor_ns, kernel.jitter_ns) == (
        0.1, {"relu": 0.2}, 100.0, 20.0)
    assert gate_config(measures.named("time").gate).rank_alpha == 0.01


# -- auto ------------------------------------------------------------------------------

@pytest.fixture
def fake_auto(monkeypatch):
    """``auto`` over the fakes: fake kernel time, else fake event spans, else the CPU."""
    monkeypatch.setattr(measures, "AUTO_ORDER", ("fake-kernel", "fake", "time"))
    monkeypatch.delenv(ENV, raising=False)


def test_auto_takes_kernel_time_where_cupti_starts(fake_auto):
    started = measures.start("auto")
    assert started.name == "fake-kernel" and isinstance(started.tracer, KernelTracer)
    assert started.header().startswith("opprof: measure fake-kernel (per-op GPU time from "
                                       "fake CUPTI activity records")
    assert started.machine_key() == "fake-kernel-fake CUDA device"


@pytest.mark.parametrize("failure", ["missing", "no-gpu", "multiple-subscribers", "version"])
def test_auto_falls_back_to_event_spans_saying_why(fake_auto, monkeypatch, failure):
    monkeypatch.setenv(ENV, failure)
    started = measures.start("auto")
    assert started.name == "fake" and started.tracer is None
    assert started.header().startswith("opprof: measure fake (event span from virtual CUDA "
                                       "events): kernel time unavailable: ")


def test_auto_goes_on_to_the_cpu_without_a_word_where_there_is_no_gpu(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)  # no CuPy
    started = measures.start("auto")
    assert started.name == "time" and started.passed_over == ""
    assert started.machine_key().startswith("cpu-")


def test_a_measure_asked_for_that_cannot_start_is_unavailable_with_advice(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(Unavailable) as info:
        measures.start("kernel")
    assert str(info.value).startswith("CuPy is not installed (pip install 'cupy-cuda12x")
    assert info.value.advice == "use --opprof-measure=auto"
    monkeypatch.setenv(ENV, "bogus")
    with pytest.raises(Unavailable, match=f"^{ENV}='bogus': use ok or one of"):
        measures.start("fake-kernel")


def test_the_help_offers_no_fake():
    from pytest_opprof.run import options

    assert "fake" not in options.HELP_MEASURE
    assert options.HELP_MEASURE.startswith("what an op's figure is: auto (kernel where CUPTI")
