"""The README's layout table names every module of ``polymap/``, and only modules that exist."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "polymap"


def _table_paths() -> set[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Layout, in pipeline order", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {path for row in rows[1:] for path in re.findall(r"`([\w/]+\.(?:py|lark))`", row.split("|")[2])}


def _only_a_docstring(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    return len(body) <= 1 and all(isinstance(node, ast.Expr) for node in body)


def _tree_paths(*, markers: bool) -> set[str]:
    """Every module; without ``markers``, less the package markers that hold only a docstring."""
    return {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*")
            if p.suffix in (".py", ".lark") and "__pycache__" not in p.parts
            and (markers or not (p.name == "__init__.py" and _only_a_docstring(p)))}


def test_every_module_is_in_the_layout_table() -> None:
    missing = sorted(_tree_paths(markers=False) - _table_paths())
    assert not missing, f"modules missing from README's layout table: {missing}"


def test_the_layout_table_names_only_modules_that_exist() -> None:
    stale = sorted(_table_paths() - _tree_paths(markers=True))
    assert not stale, f"README's layout table names modules that do not exist: {stale}"
