"""Every Markdown the package writes (``--opprof-markdown``, ``opprof compare --markdown``)
rendered by cmark-gfm, GitHub's own renderer, as ``$GITHUB_STEP_SUMMARY`` shows it: the
tables are tables (a ``>`` note or ``blind:`` line right above a table swallowed it into
the quote), each with its rows, and every name from user code comes out as the text of a
``<code>`` element, escaped, with no markup of its own.

cmark-gfm is Debian's ``cmark-gfm`` package; without it these tests skip, unless
``OPPROF_REQUIRE_CMARK=1`` (``.ci/run`` installs it and sets that), where they fail.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser

import numpy as np
import pytest

from pytest_opprof.model.words import display_name

from .fakes import fake_profiler

#: Every test here runs cmark-gfm, a process of its own (where it is installed, as in CI).
pytestmark = pytest.mark.pytester

#: Names a user's code may give an op or a test: every character Markdown or GitHub's
#: tables read as markup, and the characters display_name escapes.
HOSTILE = ["a|b", "a\\|b", "`tick`", "``", "<img src=x>", "x\ny", "[a](http://x)",
           "*em* _u_", "| lead", "trail \\", "<b>bold</b> & &amp;", "# h", "> q", "- item",
           "注意力"]


def cmark() -> str:
    found = shutil.which("cmark-gfm")
    if found is None:
        if os.environ.get("OPPROF_REQUIRE_CMARK", "") not in ("", "0"):
            pytest.fail("OPPROF_REQUIRE_CMARK is set but cmark-gfm is not installed "
                        "(Debian: apt-get install cmark-gfm)")
        pytest.skip("cmark-gfm is not installed (Debian: apt-get install cmark-gfm)")
    return found


@dataclass
class Table:
    head: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    in_quote: bool = False


class Page(HTMLParser):
    """What cmark-gfm made: its tables (header and body cells as text), the text of
    every ``<code>``, every tag."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[Table] = []
        self.codes: list[str] = []
        self.tags: list[str] = []
        self._stack: list[str] = []
        self._cell: list[str] | None = None
        self._code: list[str] | None = None
        self._row: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        if tag == "table":
            self.tables.append(Table(in_quote="blockquote" in self._stack))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "code":
            self._code = []
        self._stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        while self._stack and self._stack.pop() != tag:
            pass
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            table = self.tables[-1]
            if "thead" in self._stack:
                table.head = self._row
            else:
                table.rows.append(self._row)
            self._row = None
        elif tag == "code" and self._code is not None:
            self.codes.append("".join(self._code))
            self._code = None

    def handle_data(self, data: str) -> None:
        for part in (self._cell, self._code):
            if part is not None:
                part.append(data)


def rendered(markdown: str) -> Page:
    html = subprocess.run([cmark(), "-e", "table"], input=markdown, capture_output=True,
                          text=True, check=True, timeout=60).stdout
    return Page(html)


#: The tags a page may hold: none from a name (no img, a, b, em, h1 ... from data).
ALLOWED = {"h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "code", "strong",
           "blockquote", "ul", "li"}


def assert_names_escaped(page: Page, names: list[str]) -> None:
    assert set(page.tags) <= ALLOWED, set(page.tags) - ALLOWED
    for name in names:
        assert display_name(name).strip() in {c.strip() for c in page.codes}, name


# -- opprof compare --markdown ---------------------------------------------------------

def _runs(names: list[str], pairs: int, spread: float, slow: dict[str, float],
          tests: list[str], rng: np.random.Generator):
    """``pairs`` base and head runs of ``tests``, each test's profile of ``names`` (one
    op each), every op's samples moved per process by a lognormal ``spread``; head ops
    in ``slow`` slowed by their factor."""
    profiler, dev = fake_profiler(skip=1)
    for _ in profiler.iterations(8):
        for k, _name in enumerate(names):
            with profiler.op(names[k]):
                dev.kernel(10_000 * (k + 1))
    template = profiler.profile
    assert template is not None

    def side(head: bool):
        run = {}
        for nodeid in tests:
            moved = template.samples * np.exp(rng.normal(0, spread, template.samples.shape[1]))
            for k, name in enumerate(names):
                if head and name in slow:
                    moved[:, k] *= slow[name]
            run[nodeid] = replace(template, samples=moved, nodeid=nodeid)
        return run
    return [side(False) for _ in range(pairs)], [side(True) for _ in range(pairs)]


