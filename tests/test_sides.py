"""Each side measures what it says and each result is checked against its test (issue
20, class 3): the confirmation re-run selects exactly its test, whatever adds test
paths (PYTEST_ADDOPTS, addopts, ``@FILE``), and takes only that test's profile;
``opprof compare`` runs the base's own files (absolute paths too), fails when a side's
test failed, refuses sides measured unlike, and names what stopped a side."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_opprof.cli import main

from .fakes import SIX_OP_NET, batch
from .test_compare import COSTS, MODEL_TEST, assert_clean, git, one_line


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """test_compare's repository of a six-op fake-backend test, committed."""
    from . import test_compare

    return test_compare.repo.__wrapped__(tmp_path, monkeypatch)


# a second test, never slowed: the profile a re-run that ran both files took instead
OTHER = SIX_OP_NET.replace("def test_net", "def test_other").replace(" * factor(name)", "")


@pytest.fixture
def two_files(pytester, monkeypatch):
    monkeypatch.delenv("SLOW", raising=False)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    pytester.makepyfile(test_net=SIX_OP_NET, test_other=OTHER)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    return pytester


@pytest.mark.rerun
@pytest.mark.parametrize("where", ["PYTEST_ADDOPTS", "addopts", "@args.txt"])
def test_the_rerun_confirms_on_its_own_test_whatever_adds_test_paths(two_files, monkeypatch,
                                                                      where):
    """Both files selected through ``where``: the re-run of test_net must not run
    test_other too and take its (unslowed) profile, which cleared a real +50%."""
    args: list[str] = []
    if where == "PYTEST_ADDOPTS":
        monkeypatch.setenv("PYTEST_ADDOPTS", "test_net.py test_other.py")
    elif where == "addopts":
        two_files.makeini("[pytest]\nopprof_measure = fake\naddopts = test_net.py "
                          "test_other.py\n")
    else:
        (two_files.path / "args.txt").write_text("test_net.py\ntest_other.py\n")
        args = ["@args.txt"]
    with batch("b"):
        for _ in range(2):
            done = two_files.runpytest("-p", "no:randomly", *args, "--opprof-update-baseline")
            assert done.ret == 0, done.stdout.str()
    monkeypatch.setenv("SLOW", "relu:1.5")
    result = two_files.runpytest("-p", "no:randomly", *args)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines([
        "opprof: re-running test_net.py::test_net in a new process to confirm: "
        "relu (OP_ID 2) +50.0%",
        "*confirmed by a re-run in a new process*"])


@pytest.mark.rerun
def test_the_rerun_takes_only_its_own_tests_profile(pytester, monkeypatch):
    """Whatever the child ran, only a record of the test's own node id counts."""
    from dataclasses import replace

    from pytest_opprof.model.records import TestRecord
    from pytest_opprof.run import launcher, rerun

    from .fakes import train_profile

    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    config = pytester.parseconfig("test_a.py")
    other = replace(train_profile(), nodeid="test_b.py::test_b")

    def child(*args, **kwargs):
        return launcher.ChildResult(0, "", records=(TestRecord(other),))

    monkeypatch.setattr(rerun, "run_pytest", child)
    assert rerun.profile_again(config, "test_a.py::test_a", measure="fake", skip=1,
                               timeout=10) is None


@pytest.mark.rerun
def test_the_rerun_leaves_out_the_test_paths_and_writing_flags_of_addopts(pytester,
                                                                          monkeypatch):
    from pytest_opprof.run import rerun

    pytester.makepyfile(test_a="def test_a():\n    pass\n", test_b="def test_b():\n    pass\n")
    pytester.makeini("[pytest]\naddopts = test_a.py --junitxml=j.xml -p no:randomly\n")
    monkeypatch.setenv("PYTEST_ADDOPTS", "test_b.py -q")
    config = pytester.parseconfig()
    args, env = rerun.selection_free(config)
    assert args == ["-o", "addopts=--junitxml=j.xml -p no:randomly"]
    assert env == {"PYTEST_ADDOPTS": "-q"}
    monkeypatch.delenv("PYTEST_ADDOPTS")
    pytester.makeini("[pytest]\naddopts = -p no:randomly\n")
    assert rerun.selection_free(pytester.parseconfig()) == ([], {})  # nothing to take out


# -- opprof compare: each side its own ---------------------------------------------------

def slower_mul(repo_path, factor: float = 3.0) -> None:
    """The working tree's mul ``factor`` times slower (uncommitted): plain enough for
    one or two pairs, which the judge credits with a wide spread."""
    (repo_path / "costs.py").write_text(
        COSTS.replace('"mul": 30_000', f'"mul": {int(30_000 * factor)}'))


