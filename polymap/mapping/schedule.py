"""Schedule entries and fused nests of a mapping (``mapping.md``, "Schedules, fused nests and wavefronts").

A mapping file may give statements new coordinates and map several
top-level nests together::

    nests: [0]                                  Mapping(..., nests=(0,), schedule=(
    schedule:                            ->       ScheduleEntry("relax", ("t", "u", "v"),
      relax: {t: t, u: t + i, v: 2*t + i + j}         ("t", "t + i", "2*t + i + j"),
                                                      ("t", "(t + i)", "((2*t) + i) + j)")),))

This module parses the expressions (quasi-affine in the statement's
iterators and the kernel's parameters, written as in ``.loop`` code) into
ISL text, and answers, for the passes after it, which statements a mapping
covers (:func:`mapping_statements`), which loops a statement has and at
which coordinate (:func:`statement_coords`), and how far each loop of the
mapping reaches (:func:`mapping_extents`). A statement the schedule does not
list keeps its iterators: its coordinate on loop ``i`` is ``i``.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping as MappingT

from polymap.islcheck import isl
from polymap.poly import KernelModel, StatementModel, fix_params, isl_name

if TYPE_CHECKING:  # for annotations only: mapping.model builds on this module
    from polymap.mapping.model import Mapping


@dataclass(frozen=True)
class ScheduleEntry:
    """One statement's new coordinates: loop ``loops[k]`` is at ``exprs[k]`` (as written) = ``isl[k]``."""

    statement: str
    loops: tuple[str, ...]
    exprs: tuple[str, ...]
    isl: tuple[str, ...]


class ExpressionProblem(ValueError):
    """A schedule expression that is not quasi-affine; ``column`` is 0-based in its text."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.column = column


def schedule_entry(model: KernelModel, statement: str, loops: tuple[str, ...], exprs: tuple[str, ...]
                   ) -> ScheduleEntry:
    """The entry placing ``statement`` at ``exprs`` (texts over its iterators and the parameters) on
    ``loops``, its ISL texts made here: what a pass writes (isl's scheduler, a suggested skew, a folded
    initialisation, a remembered entry read back); a mapping file's entries are read, with located
    errors, by :func:`polymap.mapping.schedule_files.read_schedule`."""
    names = model.statement(statement).loops + model.params
    return ScheduleEntry(statement, tuple(loops), tuple(exprs), tuple(expression_isl(e, names) for e in exprs))


def expression_isl(text: str, names: tuple[str, ...]) -> str:
    """ISL text of the quasi-affine expression ``text`` over ``names`` (iterators and parameters).

    ``2*t + i`` -> ``((2*t) + i)``; ``floor(i / 4)`` -> ``floor((i)/4)``;
    ``i % 2`` -> ``(i mod 2)``. A problem raises :class:`ExpressionProblem` at its column.
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionProblem(f"'{text}' is not an expression ({exc.msg})", max((exc.offset or 1) - 1, 0)) from None
    lead = len(text) - len(text.lstrip())
    out, _ = _convert(tree.body, text.strip(), names, lead)
    return out


def _convert(node: ast.AST, text: str, names: tuple[str, ...], lead: int) -> tuple[str, int | None]:
    """``(ISL text, constant value or None)``; a constant is written as a bare integer (ISL reads
    ``-2*t`` but not ``(-2)*t``)."""
    out, value = _convert_node(node, text, names, lead)
    return (str(value), value) if value is not None else (out, None)


def _segment(node: ast.AST, text: str) -> str:
    return ast.get_source_segment(text, node) or "?"


def _convert_node(node: ast.AST, text: str, names: tuple[str, ...], lead: int) -> tuple[str, int | None]:
    """``(ISL text, constant value or None)`` of one node."""
    col = lead + getattr(node, "col_offset", 0)
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return str(node.value), node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ExpressionProblem(f"unknown name '{node.id}' (the statement's iterators and the kernel's "
                                    f"parameters are {', '.join(names)})", col)
        return isl_name(node.id), None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner, value = _convert(node.operand, text, names, lead)
        if isinstance(node.op, ast.UAdd):
            return inner, value
        return f"(-{inner})", None if value is None else -value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        a, va = _convert(node.left, text, names, lead)
        b, vb = _convert(node.right, text, names, lead)
        sign = "+" if isinstance(node.op, ast.Add) else "-"
        value = None if va is None or vb is None else (va + vb if sign == "+" else va - vb)
        return f"({a} {sign} {b})", value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        a, va = _convert(node.left, text, names, lead)
        b, vb = _convert(node.right, text, names, lead)
        if va is None and vb is None:
            raise ExpressionProblem(f"'{_segment(node, text)}' is a product of two variables; "
                                    f"a schedule expression is quasi-affine", col)
        value = va * vb if va is not None and vb is not None else None
        return (f"({a}*{b})" if va is not None else f"({b}*{a})"), value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        a, va = _convert(node.left, text, names, lead)
        c = _positive_constant(node.right, text, names, lead, "%")
        return f"({a} mod {c})", None if va is None else va % c
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("floor", "min", "max"):
        if node.keywords:
            raise ExpressionProblem(f"'{_segment(node, text)}': no keyword arguments here", col)
        if node.func.id == "floor":
            arg = node.args[0] if len(node.args) == 1 else None
            if not (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Div)):
                raise ExpressionProblem(f"'{_segment(node, text)}': floor takes one division 'floor(e / c)'", col)
            a, va = _convert(arg.left, text, names, lead)
            c = _positive_constant(arg.right, text, names, lead, "/")
            return f"floor(({a})/{c})", None if va is None else va // c
        if len(node.args) < 2:
            raise ExpressionProblem(f"'{_segment(node, text)}': {node.func.id} takes two or more arguments", col)
        parts = [_convert(a, text, names, lead) for a in node.args]
        out = parts[0][0]
        for p, _ in parts[1:]:
            out = f"{node.func.id}({out}, {p})"
        values = [v for _, v in parts]
        value = None if None in values else (min(values) if node.func.id == "min" else max(values))
        return out, value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        raise ExpressionProblem(f"'{_segment(node, text)}': write integer division as 'floor(e / c)'", col)
    raise ExpressionProblem(f"'{_segment(node, text)}' is not quasi-affine (allowed: integers, iterators, "
                            f"parameters, + -, products with a constant, floor(e / c), e % c, min, max)", col)


