"""One results model: the terminal, the results JSON, the Markdown summary and the HTML
report of one record say the same numbers for the same op, whether rendered from the
record just judged or from a results file read back."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from pytest_opprof.judge.gate import gate_config, judge
from pytest_opprof.measure.measures import named
from pytest_opprof.model.hints import Retake
from pytest_opprof.model.records import TestRecord
from pytest_opprof.model.runinfo import RunInfo
from pytest_opprof.render import duration, html, markdown, percent, results_json, text
from pytest_opprof.render.verdicts import failure_text, verdict_table
from pytest_opprof.stats.reports import phase_medians, report_of, segment_levels
from pytest_opprof.store import results
from pytest_opprof.store.baseline import Baseline, BaselineRun

from .fakes import train_profile

OPS = {"conv2d": 100_000, "relu": 25_000, "relu_grad": 50_000, "conv2d_grad": 200_000,
       "add": 30_000, "mul": 40_000}
SLOW = "relu_grad"


def _profile(run: int, slow: float = 1.0):
    """Six ops on the fake clock, each run a little off the others (so that the baseline
    has a spread), ``relu_grad`` ``slow`` times as slow."""
    def body(profiler, dev, i):
        for k, (name, ns) in enumerate(OPS.items()):
            with profiler.op(name):
                factor = slow if name == SLOW else 1.0
                dev.kernel(round(ns * factor * (1 + 0.01 * ((run * 3 + k) % 4))
                                 * (1 + 0.002 * (i % 3))))

    return train_profile(iterations=12, body=body)


@pytest.fixture(scope="module")
def record() -> TestRecord:
    baseline = Baseline("test_x.py::test_x", "m",
                        [BaselineRun.from_profile(_profile(r), {}) for r in range(5)])
    current = _profile(9, slow=1.4)
    result = judge(current, baseline, machine="m",
                   retake=Retake(), config=gate_config(named("fake").gate, 0.05, {}),
                   budgets={}, strict_ops=False)
    assert result.comparison is not None
    assert {v.name: v.verdict for v in result.comparison.ops}[SLOW] == "regressed"
    return TestRecord(current, result)


def _cells(page: str) -> list[list[str]]:
    return [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", page)]


def test_every_surface_says_the_same_figures_for_one_op(record, tmp_path):
    run_info = RunInfo("m", "fake", "d")
    assert record.result is not None and record.result.comparison is not None
    verdict = next(v for v in record.result.comparison.ops if v.name == SLOW)
    # the JSON: the op's figures as numbers
    data = json.loads(results_json.render([record], run_info))
    op = next(o for o in data["tests"][0]["ops"] if o["name"] == SLOW)
    base, current = op["baseline"], op["current"]
    assert op["verdict"] == "regressed"
    assert current["median_ns"] == pytest.approx(verdict.current_median)  # profile = gate
    assert base["median_ns"] == verdict.baseline_median
    assert base["ratio"] == verdict.ratio and base["corrected_ratio"] == verdict.corrected_ratio
    assert base["p_value"] == verdict.p_value and base["z"] == verdict.z
    assert base["margin"] == verdict.margin
    figures = {"baseline": duration(base["median_ns"]), "current": duration(current["median_ns"]),
               "change": percent(base["corrected_ratio"]), "margin": percent(base["margin"])}
    assert figures["change"] != "-" and figures["baseline"] != figures["current"]

    # the terminal: the failure text's op line and the verdict table
    line = next(x for x in failure_text(record.result, Retake()).splitlines() if f". {SLOW}:" in x)
    assert f"{figures['baseline']} -> {figures['current']}" in line
    assert f"({percent(base['ratio'])}; {figures['change']} drift-corrected beyond its " \
           f"margin {figures['margin']}" in line
    assert f"z={base['z']:.1f}" in line and f"p={verdict.rank_p_value:.2g}" in line
    row = next(x for x in verdict_table(record.result).splitlines() if f" {SLOW} " in x)
    assert row.split()[2:6] == [*figures["baseline"].split(), *figures["current"].split()]
    assert row.split()[6:8] == [figures["change"], figures["margin"]]

    # the Markdown summary: the regressions' row
    md = next(x for x in markdown.render([record], run_info).splitlines()
              if f"`{SLOW}`" in x and x.startswith("|"))
    assert [c.strip() for c in md.strip("|").split("|")][2:] == [
        figures["baseline"], figures["current"], figures["change"], figures["margin"]]

    # the HTML report, from the run and from the results file read back
    path = tmp_path / "r.json"
    path.write_text(results_json.render([record], run_info))
    loaded_info, loaded = results.load(path)
    pages = [html.render_tests([report_of(record)], run_info, charts=False),
             html.render_tests(loaded, loaded_info, charts=False)]
    assert pages[0] == pages[1]
    html_row = next(c for c in _cells(pages[0]) if f"<code>{SLOW}</code>" in c)
    assert html_row[2:] == [figures["baseline"], figures["current"], figures["change"],
                            "regressed"]
    # and the JSON written from the file read back is the JSON written from the run
    assert results_json.entry(loaded[0]) == results_json.entry(report_of(record))

    # the terminal's per-op mean (SINGA's list) is the JSON's mean, in seconds
    singa = next(x for x in text.singa_ops(record.profile).splitlines() if f". {SLOW} :" in x)
    assert singa.endswith(f": {current['mean_ns'] / 1e9:g} sec")


def test_kernel_time_figures_read_their_measure_without_copying_the_profile():
    """The JSON's kernel figures: kernel time as the op's figure, its event span beside
    it, both from the one profile (no copy of it with its samples swapped)."""
    from .test_kernel_reports import kernel_profile

    profile = kernel_profile()
    samples, kernel = profile.samples.copy(), profile.kernel_samples.copy()
    report = report_of(TestRecord(profile))
    assert report.measure == "fake-kernel"
    conv = report.ops[0]
    assert conv.kernel is not None and conv.current is not None
    counted = slice(profile.skip, None)
    assert conv.median == float(np.nanmedian(kernel[counted, 0]))
    assert conv.kernel.span_median == float(np.nanmedian(samples[counted, 0]))
    assert (profile.samples == samples).all() and (profile.kernel_samples == kernel).all()


def test_the_charts_statistics_are_the_stats_layers():
    profile = train_profile()
    medians = dict(phase_medians(profile))
    assert medians["forward"] == 1250.0 and medians["backward"] == 2500.0
    assert medians["outside phases"] >= 0
    assert segment_levels([1.0, 2.0, 3.0, 10.0, 12.0], [0, 3, 5]) == [2.0, 11.0]
    assert not math.isnan(sum(medians.values()))
