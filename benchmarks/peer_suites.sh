#!/usr/bin/env bash
# Peer suites: is pytest-opprof inert where it is installed but unused?
#
# Fetches the sdists (--no-binary for the peer only: its build backend may come as a
# wheel) of pytest-benchmark, pytest-xdist, pytest-randomly and
# pytest-timeout from PyPI (each ships its own test suite), and runs each full suite
# three times in one venv per peer:
#   without  - pytest-opprof not installed (its dependencies are, in every column)
#   with     - pytest-opprof installed (from this checkout)
#   no:opprof - installed, but disabled with -p no:opprof on the outer command line
# then prints the pass/fail counts side by side. Not part of the default test run:
#
#   bash benchmarks/peer_suites.sh [WORKDIR]     (default: a new temporary folder)
#   PEERS="pytest-timeout" bash benchmarks/peer_suites.sh    (some of them)
#   SRC_pytest_randomly=/path/to/checkout bash benchmarks/peer_suites.sh
#       (a peer from a checkout of its repository: pytest-randomly's sdist has no tests)
#
# The goal is identical counts in the three columns. A peer's own failures that
# appear in every column come from its environment (versions, missing services).
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$(mktemp -d -t opprof-peers-XXXX)}"
PY="${PYTHON:-python3}"
PEERS="${PEERS:-pytest-benchmark pytest-xdist pytest-randomly pytest-timeout}"
mkdir -p "$WORK"
echo "peer suites in $WORK"

# What each suite needs to run its tests, beyond its own dependencies (from each
# project's tox.ini / requirements files).
needs() {
  case "$1" in
    pytest-benchmark) echo "pytest-xdist freezegun hunter aspectlib pygal pygaljs elasticsearch setuptools nbmake" ;;
    pytest-xdist) echo "filelock psutil setproctitle pexpect" ;;
    pytest-randomly) echo "pytest-xdist factory-boy faker numpy model-bakery" ;;
    pytest-timeout) echo "pexpect pytest-cov" ;;
  esac
}

# pytest-opprof's declared dependencies, from pyproject.toml.
deps() {
  "$PY" -c 'import tomllib, sys; print(" ".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
    "$ROOT/pyproject.toml"
}

# How each project's CI runs its suite (tox.ini), beyond its pytest config.
args() {
  case "$1" in
    pytest-benchmark) echo "--ignore=src" ;;
  esac
}

# The last summary line of a pytest run, e.g. "3 failed, 120 passed in 40.1s".
summary() { grep -E '^(=+ )?[0-9]+ (passed|failed|error)' "$1" | tail -1 | sed -E 's/=//g; s/ in [0-9.]+s.*//; s/^ +//'; }

# Each run gets its own --basetemp: pytest prunes /tmp/pytest-of-$USER, so runs sharing it
# (another project's, or these three) delete each other's folders mid-run.
run_suite() {  # name, label, extra pytest args...; each peer's own config picks its tests
  local name="$1" label="$2"; shift 2
  (cd "$WORK/$name/src" && timeout 1800 "$WORK/$name/venv/bin/python" -m pytest -q -rfE \
     -p no:cacheprovider --basetemp="$WORK/$name/tmp-$label" $(args "$name") "$@" \
     >"$WORK/$name/$label.log" 2>&1)
  summary "$WORK/$name/$label.log"
}

printf '%-18s | %-40s | %-40s | %-40s\n' peer without with "with, -p no:opprof" > "$WORK/table.txt"
for name in $PEERS; do
  dir="$WORK/$name"
  mkdir -p "$dir"
  local_src="SRC_${name//-/_}"
  if [ -n "${!local_src:-}" ]; then  # a checkout of the peer's repository (its sdist lacks tests)
    cp -r "${!local_src}" "$dir/src"
    version=$(grep -m1 -E '^version *=' "$dir/src/pyproject.toml" | sed -E 's/.*"(.*)".*/\1/')
  else
    (cd "$dir" && "$PY" -m pip download -q --no-binary "$name" --no-deps "$name" -d sdist) \
      || continue
    tar -xzf "$dir"/sdist/*.tar.gz -C "$dir" && mv "$dir"/"${name//-/_}"-* "$dir/src" 2>/dev/null \
      || mv "$dir"/"$name"-* "$dir/src"
    version=$(basename "$dir"/sdist/*.tar.gz .tar.gz | sed -E 's/.*-//')
  fi
  "$PY" -m venv "$dir/venv"
  # the released wheel of the same version (building some sdists needs network for Rust)
  # pytest-opprof's own dependencies (pytest-benchmark, numpy) in every column, so that
  # the columns differ by the plugin alone (pytest-benchmark prints a header line too)
  "$dir/venv/bin/pip" install -q "$name==$version" $(needs "$name") pytest $(deps) \
    >"$dir/install.log" 2>&1
  without=$(run_suite "$name" without)
  "$dir/venv/bin/pip" install -q -e "$ROOT" >>"$dir/install.log" 2>&1
  with=$(run_suite "$name" with)
  disabled=$(run_suite "$name" disabled -p no:opprof)
  printf '%-18s | %-40s | %-40s | %-40s\n' "$name" "$without" "$with" "$disabled" \
    | tee -a "$WORK/table.txt"
  # which tests fail only with the plugin
  for label in with disabled; do
    diff <(grep -E '^(FAILED|ERROR) ' "$dir/without.log" | sort) \
         <(grep -E '^(FAILED|ERROR) ' "$dir/$label.log" | sort) | grep '^>' \
      | sed "s/^>/  only $label:/"
  done
done
echo
cat "$WORK/table.txt"