@pytest.mark.e2e
@pytest.mark.parametrize("form", ["file", "node id", "PYTEST_ADDOPTS", "@FILE"])
def test_an_absolute_test_path_runs_each_sides_own_file(repo, capsys, monkeypatch, form):
    """``opprof compare HEAD /abs/test_model.py``: the base ran the working tree's file
    (+30%, or 3x, shown as +0.0% ok)."""
    slower_mul(repo)
    path = str(repo / "test_model.py") + ("::test_model" if form == "node id" else "")
    args = [path]
    if form == "PYTEST_ADDOPTS":
        monkeypatch.setenv("PYTEST_ADDOPTS", path)
        args = []
    elif form == "@FILE":
        (repo / "args.txt").write_text(path + "\n")
        args = ["@args.txt"]
    assert main(["compare", "HEAD", "--pairs", "2", *args]) == 1
    out = capsys.readouterr().out
    assert "1 regressed, 0 improved, 5 ok of 6 op(s) in 1 test(s)" in out
    assert_clean(repo)


@pytest.mark.e2e
def test_a_test_path_outside_the_repository_is_refused(repo, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "test_x.py").write_text("def test_x():\n    pass\n")
    assert main(["compare", "HEAD", str(elsewhere / "test_x.py")]) == 2
    assert f"{elsewhere / 'test_x.py'}: outside the repository" in one_line(capsys)
    assert_clean(repo)


FAILS_IN_LOOP = MODEL_TEST.replace("dev.kernel(ns)", "dev.kernel(ns)\n        assert _ < 6")
FAILS_BEFORE = MODEL_TEST.replace("    dev = gpu",
                                  "    raise RuntimeError('no data')\n    dev = gpu")


@pytest.mark.e2e
@pytest.mark.parametrize("where, text, says", [
    ("inside its loop", FAILS_IN_LOOP, "assert 6 < 6"),
    ("before its loop", FAILS_BEFORE, "RuntimeError: no data")],
    ids=["inside", "before"])
def test_a_test_that_fails_at_head_fails_the_compare(repo, capsys, where, text, says):
    """It gave "4 ok" (a part of its loop compared) or "base only", exit 0."""
    (repo / "test_model.py").write_text(text)
    assert main(["compare", "HEAD", "--pairs", "1"]) == 1
    captured = capsys.readouterr()
    assert "opprof: test test_model.py::test_model failed at head (pair 1: " in captured.out
    assert says in captured.out and "not compared" in captured.out
    assert "base only" not in captured.out and " 0 ok of 0 op(s) in 0 test(s)" in captured.out
    assert "1 test(s) failed at a side and were not compared" in captured.err
    assert_clean(repo)


@pytest.mark.e2e
def test_a_test_that_fails_at_the_base_fails_the_compare_too(repo, capsys):
    (repo / "test_model.py").write_text(FAILS_IN_LOOP)
    git(repo, "commit", "-qam", "broken")
    (repo / "test_model.py").write_text(MODEL_TEST)
    assert main(["compare", "HEAD", "--pairs", "1"]) == 1
    assert "failed at base" in capsys.readouterr().out
    assert_clean(repo)


@pytest.mark.e2e
def test_sides_measured_with_different_measures_are_refused(repo, capsys):
    """An ini change (the measure) made every op "regressed" or "improved", no word."""
    either = MODEL_TEST.replace("    dev = gpu_profiler.timer.device_model\n", "").replace(
        "dev.kernel(ns)", "sum(range(ns // 1000))")
    (repo / "test_model.py").write_text(either)
    git(repo, "commit", "-qam", "runs under any measure")
    (repo / "pytest.ini").write_text("[pytest]\nopprof_measure = time\n")
    assert main(["compare", "HEAD", "--pairs", "1"]) == 1
    err = one_line(capsys)
    assert "measured with --opprof-measure=fake at base" in err
    assert "but --opprof-measure=time at head" in err
    assert "set both with --opprof-measure=... on the command line" in err
    assert_clean(repo)


@pytest.mark.e2e
def test_a_collection_error_at_the_base_names_the_error(repo, capsys):
    (repo / "test_model.py").write_text("import no_such_module_here\n" + MODEL_TEST)
    git(repo, "commit", "-qam", "broken import")
    (repo / "test_model.py").write_text(MODEL_TEST)
    assert main(["compare", "HEAD", "--pairs", "1"]) == 1
    err = one_line(capsys)
    assert "could not collect the tests at base" in err
    assert "ModuleNotFoundError: No module named 'no_such_module_here'" in err
    assert_clean(repo)


