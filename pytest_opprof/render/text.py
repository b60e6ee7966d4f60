"""The terminal report: Apache SINGA's time profile and PaddlePaddle's op table.

Verbosity 1 prints SINGA's phase block; verbosity 2 adds SINGA's per-op list in
graph order, PaddlePaddle's per-op-type table and the outside-ops line. Op and phase
names come from user code: they are shown through :func:`display_name`, so that none
can forge a line.
"""

from __future__ import annotations

from ..profile import Profile
from ..stats import op_stats, op_type_stats, phase_times, wall_summary
from . import display_name

_SINGA_PHASE_LABELS = {"forward": "Forward Propagation", "backward": "Backward Propagation"}


def seconds(ns: float) -> str:
    """Seconds as C++'s default ostream prints a double (``%g``): 1.73722e-05, 0.000612724."""
    return f"{ns / 1e9:g}"


def milliseconds(ns: float) -> str:
    return f"{ns / 1e6:g}"


def phase_label(name: str) -> str:
    """``forward`` -> ``Forward Propagation``; ``update`` -> ``Update``."""
    name = display_name(name)
    return _SINGA_PHASE_LABELS.get(name, name[:1].upper() + name[1:])


def header(profile: Profile) -> str:
    """Which clock, and which iterations the figures cover."""
    skipped = f"first {profile.skip} skipped" if profile.skip else "none skipped"
    timeline = {"cuda": "CUDA events", "fake": "virtual CUDA events"}.get(
        profile.backend, "perf_counter_ns")
    return (f"backend {profile.backend} ({profile.device}; {timeline}): "
            f"{profile.counted} of {profile.iterations} iterations counted ({skipped})")


def singa_phases(profile: Profile) -> str:
    """SINGA's verbosity-1 block: each phase's time per counted iteration."""
    lines = ["Time Profiling:"]
    lines += [f"{phase_label(name)} Time : {seconds(ns)} sec"
              for name, ns in phase_times(profile)]
    return "\n".join(lines)


def singa_ops(profile: Profile) -> str:
    """SINGA's verbosity-2 list: every OP_ID in graph order, mean seconds per run."""
    lines = ["Time Profiling:"]
    for s in op_stats(profile):
        value = f"{seconds(s.mean)} sec" if s.count else "- sec (ran only in skipped iterations)"
        lines.append(f"OP_ID{s.op_id}. {display_name(s.name)} : {value}")
    return "\n".join(lines)


def paddle_table(profile: Profile) -> str:
    """PaddlePaddle's per-op-type table, by total time, in ms, columns aligned."""
    rows = [
        [f"Stat={display_name(s.name)}", f"total={milliseconds(s.total)}",
         f"avg={milliseconds(s.mean)}", f"max={milliseconds(s.max)}",
         f"min={milliseconds(s.min)}", f"count={s.count}"]
        for s in op_type_stats(profile)
    ]
    if not rows:
        return ""
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    widths[-1] = 0  # the last column is not padded
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                     for row in rows)


def wall_line(profile: Profile) -> str:
    """Op time against iteration wall time, and the share outside any op."""
    w = wall_summary(profile)
    return (f"Op time : {seconds(w.op_time)} sec of {seconds(w.wall)} sec iteration wall time "
            f"per counted iteration, {100 * w.outside_share:.1f}% outside any op")


def render(profile: Profile, verbosity: int) -> str:
    """The report of one profile at ``verbosity`` (0: nothing)."""
    if verbosity <= 0:
        return ""
    parts = [header(profile), singa_phases(profile)]
    if verbosity >= 2:
        parts += [singa_ops(profile), paddle_table(profile), wall_line(profile)]
    if profile.unbalanced:
        parts.append(f"{profile.unbalanced} op or phase boundaries were unbalanced "
                     "(an exit with nothing open, or still open when the iteration ended) "
                     "and were left out")
    return "\n\n".join(p for p in parts if p)
