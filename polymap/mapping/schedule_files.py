"""Reading ``nests``, ``schedule`` and ``wavefront`` in a mapping file (``mapping.md``).

Each problem is a :class:`~polymap.errors.MappingError` at its entry; an
expression's problem points at the offending term inside the YAML scalar::

    schedule:
      relax: {t: t, u: t * i}       ->  m.yaml:3:22: error: schedule of 'relax', loop 'u':
                     ^^^^^                't * i' is a product of two variables; ...

A schedule entry must be injective on its statement's domain, checked with
ISL for every parameter value (two instances never share coordinates); the
error names two instances that collide. Identity entries (the statement's
own iterators, each at itself) are dropped: such a mapping is the same as
one without them.
"""
from __future__ import annotations

import re
from typing import Any

from polymap import ir
from polymap.errors import MappingError
from polymap.islcheck import isl
from polymap.mapping.model import nest_loops
from polymap.mapping.schedule import ExpressionProblem, ScheduleEntry, coords_map, expression_isl
from polymap.poly import build_model
from polymap.yamlsource import YamlDocument
from polymap.poly import KernelModel

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def read_nests(doc: YamlDocument, value: Any, kernel: ir.Kernel) -> tuple[int, ...]:
    """``nests: [k, k+1, ...]``: consecutive top-level nests, no statement between them."""
    count = len(kernel.nests())
    if not isinstance(value, list) or not value:
        doc.fail(("nests",), "nests: expected a list of consecutive nest indices, like [0, 1]")
    for k, n in enumerate(value):
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < count:
            doc.fail(("nests", k), f"nests: kernel '{kernel.name}' has {count} top-level loop nest(s), "
                                   f"numbered from 0; {n!r} is none of them")
        if k and n != value[k - 1] + 1:
            doc.fail(("nests", k), f"nests: the nests mapped together must be consecutive and ascending "
                                   f"({value[k - 1]} is followed by {n})")
    loops_at = [k for k, node in enumerate(kernel.body) if isinstance(node, ir.Loop)]
    first, last = loops_at[value[0]], loops_at[value[-1]]
    between = [node for node in kernel.body[first:last + 1] if not isinstance(node, ir.Loop)]
    if between:
        doc.fail(("nests",), f"nests: a statement outside every loop stands between nests {value[0]} and "
                             f"{value[-1]}; only adjacent nests can be mapped together")
    return tuple(value)


def _scalar_loc(doc: YamlDocument, path: tuple, column: int, width: int) -> ir.Loc:
    """The location of characters ``column..column+width`` of the scalar at ``path``."""
    loc = doc.loc(path)
    if loc.line <= 0 or loc.line != loc.end_line:
        return loc
    line = doc.source.line(loc.line)
    start = loc.col - 1 + (1 if line[loc.col - 1:loc.col] in ("'", '"') else 0) + column
    return ir.Loc(loc.line, start + 1, loc.line, start + 1 + max(width, 1), loc.source)


