"""``opprof compare --base-python A [--head-python B]``: the same tests in one folder,
each side under its own interpreter, judged per op from pairs of processes.

The environments are this interpreter behind small launch scripts, each changing what
the tests see as an upgrade would: one sets ``MUL_NS`` (the fake backend's ``mul`` op
costs that much: the upgrade slowed one op), one puts a folder of fake distributions
first on ``PYTHONPATH`` (a package of another version: what the report must name), one
starts Python with ``-S`` (no site-packages). One real virtual environment
(``python -m venv --without-pip``) has no pytest at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import pytest_opprof
from pytest_opprof._version import __version__
from pytest_opprof.cli import main
from pytest_opprof.model.comparison import Environment, differences
from pytest_opprof.run import environments
from pytest_opprof.run.environments import Probed, major, refusal

from . import test_compare
from .fakes import committed, git
from .test_compare import one_line

SCHEMA = Path(pytest_opprof.__file__).parent / "schemas" / "compare-3.schema.json"

COSTS = """import os
COSTS = {"conv": 50_000, "relu": 8_000, "mul": int(os.environ.get("MUL_NS", 30_000)),
         "softmax": 12_000, "norm": 25_000}
"""
#: test_compare's six-op test, and a one-op test that an environment may skip.
MODEL_TEST = "import os\n\nimport pytest\n" + test_compare.MODEL_TEST + """

@pytest.mark.skipif(os.environ.get("ONLY_ONE") == "1", reason="not in this environment")
def test_other(gpu_profiler):
    for _ in gpu_profiler.iterations(4):
        with gpu_profiler.op("relu"):
            gpu_profiler.timer.device_model.kernel(8_000)
"""


def launcher(folder: Path, name: str, *, env: str = "", flags: str = "") -> str:
    """An interpreter: this one, started with ``env`` set and ``flags`` given."""
    path = folder / name
    path.write_text(f'#!/bin/sh\n{env} exec {sys.executable} {flags} "$@"\n')
    path.chmod(0o755)
    return str(path)


def fake_distribution(folder: Path, name: str, version: str) -> Path:
    """A folder that makes ``importlib.metadata`` report ``name`` at ``version``."""
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return folder


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder (no git repository: this form needs none) with a fake-backend test of
    five ops and one of one op; the current folder."""
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
                 "PYTEST_XDIST_TESTRUNUID", "MUL_NS", "ONLY_ONE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    path = tmp_path / "project"
    path.mkdir()
    (path / "pytest.ini").write_text("[pytest]\nopprof_measure = fake\n")
    (path / "costs.py").write_text(COSTS)
    (path / "test_model.py").write_text(MODEL_TEST)
    monkeypatch.chdir(path)
    return path


# -- the command as a user runs it ----------------------------------------------------

@pytest.mark.e2e
def test_an_upgrade_that_slows_one_op_is_that_op_regressed(project, tmp_path, capsys):
    """The head environment has fakelib 2.0 (the base 1.0) and makes mul 3x slower: mul
    alone regressed, exit 1, both environments and the package that differs named in
    every output."""
    base = launcher(tmp_path, "old-python", env="PYTHONPATH=" + str(
        fake_distribution(tmp_path / "old", "fakelib", "1.0")))
    head = launcher(tmp_path, "new-python", env="MUL_NS=90000 PYTHONPATH=" + str(
        fake_distribution(tmp_path / "new", "fakelib", "2.0")))
    code = main(["compare", "--base-python", base, "--head-python", head, "--pairs", "2",
                 "--json", "out.json", "--markdown", "summary.md", "-q"])
    out = capsys.readouterr().out
    assert code == 1, out
    data = json.loads((project / "out.json").read_text())
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    verdicts = {t["nodeid"]: {op["name"]: op["verdict"] for op in t["ops"]}
                for t in data["tests"]}
    assert verdicts == {"test_model.py::test_model": {
        "conv": "ok", "relu": "ok", "mul": "regressed", "softmax": "ok", "norm": "ok"},
        "test_model.py::test_other": {"relu": "ok"}}
    assert data["base"] == base and data["head"] == head and data["pairs"] == 2
    envs = data["environments"]
    assert envs["base"]["python"] == base and envs["head"]["python"] == head
    assert envs["base"]["packages"]["fakelib"] == "1.0"
    assert envs["differ"] == [{"name": "fakelib", "base": "1.0", "head": "2.0"}]
    assert envs["base"]["version"] == envs["head"]["version"] == \
        ".".join(map(str, sys.version_info[:3]))
    assert f"base environment: {base}: Python {envs['base']['version']}, numpy " in out
    assert "packages that differ: fakelib 1.0 -> 2.0\n" in out
    assert f"pair 1 of 2: base ({base})" in out and f"pair 2 of 2: head ({head})" in out
    summary = (project / "summary.md").read_text()
    assert "- packages that differ: `fakelib 1.0 -> 2.0`" in summary
    assert "| 2 | `mul` | 30 us | 90 us | +200.0% |" in summary


