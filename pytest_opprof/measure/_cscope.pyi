"""Types of the C recording hot path (``_cscope.c``); ``_pyscope.py`` has the same API.

These are the types users see for ``pytest_opprof.op`` and ``gpu_profiler.op``.
"""

from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar, final, overload

_F = TypeVar("_F", bound=Callable[..., Any])

FORWARDS_ATTRIBUTES: bool

class OpScope:
    """A named op: ``with op("conv2d"): ...`` or ``@op("conv2d")``."""

    @property
    def name(self) -> str: ...
    def __new__(cls, name: str) -> OpScope: ...
    def __enter__(self) -> OpScope: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
    def __call__(self, fn: _F) -> _F: ...

@final
class TimedFunction:
    """A callable timed as a named op of the active profiler (it also answers the wrapped
    callable's attributes)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

@overload
def op(name: str) -> OpScope:
    """Time a block (``with op("conv2d"):``) or a function (``@op("conv2d")``)."""

@overload
def op(name: _F) -> _F:
    """Bare ``@op``: time a function as the op named after it."""

def set_sink(sink: tuple[Any, ...] | None) -> None: ...
def get_sink() -> tuple[Any, ...] | None: ...
def recording_here() -> bool: ...
def untimed_calls() -> int: ...
def new_scope(name: str) -> OpScope: ...
def configure_op(cache: dict[str, Any], make: Callable[[Any], Any]) -> None: ...
