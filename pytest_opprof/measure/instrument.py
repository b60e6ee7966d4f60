"""Proxies that time every call of a module or object as an op (``instrument(numpy)
.linalg.norm(a)`` is the op ``linalg.norm``). Classes and plain values pass through, so
``isinstance`` checks and dtypes keep working; the proxied object is never modified.
"""

from __future__ import annotations

import types
from typing import Any

from .scope import OpScope
from .scope import impl as _impl

_PLAIN_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType)


class _TimedCallable:
    """A timed callable that still answers the wrapped object's attributes
    (``instrument(numpy).add.reduce`` keeps working)."""

    __slots__ = ("_opprof_call", "_opprof_target")

    def __init__(self, target: Any, name: str) -> None:
        self._opprof_target = target
        self._opprof_call = OpScope(name)(target)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._opprof_call(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._opprof_target, attr)

    def __repr__(self) -> str:
        return f"<timed {self._opprof_target!r}>"


class InstrumentedProxy:
    """A read-only view of ``target`` whose callables are timed as ops."""

    def __init__(self, target: Any, names: frozenset[str] | None = None,
                 prefix: str = "") -> None:
        object.__setattr__(self, "_opprof_target", target)
        object.__setattr__(self, "_opprof_names", names)
        object.__setattr__(self, "_opprof_prefix", prefix)

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._opprof_target, attr)
        if self._opprof_names is not None and attr not in self._opprof_names:
            return value
        name = self._opprof_prefix + attr
        if isinstance(value, types.ModuleType):
            wrapped: Any = InstrumentedProxy(value, None, name + ".")
        elif isinstance(value, _PLAIN_FUNCTIONS) or (
                _impl.FORWARDS_ATTRIBUTES and callable(value)
                and not isinstance(value, type)):
            wrapped = OpScope(name)(value)
        elif callable(value) and not isinstance(value, type):
            wrapped = _TimedCallable(value, name)
        else:
            return value
        # cached on the proxy: the next lookup is a plain attribute hit
        object.__setattr__(self, attr, wrapped)
        return wrapped

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError(
            f"cannot set {attr!r} on an instrumented proxy: set it on the original object"
        )

    def __dir__(self) -> list[str]:
        return dir(self._opprof_target)

    def __repr__(self) -> str:
        return f"<instrumented {self._opprof_target!r}>"
