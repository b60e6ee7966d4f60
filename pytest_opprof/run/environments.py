"""The Python environments ``opprof compare --base-python``/``--head-python`` runs its
sides in: each interpreter asked, once, what it has (:func:`probe`), and refused in one
line when it cannot run a side (:func:`refusal`).

The probe is a script the other interpreter runs, importing nothing of pytest-opprof
(which it may not have).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .._version import __version__
from ..errors import OpprofError
from ..model import jsontext
from ..model.comparison import Environment
from ..model.words import display_name
from .launcher import last_line, run_command

#: How long an interpreter has to answer the probe (importing CuPy can take seconds).
PROBE_TIMEOUT_S = 120.0

#: One JSON line on stdout: its Python, every distribution (names normalized as packaging
#: does) with its version, numpy's BLAS from its build configuration, CuPy's CUDA runtime.
PROBE = r"""
import importlib.util, json, platform, re, sys
from importlib import metadata
found = {"version": platform.python_version(), "packages": {}, "editable": [],
         "pytest": importlib.util.find_spec("pytest") is not None, "blas": "", "cuda": "",
         "venv": sys.prefix if sys.prefix != sys.base_prefix else ""}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if not name:
        continue
    found["packages"].setdefault(re.sub(r"[-_.]+", "-", name).lower(), dist.version)
    try:
        url = json.loads(dist.read_text("direct_url.json") or "null")
        if url["dir_info"]["editable"] and url["url"].startswith("file://"):
            found["editable"].append([name, url["url"][len("file://"):]])
    except Exception:
        pass
if "numpy" in found["packages"]:
    try:
        import numpy
        blas = numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]
        found["blas"] = " ".join(str(blas.get(k) or "") for k in ("name", "version")).strip()
    except Exception:
        pass
if any(name.startswith("cupy") for name in found["packages"]):
    try:
        import cupy
        v = cupy.cuda.runtime.runtimeGetVersion()
        found["cuda"] = f"{v // 1000}.{v % 1000 // 10}"
    except Exception:
        pass
print("\nOPPROF-PROBE " + json.dumps(found), flush=True)
"""
#: What starts the probe's answer: the line is found whatever else the interpreter
#: writes around it (a library's notice at exit on stderr).
MARK = "OPPROF-PROBE "


class Refused(OpprofError):
    """An interpreter that cannot run a side, in one line naming its flag (a usage
    error: the command exits 2)."""


@dataclass(frozen=True)
class Probed:
    """What an interpreter said of itself."""

    environment: Environment
    has_pytest: bool
    editable: tuple[tuple[str, str], ...] = ()  # (name, source folder)


def resolve(flag: str, given: str) -> str:
    """A path, or a command found on PATH (``python3.12``). A venv's ``bin/python`` is
    kept as given, never resolved through its symlink: the venv is chosen by the path
    it is started by."""
    if os.sep not in given and shutil.which(given) is not None:
        return str(shutil.which(given))
    path = Path(given).expanduser()
    if not path.exists():
        raise Refused(f"{flag} {given}: no such interpreter; give the path of a Python "
                     "(a virtual environment's bin/python)")
    if path.is_dir():
        hint = next((str(path / p) for p in ("bin/python", "Scripts/python.exe")
                     if (path / p).exists()), None)
        raise Refused(f"{flag} {given}: is a folder; give its interpreter"
                     + (f" ({hint})" if hint else " (bin/python)"))
    if not os.access(path, os.X_OK):
        raise Refused(f"{flag} {given}: is not executable; give a Python interpreter")
    return os.path.abspath(path)  # lexically: ../venv/bin/python, never its symlink's target


#: Where an interpreter, started as a side's ``python -m pytest`` is (the folder it runs
#: in first on sys.path), finds the top-level modules of the distributions named in its
#: arguments: one JSON line, module -> its folders (a package) or its file.
WHERE = r"""
import importlib.util, json, sys
from importlib import metadata
found = {}
for name in sys.argv[1:]:
    try:
        dist = metadata.distribution(name)
    except Exception:
        continue
    tops = (dist.read_text("top_level.txt") or "").split() or [name.replace("-", "_")]
    for top in tops:
        try:
            spec = importlib.util.find_spec(top)
        except Exception:
            continue
        if spec is not None:
            found[top] = list(spec.submodule_search_locations or [spec.origin or ""])
