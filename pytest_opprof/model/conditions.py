"""Run conditions: what a run was measured under that changes op times by itself.

Two xdist workers share the cores a serial run had alone (an op 40% slower with nothing
changed), and a BLAS library left to pick its threads times a matmul differently from
one pinned to a thread. A baseline run records its conditions (``meta["conditions"]``);
a run whose conditions differ from its baseline's is not judged against it, and says
which condition differs and how to make them match. Baselines written before
conditions were recorded are judged as before.

Conditions are a flat mapping of names to a string, a whole number or None (unset):
``workers`` (pytest-xdist workers of the run, 1 when serial), ``measure`` (its name),
``device``, and each of :data:`THREAD_VARIABLES`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .words import display_name

if TYPE_CHECKING:
    from .hints import Retake

#: The environment variables that set how many threads numpy's BLAS (OpenBLAS, MKL,
#: BLIS, Accelerate) and OpenMP-using libraries start: each is a run condition.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
#: Those of them that pin numpy's own BLAS threads (the terminal header's hint).
BLAS_PINNING = THREAD_VARIABLES[:5]
#: xdist sets it in each worker's environment.
WORKER_COUNT_VARIABLE = "PYTEST_XDIST_WORKER_COUNT"
#: What instruction counts also depend on (the instructions measure's conditions): shown
#: with the others, compared as every condition is.
COUNT_CONDITIONS = ("valgrind", "architecture", "python", "numpy", "blas", "PYTHONHASHSEED")

#: Recorded and shown, never refused: the device differs only under an explicit
#: ``--opprof-machine-key``, which pools machines on purpose (hosted runners change CPU
#: model from run to run); the drift correction is what makes them comparable.
RECORDED_ONLY = frozenset({"device"})

Conditions = dict[str, "str | int | None"]


def current(workerinput: Any, *, measure: str, device: str) -> Conditions:
    """This process's conditions; ``workerinput``: ``config.workerinput`` or None."""
    return {"workers": worker_count(workerinput), "measure": measure, "device": device,
            **{name: os.environ.get(name) for name in THREAD_VARIABLES}}


def worker_count(workerinput: Any) -> int:
    """How many xdist workers share this run (xdist tells its workers), 1 if serial."""
    given = os.environ.get(WORKER_COUNT_VARIABLE)
    if given is None and isinstance(workerinput, dict):
        given = str(workerinput.get("workercount", ""))
    return int(given) if given and given.isdecimal() and int(given) > 0 else 1


def pinned(values: Mapping[str, Any] = os.environ) -> bool:
    """Whether any variable that pins numpy's BLAS threads is set to something: in this
    process's environment, or in a run's recorded conditions. An empty value pins
    nothing (the libraries read it as unset)."""
    return any(str(value).strip() for name in BLAS_PINNING
               if (value := values.get(name)) is not None)


def remedies(conditions: Mapping[str, Any] | None) -> list[str]:
    """What a quieter run would change, of what the run's ``conditions`` leave to
    change: pinning BLAS threads where none was pinned, fewer xdist workers where there
    were several. Conditions not recorded (None): both, as either may help."""
    known = conditions or {}
    found = []
    if conditions is None or not pinned(known):
        found.append("pinned BLAS threads (OMP_NUM_THREADS=1)")
    workers = _workers_of(known.get("workers"))
    if conditions is None or (workers is not None and workers > 1):
        found.append("fewer xdist workers")
    return found


def normal(name: str, value: Any) -> Any:
    """A condition's value as the comparison sees it: a thread variable as the text the
    environment holds (a hand-written ``1`` is ``"1"``), the worker count as a whole
    number (``"2"`` is 2); anything else as stored."""
    if value is None:
        return None
    if name in THREAD_VARIABLES or name in COUNT_CONDITIONS:
        return str(value)
    if name == "workers":
        workers = _workers_of(value)
        return value if workers is None else workers
    return value


def _workers_of(value: Any) -> int | None:
    """A worker count a run can have (a whole number, at least 1), or None."""
    if isinstance(value, str) and value.strip().isdecimal():
        value = int(value)
    whole = isinstance(value, int) and not isinstance(value, bool)
    return value if whole and value >= 1 else None


