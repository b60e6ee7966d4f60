"""The confirmation re-run: one test profiled again in a new pytest process.

The new process must measure the same workload as the first, so it gets the user's own
arguments (a conftest option that sizes the workload, ``-p``, ``-o``, ``--count``) less the
test paths pytest took from them (the node id replaces them) and the ``--opprof-*`` flags
(the re-run gives its own); ``addopts`` and ``PYTEST_ADDOPTS``, which the child reads
again, lose their test paths and the output registry's flags. Other plugins' flags are
kept, as they change how the workload runs (:mod:`.child` keeps ``--lf`` and
``--basetemp`` off the user's cache and folders; the child reads no input for ``--pdb``
to wait on); what a plugin writes at the end of a session, this run writes again.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..model.profile import Profile
from . import outputs
from .launcher import run_pytest

if TYPE_CHECKING:
    from ..model.verdict import OpVerdict


def _an_output(flag: str) -> bool:
    return flag.split("=", 1)[0] in {output.flag for output in outputs.RUN_OUTPUTS}


def user_args(config: pytest.Config) -> list[str]:
    """The command line the user gave (``@FILE`` arguments read), less the test paths
    and the ``--opprof-*`` flags."""
    args = _expanded([str(a) for a in config.invocation_params.args],
                     Path(config.invocation_params.dir))
    return _kept(config, args, lambda flag: flag.startswith("--opprof-"))


def _kept(config: pytest.Config, args: Sequence[str],
          dropped: Callable[[str], bool]) -> list[str]:
    """``args`` less the test paths pytest took from them and the flags ``dropped``
    names, each with its value: the word after a flag written without ``=``, unless
    pytest took that word as a test path, or it is a flag."""
    positional = {str(p) for p in config.option.file_or_dir or ()}
    kept: list[str] = []
    i = 0
    while i < len(args) and args[i] != "--":  # after "--": test paths
        arg = args[i]
        flag = arg.startswith("-")
        valued = flag and "=" not in arg and i + 1 < len(args) \
            and not args[i + 1].startswith("-") and args[i + 1] not in positional
        chunk = list(args[i:i + 1 + valued])
        i += len(chunk)
        if not (dropped(arg) if flag else arg in positional):
            kept += chunk
    return kept


def _expanded(args: list[str], folder: Path) -> list[str]:
    """``@FILE`` arguments replaced by the file's lines (pytest's own reading: one
    argument a line), so that the test paths they give are seen and left out."""
    out: list[str] = []
    for arg in args:
        if arg.startswith("@") and len(arg) > 1:
            try:
                lines = (folder / arg[1:]).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                out.append(arg)  # pytest said what was wrong with it in the first run
                continue
            out += _expanded(lines, folder)
        else:
            out.append(arg)
    return out


def selection_free(config: pytest.Config) -> tuple[list[str], dict[str, str]]:
    """``-o addopts=`` and ``PYTEST_ADDOPTS`` for a child, where the ini file's addopts
    and the environment's would add test paths or output flags to its node ids."""
    addopts = [str(a) for a in config.getini("addopts") or ()]
    kept = _kept(config, addopts, _an_output)
    args = ["-o", f"addopts={shlex.join(kept)}"] if kept != addopts else []
    words = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    kept = _kept(config, words, _an_output)
    return args, {"PYTEST_ADDOPTS": shlex.join(kept)} if kept != words else {}


def node_arg(config: pytest.Config, nodeid: str) -> str:
    """Node ids are relative to the rootdir; the re-run starts where the user started."""
    path, sep, rest = nodeid.partition("::")
    return f"{Path(config.rootpath, path)}{sep}{rest}"


def profiling(config: pytest.Config, nodeids: Sequence[str], *, measure: str,
              skip: int) -> list[str]:
    """The arguments of a child that profiles ``nodeids`` as this run does, serially
    (the re-run, the callgrind child; with ``records`` it gates nothing)."""
    args = [*user_args(config), *(node_arg(config, n) for n in nodeids),
            # the first run's measure, not auto's choice of the moment
            "-q", f"--rootdir={config.rootpath}", f"--opprof-measure={measure}",
            f"--opprof-skip={skip}", "--opprof-verbosity=0"]
    if config.inipath is not None:
        args += ["-c", str(config.inipath)]
    if config.pluginmanager.hasplugin("xdist"):
        args += ["-n", "0"]  # no workers, whatever the user's flags and addopts say
    return args + selection_free(config)[0]


def announce(config: pytest.Config, nodeid: str, suspects: Sequence[OpVerdict]) -> None:
    """``opprof: re-running ... to confirm: relu (OP_ID 3) +40.0%``."""
    from ..render import percent
    from ..render.verdicts import op_name

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return  # an xdist worker: its terminal is not the user's
    reporter.ensure_newline()
    why = ", ".join(f"{op_name(v)} {percent(v.corrected_ratio)}" for v in suspects)
    reporter.write_line(f"opprof: re-running {nodeid} in a new process to confirm: {why}")


def profile_again(config: pytest.Config, nodeid: str, *, measure: str, skip: int,
                  timeout: float) -> Profile | None:
    """The test's last passing profile from a new process, or None (the first run's
    verdict then stands)."""
    args = profiling(config, [nodeid], measure=measure, skip=skip)
    try:
        child = run_pytest(args, cwd=config.invocation_params.dir, records=True,
                           timeout=timeout, env=selection_free(config)[1])
    except OSError:
        return None
    # this test's profile only: whatever else the child ran is no evidence for it
    passed = [r.profile for r in child.records or () if r.passed and r.nodeid == nodeid]
    return passed[-1] if passed else None
