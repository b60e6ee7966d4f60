"""The project's own error type."""

from __future__ import annotations


class OpprofError(Exception):
    """A mistake in how pytest-opprof is used or configured.

    Its message is one line that names the input and says what to do; the
    plugin shows that line instead of a traceback.
    """
