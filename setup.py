"""The one thing pyproject.toml cannot say: the optional C extension.

``pytest_opprof.measure._cscope`` is the recording hot path in C. It is optional: where it
cannot be compiled (no C compiler, another Python implementation) the install goes on
and the profiler uses the pure-Python reference, ``pytest_opprof.measure._pyscope``.
``pytest_opprof.measure._callgrind`` (valgrind's client requests) is built where
valgrind's headers are installed, and is as optional.
"""

import platform

from setuptools import Extension, setup

ext_modules = []
if platform.python_implementation() == "CPython":
    ext_modules.append(
        Extension("pytest_opprof.measure._cscope", ["pytest_opprof/measure/_cscope.c"], optional=True)
    )
    # callgrind's client requests (--opprof-measure=instructions): only where valgrind's
    # headers are installed; without them the compile fails, the install goes on, and
    # the measure says how to get it
    ext_modules.append(
        Extension("pytest_opprof.measure._callgrind", ["pytest_opprof/measure/_callgrind.c"],
                  optional=True)
    )

setup(ext_modules=ext_modules)
