#!/usr/bin/env bash
# Two Python 3.11 venvs that differ only in numpy, and an A/A twin of the second, for
# measuring a dependency upgrade (issue 21; benchmarks/env_upgrade/reference.py):
#
#     bash benchmarks/env_venvs.sh [TARGET]          # default /tmp/opprof-envs
#
#   TARGET/venv-np1   numpy 1.26.4 (the last 1.26)
#   TARGET/venv-np2   numpy 2.4.6  (as the development venv has)
#   TARGET/venv-np2b  cp -a of venv-np2: same files, its own sys.prefix (an A/A twin).
#                     Its bin/ scripts (pip, pytest, opprof) keep venv-np2's shebang, so
#                     drive it as TARGET/venv-np2b/bin/python -m ...
#
#     bash benchmarks/env_venvs.sh /work     # /work/venv-np1, /work/venv-np2, /work/venv-np2b
#
# Each has pytest and pytest-benchmark (and their dependencies) pinned to the versions of
# the development venv, and this checkout's pytest-opprof installed editable (no extras).
# numpy goes in first, so that the plugin's numpy dependency is met by the pinned one.
set -euo pipefail

TARGET=${1:-/tmp/opprof-envs}
PYTHON=${PYTHON:-python3}
CHECKOUT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# pytest 9.2.0 and pytest-benchmark 5.3.1 with their dependencies, as in the dev venv
PINS=(pytest==9.2.0 iniconfig==2.3.1 packaging==26.4 pluggy==1.7.0 Pygments==2.21.0
      pytest-benchmark==5.3.1 py-cpuinfo2==10.1.1)

"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version'
mkdir -p "$TARGET"

make_venv() {  # make_venv NAME NUMPY_VERSION
    local venv=$TARGET/$1
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install -q "numpy==$2"
    "$venv/bin/python" -m pip install -q "${PINS[@]}"
    "$venv/bin/python" -m pip install -q --no-deps -e "$CHECKOUT"
    "$venv/bin/python" -m pip check
    "$venv/bin/python" -c 'import numpy, pytest_opprof; print(numpy.__version__, pytest_opprof.__file__)'
}

make_venv venv-np1 1.26.4
make_venv venv-np2 2.4.6

rm -rf "$TARGET/venv-np2b"
cp -a "$TARGET/venv-np2" "$TARGET/venv-np2b"
# a venv's sys.prefix comes from the pyvenv.cfg beside bin/python, so the copy is its own
"$TARGET/venv-np2b/bin/python" -c "import sys; assert sys.prefix == '$TARGET/venv-np2b', sys.prefix; print('venv-np2b prefix', sys.prefix)"

echo "pip freeze, venv-np1 -> venv-np2 (only numpy should differ):"
diff <("$TARGET/venv-np1/bin/python" -m pip freeze) <("$TARGET/venv-np2/bin/python" -m pip freeze) || true
echo "pip freeze, venv-np2 -> venv-np2b (nothing should differ):"
diff <("$TARGET/venv-np2/bin/python" -m pip freeze) <("$TARGET/venv-np2b/bin/python" -m pip freeze) && echo "(identical)"
