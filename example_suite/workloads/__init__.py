"""Array workloads written once against ``xp`` (numpy or cupy).

Each op is named with :func:`pytest_opprof.op`, the way a library would
instrument itself: free when no profiler is recording, timed when one is.
Op names follow PaddlePaddle's.

``OPPROF_EXAMPLE_SLOWDOWN=relu_grad:1.3`` (several comma-separated) makes an op
do that much more real work, to show the regression gate catching it: the op
repeats its computation on the leading 30% of the batch.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

SLOWDOWN_ENV = "OPPROF_EXAMPLE_SLOWDOWN"
#: The ops that can be slowed down: those whose work splits along the batch.
SLOWABLE = ("batch_norm", "conv2d", "relu", "relu_grad")


def parse_slowdowns(text: str, env: str = SLOWDOWN_ENV,
                    allowed: tuple[str, ...] = SLOWABLE) -> dict[str, float]:
    """``"relu_grad:1.3,conv2d:1.1"`` -> {"relu_grad": 0.3, "conv2d": 0.1} (extra work).
    ``env`` and ``allowed`` name the variable and its ops in the error (the many-op
    benchmark reads its own variable with this too)."""
    extra: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, factor = part.partition(":")
        try:
            value = float(factor)
        except ValueError:
            value = 0.0
        if name not in allowed or not 1.0 <= value <= 10.0:
            raise ValueError(
                f"{env}={text!r}: {part!r} must be OP:FACTOR with OP one of "
                f"{', '.join(allowed)} and FACTOR between 1 and 10, e.g. {allowed[-1]}:1.3")
        extra[name] = value - 1.0
    return extra


@functools.cache
def slowdowns() -> dict[str, float]:
    """The extra work asked for, read once (example_suite/conftest.py has checked it)."""
    return parse_slowdowns(os.environ.get(SLOWDOWN_ENV, ""))


def redo_extra(name: str, fn: Callable[..., Any], *batch_arrays: Any) -> None:
    """Repeat ``fn`` on leading slices of the batch: ``extra`` times the batch in all."""
    extra = slowdowns().get(name)
    if not extra:
        return
    batch = batch_arrays[0].shape[0]
    rows = round(extra * batch)
    while rows > 0:
        take = min(rows, batch)
        fn(*(a[:take] for a in batch_arrays))
        rows -= take
