"""Run conditions: what a run was measured under that changes op times by itself.

Two xdist workers share the cores a serial run had alone (an op 40% slower with nothing
changed), and a BLAS library left to pick its threads times a matmul differently from
one pinned to a thread. A baseline run records its conditions (``meta["conditions"]``);
a run whose conditions differ from its baseline's is not judged against it, and says
which condition differs and how to make them match. Baselines written before
conditions were recorded are judged as before.

Conditions are a flat mapping of names to a string, a whole number or None (unset):
``workers`` (pytest-xdist workers of the run, 1 when serial), ``backend``, ``device``,
``measure``, and each of :data:`THREAD_VARIABLES`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from .words import display_name

#: The environment variables that set how many threads numpy's BLAS (OpenBLAS, MKL,
#: BLIS, Accelerate) and OpenMP-using libraries start: each is a run condition.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
#: Those of them that pin numpy's own BLAS threads (the terminal header's hint).
BLAS_PINNING = THREAD_VARIABLES[:5]
#: xdist sets it in each worker's environment.
WORKER_COUNT_VARIABLE = "PYTEST_XDIST_WORKER_COUNT"
#: What a stored conditions mapping may hold, at most (a hostile file holds anything).
MAX_ENTRIES = 64
MAX_VALUE_CHARS = 200

#: What instruction counts also depend on (``run.instructions.conditions``): shown with
#: the others, compared as every condition is.
COUNT_CONDITIONS = ("valgrind", "architecture", "python", "numpy", "blas", "PYTHONHASHSEED")

#: Recorded and shown, never refused: the device differs only under an explicit
#: ``--opprof-machine-key``, which pools machines on purpose (hosted runners change CPU
#: model from run to run); the drift correction is what makes them comparable.
RECORDED_ONLY = frozenset({"device"})

Conditions = dict[str, "str | int | None"]


def current(workerinput: Any, *, backend: str, device: str, measure: str) -> Conditions:
    """This process's conditions; ``workerinput`` is ``config.workerinput`` on an xdist
    worker (absent: None)."""
    return recorded({"workers": worker_count(workerinput), "backend": backend,
                     "device": device, "measure": measure,
                     **{name: os.environ.get(name) for name in THREAD_VARIABLES}})


def recorded(conditions: Mapping[str, str | int | None]) -> Conditions:
    """Conditions as a baseline records them, within what :func:`check` reads back (one
    bound for the writer and the reader): a value longer than :data:`MAX_VALUE_CHARS`
    (``OMP_NUM_THREADS`` set to 300 characters) is kept as its start and a hash of the
    whole, so that the same value records, and compares, the same every run. A run
    recorded one the loader refused, so every later run failed on its baseline."""
    return {key: _bounded(value) for key, value in conditions.items()}


def _bounded(value: str | int | None) -> str | int | None:
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        digest = hashlib.sha1(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        return f"{value[:MAX_VALUE_CHARS - 23]}... (sha1 {digest})"
    return value


def worker_count(workerinput: Any) -> int:
    """How many xdist workers share this run: the count xdist gives its workers (in
    their environment and their ``workerinput``), 1 in a serial run."""
    given = os.environ.get(WORKER_COUNT_VARIABLE)
    if given is None and isinstance(workerinput, dict):
        given = str(workerinput.get("workercount", ""))
    return int(given) if given and given.isdigit() and int(given) > 0 else 1


def pinned(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether any variable that pins numpy's BLAS threads is set (to anything)."""
    return any(environ.get(name) for name in BLAS_PINNING)


def difference(then: Mapping[str, Any] | None, now: Mapping[str, Any]) -> str | None:
    """One line naming how ``now`` differs from a baseline's conditions ``then`` and
    what to do; None when they agree or the baseline recorded none. Conditions only one
    side knows (a newer or older version's) are not compared."""
    if then is None:
        return None
    differing = [name for name in then if name in now and name not in RECORDED_ONLY
                 and then[name] != now[name]]
    if not differing:
        return None
    first, *others = differing
    line = _describe_difference(first, then[first], now[first])
    return line + (f" (and {', '.join(others)} differ too)" if others else "")


_RETAKE = "re-take the baseline with `opprof baseline update`"


def _describe_difference(name: str, then: Any, now: Any) -> str:
    if name == "workers":
        return (f"the baseline was taken with {_workers(then)}, this run has {_workers(now)}: "
                f"run {_as_run(then)}, or re-take the baseline with "
                f"`opprof baseline update{_flag(now)}`")
    if name in THREAD_VARIABLES:
        fix = f"unset {name}" if then is None else f"export {name}={_shown(then)}"
        return (f"{name} was {_value(then)} in the baseline, {_value(now)} now: {fix}, "
                f"or {_RETAKE}")
    return f"the baseline's {name} was {_value(then)}, this run's is {_value(now)}: {_RETAKE}"


def _workers(count: Any) -> str:
    return "1 worker (serial)" if count == 1 else f"{_shown(count)} xdist workers"


def _as_run(count: Any) -> str:
    return "serially (-n 0)" if count == 1 else f"with -n {_shown(count)}"


def _flag(count: Any) -> str:
    return "" if count == 1 else f" -n {_shown(count)}"


def _value(value: Any) -> str:
    return "unset" if value is None else _shown(value)


def _shown(value: Any) -> str:
    return display_name(str(value))


def describe(conditions: Mapping[str, Any]) -> str:
    """``serial, backend cpu (x86_64), measure events, OMP_NUM_THREADS=1, others unset``:
    a baseline run's conditions for ``opprof baseline show``."""
    workers = conditions.get("workers")
    parts = [] if workers is None else [  # instruction counts do not depend on workers
        "serial" if workers == 1 else f"{_shown(workers)} xdist workers"]
    parts.append(f"backend {_value(conditions.get('backend'))} "
                 f"({_value(conditions.get('device'))})")
    parts.append(f"measure {_value(conditions.get('measure'))}")
    parts += [f"{name} {_shown(conditions[name])}" for name in COUNT_CONDITIONS
              if conditions.get(name) is not None]
    threads = [f"{name}={_shown(conditions[name])}" for name in THREAD_VARIABLES
               if conditions.get(name) is not None]
    parts.append(", ".join(threads) + ", others unset" if threads
                 else "thread variables unset")
    return ", ".join(parts)


def check(data: Any) -> Conditions:
    """A stored conditions mapping, validated (raises TypeError or ValueError, which
    the baseline loader turns into one line naming the file)."""
    if not isinstance(data, dict):
        raise TypeError("meta conditions is not an object")
    if len(data) > MAX_ENTRIES:
        raise ValueError(f"meta conditions holds {len(data)} entries; at most {MAX_ENTRIES}")
    for key, value in data.items():
        if value is not None and type(value) not in (str, int):
            raise TypeError(f"meta conditions {key!r} is not a string, a whole number or null")
        if len(key) > MAX_VALUE_CHARS or len(str(value)) > MAX_VALUE_CHARS:
            raise ValueError(f"meta conditions {key[:40]!r} is longer than "
                             f"{MAX_VALUE_CHARS} characters")
    return data
