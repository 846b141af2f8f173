"""Packing: a tile a level keeps, copied into a contiguous local panel in the order the inner levels read it.

The mapping says which tensors each level keeps; the counts charge a fill of
the level for every element of a kept tile. When the tile is strided in
memory (a block of rows of a larger array), this module makes that fill
real: at the entry of each tile of the level (the body of the innermost loop
of the levels outside it that indexes the tensor) the generated code copies
the tile into a local buffer, and every read of the tensor inside reads the
buffer instead. When consecutive levels keep the tensor (no spatial loop
between them, a constant box at each), the outermost of them copies: the
inner level's tile is then a contiguous part of the panel (its digits are the
panel's innermost ones), so the cache fills it as the counts say, with no
copy of its own. gemm with B's panels grouped at L2: L2 keeps B's KC x 128
block, packed ``[j / NR][k][j % NR]``, and L1 keeps one KC x NR panel of it.

The buffer's layout is the one the inner levels walk: one dimension per
(level, loop) below the keeping level whose loop indexes the tensor and
walks more than one tile, in the levels' order, outermost first. For gemm's
BLIS mapping (L2 keeps A, L1 keeps B; RF tile 14 x 32)::

    L2  tile {i: 518, k: 192}     A[i, k] -> A_pack[i / 14][k][i % 14]       (BLIS's packed A)
    L1  tile {i: 672, j: 32, k: 192}  order j, i, k
    RF  tile {i: 14, j: 32}       order k, i, j
                                  B[k, j] -> B_pack[k][j]  (32 columns: one KC x NR panel)

so the register tile reads both operands at unit stride. Only tensors that
no statement of the nest writes are packed (their values cannot change while
the panel is live), at the innermost level that keeps them, when every
reference is a tuple of distinct bare loop variables and the tile is a
constant box at that level and below. Elements of the box outside the
array (edge tiles) are stored as 0 and never read.

One more rule makes a layout rather than a fill: a read that is strided
along the register tile's row loop (syrk's ``A[j, k]`` under a tile over
``i, j``) is packed at the level just above the registers even when the
mapping does not keep its tensor there, so that the tile's rows load as
vectors; its reads are then counted at the level the mapping says.
That panel may span loops whole at that level (conv2d's ``W[k, c, r, s]`` under a tile along the
output channels ``k``, with ``c, r, s`` whole: ``[k / 16][c][r][s][k % 16]``): a whole loop whose
bounds are the sizes only is a dimension of its run-time extent (counts, strides and size as C
text, the buffer on the heap).

What is packed, in which layout and where the copy sits is decided in
:mod:`polymap.passes.counting.packs`, which the cost model calls too (it counts the copies' cycles);
this module prints the decision.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from polymap.islcheck import isl
from polymap.codegen.ast_build import LoopInfo, user_statement
from polymap.codegen.c.expr import C_TYPES, ValuePrinter, ast_expr, c_name
from polymap.mapping.model import Mapping
from polymap.passes.counting import packs
from polymap.passes.counting.packs import Count, Pack, PackDim, source_order, whole_loops
from polymap.poly import KernelModel, StatementModel


if TYPE_CHECKING:  # annotations only: the emitter builds on this module
    from polymap.codegen.c.emitter import _Printer as Printer

#: a buffer larger than this (bytes) is allocated on the heap (aligned_alloc) instead of on the stack
STACK_BYTES = 64 * 1024
#: a buffer's alignment (bytes): a cache line, so that a register tile's 64-byte vectors of a panel whose
#: rows are whole vectors never straddle two lines
BUFFER_ALIGN = 64


def whole_extents(model: KernelModel, nest: int) -> dict[str, str]:
    """C text of the run-time extent of each loop of ``nest`` a panel may span whole
    (:func:`~polymap.passes.counting.packs.whole_loops`: ``for c in 0..C``: ``C``)."""
    printer = ValuePrinter(model.kernel, {}, None)
    return {x: f"({printer.index(lp.upper[0])} - ({printer.index(lp.lower[0])}))"
            for x, lp in whole_loops(model, nest).items()}


def plan_packs(model: KernelModel, mapping: Mapping) -> dict[tuple[str, tuple[str, ...]], Pack]:
    """The packed references of ``mapping``'s nest (:func:`~polymap.passes.counting.packs.plan_packs`),
    whole loops' extents as C text."""
    return packs.plan_packs(model, mapping, whole_extents(model, mapping.nest))


# --------------------------------------------------------------------------- printing


def buffer_name(pack: Pack) -> str:
    return f"polymap_pk_{c_name(pack.tensor)}_{'_'.join(pack.loops)}"


def origin_name(pack: Pack, loop: str) -> str:
    return f"{buffer_name(pack)}_o{pack.loops.index(loop)}"


