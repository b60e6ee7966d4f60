"""What each optional extra of pytest-opprof installs, and the one command a hint gives
for it.

pytest-opprof is on no package index, so asking an index for pytest-opprof with an
extra finds nothing: a hint that something is missing names the packages the extra
itself installs (``pip install 'matplotlib>=3.7'``), which any index has, and the
extra's name, for a user who installs pytest-opprof from its source. :data:`EXTRAS` is
pyproject.toml's ``[project.optional-dependencies]``, written out (the test extra
aside); ``tests/test_install_hints.py`` keeps the two equal.
"""

from __future__ import annotations

__all__ = ["EXTRAS", "install"]

#: Each user-facing extra's requirements, as pyproject.toml gives them.
EXTRAS: dict[str, tuple[str, ...]] = {
    "cuda12": ("cupy-cuda12x>=13",),
    "cuda13": ("cupy-cuda13x>=13.6",),
    "report": ("matplotlib>=3.7",),
    "history": ("ruptures>=1.1",),
    "cupti": ("cupti-python>=13", "cuda-bindings>=13"),
}


def install(*extras: str) -> str:
    """The command that installs ``extras``' packages, and which extras they are:
    ``pip install 'matplotlib>=3.7' (the report extra)``."""
    requirements = [r for extra in extras for r in EXTRAS[extra]]
    which = " and ".join(extras) + (" extras" if len(extras) > 1 else " extra")
    return "pip install " + " ".join(f"'{r}'" for r in requirements) + f" (the {which})"