print("\nOPPROF-WHERE " + json.dumps(found), flush=True)
"""


def imported_from(python: str | None, names: Sequence[str], cwd: Path,
                  env: Mapping[str, str]) -> dict[str, list[str]]:
    """Where ``python`` (None: this one) in ``cwd`` with ``env`` would import the top-level
    modules of the distributions ``names`` from: module -> its folders or file (a
    module not found, or an interpreter that does not answer: left out)."""
    try:
        _, output = run_command([python or sys.executable, "-c", WHERE, *names], cwd=cwd,
                                env=env, timeout=PROBE_TIMEOUT_S)
    except OSError:
        return {}
    for line in reversed(output.splitlines()):
        if line.startswith("OPPROF-WHERE "):
            with contextlib.suppress(jsontext.Unreadable):
                data = jsontext.Reader(dict).parse(line[len("OPPROF-WHERE "):], "where")
                return {str(k): [str(p) for p in v] for k, v in data.items()
                        if isinstance(v, list)}
    return {}


def probe(flag: str, python: str, cwd: Path) -> Probed:
    """What ``python`` has; :class:`Refused` when it does not answer as a Python does
    (or crashes, or hangs, while it looks at its packages)."""
    started = time.monotonic()
    try:
        code, output = run_command([python, "-c", PROBE], cwd=cwd, timeout=PROBE_TIMEOUT_S)
    except OSError as exc:
        raise Refused(f"{flag} {python}: cannot be started ({exc.strerror or exc})") from None
    data = _answer(output)
    if data is None:
        raise Refused(f"{flag} {python}: {_why_no_answer(python, code, output, started)}")
    editable = data.get("editable")
    return Probed(
        Environment(python, str(data.get("version", "")),
                    {str(k): str(v) for k, v in data["packages"].items()},  # a dict: _answer
                    str(data.get("blas") or ""), str(data.get("cuda") or ""),
                    str(data.get("venv") or "")),
        bool(data.get("pytest")),
        tuple((str(e[0]), unquote(str(e[1]))) for e in editable
              if isinstance(e, list) and len(e) == 2) if isinstance(editable, list) else ())


def _answer(output: str) -> dict[str, Any] | None:
    for line in reversed(output.splitlines()):
        if line.startswith(MARK):
            try:
                data = jsontext.Reader(dict).parse(line[len(MARK):], "the probe's answer")
            except jsontext.Unreadable:
                return None
            return data if isinstance(data.get("packages"), dict) else None
    return None


def _why_no_answer(python: str, code: int, output: str, started: float) -> str:
    said = display_name(last_line(output)) if last_line(output) else ""
    if time.monotonic() - started >= PROBE_TIMEOUT_S:
        return (f"did not answer in {PROBE_TIMEOUT_S:.0f} s (it was ended); an "
                "interpreter that hangs while importing numpy or CuPy hangs the tests too")
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        return (f"was ended by {name} while it read its packages (numpy or CuPy "
                "crashing on import, a build for another CPU?); see what it says: "
                f"{shlex.quote(python)} -c 'import numpy'")
    return ("did not answer as a Python interpreter (exit status "
            f"{code}{': ' + said if code != 0 and said else ''}); give a Python interpreter")


def major(version: str) -> str:
    """The part of a version that must agree (semantic versioning): the first number,
    and the second while the first is 0 (``0.1.3`` -> ``0.1``, ``2.4.0`` -> ``2``)."""
    parts = re.findall(r"\d+", version)[:2] or ["?"]
    return ".".join(parts) if parts[0] == "0" else parts[0]


def local_source(dist: metadata.Distribution) -> tuple[str, bool] | None:
    """(folder, editable) from its ``direct_url.json``; None when it came from
    elsewhere (an index, a file)."""
    try:
        data = jsontext.Reader(dict).parse(dist.read_text("direct_url.json") or "null",
                                           "direct_url.json")
    except (jsontext.Unreadable, OSError, UnicodeDecodeError):
        return None
    url = str(data.get("url", ""))
    if not url.startswith("file://"):
        return None
    info = data.get("dir_info")
    return unquote(url.removeprefix("file://")), isinstance(info, dict) and \
        bool(info.get("editable"))


def editable_here() -> list[tuple[str, str]]:
    """(name, folder) of this interpreter's editable installs, as the probe finds them."""
    return [(str(dist.metadata["Name"]), source[0]) for dist in metadata.distributions()
            if (source := local_source(dist)) is not None and source[1]]


def install_source() -> str:
    """What this pytest-opprof was installed from, as ``pip install`` takes it; the
    ``--find-links`` folder of an sdist is left to the user (docs/ci.md)."""
    try:
        source = local_source(metadata.distribution("pytest-opprof"))
    except metadata.PackageNotFoundError:
        source = None
    if source is not None:
        return shlex.quote(source[0])
    return f"'pytest-opprof=={__version__}' (with the --find-links folder you install it from)"


def refusal(flag: str, found: Probed) -> str | None:
    """Why ``found`` cannot run a side: it needs pytest, and pytest-opprof of this one's
    major version (this process reads what its children write)."""
    env = found.environment
    pip = f"{shlex.quote(env.python)} -m pip install"
    if not found.has_pytest:
        return (f"{flag} {env.python}: has no pytest; install pytest-opprof there (it "
                f"brings pytest) with the tests' other requirements: {pip} "
                f"{install_source()}")
    theirs = env.packages.get("pytest-opprof")
    theirs = None if theirs is None else display_name(theirs)
    if theirs is None:
        return f"{flag} {env.python}: has no pytest-opprof; install it there: {pip} " \
               f"{install_source()}"
    if major(theirs) != major(__version__):
        return (f"{flag} {env.python}: has pytest-opprof {theirs}, this command is "
                f"{__version__} (another major version writes results this one cannot "
                f"read); install {major(__version__)}.x there: {pip} {install_source()}")
    return None