@pytest.mark.e2e
def test_one_environment_against_itself_passes_and_says_nothing_differs(project, capsys):
    """The head defaults to this interpreter; the base is this one too."""
    assert main(["compare", "--base-python", sys.executable, "--pairs", "1", "-q"]) == 0
    out = capsys.readouterr().out
    assert "0 regressed, 0 improved, 6 ok of 6 op(s) in 2 test(s)" in out
    assert f"head environment: {sys.executable}: Python" in out
    assert "packages that differ: none (the same versions of everything)" in out


@pytest.mark.e2e
def test_environments_that_run_different_tests_are_refused_naming_them(project, tmp_path,
                                                                         capsys):
    head = launcher(tmp_path, "new-python", env="ONLY_ONE=1")
    assert main(["compare", "--base-python", sys.executable, "--head-python", head,
                 "--pairs", "1"]) == 2
    err = one_line(capsys)
    assert "the environments ran different tests (base only: test_model.py::test_other)" \
        in err and "select the tests both have" in err
    assert main(["compare", "--base-python", sys.executable, "--head-python", head,
                 "--pairs", "1", "test_model.py::test_model"]) == 0  # selected: compared


def _no_pytest_venv(tmp_path: Path) -> str:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True, capture_output=True)
    return str(tmp_path / "bare" / "bin" / "python")


def _pytest_without_opprof(tmp_path: Path) -> str:
    """Python without site-packages (``-S``) and a folder that has a ``pytest``."""
    (tmp_path / "only-pytest" / "pytest").mkdir(parents=True)
    (tmp_path / "only-pytest" / "pytest" / "__init__.py").write_text("")
    return launcher(tmp_path, "pytest-only", env=f"PYTHONPATH={tmp_path / 'only-pytest'}",
                    flags="-S")


def _another_major(tmp_path: Path) -> str:
    later = f"{int(major(__version__).split('.')[0]) + 1}.0.0"
    fake_distribution(tmp_path / "later", "pytest-opprof", later)
    return launcher(tmp_path, "later-opprof", env=f"PYTHONPATH={tmp_path / 'later'}")


def _not_python(tmp_path: Path) -> str:
    return launcher(tmp_path, "not-python", env="echo hello; exit 0;")


def _not_executable(tmp_path: Path) -> str:
    (tmp_path / "plain").write_text("")
    return str(tmp_path / "plain")


@pytest.mark.e2e
@pytest.mark.parametrize("make, says", [
    (lambda t: str(t / "nowhere" / "python"), "no such interpreter; give the path of a Python"),
    (lambda t: str(t), "is a folder; give its interpreter"),
    (_not_executable, "is not executable; give a Python interpreter"),
    (_not_python, "did not answer as a Python interpreter (exit status 0)"),
    (_no_pytest_venv, "has no pytest; install pytest-opprof there"),
    (_pytest_without_opprof, "has no pytest-opprof; install it there: "),
    (_another_major, f"this command is {__version__} (another major version"),
], ids=["missing", "folder", "not-executable", "not-python", "no-pytest", "no-opprof",
        "another-major"])
@pytest.mark.parametrize("flag", ["--base-python", "--head-python"])
def test_an_interpreter_that_cannot_run_a_side_is_one_line(project, tmp_path, capsys,
                                                          make, says, flag):
    """Refused before any test runs, naming the flag and the interpreter; nothing
    written."""
    python = make(tmp_path)
    assert main(["compare", flag, python, "--json", "out.json"]) == 2
    err = one_line(capsys)
    assert err.startswith(f"opprof: {flag} {python}: ") and says in err, err
    assert not (project / "out.json").exists()
    if "install" in says:
        assert f"{python} -m pip install " in err


