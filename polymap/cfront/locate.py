"""Locations in the C file for pycparser's nodes, and the errors that use them.

pycparser gives a node's file, line and column (the start of its first
token, after line markers); the end is the node's text as printed back when
the source line holds it there, else one character::

    A[i][j] = sqrt(alpha)    node FuncCall at 6:17  ->  Loc(6, 17, 6, 28) over "sqrt(alpha)"
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pycparser import c_ast, c_generator

from polymap import ir
from polymap.errors import Diagnostic


@dataclass
class Sources:
    """The files nodes point into, read once each (the C file and its headers)."""

    main: ir.SourceFile
    files: dict[str, ir.SourceFile] = field(default_factory=dict)

    def file(self, name: str) -> ir.SourceFile:
        if name == self.main.name:
            return self.main
        if name not in self.files:
            try:
                text = Path(name).read_text()
            except (OSError, UnicodeDecodeError):
                text = ""
            self.files[name] = ir.SourceFile(name, text)
        return self.files[name]

    def loc(self, node: c_ast.Node | None) -> ir.Loc:
        """The span of ``node`` in its file (``NOWHERE`` for a node without coordinates)."""
        coord = getattr(node, "coord", None)
        if coord is None or not coord.line:
            return ir.Loc(0, 0, 0, 0, self.main)
        source = self.file(coord.file or self.main.name)
        col = coord.column or 1
        width = 1
        text = _text(node)
        if text and source.line(coord.line)[col - 1:col - 1 + len(text)] == text:
            width = len(text)
        return ir.Loc(coord.line, col, coord.line, col + width, source)

    def error(self, message: str, node: c_ast.Node | None) -> Diagnostic:
        return Diagnostic(message, self.loc(node))


def _text(node: c_ast.Node) -> str:
    if isinstance(node, c_ast.ID):
        return node.name
    try:
        return c_generator.CGenerator().visit(node)
    except (AttributeError, TypeError, KeyError):
        return ""