@pytest.mark.e2e
def test_a_conftest_that_cannot_be_imported_is_named_not_an_argument_error(repo, capsys):
    (repo / "conftest.py").write_text("import no_such_module_here\n")
    git(repo, "add", "conftest.py")
    git(repo, "commit", "-qm", "broken conftest")
    (repo / "conftest.py").write_text("")
    assert main(["compare", "HEAD", "--pairs", "1"]) == 1
    err = one_line(capsys)
    assert "pytest could not start at base: ImportError while loading conftest" in err
    assert "No module named 'no_such_module_here'" in err and "refused" not in err
    assert_clean(repo)


@pytest.mark.e2e
def test_a_branch_named_like_a_json_file_is_a_ref(repo, capsys):
    """``opprof compare feature.json``: a branch, not the files form."""
    git(repo, "branch", "feature.json")
    slower_mul(repo)
    assert main(["compare", "feature.json", "--pairs", "1"]) == 1
    assert "1 regressed" in capsys.readouterr().out
    (repo / "feature.json").write_text("{}")  # now a file of that name too: ambiguous
    assert main(["compare", "feature.json", "--pairs", "1"]) == 2
    assert "'feature.json' is both a file and a git ref: write ./feature.json" in \
        one_line(capsys)
    assert_clean(repo)


@pytest.mark.e2e
def test_a_first_pytest_argument_ending_in_json_keeps_the_ref_form(repo, capsys):
    assert main(["compare", "HEAD", "--pairs", "1", "--benchmark-json=x.json"]) == 0
    assert "0 regressed, 0 improved, 6 ok of 6 op(s)" in capsys.readouterr().out
    assert_clean(repo)


def _installed_editable(repo, layout: str) -> str:
    """``repo`` made a project whose test imports ``costs`` from its package ``model``
    (a ``flat`` or ``src`` layout), committed, and installed with ``pip install -e .``
    in a virtual environment of its own that sees this one's packages: its python."""
    import site
    import subprocess
    import sys
    import sysconfig

    package = repo / ("src/model" if layout == "src" else "model")
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (repo / "costs.py").rename(package / "costs.py")
    (repo / "test_model.py").write_text(MODEL_TEST.replace("from costs", "from model.costs"))
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "model"\nversion = "1"\n[tool.setuptools]\npackages = ["model"]\n'
        + ('package-dir = {"" = "src"}\n' if layout == "src" else ""))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", layout)
    venv = repo.parent / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path("
                              "'purelib'))"], check=True, capture_output=True, text=True)
    ours = [sysconfig.get_path("purelib"), *site.getsitepackages()]
    (Path(purelib.stdout.strip()) / "outer.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in ours))
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "-e", str(repo)], check=True, capture_output=True)
    return python


@pytest.mark.e2e
@pytest.mark.parametrize(("layout", "pythonpath", "said"), [
    ("flat", None, False), ("src", None, True), ("src", "src", False)])
def test_an_editable_install_from_the_repository_is_said_only_where_base_imports_it(
        repo, monkeypatch, layout, pythonpath, said):
    """``pip install -e .`` of the code under test, as docs/ci.md has it. In a flat layout
    each side imports its own tree's package (the folder it runs in comes first): no
    word, and a slowdown in the working tree is seen. In a src layout the base side
    imports the working tree's package through the install (a wrong "ok"): said, with
    the PYTHONPATH that avoids it; given that, no word and the slowdown is seen."""
    import subprocess

    python = _installed_editable(repo, layout)
    costs = repo / ("src" if layout == "src" else "") / "model" / "costs.py"
    costs.write_text(COSTS.replace('"mul": 30_000', '"mul": 90_000'))  # uncommitted
    monkeypatch.delenv("PYTHONPATH", raising=False)
    env = {**os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {})}
    done = subprocess.run([python, "-m", "pytest_opprof.cli", "compare", "HEAD", "--pairs",
                           "1"], cwd=repo, env=env, capture_output=True, text=True)
    out = done.stdout
    warned = [line for line in out.splitlines() if "editable mode" in line]
    assert len(warned) == said, out + done.stderr
    if said:
        assert warned == [f"opprof: the base side would import model from the working tree "
                          f"({repo / 'src' / 'model'}), not from its own tree: it is installed "
                          "in editable mode from this repository and is not found from the "
                          "folder a side runs in; give it by a relative PYTHONPATH instead "
                          "(PYTHONPATH=src opprof compare ...)"]
    else:
        assert done.returncode == 1 and "mul" in out and "regressed" in out, out
    assert_clean(repo)