@pytest.mark.e2e
@pytest.mark.parametrize("script, says", [
    ('echo "OPPROF-PROBE [1, 2]"', "did not answer as a Python interpreter (exit status 0)"),
    ('echo \'OPPROF-PROBE {"packages": [1, 2]}\'', "did not answer as a Python interpreter"),
    ('echo \'OPPROF-PROBE {"packages": {}, "editable": 5, "version": 7}\'',
     "has no pytest; install pytest-opprof there"),
    ("printf '%s\\n' 'OPPROF-PROBE {\"packages\": {\"pytest-opprof\": \"9\\u001b[2J\\n\"}, "
     '"pytest": true}\'', "has pytest-opprof 9\\x1b[2J\\n, this command is"),
    ("printf '\\033[31mred'; exit 3", "(exit status 3: \\x1b[31mred)"),
    ("kill -ABRT $$", "was ended by SIGABRT while it read its packages"),
], ids=["not-an-object", "packages-not-a-mapping", "odd-fields", "escapes-in-a-version",
        "escapes-in-its-output", "crashes"])
def test_whatever_an_interpreter_answers_is_one_escaped_line(project, tmp_path, capsys,
                                                            script, says):
    python = launcher(tmp_path, "odd-python", env=f"{script}; exit 0;")
    assert main(["compare", "--base-python", python]) == 2
    err = one_line(capsys)
    assert err.startswith(f"opprof: --base-python {python}: ") and says in err, err
    assert "\x1b" not in err


@pytest.mark.e2e
def test_an_interpreter_that_hangs_is_ended_and_said(project, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(environments, "PROBE_TIMEOUT_S", 1.0)
    python = launcher(tmp_path, "hangs", env="sleep 30;")
    assert main(["compare", "--base-python", python]) == 2
    assert "did not answer in 1 s (it was ended)" in one_line(capsys)


WHERE_TEST = """import os, shutil

def test_where(gpu_profiler):
    with open(os.environ["WHERE_FILE"], "a") as out:
        out.write(shutil.which("python") + "\\n")
    for _ in gpu_profiler.iterations(2):
        with gpu_profiler.op("x"):
            gpu_profiler.timer.device_model.kernel(1_000)
"""


@pytest.mark.e2e
def test_each_sides_tests_find_their_own_environments_python_first_on_path(
        project, tmp_path, monkeypatch, capsys):
    """A test that starts ``python`` (or a console script) gets its side's: each side
    runs as if its environment were activated."""
    (project / "test_where.py").write_text(WHERE_TEST)
    (tmp_path / "envbin").mkdir()
    base = launcher(tmp_path / "envbin", "python")
    monkeypatch.setenv("WHERE_FILE", str(tmp_path / "where"))
    assert main(["compare", "--base-python", base, "--pairs", "1", "test_where.py"]) == 0
    first, second = (tmp_path / "where").read_text().split()  # base, then head
    assert first == base and second == str(Path(sys.executable).parent / "python")


@pytest.mark.e2e
@pytest.mark.parametrize("argv, says", [
    (["--base-python", sys.executable, "--setup", "make"],
     "--setup runs in each side's tree, and the environments share the working tree"),
    (["--base-python", sys.executable, "a.json", "b.json"],
     "a.json: two results files were measured already"),
    (["-k", "x", "main"], "give what to compare with first: a REF"),
    (["-k", "x"], "before pytest's arguments (opprof compare --help shows each form)"),
    ([], "give what to compare with first: a REF (commit, branch or tag), two results "
         "files, or --base-python PYTHON"),
])
def test_forms_that_do_not_fit_together_are_one_line(project, capsys, argv, says):
    (project / "a.json").write_text("{}")
    assert main(["compare", *argv]) == 2
    assert says in one_line(capsys)


# -- with a REF: the base side is REF under the base interpreter ---------------------

@pytest.fixture
def repo(project, monkeypatch):
    monkeypatch.delenv("GIT_CEILING_DIRECTORIES")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "opprof")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "opprof@example.com")
    committed(project)
    return project


@pytest.mark.e2e
def test_a_ref_and_an_interpreter_make_the_base_side_together(repo, tmp_path, capsys):
    """``opprof compare HEAD --base-python SLOW``: the base is the commit under an
    interpreter where mul costs 3x; the head, the working tree under this one, where it
    does not: mul improved, and the labels say both."""
    slow = launcher(tmp_path, "slow-python", env="MUL_NS=90000")
    assert main(["compare", "HEAD", "--base-python", slow, "--pairs", "1",
                 "test_model.py::test_model"]) == 0
    out = capsys.readouterr().out
    assert "base HEAD (" in out and f") under {slow}, head working tree under " in out
    assert "1 regressed" not in out and "0 regressed, 1 improved, 4 ok" in out


