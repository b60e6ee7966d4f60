"""The many-op workload: 44 array ops written once against ``xp`` (numpy or cupy),
whose medians span ~5 us to ~5 ms on a 2-core VM with single-threaded BLAS.

Each op is a :class:`Spec`: inputs whose leading axis is a batch, and a call that
works on them row by row (or as one block). An op's time is ``reps`` calls; ``reps``
is more than one for the smallest ops, whose single call is mostly fixed overhead, so
that extra work can be added in whole calls.

``OPPROF_MANYOP_SLOW=NAME:FACTOR[,NAME:FACTOR...]`` makes an op about FACTOR times as
slow with real work: ``(FACTOR - 1) * reps`` more calls, the whole ones on all of the
inputs and the remainder on that share of the batch's leading rows (as the example
suite's ``OPPROF_EXAMPLE_SLOWDOWN`` does). The gate's own ratio in the results JSON says
how much slower the op really became.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from example_suite.workloads import parse_slowdowns
from pytest_opprof import op

SLOW_ENV = "OPPROF_MANYOP_SLOW"


@dataclass(frozen=True)
class Spec:
    name: str
    #: The inputs, as numpy arrays (leading axis: the batch the extra work slices).
    make: Callable[[np.random.Generator], tuple[np.ndarray, ...]]
    call: Callable[..., Any]
    reps: int = 1
    #: How many leading inputs the extra work slices (a matmul slices only its left side).
    sliced: int = 99
    #: Called once, untimed, just before its scope. After the 5 ms ops a 3 us op runs
    #: cold at 10-30 us (the suite is to span ~5 us to ~5 ms), and a cold first call
    #: costs more than the warm calls after it, so that extra calls would slow the op
    #: by less than asked.
    warm: bool = False


def _normal(*shape: int) -> Callable[[np.random.Generator], tuple[np.ndarray, ...]]:
    return lambda rng: (rng.standard_normal(shape),)


def _pair(*shape: int) -> Callable[[np.random.Generator], tuple[np.ndarray, ...]]:
    return lambda rng: (rng.standard_normal(shape), rng.standard_normal(shape))


def specs(xp: Any) -> list[Spec]:
    """Every op, smallest first (sizes tuned on the 2-core VM, BLAS on one thread)."""
    return [
        # under 20 us: one call, warmed (the harness injects into ops of 20 us or more)
        Spec("add_tiny", _pair(500), lambda a, b: a + b, warm=True),
        Spec("argmax_tiny", _normal(1_000), lambda a: xp.argmax(a), warm=True),
        Spec("matmul_16", _pair(16, 16), lambda a, b: a @ b, sliced=1, warm=True),
        Spec("sum_tiny", _normal(2_000), lambda a: a.sum(), warm=True),
        Spec("where_tiny", _normal(500), lambda a: xp.where(a > 0, a, 0.0), warm=True),
        Spec("abs_tiny", _normal(4_000), lambda a: xp.abs(a), warm=True),
        Spec("exp_tiny", _normal(600), lambda a: xp.exp(a), warm=True),
        Spec("cumsum_tiny", _normal(1_000), lambda a: xp.cumsum(a), warm=True),
        Spec("sort_tiny", _normal(500), lambda a: xp.sort(a), warm=True),
        # 20 us to 200 us: four calls, warmed, so that +25% and +50% are whole calls
        Spec("matmul_40", _pair(40, 40), lambda a, b: a @ b, 4, sliced=1, warm=True),
        Spec("fft_small", _normal(2, 256), lambda a: xp.fft.fft(a, axis=1), 4, warm=True),
        Spec("clip", _normal(8, 1_000), lambda a: xp.clip(a, -1.0, 1.0), 4, warm=True),
        Spec("argmax", _normal(8, 8_000), lambda a: a.argmax(axis=1), 4, warm=True),
        Spec("where", _normal(4, 1_000), lambda a: xp.where(a > 0, a, 0.5 * a), 4, warm=True),
        Spec("mul", _pair(16, 4_000), lambda a, b: a * b, 4, warm=True),
        Spec("exp", _normal(4, 1_000), lambda a: xp.exp(a), 4, warm=True),
        Spec("sum_rows", _normal(32, 4_000), lambda a: a.sum(axis=1), 4, warm=True),
        Spec("matmul_64", _pair(64, 64), lambda a, b: a @ b, 4, sliced=1, warm=True),
        Spec("cumsum", _normal(4, 2_000), lambda a: xp.cumsum(a, axis=1), 4, warm=True),
        Spec("max_rows", _normal(64, 4_000), lambda a: a.max(axis=1), 4, warm=True),
        Spec("sort", _normal(4, 1_000), lambda a: xp.sort(a, axis=1), 4, warm=True),
        Spec("diff_rows", _normal(64, 4_000), lambda a: xp.diff(a, axis=1), 4, warm=True),
        Spec("norm_rows", _normal(64, 4_000), lambda a: xp.linalg.norm(a, axis=1), 4, warm=True),
        # 200 us to 5 ms: one call; extra work on a share of the rows
        Spec("std_rows", _normal(64, 4_000), lambda a: a.std(axis=1)),
        Spec("partition_rows", _normal(24, 4_000), lambda a: xp.partition(a, 2_000, axis=1)),
        Spec("take_rows", lambda rng: (rng.standard_normal((64, 4_000)),
                                       rng.integers(0, 4_000, (64, 1_000))),
             lambda a, i: xp.take_along_axis(a, i, axis=1)),
        Spec("rfft_rows", _normal(32, 4_096), lambda a: xp.fft.rfft(a, axis=1)),
        Spec("searchsorted", lambda rng: (np.sort(rng.standard_normal((40, 2_000)), axis=1),),
             lambda a: [xp.searchsorted(row, row[::7]) for row in a]),
        Spec("matmul_160", _pair(160, 160), lambda a, b: a @ b, sliced=1),
        Spec("cumprod_rows", _normal(40, 4_000), lambda a: xp.cumprod(1.0 + 1e-3 * a, axis=1)),
        Spec("sort_rows", _normal(16, 4_000), lambda a: xp.sort(a, axis=1)),
        Spec("transpose_copy", _normal(256, 512), lambda a: xp.ascontiguousarray(a.T)),
        Spec("where_rows", _normal(32, 4_000), lambda a: xp.where(a > 0, a, 0.5 * a)),
        Spec("fft_rows", _normal(16, 4_096), lambda a: xp.fft.fft(a, axis=1)),
        Spec("einsum_bmm", _pair(32, 48, 48), lambda a, b: xp.einsum("bij,bjk->bik", a, b)),
        Spec("outer", _pair(32, 160), lambda a, b: xp.einsum("bi,bj->bij", a, b)),
        Spec("exp_rows", _normal(64, 3_000), lambda a: xp.exp(a)),
        Spec("argsort_rows", _normal(16, 4_000), lambda a: xp.argsort(a, axis=1)),
        Spec("fft2", _normal(2, 256, 256), lambda a: xp.fft.fft2(a)),
        Spec("sqrt_rows", _normal(64, 4_000), lambda a: xp.sqrt(xp.abs(a))),
        Spec("matmul_320", _pair(320, 320), lambda a, b: a @ b, sliced=1),
        Spec("sort_big", _normal(12, 32_768), lambda a: xp.sort(a, axis=1)),
        Spec("log1p_rows", _normal(32, 4_000), lambda a: xp.log1p(xp.abs(a))),
        Spec("tanh_rows", _normal(32, 4_000), lambda a: xp.tanh(a)),
    ]


@functools.cache
def slowdowns() -> dict[str, float]:
    """The extra work asked for by the environment (the conftest has checked it)."""
    return parse_slowdowns(os.environ.get(SLOW_ENV, ""), env=SLOW_ENV, allowed=NAMES)


class ManyOp:
    """The workload on ``xp``: inputs made once, then :meth:`step` runs every op once,
    each inside its named op scope."""

    def __init__(self, xp: Any, extra: dict[str, float] | None = None, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        extra = slowdowns() if extra is None else extra
        self.ops: list[tuple[Any, Spec, list[tuple[Any, ...]]]] = []
        for spec in specs(xp):
            inputs = tuple(xp.asarray(x) for x in spec.make(rng))
            self.ops.append((op(spec.name), spec, _calls(spec, inputs, extra.get(spec.name, 0.0))))

    def step(self) -> None:
        for scope, spec, calls in self.ops:
            if spec.warm:
                spec.call(*calls[0])
            with scope:
                for args in calls:
                    spec.call(*args)


def _calls(spec: Spec, inputs: tuple[Any, ...], extra: float) -> list[tuple[Any, ...]]:
    """The argument tuples of one op's calls: ``reps`` on all inputs, then the extra
    work: ``extra * reps`` more calls, the fraction as a call on leading rows."""
    whole, fraction = divmod(extra * spec.reps, 1.0)
    calls = [inputs] * (spec.reps + int(whole))
    rows = round(fraction * inputs[0].shape[0])
    if rows:
        calls.append(tuple(x[:rows] if k < spec.sliced else x for k, x in enumerate(inputs)))
    return calls


NAMES: tuple[str, ...] = tuple(spec.name for spec in specs(np))