def read_schedule(doc: YamlDocument, value: Any, kernel: ir.Kernel, nests: tuple[int, ...]) -> tuple[ScheduleEntry, ...]:
    """The ``schedule`` entries, in textual order of their statements, identity entries dropped."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        doc.fail(("schedule",), "schedule: expected, per statement, its new loops and their expressions, "
                                "like {S: {t: t, u: t + i}}")
    stmts = [c for c in kernel.statements() if c.nest in nests]
    by_name = {c.name: c for c in stmts}
    taken = set(kernel.param_names) | {d.name for d in kernel.decls}
    model = None
    entries = []
    for name, loops in value.items():
        path = ("schedule", name)
        ctx = by_name.get(name)
        if ctx is None:
            listed = ", ".join(by_name)
            doc.fail(path, f"schedule: no statement '{name}' in the mapped nest(s) (statements: {listed})", key=True)
        if not isinstance(loops, dict) or not loops:
            doc.fail(path, f"schedule of '{name}': expected its new loops and their expressions, "
                           f"like {{t: t, u: t + i}}")
        names = ctx.iterators + kernel.param_names
        out_loops, exprs, texts = [], [], []
        for loop, expr in loops.items():
            if not isinstance(loop, str) or not _NAME.match(loop) or loop in taken:
                doc.fail(path + (loop,), f"schedule of '{name}': '{loop}' cannot name a loop (a loop is an "
                                         f"identifier that is no parameter or tensor)", key=True)
            if isinstance(expr, bool) or not isinstance(expr, (int, str)):
                doc.fail(path + (loop,), f"schedule of '{name}', loop '{loop}': expected an expression of "
                                         f"{', '.join(names)}, not {expr!r}")
            text = str(expr)
            try:
                isl_text = expression_isl(text, names)
            except ExpressionProblem as exc:
                seg = re.match(r"'([^']*)'", str(exc))
                raise MappingError(f"schedule of '{name}', loop '{loop}': {exc}",
                                   _scalar_loc(doc, path + (loop,), exc.column,
                                               len(seg.group(1)) if seg else 1)) from None
            out_loops.append(loop)
            exprs.append(text.strip())
            texts.append(isl_text)
        if tuple(out_loops) == ctx.iterators and all(e == x for e, x in zip(exprs, ctx.iterators)):
            continue  # the identity: the same mapping as none
        model = model or build_model(kernel)
        entry = ScheduleEntry(name, tuple(out_loops), tuple(exprs), tuple(texts))
        _check_injective(doc, path, model, entry)
        entries.append(entry)
    order = [c.name for c in stmts]
    return tuple(sorted(entries, key=lambda e: order.index(e.statement)))


def _check_injective(doc: YamlDocument, path: tuple, model: KernelModel, entry: ScheduleEntry) -> None:
    st = model.statement(entry.statement)
    cmap = coords_map(model, st, dict(zip(entry.loops, entry.isl)))
    if cmap.is_injective():
        return
    clash = cmap.apply_range(cmap.reverse()).intersect(
        isl.Map.lex_lt(cmap.get_space().domain()).align_params(cmap.get_space()).intersect_params(model.context))
    point = clash.wrap().sample_point() if not clash.is_empty() else None
    detail = ""
    if point is not None and not point.is_void():
        n = len(st.loops)
        vals = [point.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(2 * n)]
        params = [point.get_coordinate_val(isl.dim_type.param, k).to_python() for k in range(len(model.params))]
        a = ", ".join(f"{x}={v}" for x, v in zip(st.loops, vals[:n]))
        b = ", ".join(f"{x}={v}" for x, v in zip(st.loops, vals[n:]))
        at = ", ".join(f"{p}={v}" for p, v in zip(model.params, params))
        detail = f": {entry.statement}({a}) and {entry.statement}({b}) get the same coordinates" + \
                 (f" (at {at})" if at else "")
    doc.fail(path, f"schedule of '{entry.statement}' is not injective on its domain{detail}; "
                   f"give every instance its own coordinates", key=True)


def mapping_loops(kernel: ir.Kernel, nests: tuple[int, ...], schedule: tuple[ScheduleEntry, ...]) -> tuple[str, ...]:
    """Every loop of the mapping, by first appearance: the iterators of unlisted statements and
    the new loops of listed ones, statement by statement in textual order."""
    if not schedule:
        out: list[str] = []
        for n in nests:
            out += [x for x in nest_loops(kernel, n) if x not in out]
        return tuple(out)
    entries = {e.statement: e.loops for e in schedule}
    out = []
    for ctx in kernel.statements():
        if ctx.nest in nests:
            out += [x for x in entries.get(ctx.name, ctx.iterators) if x not in out]
    return tuple(out)


def read_wavefront(doc: YamlDocument, path: tuple, value: Any, what: str, order: Any, loops: tuple[str, ...],
                   kernel: ir.Kernel, nests: tuple[int, ...], schedule: tuple[ScheduleEntry, ...]) -> tuple[str, ...]:
    """``wavefront: [a, b]``: two distinct loops listed in this level's ``order``, had by every statement."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) != 2:
        doc.fail(path, f"{what}: wavefront names two loops of this level, like [{', '.join(loops[:2])}]")
    listed = list(order) if isinstance(order, list) else []
    for k, x in enumerate(value):
        if x not in loops:
            doc.fail(path + (k,), f"{what}: wavefront: unknown loop '{x}' (the mapping has {', '.join(loops)})")
        if x not in listed:
            doc.fail(path + (k,), f"{what}: wavefront over '{x}', which is not at this level (its order "
                                  f"lists {', '.join(map(str, listed)) or 'no loop'})")
    if value[0] == value[1]:
        doc.fail(path + (1,), f"{what}: wavefront: loop '{value[1]}' is listed twice")
    if listed.index(value[0]) > listed.index(value[1]):
        doc.fail(path, f"{what}: wavefront [{value[0]}, {value[1]}]: the diagonal stands where '{value[0]}' "
                       f"stands, so '{value[0]}' must come before '{value[1]}' in the order")
    entries = {e.statement: e.loops for e in schedule}
    for ctx in kernel.statements():
        if ctx.nest in nests:
            has = entries.get(ctx.name, ctx.iterators)
            for x in value:
                if x not in has:
                    doc.fail(path, f"{what}: wavefront over '{x}', a loop statement '{ctx.name}' lacks; "
                                   f"every statement of a wavefront has both loops")
    return tuple(value)