@pytest.mark.e2e
def test_options_of_the_command_may_come_before_the_ref(repo, capsys):
    """REF is the first argument argparse leaves, wherever compare's own options are."""
    assert main(["compare", "--pairs", "1", "--tolerance", "5%", "HEAD",
                 "test_model.py::test_model"]) == 0
    out = capsys.readouterr().out
    assert "base HEAD (" in out and "1 pair(s)" in out


@pytest.mark.e2e
def test_setup_runs_with_each_sides_interpreter_first_on_path(repo, tmp_path, capsys):
    """``--setup 'python -m pip install .'`` must install into that side's environment:
    its ``python`` is the side's interpreter."""
    (tmp_path / "envbin").mkdir()
    base = launcher(tmp_path / "envbin", "python")
    found = tmp_path / "found"
    assert main(["compare", "HEAD", "--base-python", base, "--pairs", "1", "--setup",
                 f"command -v python >> {found}", "test_model.py::test_model"]) == 0
    first, second = found.read_text().split()
    assert first == base and second == str(Path(sys.executable).parent / "python")


@pytest.mark.e2e
def test_a_path_that_is_also_a_ref_is_refused_under_the_environment_form(repo, capsys):
    git(repo, "branch", "test_model.py")
    assert main(["compare", "--base-python", sys.executable, "test_model.py"]) == 2
    assert "'test_model.py' is both a path and a git ref: write ./test_model.py" in \
        one_line(capsys)


# -- the parts ------------------------------------------------------------------------

def env(python="/v/bin/python", version="3.11.7", blas="", cuda="", **packages):
    return Environment(python, version, packages, blas, cuda)


def test_differences_name_every_version_that_differs_and_what_one_side_lacks():
    base = env(version="3.11.7", blas="openblas 0.3.23", numpy="1.26.4", scipy="1.11.0",
               pytest="8.3.0")
    head = env(version="3.12.1", blas="openblas 0.3.27", numpy="2.4.6", pytest="8.3.0",
               cupy="14.2.0")
    assert differences(base, head) == (
        ("python", "3.11.7", "3.12.1"), ("blas", "openblas 0.3.23", "openblas 0.3.27"),
        ("cupy", "absent", "14.2.0"), ("numpy", "1.26.4", "2.4.6"),
        ("scipy", "1.11.0", "absent"))
    assert differences(base, base) == ()


def test_an_environments_summary_names_numpy_cupy_the_blas_and_cuda_where_present():
    assert env(numpy="2.4.6", cupy="14.2.0", blas="openblas 0.3.27", cuda="13.0",
               other="1").summary() == ("/v/bin/python: Python 3.11.7, numpy 2.4.6, "
                                        "cupy 14.2.0, BLAS openblas 0.3.27, CUDA 13.0")
    assert env(**{"cupy-cuda13x": "14.2.0"}).summary() == \
        "/v/bin/python: Python 3.11.7, cupy-cuda13x 14.2.0"  # a CuPy wheel's own name
    assert env().summary() == "/v/bin/python: Python 3.11.7"


@pytest.mark.parametrize("version, expected", [
    ("0.1.0", "0.1"), ("0.1.7", "0.1"), ("0.2.0", "0.2"), ("2.4.0", "2"), ("2.0rc1", "2"),
    ("10", "10"), ("dev", "?")])
def test_the_major_version_follows_semantic_versioning(version, expected):
    assert major(version) == expected


@pytest.mark.parametrize("theirs, refused", [
    (__version__, False), (f"{major(__version__)}.99", False),
    (None, True), ("99.0.0", True)])
def test_only_pytest_opprof_of_this_major_version_may_run_a_side(theirs, refused):
    packages = {} if theirs is None else {"pytest-opprof": theirs}
    found = Probed(env(**packages), has_pytest=True)
    assert (refusal("--base-python", found) is not None) == refused


@pytest.mark.pytester
def test_the_probe_answers_for_this_interpreter(tmp_path):
    """The real probe, run by this interpreter: its version, its packages, numpy's BLAS."""
    found = environments.probe("--base-python", sys.executable, tmp_path)
    assert found.has_pytest
    assert found.environment.version == ".".join(map(str, sys.version_info[:3]))
    import numpy

    assert found.environment.packages["numpy"] == numpy.__version__
    assert found.environment.packages["pytest-opprof"] == __version__
    assert found.environment.blas  # numpy 1.26 and later say what they were built with


def test_a_bare_command_name_is_found_on_path(tmp_path, monkeypatch):
    launcher(tmp_path, "python-on-path")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert environments.resolve("--base-python", "python-on-path") == \
        str(tmp_path / "python-on-path")
