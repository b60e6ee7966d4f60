"""``kernel``: the summed GPU time of the kernels, copies and memsets each op launched,
from CUPTI's activity records; each op's event span is kept as its second figure."""

from __future__ import annotations

from ..._extras import install
from . import GateSettings, Unavailable, register
from .events import Events


@register
class Kernel(Events):
    name = "kernel"
    help = ("the summed GPU time of the kernels, copies and memsets it launched, from CUPTI "
            f"({install('cupti')})")
    figure = "kernel time"
    source = "CUPTI activity records"
    #: Far more precise than an event span: on an H200 the medians of launch-bound ops
    #: moved 0.11-0.27% between processes and big kernels' 0.01%, where spans moved
    #: 21-29% (shared/GATE.md, issue 12). Its records are in ns, with no event resolution
    #: or launch jitter: a smaller floor, prior spread and per-call jitter.
    gate = GateSettings(floor=100.0, tau_prior=0.005, tau_floor=0.002,
                        jitter=20.0)
    key = "cuda-kernel"
    formerly = (("cuda", "kernel"),)

    def __init__(self, worker: int | None = None) -> None:
        super().__init__(worker)
        from ..timers.cupti import CuptiUnavailable, cuda_tracer

        try:
            self.tracer = cuda_tracer()
        except CuptiUnavailable as exc:
            raise Unavailable(str(exc), "use --opprof-measure=auto or events") from None

    def header(self) -> str:
        return (f"opprof: measure {self.name} (per-op GPU time from {self.source}; event "
                "spans kept as the second figure)")
