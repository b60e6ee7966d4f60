"""Ctrl-C and SIGTERM held off (or deferred) for a moment that must not be cut halfway.

A commit of the baseline store, and the ending of a child's process group, each finish
once started: a second Ctrl-C there would leave a store half written or a group half
ended. In the foundation, since both the store and the launcher need it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType


@contextlib.contextmanager
def _handled_by(handler: Callable[[int, FrameType | None], None] | signal.Handlers
                ) -> Iterator[None]:
    """SIGINT and SIGTERM sent to ``handler`` inside the block, their handlers restored
    after; a no-op off the main thread (where Python cannot set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = [(sig, signal.signal(sig, handler)) for sig in (signal.SIGINT, signal.SIGTERM)]
    try:
        yield
    finally:
        for sig, old in previous:
            signal.signal(sig, old)


def held() -> contextlib.AbstractContextManager[None]:
    """SIGINT and SIGTERM ignored inside the block."""
    return _handled_by(signal.SIG_IGN)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held back inside the block and delivered after it, once, to
    the handlers that were in place: a cleanup (a worktree removed, a child started
    and its group's id taken) is never cut halfway, and the signal is not lost."""
    caught: list[int] = []

    def keep(signum: int, frame: FrameType | None) -> None:
        if signum not in caught:
            caught.append(signum)

    try:
        with _handled_by(keep):
            yield
    finally:
        for signum in caught:  # the handlers' own action now: raise, end, or nothing
            signal.raise_signal(signum)
