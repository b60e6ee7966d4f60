"""The terminal report: Apache SINGA's time profile and PaddlePaddle's op table.

Verbosity 1 prints SINGA's phase block; verbosity 2 adds SINGA's per-op list in graph
order, PaddlePaddle's per-op-type table and the outside-ops line. Names come from user
code: they are shown through :func:`display_name`, so that none can forge a line.

With kernel time (CUPTI) the op figures are kernel time, each op's event span follows,
each op lists the kernels it launched, and a per-kernel section follows Paddle's table
(as Paddle's CUPTI tracer and torch.profiler's kernel table). With counts (instructions,
by callgrind) every figure is written as its measure says it (``1.57M instr``), and
verbosity 2 adds each op's costliest functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..model.profile import Profile
from ..model.reports import KernelStats
from ..model.words import Unit
from ..stats.kernels import kernel_stats, kernels_by_op
from ..stats.summary import OpTypeStats, op_stats, op_type_stats, phase_times, wall_summary
from . import display_name
from .kernels import abbreviate, measure_of, op_name, zero_instrumentation
from .table import align

_SINGA_PHASE_LABELS = {"forward": "Forward Propagation", "backward": "Backward Propagation"}


def seconds(ns: float) -> str:
    """Seconds as C++'s default ostream prints a double (``%g``): 1.73722e-05, 0.000612724."""
    return f"{ns / 1e9:g}"


def milliseconds(ns: float) -> str:
    return f"{ns / 1e6:g}"


def counts(profile: Profile) -> bool:
    return profile.unit is Unit.COUNT


def figure(profile: Profile, value: float) -> str:
    """As SINGA's lists print it: ``1.73722e-05 sec``, or ``1.57M instr``."""
    return measure_of(profile).amount(value) if counts(profile) else f"{seconds(value)} sec"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def phase_label(name: str) -> str:
    """``forward`` -> ``Forward Propagation``; ``update`` -> ``Update``."""
    name = display_name(name)
    return _SINGA_PHASE_LABELS.get(name, _capital(name))


def header(profile: Profile) -> str:
    skipped = f"first {profile.skip} skipped" if profile.skip else "none skipped"
    measure = measure_of(profile)
    return (f"measure {display_name(profile.measure)} ({profile.device}; {measure.figure} from "
            f"{measure.source}): {profile.counted} of {profile.iterations} iterations counted "
            f"({skipped})")


def singa_phases(profile: Profile) -> str:
    """SINGA's verbosity-1 block: each phase's figure per counted iteration."""
    title, word = _titles(profile)
    phases = phase_times(profile)
    return "\n".join([f"{title} Profiling:", *(f"{phase_label(name)} {word} : "
                                               f"{figure(profile, ns)}" for name, ns in phases),
                      *_split_note(profile, phases)])


def _titles(profile: Profile) -> tuple[str, str]:
    """SINGA's words: ``Time`` twice, or ``Instruction`` (``Instruction Profiling:``)
    and ``Instructions`` (``Forward Propagation Instructions``)."""
    noun = measure_of(profile).counts[0]
    if not counts(profile) or not noun:
        return "Time", "Time"
    return _capital(noun).removesuffix("s"), _capital(noun)


def _split_note(profile: Profile, phases: list[tuple[str, float]]) -> list[str]:
    """Why a test that names no phase has no backward line (the README: forward is every
    top-level op before the first op named ``*backward*`` or ``*_grad``), or none."""
    if profile.phases or not profile.counted:
        return []
    found = [name for name, _ in phases]
    if not found:
        return ["(no phase named and no op counted: nothing to split)"]
    if "backward" not in found:
        return ["(no phase named: forward is every top-level op; no op is named *backward* "
                "or *_grad, so there is no backward time)"]
    if "forward" not in found:
        return ["(no phase named: the first op is a backward op, so every top-level op is "
                "backward time)"]
    return []


def measure_line(profile: Profile) -> str:
    if zero_instrumentation(profile):
        return ("Measure: kernel time; the test named no op: one op per kernel name, in "
                "launch order (zero instrumentation)")
    if profile.kernel_samples is not None:
        return ("Measure: kernel time (the GPU activities each op launched, nested ops "
                "included); span: the op's event span")
    measure = measure_of(profile)
    return (f"Measure: {measure.figure} (from {measure.source} between the op's boundaries, "
            "nested ops included)")


def _kernel_lines(kernels: Iterable[KernelStats]) -> list[str]:
    return [f"    {abbreviate(k.name)} : count={k.count} total={milliseconds(k.total)} ms"
            for k in kernels]