def _positive_constant(node: ast.AST, text: str, names: tuple[str, ...], lead: int, op: str) -> int:
    _, value = _convert(node, text, names, lead)
    if value is None or value <= 0:
        raise ExpressionProblem(f"'{_segment(node, text)}': the divisor of '{op}' must be a positive integer "
                                f"constant", lead + node.col_offset)
    return value


# --------------------------------------------------------------------------- what passes ask


def mapped_nests(mapping: Mapping) -> tuple[int, ...]:
    """The top-level nests ``mapping`` maps (``nests``, or its one ``nest``)."""
    return tuple(getattr(mapping, "nests", ()) or (mapping.nest,))


def mapping_statements(model: KernelModel, mapping: Mapping) -> tuple[StatementModel, ...]:
    """The statements of every nest ``mapping`` maps, in textual order."""
    nests = set(mapped_nests(mapping))
    return tuple(s for s in model.statements if s.context.nest in nests)


def entry_of(mapping: Mapping, statement: str) -> ScheduleEntry | None:
    return next((e for e in getattr(mapping, "schedule", ()) if e.statement == statement), None)


def statement_coords(mapping: Mapping, st: StatementModel) -> dict[str, str]:
    """``{loop: ISL text in the statement's iterators}`` for every loop of the mapping ``st`` has."""
    entry = entry_of(mapping, st.name)
    if entry is None:
        return {x: isl_name(x) for x in st.loops}
    return dict(zip(entry.loops, entry.isl))


def only_places(entry: ScheduleEntry, st: StatementModel) -> bool:
    """Does ``entry`` keep every iterator of ``st`` as its own loop (``i: i``) and only give the
    statement a coordinate on loops it lacks? gemm's ``init: {i: i, j: j, k: 0}`` (register_mapping's
    folded initialisation): no skew, no shift, the statement is placed beside another's instances."""
    given = dict(zip(entry.loops, entry.exprs))
    return all(given.get(x, "").replace(" ", "") == x for x in st.loops)


def new_coordinates(model: KernelModel, mapping: Mapping) -> bool:
    """Does some schedule entry give a statement coordinates other than its own iterators (a skew, a
    shift)? Entries that only place a statement on loops it lacks (:func:`only_places`) do not: the
    rules that read the program's own loops (orders, strides, round-robin panels) still hold."""
    return any(not only_places(e, model.statement(e.statement)) for e in getattr(mapping, "schedule", ()))


def moves_statements(model: KernelModel, mapping: Mapping) -> bool:
    """Does the mapping give statements new coordinates (:func:`new_coordinates`), fuse nests or walk
    tiles by diagonals? If not, every loop is walked over its own iterator, as in a plain mapping."""
    if len(mapped_nests(mapping)) > 1 or any(getattr(lv, "wavefront", ()) for lv in mapping.levels):
        return True
    return new_coordinates(model, mapping)


def statement_loops(mapping: Mapping, st: StatementModel) -> tuple[str, ...]:
    entry = entry_of(mapping, st.name)
    return st.loops if entry is None else entry.loops


def coordinate_map(model: KernelModel, mapping: Mapping, st: StatementModel, loops: tuple[str, ...] | None = None
                  ) -> isl.Map:
    """``S[iterators] -> [coordinates]`` on the statement's domain (``loops`` defaults to its own)."""
    return coords_map(model, st, statement_coords(mapping, st), loops)


def coords_map(model: KernelModel, st: StatementModel, coords: dict[str, str],
               loops: tuple[str, ...] | None = None) -> isl.Map:
    """``S[iterators] -> [coords[x] for x in loops]`` on the statement's domain."""
    loops = tuple(coords) if loops is None else loops
    prefix = f"[{', '.join(isl_name(p) for p in model.params)}]"
    tup = f"{st.name}[{', '.join(isl_name(v) for v in st.loops)}]"
    return isl.Map(f"{prefix} -> {{ {tup} -> [{', '.join(coords[x] for x in loops)}] }}").intersect_domain(st.domain)


def mapping_extents(model: KernelModel, mapping: Mapping, params: MappingT[str, int]) -> dict[str, int]:
    """Bounding-box extent (max - min + 1) of each loop of ``mapping`` over its statement instances.

    For a new loop of a schedule it is the extent of the image of the domains.
    A loop no instance reaches at these sizes has extent 0.
    """
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    for st in mapping_statements(model, mapping):
        cmap = coordinate_map(model, mapping, st)
        image = fix_params(cmap.range(), model, params)
        if image.is_empty():
            continue
        for pos, name in enumerate(statement_loops(mapping, st)):
            lo = image.dim_min_val(pos).to_python()
            hi = image.dim_max_val(pos).to_python()
            low[name] = min(low.get(name, lo), lo)
            high[name] = max(high.get(name, hi), hi)
    return {x: (high[x] - low[x] + 1 if x in low else 0) for x in mapping.loops}