def compare_markdown(names, tests, *, pairs, spread, slow=None, base_only=(), seed=3):
    from pytest_opprof.judge.comparison import compare_runs
    from pytest_opprof.render import compare

    rng = np.random.default_rng(seed)
    base, head = _runs(names, pairs, spread, slow or {}, tests, rng)
    for nodeid in base_only:
        base[0][nodeid] = next(iter(base[0].values()))
    mode = "pairs" if pairs > 1 else "files"
    report = compare_runs(base, head, mode=mode, labels=("origin/main|`x`", "<head>"))
    return report, rendered(compare.markdown(report))


def test_compare_markdown_with_notes_renders_every_table():
    """Four ops, one pair (the files form): each test has notes (no drift correction,
    one run per side) right above its table; every test's table renders, with a row
    per op, outside the quote."""
    tests = [f"tests/test_{k}.py::test_step[{name}]" for k, name in enumerate(HOSTILE[:6])]
    report, page = compare_markdown(HOSTILE[:4], tests, pairs=1, spread=0.01,
                                    slow={HOSTILE[0]: 2.0})
    assert all(t.result.notes for t in report.tests)  # the case that broke
    assert len(page.tables) == len(tests)
    for table in page.tables:
        assert not table.in_quote
        assert table.head[:3] == ["OP_ID", "op", "base"]
        assert len(table.rows) == 4 and all(len(r) == len(table.head) for r in table.rows)
        assert {r[1] for r in table.rows} == {display_name(n) for n in HOSTILE[:4]}
    assert "blockquote" in page.tags
    assert_names_escaped(page, HOSTILE[:4] + tests + ["origin/main|`x`", "<head>"])


def test_compare_markdown_with_blind_lines_and_many_tests():
    """Noisy pairs too few to see --detect: one ``Blind:`` line for the run names every
    test; 40 tests of every hostile op name, each table whole; a test on the base side
    only is listed below."""
    tests = [f"t.py::test_{k}" for k in range(40)]
    report, page = compare_markdown(HOSTILE, tests, pairs=3, spread=0.2,
                                    base_only=["t.py::gone|`<b>`"])
    from pytest_opprof.render.compare import blind_tests, markdown

    assert blind_tests(report) == list(report.tests)
    assert markdown(report).count("**Blind:** 40 of 40 test(s) could not show") == 1
    assert len(page.tables) == 40 and not any(t.in_quote for t in page.tables)
    assert all(len(t.rows) == len(HOSTILE) for t in page.tables)
    assert {r[1] for t in page.tables for r in t.rows} == {display_name(n) for n in HOSTILE}
    assert_names_escaped(page, [*tests, "test t.py::gone|`<b>`"])
    assert "li" in page.tags  # the one-side list


def test_compare_markdown_of_a_test_with_no_judged_op():
    """Ops on one side only: the test's table is a header without rows, still a table."""
    from pytest_opprof.model.comparison import PairedResult, Report, TestComparison
    from pytest_opprof.render import compare

    result = PairedResult(ops=(), pairs=2, common=(1.0, 1.0), shared=None,
                          dof=math.inf, quantile=3.0, notes=("no op on both sides",))
    test = TestComparison("t.py::t|x", result, (), ("a|b#0",), ("<c>#0",))
    report = Report("pairs", "main", "HEAD", 0.05, 0.01, 2, (test,), (), (), 0.15)
    page = rendered(compare.markdown(report))
    assert len(page.tables) == 1 and page.tables[0].rows == []
    assert_names_escaped(page, ["t.py::t|x", "op a|b#0 of t.py::t|x", "op <c>#0 of t.py::t|x"])


def test_compare_markdown_across_environments_escapes_what_the_interpreters_said():
    """The environments' lines (interpreter paths and package names are data another
    interpreter reported) are a list above the tables, each value a code span; the
    tables still render."""
    from pytest_opprof.model.comparison import Environment
    from pytest_opprof.render import compare

    report, _ = compare_markdown(HOSTILE[:3], ["t.py::test_a"], pairs=2, spread=0.01)
    hostile_path = "/venvs/<b>old</b>|`x`/bin/python"
    base = Environment(hostile_path, "3.11.7", {"numpy": "1.26.4", "a|b": "<1>"})
    head = Environment("/venvs/new/bin/python", "3.11.7", {"numpy": "2.4.6"})
    page = rendered(compare.markdown(replace(report, environments=(base, head))))
    assert len(page.tables) == 1 and len(page.tables[0].rows) == 3
    assert set(page.tags) <= ALLOWED and "li" in page.tags
    codes = " ".join(page.codes)
    assert display_name(hostile_path) in codes and "a|b <1> -> absent" in codes
    assert "numpy 1.26.4 -> 2.4.6" in codes


