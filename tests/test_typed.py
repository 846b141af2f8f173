"""Every parameter and every return of ``polymap/`` is annotated, and every annotation names something.

The package is read with :mod:`ast` (nothing is imported to find the functions, so a function
defined inside another one or under a condition counts too); ``self`` and ``cls`` are the only
parameters allowed without an annotation. Each annotation is then evaluated in its module's
namespace (names imported under ``if TYPE_CHECKING:`` count as defined), so that a misspelt or
unimported name fails here instead of in a reader's type checker.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import polymap

ROOT = Path(polymap.__file__).resolve().parent
FILES = sorted(p for p in ROOT.rglob("*.py") if p.name != "__main__.py")  # __main__ runs the CLI on import
EXEMPT = {"self", "cls"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = fn.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x is not None)]


def untyped(source: str, name: str) -> list[str]:
    """``file:line: function: what is missing`` for every parameter or return without an annotation."""
    found = []
    for fn in _functions(ast.parse(source, name)):
        where = f"{name}:{fn.lineno}: {fn.name}"
        found += [f"{where}: parameter '{p.arg}'" for p in _parameters(fn)
                  if p.annotation is None and p.arg not in EXEMPT]
        if fn.returns is None:
            found.append(f"{where}: return")
    return found


def unresolved(path: Path) -> list[str]:
    """Annotations whose names the module does not define."""
    tree = ast.parse(path.read_text(), str(path))
    namespace = dict(vars(importlib.import_module(module_name(path))))
    for node in ast.walk(tree):  # annotation-only imports
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for imp in node.body:
                if isinstance(imp, (ast.Import, ast.ImportFrom)):
                    namespace.update({(a.asname or a.name).split(".")[0]: object() for a in imp.names})
    found = []
    for fn in _functions(tree):
        annotations = [p.annotation for p in _parameters(fn) if p.annotation is not None]
        annotations += [fn.returns] if fn.returns is not None else []
        for ann in annotations:
            try:
                eval(compile(ast.Expression(ann), str(path), "eval"), namespace)  # noqa: S307 - our own source
            except NameError as exc:
                found.append(f"{path.relative_to(ROOT.parent)}:{fn.lineno}: {fn.name}: {ast.unparse(ann)}: {exc}")
            except TypeError:
                pass  # ``X | Y`` of typing objects needs Python 3.10's types at run time; the names exist
    return found


def test_every_parameter_and_return_is_annotated():
    missing = [m for p in FILES for m in untyped(p.read_text(), str(p.relative_to(ROOT.parent)))]
    assert not missing, "untyped:\n" + "\n".join(missing)


def test_every_annotation_names_something():
    bad = [m for p in FILES for m in unresolved(p)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("source, want", [
    ("def f(x): pass", ["parameter 'x'", "return"]),
    ("class C:\n    def m(self, *args: int, **kw) -> None: pass", ["parameter 'kw'"]),
    ("def f() -> None:\n    def g(y: int): pass", ["return"]),
    ("def f(x: int, *, y: str = '') -> int: return 0", []),
])
def test_the_walk_finds_what_is_missing(source: str, want: list[str]):
    """The check itself: nested functions, ``*args``/``**kwargs`` and methods are all looked at."""
    assert [g.rsplit(": ", 1)[1] for g in untyped(source, "probe.py")] == want