def packed_index(pack: Pack, values: dict[str, str], coords: dict | None = None) -> str:
    """The buffer subscript for loop values ``values`` (C text).

    A digit whose (level, loop) is an enclosing AST loop in ``coords`` is that
    loop's iterator (the mapped schedule's coordinate is exactly the digit), so
    that the compiler sees one base pointer per panel rather than one per row.
    """
    terms = []
    for d in pack.dims:
        if coords and (d.level, d.loop) in coords:
            r = f"({coords[(d.level, d.loop)]})"
            terms.append(r if d.stride == 1 else f"{r} * {d.stride}")
            continue
        r = f"({values[d.loop]} - {origin_name(pack, d.loop)})"
        if d.modulus is not None:
            r = f"({r} % {d.modulus})"
        if d.divisor != 1:
            r = f"({r} / {d.divisor})"
        terms.append(r if d.stride == 1 else f"{r} * {d.stride}")
    return " + ".join(terms) or "0"


def _first_user(node: isl.AstNode, loops: tuple[str, ...], model: KernelModel, inner: set[str]
               ) -> tuple[StatementModel, tuple[isl.AstExpr, ...]] | None:
    """A statement under ``node`` that has every loop of ``loops``, and the iterators inside ``node``."""
    t = node.get_type()
    if t == isl.ast_node_type.for_:
        inner.add(node.for_get_iterator().get_id().get_name())
        return _first_user(node.for_get_body(), loops, model, inner)
    if t == isl.ast_node_type.block:
        found = None
        lst = node.block_get_children()
        for k in range(lst.n_ast_node()):
            hit = _first_user(lst.get_at(k), loops, model, inner)
            found = found or hit
        return found
    if t == isl.ast_node_type.if_:
        found = _first_user(node.if_get_then_node(), loops, model, inner)
        if node.if_has_else_node():
            found = _first_user(node.if_get_else_node(), loops, model, inner) or found
        return found
    if t == isl.ast_node_type.mark:
        return _first_user(node.mark_get_node(), loops, model, inner)
    if t == isl.ast_node_type.user:
        name, args = user_statement(node)
        sm = model.statement(name)
        if all(x in sm.loops for x in loops):
            return sm, args
    return None


def open_packs(printer: Printer, body: isl.AstNode, packs: list[Pack]) -> list[tuple[Pack, bool]]:
    """Print the copies of ``packs`` at the top of a loop body; returns what to close after it."""
    opened = []
    for pack in packs:
        inner: set[str] = set()
        hit = _first_user(body, pack.loops, printer.model, inner)
        if hit is None:
            continue
        sm, args = hit
        zeroed = dict(printer.names)
        zeroed.update({it: "0" for it in inner})
        decl = printer.decls[pack.tensor]
        ctype = C_TYPES[decl.dtype]
        name = buffer_name(pack)
        for x in pack.loops:
            some = ast_expr(args[sm.loops.index(x)], zeroed, top=False)
            # x = sum of level coordinates times the next level's tile: the inner ones zeroed give the origin
            printer.emit(f"const long {origin_name(pack, x)} = {some};")
        heap = not isinstance(pack.size, int) or pack.size * {"f32": 4, "f64": 8}.get(decl.dtype, 8) > STACK_BYTES
        if heap:
            # on a cache line, as the stack buffers: malloc's 16-byte alignment made every 64-byte vector
            # of a packed panel straddle two lines (gemm, one thread, aligned: f32 1024 +5%, 2048 +14%;
            # docs/design.md). aligned_alloc wants a whole number of alignments
            printer.emit(f"{ctype} *restrict {name} = aligned_alloc({BUFFER_ALIGN}, "
                         f"(sizeof({ctype}) * {pack.size} + {BUFFER_ALIGN - 1}) / {BUFFER_ALIGN} * {BUFFER_ALIGN});")
        else:
            printer.emit(f"{ctype} {name}[{pack.size}] __attribute__((aligned({BUFFER_ALIGN})));")
        _copy(printer, pack, name)
        printer.active_packs[pack.key] = pack
        opened.append((pack, heap))
    return opened


def close_packs(printer: Printer, opened: list[tuple[Pack, bool]]) -> None:
    for pack, heap in opened:
        printer.active_packs.pop(pack.key, None)
        if heap:
            printer.emit(f"free({buffer_name(pack)});")


