"""docs/ci.md runs as written on a fresh runner: what can be checked offline of its
workflows. Each ``yaml`` block parses (where PyYAML is installed); every ``pip install``
of pytest-opprof is the one form that works (pytest-opprof is on no index: it comes
from the source distribution committed in ``ci/vendor``); every ``opprof compare``
names the performance tests (without them each pair runs the whole suite twice); every
file a step writes is uploaded; every gate is strict. And the source distribution that
form installs carries what the package needs."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import pytest_opprof

ROOT = Path(pytest_opprof.__file__).resolve().parent.parent
CI = ROOT / "docs" / "ci.md"
#: The one install of pytest-opprof every workflow uses.
INSTALL = "pip install --find-links ci/vendor 'pytest-opprof[history,report]'"
#: The flags that write a file (their value is its path), by the command they belong to.
WRITES = {"pytest": ("--junitxml", "--opprof-json", "--opprof-html", "--opprof-trace",
                     "--opprof-markdown"),
          "opprof": ("--json", "--html", "--markdown", "-o")}


def blocks() -> list[str]:
    found = re.findall(r"^```yaml\n(.*?)^```", CI.read_text(encoding="utf-8"), re.S | re.M)
    assert len(found) >= 3, "docs/ci.md has its workflows in ```yaml blocks"
    return found


@dataclass
class Job:
    name: str
    runs: list[str] = field(default_factory=list)
    uploads: list[str] = field(default_factory=list)


def _value(lines: list[str], k: int, key: str) -> tuple[str, int]:
    """The scalar of ``key:`` on line k: plain (its comment cut), or a block (``>``
    folded into one line, ``|`` kept line by line); and the next line to read."""
    line = lines[k]
    indent = len(line) - len(line.lstrip(" -"))
    rest = line.split(f"{key}:", 1)[1].strip()
    if rest in (">", "|"):
        body, j = [], k + 1
        while j < len(lines) and (not lines[j].strip() or
                                  len(lines[j]) - len(lines[j].lstrip()) > indent):
            body.append(lines[j].strip())
            j += 1
        return (" " if rest == ">" else "\n").join(b for b in body if b), j
    return re.split(r"\s+#", rest, maxsplit=1)[0].strip(), k + 1


def jobs(block: str) -> list[Job]:
    """The jobs of a workflow (or of a workflow's fragment: its top-level keys)."""
    lines = block.splitlines()
    start = next((k + 1 for k, line in enumerate(lines) if line == "jobs:"), 0)
    indent = 2 if start else 2 if lines[0].startswith("  ") else 0
    out: list[Job] = []
    k = start
    upload = False
    while k < len(lines):
        line = lines[k]
        if re.fullmatch(" " * indent + r"[A-Za-z][\w-]*:\s*", line):
            out.append(Job(line.strip().rstrip(":")))
            k += 1
            continue
        stripped = line.strip().removeprefix("- ")
        if stripped.startswith("uses:"):
            upload = "actions/upload-artifact" in stripped
        if stripped.startswith("run:"):
            value, k = _value(lines, k, "run")
            out[-1].runs.append(value)
            continue
        if stripped.startswith("path:") and upload:
            value, k = _value(lines, k, "path")
            out[-1].uploads += value.split()
            continue
        k += 1
    return out


def commands(run: str) -> list[list[str]]:
    """A step's shell commands, each as words (``&&``, ``;`` and newlines split them)."""
    return [shlex.split(part) for part in re.split(r"&&|;|\n", run) if part.strip()]


def every_job() -> list[Job]:
    found = [job for block in blocks() for job in jobs(block)]
    assert len(found) >= 4, [j.name for j in found]
    return found


def test_the_workflows_parse_as_yaml():
    yaml = pytest.importorskip("yaml")
    for block in blocks():
        data = yaml.safe_load(block)
        steps = [s for job in (data.get("jobs") or data).values() for s in job["steps"]]
        assert steps and all("run" in s or "uses" in s for s in steps)


def test_the_parser_here_finds_every_step():
    """The checks below read what the workflows hold: every run step and upload."""
    names = {j.name for j in every_job()}
    assert {"compare", "history", "perf", "perf-instructions", "upgrade"} <= names
    assert all(job.runs for job in every_job())
    text = "\n".join(blocks())
    assert sum(len(j.runs) for j in every_job()) == len(re.findall(r"\brun:", text))


def test_every_install_of_pytest_opprof_is_the_one_form():
    for job in every_job():
        installs = [" ".join(shlex.quote(w) for w in c) for r in job.runs for c in commands(r)
                    if c[:2] == ["pip", "install"]]
        of_opprof = [c for c in installs if "opprof" in c]
        # one install per environment the job makes (the upgrade job makes two)
        assert of_opprof and set(of_opprof) == {shlex.join(shlex.split(INSTALL))}, \
            (job.name, installs)
    prose = CI.read_text(encoding="utf-8")
    assert INSTALL in prose and "python -m build --sdist --outdir ci/vendor" in prose
    assert INSTALL in (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_compare_names_the_performance_tests():
    found = 0
    for job in every_job():
        for run in job.runs:
            for c in commands(run):
                if c[:2] == ["opprof", "compare"]:
                    found += 1
                    assert any(w.startswith("tests/") for w in c[3:]), c
    assert found


def _written(command: list[str]) -> list[str]:
    """The files (or folders) a command writes, from its flags."""
    flags = WRITES.get(command[0], ())
    out = []
    for k, word in enumerate(command):
        name, _, value = word.partition("=")
        if name in flags:
            out.append(value or command[k + 1])
    return [p for p in out if "GITHUB_STEP_SUMMARY" not in p]


def test_every_file_written_is_uploaded():
    """--junitxml, --opprof-json, --opprof-html, --opprof-trace and the commands' --json
    / --html: each path lies in an upload-artifact step's path of its job, and its
    folder is made before the step that writes it."""
    checked = 0
    for job in every_job():
        for run in job.runs:
            made = [c[-1] for c in commands(run) if c[:2] == ["mkdir", "-p"]]
            for c in commands(run):
                for path in _written(c):
                    checked += 1
                    assert any(path == u.rstrip("/") or path.startswith(u.rstrip("/") + "/")
                               for u in job.uploads), (job.name, path, job.uploads)
                    folder = path.rsplit("/", 1)[0] if "/" in path else None
                    assert folder is None or folder in made or path.endswith("traces"), \
                        (job.name, path)
    assert checked >= 6


def test_every_gate_is_strict():
    """A pytest that gates (not one that stores baselines) fails on what it could not
    judge: --opprof-strict."""
    gates = 0
    for job in every_job():
        for run in job.runs:
            for c in commands(run):
                if c[0] == "pytest" and not {"--opprof-update-baseline=append",
                                             "--opprof-update-baseline"} & set(c):
                    gates += 1
                    assert "--opprof-strict" in c, (job.name, c)
    assert gates >= 2


@pytest.mark.e2e
def test_the_source_distribution_installs_and_carries_the_package(tmp_path):
    """What ``python -m build --sdist`` makes of this tree (here setuptools' own sdist,
    offline): every module, the schemas, the C sources; built from it alone, the package
    imports with its schemas and its C hot path."""
    sdist = tmp_path / "vendor"
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(sdist)], cwd=ROOT,
                   check=True, capture_output=True, timeout=300)
    (archive,) = sdist.glob("pytest[-_]opprof-*.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(archive).getnames() if "/" in n}
    package = {str(p.relative_to(ROOT)) for p in (ROOT / "pytest_opprof").rglob("*")
               if p.suffix in (".py", ".json", ".c", ".pyi") or p.name == "py.typed"}
    assert package <= names, package - names
    # unpacked and built as pip builds it on the runner (setuptools' build_ext: the C
    # hot path), then imported from there
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    (target,) = (tmp_path / "unpacked").iterdir()
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=target,
                   check=True, capture_output=True, timeout=600)
    schemas = sorted(p.name for p in (ROOT / "pytest_opprof" / "schemas").glob("*.json"))
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, pathlib, sys\n"
        "import pytest_opprof\n"
        "from pytest_opprof.measure import scope\n"
        "p = pathlib.Path(pytest_opprof.__file__).parent\n"
        "print(json.dumps([str(p), sorted(s.name for s in (p / 'schemas').glob('*.json')),\n"
        "                  scope.impl.__name__]))\n", encoding="utf-8")
    out = subprocess.run([sys.executable, str(probe)], env={"PYTHONPATH": str(target)},
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    where, found, impl = json.loads(out.stdout)
    assert Path(where).is_relative_to(target) and found == schemas
    if shutil.which("cc") or shutil.which("gcc"):  # the C hot path was built from the sdist
        assert impl.endswith("._cscope"), impl


def test_every_compare_parses_as_opprof_compare_and_one_counts_instructions():
    """Each ``opprof compare`` of the workflows, as the command's parser reads it: the
    summary and the JSON its own options, REF the pull request's base, the rest (the
    performance tests, the measure) left for pytest; one pull-request job compares
    instruction counts."""
    from pytest_opprof.cli import build_parser

    measures = []
    for job in every_job():
        # GitHub puts the expressions in before the shell reads the line
        runs = [r.replace("${{ github.base_ref }}", "main") for r in job.runs]
        for c in (c for r in runs for c in commands(r) if c[:2] == ["opprof", "compare"]):
            args, extra = build_parser().parse_known_args(c[1:])
            assert args.command == "compare" and args.markdown and args.json, (job.name, c)
            # REF first (the command takes it from the words pytest is not given), but
            # in the environments form
            assert args.base_python or extra[0] == "origin/main", c
            assert not [w for w in extra if w.startswith("-") and not w.startswith("--opprof-")]
            measures += [w for w in extra if w.startswith("--opprof-measure")]
    assert measures == ["--opprof-measure=instructions"]


def _env(block: str) -> dict[str, str]:
    """A workflow's ``NAME: value`` settings of upper-case names (its env, any level)."""
    return {m[0]: m[1].strip('"') for m in re.findall(r"^\s+([A-Z][A-Z0-9_]+):\s*(\S+)",
                                                      block, re.M)}


def _keys(block: str) -> tuple[set[str], set[str]]:
    """The machine keys a workflow appends a history under, and those it gates or takes
    baselines under (--opprof-machine-key, its variables resolved)."""
    env = _env(block)
    history: set[str] = set()
    gate: set[str] = set()
    for job in jobs(block):
        for c in (c for run in job.runs for c in commands(run)):
            for word in c:
                if word.startswith("--opprof-machine-key="):
                    key = env.get(word.split("=", 1)[1].strip("$\"{}"), "?")
                    (history if "--opprof-update-baseline=append" in c else gate).add(key)
    return history, gate


def test_the_history_and_the_gate_never_share_a_machine_key_or_a_cache():
    """Issue 28: one OPPROF_KEY for the history job and the stored-baseline gate. Their
    keys differ, and no job's cache prefix (``restore-keys``) matches the other's keys."""
    history: set[str] = set()
    gate: set[str] = set()
    for block in blocks():
        h, g = _keys(block)
        history |= h
        gate |= g
    assert history and gate and not history & gate, (history, gate)
    for h in history:
        for g in gate:
            assert not f"opprof-{h}-".startswith(f"opprof-{g}-") and \
                   not f"opprof-{g}-".startswith(f"opprof-{h}-"), (h, g)
    text = "\n".join(blocks())
    caches = re.findall(r"restore-keys: opprof-\$\{\{ env\.(\w+) \}\}-", text)
    assert sorted(set(caches)) == ["OPPROF_HISTORY_KEY", "OPPROF_KEY"]


def test_the_stored_instruction_gate_pins_what_counts_depend_on():
    """The committed counts depend on valgrind, Python (its patch release), numpy and
    its BLAS: the job names its runner image (its valgrind), a Python release of the
    other jobs' minor version, and a constraints file shown in the doc that pins numpy
    (from its wheel, which carries its BLAS)."""
    prose = CI.read_text(encoding="utf-8")
    (block,) = [b for b in blocks() if "perf-instructions:" in b]
    env = _env(block)
    constraints = env["PIP_CONSTRAINT"]
    assert env["PIP_ONLY_BINARY"] == "numpy"
    shown = re.search(rf"^```\n# {re.escape(constraints)}:.*?\n(.*?)^```", prose, re.S | re.M)
    assert shown and re.search(r"^numpy==\d+\.\d+\.\d+$", shown.group(1), re.M), constraints
    assert re.search(r"runs-on: ubuntu-\d\d\.\d\d\b", block), "a named image: its valgrind"
    versions = {b: re.findall(r'python-version: "([\d.]+)"', b) for b in blocks()}
    (pinned,) = versions.pop(block)
    others = {v for found in versions.values() for v in found}
    assert others == {"3.11"} and re.fullmatch(r"3\.11\.\d+", pinned), (others, pinned)
