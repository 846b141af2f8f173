"""The import graph of ``polymap/`` is acyclic, function-level imports included, and no function
imports the project's own modules (a local import is how a cycle hides).

Every module is parsed with :mod:`ast`; each ``import polymap.x`` / ``from polymap.x import y`` /
``from . import y`` anywhere in it (module level, functions, classes, ``if TYPE_CHECKING`` excluded)
is an edge ``module -> imported module``. ``from polymap.a import b`` where ``polymap.a.b`` is a
module is an edge to ``polymap.a.b``; otherwise to ``polymap.a``.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import polymap

ROOT = Path(polymap.__file__).resolve().parent

def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = _resolve(module, path, node)
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    out = []
    for name in names:
        while name and name not in MODULES:  # ``import polymap.a.b`` of a name inside a module
            name = name.rpartition(".")[0]
        if name.startswith("polymap") and name != module:
            out.append(name)
    return out


def imports(module: str) -> list[tuple[str, int, bool]]:
    """``(imported module, line, inside a function)`` for every import of a polymap module."""
    path = MODULES[module]
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for orelse in child.orelse:
                    visit(orelse, in_function)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.extend((t, child.lineno, in_function) for t in _targets(module, path, child))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(), str(path)), False)
    return found


def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for module in MODULES:
        for target, line, _ in imports(module):
            graph.add_edge(module, target, line=line)
    return graph


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert len(MODULES) > 50
    assert graph.has_edge("polymap.mapping.files", "polymap.mapping.model")  # from polymap.x import y
    assert graph.number_of_edges() > 2 * len(MODULES)


def test_no_import_cycle():
    graph = import_graph()
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return
    shown = " -> ".join(f"{a} (line {graph.edges[a, b]['line']})" for a, b in cycle) + f" -> {cycle[0][0]}"
    pytest.fail(f"import cycle: {shown}")


def test_no_function_local_import_of_polymap():
    local = [f"{MODULES[m].relative_to(ROOT.parent)}:{line}: imports {target} inside a function"
             for m in MODULES
             for target, line, in_function in imports(m) if in_function]
    assert not local, "\n".join(local)


def test_a_compile_loads_no_library_it_does_not_use():
    """networkx (the dependence graph of ``deps``), matplotlib (plots), scikit-learn and dask are imported where
    they are used: every process pays for its imports (this environment caches no bytecode), and most of a
    cache hit's time was its imports (networkx alone 0.1-0.3 s)."""
    code = ("import sys, polymap, polymap.cli, polymap.commands.compile; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'networkx', 'matplotlib', 'sklearn', 'dask'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent, check=True)
    assert out.stdout.strip() == "[]", out.stdout
