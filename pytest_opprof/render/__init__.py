"""Renderers: each takes plain data and returns a string; none prints, none writes
(:mod:`pytest_opprof.run.outputs` writes them). The words every surface shares live in
:mod:`pytest_opprof.model.words`, once, and are re-exported here.
"""

from __future__ import annotations

from ..model.words import amount, count, display_name, duration, percent, word

__all__ = ["amount", "count", "display_name", "duration", "percent", "word"]
