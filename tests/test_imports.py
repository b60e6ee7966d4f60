"""The package's import graph has no cycle: layers import downwards only (the verdict
types, then the rule and the judge, the records, the renderers, the session)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_opprof

PACKAGE = Path(pytest_opprof.__file__).parent

#: Modules whose imports inside functions count too: an import deferred for start-up
#: time is still a dependency, and a cycle there is a layering mistake.
LAYERED = ("pytest_opprof.model.verdict", "pytest_opprof.judge.rule",
           "pytest_opprof.judge.gate", "pytest_opprof.model.records",
           "pytest_opprof.stats.summary", "pytest_opprof.run.session", "pytest_opprof.render")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _runtime_imports(tree: ast.Module, deferred: bool) -> list[ast.Import | ast.ImportFrom]:
    """The module's import statements that run: ``if TYPE_CHECKING:`` blocks never do;
    those inside functions only when ``deferred``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if deferred:
                    visit(node.body)
            elif isinstance(node, ast.ClassDef | ast.If | ast.Try | ast.With):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, field, []):
                        visit(child.body if isinstance(child, ast.ExceptHandler)
                              else [child])

    visit(tree.body)
    return found


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The package's modules an import statement loads (a parent package is always
    loaded before its child, so an edge to one's own ancestor is no dependency)."""
    if isinstance(node, ast.Import):
        names = {alias.name for alias in node.names}
    else:
        if node.level:
            here = module.split(".")
            if not MODULES[module].name == "__init__.py":
                here = here[:-1]
            here = here[:len(here) - node.level + 1]
            base = ".".join(here + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                 for a in node.names}
    return {n for n in names if n in MODULES and not module.startswith(n + ".") and n != module}


def graph(deferred_in: tuple[str, ...]) -> dict[str, set[str]]:
    edges = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        deferred = module.startswith(deferred_in)
        edges[module] = set().union(*(_targets(module, n)
                                      for n in _runtime_imports(tree, deferred)))
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


def test_module_level_imports_have_no_cycle():
    assert find_cycle(graph(())) is None


def test_the_verdict_record_render_and_session_layers_have_no_cycle_even_deferred():
    edges = graph(LAYERED)
    layered = {m: {n for n in e if n.startswith(LAYERED)}
               for m, e in edges.items() if m.startswith(LAYERED)}
    assert find_cycle(layered) is None


def test_records_import_no_renderer_and_verdicts_import_nothing_of_the_gate():
    edges = graph(LAYERED)
    assert not {n for n in edges["pytest_opprof.model.records"] if n.startswith(
        ("pytest_opprof.render", "pytest_opprof.run.session"))}
    assert edges["pytest_opprof.model.verdict"] <= {"pytest_opprof.errors"}


@pytest.mark.parametrize("edges", [
    {"a": {"b"}, "b": {"c"}, "c": {"a"}},
    {"a": {"a2"}, "a2": {"a"}},
])
def test_the_cycle_finder_finds_cycles(edges):
    cycle = find_cycle(edges)
    assert cycle is not None and cycle[0] == cycle[-1]
