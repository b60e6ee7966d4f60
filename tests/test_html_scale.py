"""The HTML pages stay bounded at scale (issue 20, class 10).

Before: ``--opprof-html`` drew every iteration of a series as its own SVG point (42 MB
at 100,000 iterations, 107 MB at a million), and ``opprof history --html`` drew 25
charts for every test (18.5 MB and 41 s for 100 tests; 1,000 did not finish in 600 s).
Now a long series is drawn as buckets (median line, min-max band), a page draws the
charts of a bounded number of tests and ops (the rest summarised), and a test's table
lists a bounded number of ops. These tests assert sizes, which are deterministic
bytes, on synthetic data: never a time. benchmarks/html_scale.py measures both.
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_opprof.model.profile import OpInfo, Profile
from pytest_opprof.model.records import TestRecord
from pytest_opprof.model.runinfo import RunInfo
from pytest_opprof.stats.reports import report_of

pytest.importorskip("matplotlib")

INFO = RunInfo(machine="m", measure="time", device="synthetic")


def synthetic(iterations: int, n_ops: int = 4, nodeid: str = "t.py::t",
              seed: int = 0) -> Profile:
    """A profile of ``iterations`` iterations of ``n_ops`` ops, made as data (not run)."""
    rng = np.random.default_rng(seed)
    samples = 10_000.0 * (1 + np.arange(n_ops)) * np.exp(rng.normal(0, 0.05,
                                                                  (iterations, n_ops)))
    ops = [OpInfo(op_id=k, name=f"op{k}", occurrence=0, depth=0, phase=None)
           for k in range(n_ops)]
    op_time = samples.sum(axis=1)
    return Profile(nodeid=nodeid, measure="time", device="synthetic", skip=1, ops=ops,
                   samples=samples, phase_samples=np.zeros((iterations, 0)), phases=[],
                   wall=op_time * 1.05, op_time=op_time)


def page_of(*profiles: Profile, charts: bool = True) -> str:
    from pytest_opprof.render.html import render_tests

    return render_tests([report_of(TestRecord(profile=p)) for p in profiles], INFO,
                        charts=charts)


def test_a_long_series_is_drawn_in_buckets_whatever_its_length():
    """100,000 iterations: a page of the size of 10,000's, a few hundred kB (was 42 MB)."""
    from pytest_opprof.render.charts import SERIES_POINTS

    long, shorter = page_of(synthetic(100_000)), page_of(synthetic(10_000))
    assert len(long.encode()) < 400_000
    assert abs(len(long) - len(shorter)) < 0.1 * len(shorter)
    assert f"100,000 iterations in {SERIES_POINTS} buckets" in long


def test_the_envelope_keeps_each_buckets_extremes():
    from pytest_opprof.render.charts import envelope

    values = np.ones(10_000)
    values[4321] = 50.0  # one slow iteration: the band must still reach it
    values[100:200] = np.nan  # an op that did not run there
    centre, median, low, high = envelope(values, points=100)
    assert len(centre) == 100 and np.nanmax(high) == 50.0 and np.nanmin(low) == 1.0
    assert np.isnan(median[1]) and median[0] == 1.0
    assert envelope(np.ones(50), points=100) is None  # short: drawn point by point


def test_a_page_draws_the_charts_of_a_bounded_number_of_tests(monkeypatch):
    from pytest_opprof.render import html

    monkeypatch.setattr(html, "CHARTED_TESTS", 2)
    page = page_of(*(synthetic(20, nodeid=f"t.py::t{k}", seed=k) for k in range(5)))
    assert page.count("<svg") <= 2 * 3  # three charts a test at most
    assert page.count("Charts not drawn: a page draws those of 2 tests") == 3
    assert "5 profiled test(s); the charts of 2 of them" in page


def test_a_tests_table_lists_a_bounded_number_of_ops():
    from pytest_opprof.render.html import TABLE_ROWS

    page = page_of(synthetic(8, n_ops=TABLE_ROWS + 100), charts=False)
    assert page.count("<tr class=") == TABLE_ROWS
    assert f"{TABLE_ROWS} of {TABLE_ROWS + 100} ops listed" in page
    assert f"<code>op{TABLE_ROWS + 99}</code>" in page  # the slowest is kept


def test_the_history_page_draws_a_bounded_number_of_charts(tmp_path, monkeypatch):
    """Many tests of 20 runs: the charts are capped, the stepped op drawn first, and the
    page grows by a test's table only (was 25 charts a test)."""
    from pytest_opprof.judge.changepoints import history_of
    from pytest_opprof.render import history_html
    from pytest_opprof.store.baseline import Baseline, BaselineRun

    pytest.importorskip("ruptures")

    def test_history(k: int, step: bool):
        runs = []
        for r in range(20):
            profile = synthetic(6, n_ops=5, nodeid=f"t.py::t{k}", seed=100 * k + r)
            if step and r >= 10:
                profile.samples[:, 0] *= 1.5
            runs.append(BaselineRun.from_profile(profile, {
                "date": f"2026-01-{r + 1:02d}T00:00:00+00:00",
                "commit": {"id": f"{k:03d}{r:02d}" + "0" * 35}}))
        return history_of(Baseline(f"t.py::t{k}", "m", runs), 0.05)

    monkeypatch.setattr(history_html, "CHARTS_PER_PAGE", 4)
    monkeypatch.setattr(history_html, "CHARTS_PER_TEST", 2)
    few = [test_history(k, step=k == 3) for k in range(4)]
    page = history_html.render_history(few)
    assert page.count("<svg") == 4
    assert "4 of 20 op charts drawn" in page
    stepped = page.split("t.py::t3</h2>")[1].split("</section>")[0]
    assert stepped.count("<svg") >= 1 and "OP_ID0. op0" in stepped  # its step is drawn
    many = [*few, *(test_history(k, step=False) for k in range(4, 12))]
    bigger = history_html.render_history(many)
    assert bigger.count("<svg") == 4
    per_test = (len(bigger) - len(page)) / 8
    assert per_test < 3_000  # a section and its table, no chart