def difference(then: Mapping[str, Any] | None, now: Mapping[str, Any],
               retake: Retake) -> str | None:
    """One line naming how ``now`` differs from a baseline's conditions ``then`` and
    what to do; None when they agree or the baseline recorded none. Conditions only one
    side knows (a newer or older version's) are not compared.

    Each piece of advice, followed, makes the conditions match: the exports and unsets
    of every differing thread variable at once, quoted for the shell (an empty value is
    ``export X=''``, not an unset); ``-n`` only for a worker count a run can have;
    re-taking the baseline for anything else: ``retake``, the run's own command (its
    workers, its measure: the conditions ``now`` were taken under)."""
    if then is None:
        return None
    differing = [name for name in then if name in now and name not in RECORDED_ONLY
                 and normal(name, then[name]) != normal(name, now[name])]
    if not differing:
        return None
    said = [_describe_difference(name, then[name], now[name]) for name in differing]
    fixes = _fixes(differing, then)
    again = f"re-take the baseline with `{display_name(retake.command())}`"
    return "; ".join(said) + ": " + (f"{fixes}, or {again}" if fixes else again)


def _describe_difference(name: str, then: Any, now: Any) -> str:
    if name == "workers":
        return f"the baseline was taken with {_workers(then)}, this run has {_workers(now)}"
    if name in THREAD_VARIABLES:
        return f"{name} was {_value(then)} in the baseline, {_value(now)} now"
    return f"the baseline's {name} was {_value(then)}, this run's is {_value(now)}"


def _fixes(differing: list[str], then: Mapping[str, Any]) -> str:
    """What this run can change to match ``then``, every differing condition at once;
    empty when some differing condition is not this run's to change (the measure,
    valgrind's version, a value no run can have): then only re-taking helps."""
    exports, unsets, run = [], [], ""
    for name in differing:
        value = then[name]
        if name in THREAD_VARIABLES:
            if value is None:
                unsets.append(name)
            elif isinstance(value, (str, int)) and not isinstance(value, bool) \
                    and display_name(str(value)) == str(value):
                exports.append(f"{name}={shlex.quote(str(value))}")
            else:
                return ""  # a value the shell cannot be told in one line
        elif name == "workers" and (workers := _workers_of(value)) is not None:
            run = "serially (-n 0)" if workers == 1 else f"with -n {workers}"
        else:
            return ""
    fixes = ([f"export {' '.join(exports)}"] if exports else []) + \
        ([f"unset {' '.join(unsets)}"] if unsets else []) + ([f"run {run}"] if run else [])
    return " and ".join(fixes)


def _workers(count: Any) -> str:
    workers = _workers_of(count)
    if workers == 1:
        return "1 worker (serial)"
    return f"{workers} xdist workers" if workers else f"workers {_shown(count)}"


def _value(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, str) and not value:
        return "set but empty ('')"
    shown = _shown(value)
    # blanks shown as the shell would need them: "1 " is not "1"
    return shlex.quote(shown) if isinstance(value, str) and shown == value else shown


def _shown(value: Any) -> str:
    return display_name(str(value))


def describe(conditions: Mapping[str, Any]) -> str:
    """``serial, measure time (AMD EPYC (2 cores)), OMP_NUM_THREADS=1, others unset``:
    a baseline run's conditions for ``opprof baseline show``."""
    workers = conditions.get("workers")
    parts = [] if workers is None else [  # instruction counts do not depend on workers
        "serial" if _workers_of(workers) == 1 else _workers(workers)]
    parts.append(f"measure {_plain(conditions.get('measure'))} "
                 f"({_plain(conditions.get('device'))})")
    parts += [f"{name} {_shown(conditions[name])}" for name in COUNT_CONDITIONS
              if conditions.get(name) is not None]
    threads = [f"{name}={_shown(conditions[name])}" for name in THREAD_VARIABLES
               if conditions.get(name) is not None]
    parts.append(", ".join(threads) + ", others unset" if threads
                 else "thread variables unset")
    return ", ".join(parts)


def _plain(value: Any) -> str:
    return "unset" if value is None else _shown(value)


def check(data: Any) -> Conditions:
    """A stored conditions mapping, validated (raises as the one parse path expects)."""
    if not isinstance(data, dict):
        raise TypeError("meta conditions is not an object")
    for key, value in data.items():
        if value is not None and type(value) not in (str, int):
            raise TypeError(f"meta conditions {key!r} is not a string, a whole number or null")
    return data
