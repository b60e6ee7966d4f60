"""The package's layers, enforced over every import it has: top-level, deferred into a
function and under ``if TYPE_CHECKING:`` alike (a deferred import is still a dependency;
hiding a circle behind one is the mistake this test exists to catch).

The order is import-linter's layers contract, written out: a module imports only from
a layer below its own, or from within its own folder, and no two modules import each
other through any chain. ``docs/architecture.md`` says what each layer holds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_opprof

PACKAGE = Path(pytest_opprof.__file__).parent

#: Lowest first. The foundation (the error type, the version, signals held off) is below
#: every layer; the plugin and the CLI sit above them all.
LAYERS = ("foundation", "model", "measure", "stats", "judge", "store", "render", "run",
          "commands", "top")
FOUNDATION = {"pytest_opprof.errors", "pytest_opprof._version", "pytest_opprof.signals",
              "pytest_opprof._extras"}
#: The package's root: it loads ``op`` and friends lazily from model and measure.
TOP = {"pytest_opprof", "pytest_opprof.plugin", "pytest_opprof.cli"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def layer(module: str) -> str:
    """The layer a module belongs to: its folder under the package, or its role."""
    if module in FOUNDATION:
        return "foundation"
    if module in TOP:
        return "top"
    folder = module.split(".")[1]
    assert folder in LAYERS, f"{module}: in no layer (add its folder to LAYERS)"
    return folder


def imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, wherever it stands."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The package's modules an import statement loads (a parent package is always
    loaded before its child, so an edge to one's own ancestor is no dependency)."""
    if isinstance(node, ast.Import):
        names = {alias.name for alias in node.names}
    else:
        if node.level:
            here = module.split(".")
            if MODULES[module].name != "__init__.py":
                here = here[:-1]
            here = here[:len(here) - node.level + 1]
            base = ".".join(here + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                 for a in node.names}
    return {n for n in names if n in MODULES and not module.startswith(n + ".") and n != module}


def graph() -> dict[str, set[str]]:
    edges = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges[module] = set().union(*(_targets(module, n) for n in imports(tree)))
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def against_the_order(edges: dict[str, set[str]]) -> list[str]:
    """Each import that points to a higher layer, as ``a (layer) -> b (layer)``."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    return sorted(f"{a} ({layer(a)}) -> {b} ({layer(b)})"
                  for a, targets in edges.items() for b in targets
                  if rank[layer(b)] > rank[layer(a)])


def test_every_module_is_in_a_layer():
    assert sorted({layer(m) for m in MODULES}) == sorted(LAYERS)


def test_no_import_points_to_a_higher_layer():
    assert against_the_order(graph()) == []


def test_no_circle_through_any_import():
    assert find_cycle(graph()) is None


def test_the_verdict_types_import_nothing_but_the_model():
    edges = graph()
    assert {layer(m) for m in edges["pytest_opprof.model.verdict"]} <= {"foundation", "model"}


def test_only_the_chart_module_imports_matplotlib():
    users = sorted({m for m, path in MODULES.items()
                   for node in imports(ast.parse(path.read_text(encoding="utf-8")))
                   if any((name or "").split(".")[0] == "matplotlib" for name in
                          ([a.name for a in node.names] if isinstance(node, ast.Import)
                           else [node.module]))})
    assert users == ["pytest_opprof.render.charts"]


@pytest.mark.parametrize("edges", [
    {"a": {"b"}, "b": {"c"}, "c": {"a"}},
    {"a": {"a2"}, "a2": {"a"}},
])
def test_the_cycle_finder_finds_cycles(edges):
    cycle = find_cycle(edges)
    assert cycle is not None and cycle[0] == cycle[-1]


def test_the_order_check_finds_an_upward_import():
    edges = {"pytest_opprof.model.profile": {"pytest_opprof.render.text"},
             "pytest_opprof.render.text": {"pytest_opprof.model.profile"}}
    assert against_the_order(edges) == [
        "pytest_opprof.model.profile (model) -> pytest_opprof.render.text (render)"]


def test_a_deferred_and_a_type_checking_import_count():
    tree = ast.parse("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from .a import b\n"
                     "def f():\n    from .c import d\n")
    assert [n.module for n in imports(tree) if isinstance(n, ast.ImportFrom)] == [
        "typing", "a", "c"]


def third_party_imports() -> set[str]:
    """Every module outside the standard library and the package that the package
    imports, top-level or deferred (``import a.b`` and ``from a.b import c`` name a.b)."""
    import sys

    found = set()
    for path in MODULES.values():
        for node in imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                continue
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""])
            found |= {n for n in names if n.split(".")[0] not in sys.stdlib_module_names
                      and n.split(".")[0] not in {"pytest_opprof", "pytest", "_pytest"}}
    return found


def test_the_suite_preloads_every_third_party_module_the_package_imports():
    """pytester's in-process runs drop what was first imported inside them, and numpy's
    C modules cannot load twice (``import ruptures`` after a drop: "cannot load module
    more than once per process", in whichever test came next on that worker); a
    half-dropped package (matplotlib) breaks too. The conftest loads each module the
    package imports, by its full name, first; a new import has to join it."""
    from tests import conftest

    missing = sorted(third_party_imports() - set(conftest.PRELOADED))
    assert not missing, f"add to tests/conftest.py PRELOADED: {missing}"
    assert "ruptures" in third_party_imports()  # the finder sees a deferred import


@pytest.mark.pytester
def test_the_conftest_alone_loads_each_preloaded_module_that_is_installed():
    """In a new process, importing the conftest and nothing else: every module of
    PRELOADED whose package is installed and loads is in sys.modules."""
    import subprocess
    import sys

    code = ("import importlib.util, sys\n"
            "from tests import conftest\n"
            "for name in conftest.PRELOADED:\n"
            "    top = name.split('.')[0]\n"
            "    if importlib.util.find_spec(top) is None:\n"
            "        continue\n"
            "    try:\n"
            "        importlib.import_module(top)\n"
            "    except (ImportError, OSError):\n"
            "        continue\n"
            "    print(name, name in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE.parent,
                          capture_output=True, text=True, check=True)
    seen = dict(line.split() for line in done.stdout.splitlines())
    assert seen.get("numpy.fft") == "True" and seen.get("pytest_benchmark.plugin") == "True"
    assert all(v == "True" for v in seen.values()), seen