def singa_ops(profile: Profile) -> str:
    """SINGA's verbosity-2 list: every OP_ID in graph order, its mean per run; with
    kernel time, its event span second and the kernels it launched under it."""
    kernel = profile.kernel_samples is not None
    counted = counts(profile)
    lines = [f"{_titles(profile)[0]} Profiling:"]
    if kernel or counted:
        lines.append(measure_line(profile))
    zero = zero_instrumentation(profile)
    kernel = kernel and not zero  # its ops are its kernels: no span, no kernels under them
    by_op = kernels_by_op(profile) if kernel or zero else {}
    span_stats = op_stats(profile, profile.samples) if kernel else []
    for s in op_stats(profile):
        value = figure(profile, s.mean) if s.count else (
            f"- {measure_of(profile).counts[1] if counted else 'sec'} (ran only in skipped "
            "iterations)")
        if kernel and s.count:
            value += f" (span {seconds(span_stats[s.op_id].mean)} sec)"
        lines.append(f"OP_ID{s.op_id}. {op_name(profile, s.name)} : {value}")
        lines += _kernel_lines(by_op.get(s.op_id, []) if kernel else [])
    outside = by_op.get(-1, [])
    if outside:
        lines += ["Outside any op:", *_kernel_lines(outside)]
    return "\n".join(lines)


#: The functions each op lists in the verbosity-2 report (its costliest).
FUNCTIONS_SHOWN = 3


def top_functions(profile: Profile) -> str:
    """Each op's costliest functions in its last iteration (instructions only)."""
    found = profile.op_functions
    if not counts(profile) or not found:
        return ""
    measure = measure_of(profile)
    rows = [[f"OP_ID{info.op_id}. {op_name(profile, info.name)}" if k == 0 else "",
             abbreviate(name), measure.amount(n)]
            for info, functions in zip(profile.ops, found, strict=False)
            for k, (name, n) in enumerate(sorted(functions, key=lambda f: -f[1])[:FUNCTIONS_SHOWN])]
    if not rows:
        return ""
    return (f"Top functions per op ({measure.counts[0]} in the last iteration, nested ops "
            "included):\n" + "\n".join("    " + line for line in align(rows, right={2})))


def stat_table(rows: list[list[str]]) -> str:
    """PaddlePaddle's ``Stat=`` lines: ``key=value`` cells, columns three spaces apart."""
    return "\n".join(align(rows, sep="   "))


def _stats(rows: Iterable[OpTypeStats | KernelStats], name: Callable[[str], str],
           number: Callable[[float], str]) -> str:
    return stat_table([[f"Stat={name(s.name)}", f"total={number(s.total)}",
                        f"avg={number(s.mean)}", f"max={number(s.max)}",
                        f"min={number(s.min)}", f"count={s.count}"] for s in rows])


def paddle_table(profile: Profile) -> str:
    """PaddlePaddle's per-op-type table of the gated figures, by total, in ms (or as the
    measure writes counts, each with its noun), under a line naming the unit."""
    measure = measure_of(profile)
    number = measure.amount if counts(profile) else milliseconds
    table = _stats(op_type_stats(profile), lambda name: op_name(profile, name), number)
    unit = measure.counts[0] if counts(profile) else f"{measure.figure}, ms"
    return table and f"Per op type ({unit}; over the counted iterations):\n" + table


def kernel_table(profile: Profile) -> str:
    """Every kernel, memcpy and memset name over the counted iterations, by total."""
    table = _stats(kernel_stats(profile), abbreviate, milliseconds)
    return table and "GPU activities (kernels, memcpy, memset) by total time, ms:\n" + table


def wall_line(profile: Profile) -> str:
    w = wall_summary(profile)
    if counts(profile):
        return (f"Op {measure_of(profile).counts[0]} : {figure(profile, w.op_time)} of "
                f"{figure(profile, w.wall)} per counted iteration, "
                f"{100 * w.outside_share:.1f}% outside any op")
    return (f"Op time : {seconds(w.op_time)} sec of {seconds(w.wall)} sec iteration wall time "
            f"per counted iteration, {100 * w.outside_share:.1f}% outside any op")


def render(profile: Profile, verbosity: int) -> str:
    if verbosity <= 0:
        return ""
    parts = [header(profile), singa_phases(profile)]
    if verbosity >= 2:
        parts += [singa_ops(profile), top_functions(profile), paddle_table(profile),
                  kernel_table(profile), wall_line(profile)]
    if profile.unbalanced:
        parts.append(f"{profile.unbalanced} op or phase boundaries were unbalanced "
                     "(an exit with nothing open, or still open when the iteration ended) "
                     "and were left out")
    return "\n\n".join(p for p in parts if p)
