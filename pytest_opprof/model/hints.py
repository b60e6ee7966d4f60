"""The commands the tool prints for the user to run, built in one place.

A printed command carries the options of the run it came from (where its baselines are
kept, under which machine key, by which measure, with how many xdist workers, the ini
file and overrides that select its tests), so that, run as printed from where that run
was started, it writes where the run reads. Every layer that advises a command asks a
:class:`Retake` for it; the session makes the run's (``run.session.RunState.retake``),
``opprof baseline show`` and ``prune`` make theirs from their own arguments.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Retake:
    """``opprof baseline update`` for one run: its ``options`` (pytest's flags, in the
    order they are printed), the rootdir as seen from where the run was started
    (``where``: node ids are the rootdir's) and the ``tests`` a command names."""

    options: tuple[str, ...] = ()
    where: str = "."
    tests: tuple[str, ...] = ()

    def of(self, *tests: str) -> Retake:
        """The same run's command for ``tests`` (node ids)."""
        return replace(self, tests=tests)

    def test_path(self, nodeid: str) -> str:
        """A node id as an argument from where the run was started: its file's path
        joined to the rootdir's (``tests/t.py::a[x/y]`` from ``tests/``: ``t.py::a[x/y]``)."""
        if self.where == ".":
            return nodeid
        path, sep, rest = nodeid.partition("::")
        return posixpath.normpath(posixpath.join(self.where, path)) + sep + rest

    def command(self, runs: int | None = None) -> str:
        """The shell command, quoted (``shlex.join``): it runs as printed."""
        return shlex.join(["opprof", "baseline", "update",
                           *(["--runs", str(runs)] if runs is not None else []),
                           *map(self.test_path, self.tests), *self.options])

    def __str__(self) -> str:
        return self.command()


def flag(name: str, value: object) -> str:
    """``--opprof-machine-key=gha`` (one argument, quoted as a whole by ``shlex.join``)."""
    return f"{name}={value}"


def workers_flags(workers: int | None) -> tuple[str, ...]:
    """``-n N`` for a run that had N > 1 xdist workers."""
    return ("-n", str(workers)) if workers is not None and workers > 1 else ()


def stored(baseline_dir: str | None, machine_key: str | None,
           measure: str | None = None, extra: Sequence[str] = ()) -> Retake:
    """The command for a store named by its folder and machine key (``opprof baseline
    show``/``prune``): each given one is carried."""
    options = [*extra]
    if baseline_dir is not None:
        options.append(flag("--opprof-baseline-dir", baseline_dir))
    if machine_key is not None:
        options.append(flag("--opprof-machine-key", machine_key))
    if measure is not None:
        options.append(flag("--opprof-measure", measure))
    return Retake(tuple(options))