# -- pytest --opprof-markdown ------------------------------------------------------------

def records(names: list[str]):
    """Records as the gate makes them: failed (regressed, new, missing, over budget),
    unjudged with a reason holding markup, and without a baseline."""
    from pytest_opprof.model.verdict import TestResult, Verdict

    from .test_render import gated, named_profile

    out = []
    for k, name in enumerate(names):
        record = gated(named_profile(name, phase=name))
        record.profile.nodeid = f"test_x.py::test_x[{k}-{name}]"
        out.append(replace(record, result=replace(record.result,
                                                  nodeid=record.profile.nodeid)))
    unjudged = named_profile("u|`v`")
    unjudged.nodeid = "test_u.py::test_u[<i>|`x`]"
    out.append(replace(out[0], profile=unjudged, result=TestResult(
        nodeid=unjudged.nodeid, verdict=Verdict.UNJUDGED, machine="m", profile=unjudged,
        reason="the baseline was taken with 1 worker | `serial`, this run has <2>")))
    fresh = named_profile("n")
    fresh.nodeid = "test_n.py::test_n"
    out.append(replace(out[0], profile=fresh, result=TestResult(
        nodeid=fresh.nodeid, verdict=Verdict.NO_BASELINE, machine="m", profile=fresh)))
    return out


def test_plugin_markdown_renders_its_tables_with_any_name():
    from pytest_opprof.model.runinfo import RunInfo
    from pytest_opprof.render import markdown
    from pytest_opprof.stats.reports import report_of

    recs = records(HOSTILE)
    page = rendered(markdown.render(recs, RunInfo("cpu-`m`|<x>", "fake", "d")))
    reports = [report_of(r) for r in recs]
    sections = [n for n in (sum(len(t.having(label)) for t in reports)
                            for label, _ in markdown.SECTIONS) if n]
    assert len(sections) >= 3  # new, missing, over budget at least
    # one table per section with rows, then the tests' table; none inside a quote
    assert len(page.tables) == len(sections) + 1 and not any(t.in_quote for t in page.tables)
    assert [len(t.rows) for t in page.tables[:-1]] == sections
    assert all(len(r) == 6 for t in page.tables[:-1] for r in t.rows)
    tests = page.tables[-1]
    assert tests.head == ["test", "verdict", "drift", "baseline runs"]
    assert [r[0] for r in tests.rows] == [display_name(r.profile.nodeid) for r in recs]
    assert tests.rows[-2][1] == ("unjudged: the baseline was taken with 1 worker | `serial`, "
                                 "this run has <2>")
    ops = {r[1].split(". ", 1)[1] for t in page.tables[:-1] for r in t.rows}
    assert ops == {display_name(n) for n in HOSTILE}
    assert_names_escaped(page, [*HOSTILE, "cpu-`m`|<x>", *(r.profile.nodeid for r in recs)])


@pytest.mark.pytester
def test_plugin_markdown_of_a_real_run_renders(pytester):
    """``pytest --opprof-markdown``, a real run: a baseline, then the gate with one op
    of a parametrized test (hostile ids) slowed twofold."""
    cmark()
    pytester.makepyfile(test_w="""
        import os
        import pytest

        @pytest.mark.parametrize("n", [1, 2], ids=["a|b", "`<i>`"])
        def test_w(gpu_profiler, n):
            slow = float(os.environ.get("SLOW", "1"))
            for _ in gpu_profiler.iterations(8):
                with gpu_profiler.op("mat|mul `x`"):
                    gpu_profiler.timer.device_model.kernel(int(20_000 * slow))
                for k in range(5):
                    with gpu_profiler.op(f"op{k}<b>"):
                        gpu_profiler.timer.device_model.kernel(10_000)
    """)
    flags = ["--opprof-measure=fake", "--opprof-no-confirm", "-p", "no:randomly"]
    assert pytester.runpytest(*flags, "--opprof-update-baseline").ret == 0
    os.environ["SLOW"] = "2"
    try:
        result = pytester.runpytest(*flags, "--opprof-markdown=s.md")
    finally:
        del os.environ["SLOW"]
    assert result.ret == 1
    page = rendered((pytester.path / "s.md").read_text(encoding="utf-8"))
    assert len(page.tables) == 2  # regressions, tests
    assert [r[1] for r in page.tables[0].rows] == ["OP_ID0. mat|mul `x`"] * 2
    assert len(page.tables[1].rows) == 2
    assert_names_escaped(page, ["mat|mul `x`", "test_w.py::test_w[a|b]"])