def _copy(printer: Printer, pack: Pack, name: str) -> None:
    """Nested loops over the buffer's digits in the source's memory order; values outside the array become 0.

    The loops run over the tensor's dimensions in its (row-major) order, and within one dimension
    the larger divisor outer, so the copy reads the source as it lies in memory::

        B[k, j] -> pack[j / 16][k][j % 16], 8 panels:  for k { for j / 16 { for j % 16 } }

    not in the buffer's order (``for j / 16 { for k { ... } }``), which reads one row of 16
    elements per page: every row of a KC x NR panel of a large B is a new page, so the panel-by-panel
    copy walked the TLB once per row (blas3's diagnosis, RESULTS.md "where the GEMM time goes").
    The writes are strided instead; they stay within the panel, which the level holds.
    """
    decl = printer.decls[pack.tensor]
    digit = {id(d): f"polymap_d{k}" for k, d in enumerate(pack.dims)}
    value = {}
    for x in pack.loops:
        parts = [origin_name(pack, x)] + [f"{digit[id(d)]} * {d.divisor}" if d.divisor != 1 else digit[id(d)]
                                          for d in pack.dims if d.loop == x]
        value[x] = "(" + " + ".join(parts) + ")"
    extents = [printer._extent(e) for e in decl.shape]
    flat = value[pack.loops[0]]
    for x, ext in zip(pack.loops[1:], extents[1:]):
        flat = f"({flat} * {ext} + {value[x]})"
    index = " + ".join(f"{digit[id(d)]} * {d.stride}" if d.stride != 1 else digit[id(d)] for d in pack.dims) or "0"
    span = {x: _span(pack, x) for x in pack.loops}
    whole = " && ".join(f"{origin_name(pack, x)} >= 0 && {origin_name(pack, x)} + {span[x]} <= {ext}"
                        for x, ext in zip(pack.loops, extents))
    inside = " && ".join(f"{value[x]} >= 0 && {value[x]} < {ext}" for x, ext in zip(pack.loops, extents))
    depth = printer.depth
    for k, (cond, text) in enumerate(((whole, f"{c_name(pack.tensor)}[{flat}]"),
                                      ("", f"{inside} ? {c_name(pack.tensor)}[{flat}] : 0"))):
        printer.emit(f"if ({cond}) {{" if k == 0 else "} else {")
        printer.depth = depth + 1
        for d in source_order(pack):
            printer.emit(f"for (long {digit[id(d)]} = 0; {digit[id(d)]} < {d.count}; {digit[id(d)]} += 1)")
            printer.depth += 1
        printer.emit(f"{name}[{index}] = {text};")
        printer.depth = depth
    printer.emit("}")


def _span(pack: Pack, loop: str) -> Count:
    """How many consecutive values of ``loop`` the buffer holds: ``1 + sum((count - 1) x divisor)``."""
    dims = [d for d in pack.dims if d.loop == loop]
    if all(isinstance(d.count, int) for d in dims):
        return 1 + sum((d.count - 1) * d.divisor for d in dims)
    return "(1" + "".join(f" + ({d.count} - 1) * {d.divisor}" for d in dims) + ")"


def pack_points(printer: Printer, node: isl.AstNode, info: LoopInfo) -> list[Pack]:
    """The packs whose tiles start inside loop ``node``: :func:`~polymap.passes.counting.packs.copies_here`
    of its loops (the innermost loop of the levels above the pack's that indexes the tensor)."""
    packs_here = printer.packs_by_rank.get(info.rank)
    if not packs_here or info.level < 0:
        return []
    out = []
    body = node.for_get_body()
    for pack in packs_here.values():
        if pack.key in printer.active_packs:
            continue  # copied once before the nest (hoisted_packs)
        if info.level >= pack.level:
            continue
        if packs.copies_here(pack, info.level, info.loop,
                             indexing_inside=_outer_loop_inside(printer, body, pack.level, pack.loops),
                             outer_inside=_outer_loop_inside(printer, body, pack.level, None),
                             indexing_around=any(lv < pack.level and x in pack.loops
                                                 for lv, x in printer.loop_stack)):
            out.append(pack)
    return out


def hoisted_packs(printer: Printer, node: isl.AstNode, info: LoopInfo, mode: str) -> list[Pack]:
    """The packs copied once, right before ``node``, the outermost loop of its nest (printed outside
    any parallel region): :func:`~polymap.passes.counting.packs.hoisted` of the nest's loops."""
    packs_here = printer.packs_by_rank.get(info.rank)
    if not packs_here or info.level < 0 or mode != "serial" or printer.loop_stack:
        return []
    return [pack for pack in packs_here.values() if pack.key not in printer.active_packs
            and packs.hoisted(indexing_anywhere=_outer_loop_inside(printer, node, pack.level, pack.loops),
                              outer_anywhere=_outer_loop_inside(printer, node, pack.level, None))]


def _outer_loop_inside(printer: Printer, node: isl.AstNode, level: int, loops: tuple[str, ...] | None) -> bool:
    """Is a loop of a level above ``level`` inside ``node`` (one of ``loops``, unless None)?"""
    t = node.get_type()
    if t == isl.ast_node_type.for_:
        info = printer.analysis.info(node)
        if info.level < level and (loops is None or info.loop in loops):
            return True
        return _outer_loop_inside(printer, node.for_get_body(), level, loops)
    if t == isl.ast_node_type.block:
        lst = node.block_get_children()
        return any(_outer_loop_inside(printer, lst.get_at(k), level, loops) for k in range(lst.n_ast_node()))
    if t == isl.ast_node_type.if_:
        return (_outer_loop_inside(printer, node.if_get_then_node(), level, loops)
                or (node.if_has_else_node() and _outer_loop_inside(printer, node.if_get_else_node(), level, loops)))
    if t == isl.ast_node_type.mark:
        return _outer_loop_inside(printer, node.mark_get_node(), level, loops)
    return False
