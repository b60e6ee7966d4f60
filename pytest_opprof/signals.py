"""Ctrl-C and SIGTERM held off for a moment that must not be cut halfway.

A commit of the baseline store, and the ending of a child's process group, each finish
once started: a second Ctrl-C there would leave a store half written or a group half
ended. In the foundation, since both the store and the launcher need it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def held() -> Iterator[None]:
    """SIGINT and SIGTERM ignored inside the block, their handlers restored after; a
    no-op off the main thread (where Python cannot set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = [(sig, signal.signal(sig, signal.SIG_IGN))
                for sig in (signal.SIGINT, signal.SIGTERM)]
    try:
        yield
    finally:
        for sig, handler in previous:
            signal.signal(sig, handler)
