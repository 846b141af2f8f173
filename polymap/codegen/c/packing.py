"""Packing: a tile a level keeps, copied into a contiguous local panel in the order the inner levels read it.

The mapping says which tensors each level keeps; the counts charge a fill of
the level for every element of a kept tile. When the tile is strided in
memory (a block of rows of a larger array), this module makes that fill
real: at the entry of each tile of the level (the body of the innermost loop
of the levels outside it) the generated code copies the tile into a local
buffer, and every read of the tensor inside reads the buffer instead.

The buffer's layout is the one the inner levels walk: one dimension per
(level, loop) below the keeping level whose loop indexes the tensor and
walks more than one tile, in the levels' order, outermost first. For gemm's
BLIS mapping (L2 keeps A, L1 keeps B; RF tile 14 x 32)::

    L2  tile {i: 518, k: 192}     A[i, k] -> A_pack[i / 14][k][i % 14]       (BLIS's packed A)
    L1  tile {i: 672, j: 32, k: 192}  order j, i, k
    RF  tile {i: 14, j: 32}       order k, i, j
                                  B[k, j] -> B_pack[k][j]  (32 columns: one KC x NR panel)

so the register tile reads both operands at unit stride. A pack at or above
the level that splits the tile over the cores (its spatial loop) is
*shared*: one buffer for the function, the copy's outermost digit split
between the threads (``omp for``), and a tensor no spatial loop indexes is
packed there rather than below, once for every core (BLIS's KC x NC panel
of B; docs/design.md, "Shared panels"). Only tensors that
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
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

from polymap import ir
from polymap.islcheck import isl
from polymap.codegen.ast_build import LoopInfo, user_statement
from polymap.codegen.c.expr import C_TYPES, ast_expr, c_name
from polymap.mapping.model import Mapping
from polymap.poly import KernelModel, StatementModel


if TYPE_CHECKING:  # annotations only: the emitter builds on this module
    from polymap.codegen.c.emitter import _Printer as Printer

#: a buffer larger than this (bytes) is allocated with malloc instead of on the stack
STACK_BYTES = 64 * 1024


@dataclass(frozen=True)
class PackDim:
    """One dimension of a packed buffer: digit ``((x - origin) % modulus) / divisor`` of loop ``loop``."""

    level: int
    loop: str
    count: int
    divisor: int
    modulus: int | None
    stride: int


@dataclass(frozen=True)
class Pack:
    """Reads ``tensor[loops...]`` of one nest packed at the entry of level ``level``'s tiles."""

    tensor: str
    loops: tuple[str, ...]  # the subscripts, in the tensor's dimension order
    level: int
    tiles: tuple[int, ...]  # the level's tile extent along each of ``loops``
    dims: tuple[PackDim, ...]
    shared: bool = False  # packed above the cores' split, once for all of them (one buffer)

    @property
    def size(self) -> int:
        return prod(d.count for d in self.dims) if self.dims else 1

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return (self.tensor, self.loops)

    def unit_last(self, loop: str) -> bool:
        """Is ``loop`` the buffer's last, unit-stride dimension (its lanes contiguous)?"""
        return bool(self.dims) and self.dims[-1].loop == loop and self.dims[-1].divisor == 1


def _bare(ref: ir.Ref) -> tuple[str, ...] | None:
    names = tuple(s.name for s in ref.indices if isinstance(s, ir.Var))
    if len(names) != len(ref.indices) or len(set(names)) != len(names):
        return None
    return names


def plan_packs(model: KernelModel, mapping: Mapping) -> dict[tuple[str, tuple[str, ...]], Pack]:
    """The packed references of ``mapping``'s nest (see the module docstring)."""
    n = len(mapping.levels)
    if n < 3:
        return {}
    stmts = model.nest_statements(mapping.nest)
    written = {s.stmt.target.tensor for s in stmts}
    refs: dict[str, set] = {}
    for s in stmts:
        for r in ir.subexpressions(s.stmt.value):
            if isinstance(r, ir.Ref) and r.indices:
                refs.setdefault(r.tensor, set()).add(_bare(r))
    out = {}
    for tensor, views in refs.items():
        if tensor in written or None in views:
            continue
        keeping = [lv for lv in range(1, n - 1) if tensor in mapping.levels[lv].keep]
        if not keeping:
            continue
        level = keeping[-1]
        for loops in views:
            pack = _pack(mapping, tensor, loops, level)
            if pack is not None:
                out[pack.key] = pack
    # a tensor that no spatial loop indexes is read alike by every core: BLIS's panel of B is packed
    # once, at the innermost level that keeps it at or above the split, and shared (not once per core)
    split = next((lv for lv in range(1, n - 1) if mapping.levels[lv].spatial), None)
    if split is not None:
        spatial = set(mapping.levels[split].spatial)
        for tensor, views in refs.items():
            if tensor in written or None in views or any(spatial & set(v) for v in views):
                continue
            above = [lv for lv in range(1, split + 1) if tensor in mapping.levels[lv].keep]
            if not above:
                continue
            packs = [_pack(mapping, tensor, loops, above[-1]) for loops in views]
            if all(p is not None for p in packs):
                for p in packs:
                    out[p.key] = p
        # a pack at or above the split is of a tile all the cores read (each its part): one buffer
        out = {key: dataclasses.replace(p, shared=p.level <= split) for key, p in out.items()}
    # a read strided along the register tile's row loop is packed at the level above the registers,
    # so that the row is contiguous (syrk's A[j, k] under a tile over i, j)
    row = mapping.levels[-1].order[-1] if mapping.levels[-1].order else None
    if row is not None and (mapping.tile(n - 1).get(row) or 1) > 1:
        for tensor, views in refs.items():
            if tensor in written or None in views:
                continue
            for loops in views:
                if row not in loops or loops[-1] == row or (tensor, loops) in out:
                    continue
                pack = _pack(mapping, tensor, loops, n - 2)
                if pack is not None and pack.unit_last(row):
                    out[pack.key] = pack
    return out


def _pack(mapping: Mapping, tensor: str, loops: tuple[str, ...], level: int) -> Pack | None:
    n = len(mapping.levels)
    tiles = [mapping.tile(lv) for lv in range(level, n)]
    if any(t.get(x) is None for t in tiles for x in loops):
        return None  # a whole loop: the box would depend on the sizes
    bound = {x: tiles[0][x] for x in loops}
    raw = []
    pending: dict[str, int] = {}  # a tile narrower than the one above: the next digit of its loop wraps
    for lv in range(level, n):
        here = mapping.tile(lv)
        inner = mapping.tile(lv + 1) if lv + 1 < n else {x: 1 for x in mapping.loops}
        for x in mapping.levels[lv].order:
            if x not in loops:
                continue
            if lv > level and here[x] < bound[x]:
                pending[x] = bound[x] = here[x]
            count = -(-min(bound[x], here[x]) // inner[x])
            if count > 1:
                # the modulus of a level whose own digit is 1 (one tile) belongs to the next digit
                raw.append((lv, x, count, inner[x], pending.pop(x, None)))
    if all(b == 1 for b in bound.values()):
        return None
    dims = []
    stride = 1
    for lv, x, count, div, mod in reversed(raw):
        dims.append(PackDim(lv, x, count, div, mod, stride))
        stride *= count
    return Pack(tensor, loops, level, tuple(tiles[0][x] for x in loops), tuple(reversed(dims)))


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


def open_packs(printer: Printer, body: isl.AstNode, packs: list[Pack], *, mode: str = "serial"
               ) -> list[tuple[Pack, bool]]:
    """Print the copies of ``packs`` at the top of a loop body; returns what to close after it.

    A shared pack's buffer is allocated once for the function (:func:`shared_buffers`); inside a
    parallel region (``mode`` "region": every thread walks this body) the threads split its copy
    with ``omp for``, whose barrier orders the copy before the reads and after the previous
    tile's (the loops reading it are ``omp for`` too, each ending in a barrier).
    """
    opened = []
    # the threads split every shared copy; only the last one ends in a barrier (``nowait`` on the
    # others: the copies write different buffers and read only tensors no statement writes)
    splits = [p for p in packs if p.shared and mode == "region"
              and _first_user(body, p.loops, printer.model, set()) is not None]
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
        heap = pack.size * {"f32": 4, "f64": 8}.get(decl.dtype, 8) > STACK_BYTES
        if pack.shared:
            printer.shared_packs.setdefault(name, (ctype, pack.size))
            heap = False  # freed at the end of the function
        elif heap:
            printer.emit(f"{ctype} *restrict {name} = malloc(sizeof({ctype}) * {pack.size});")
        else:
            printer.emit(f"{ctype} {name}[{pack.size}] __attribute__((aligned(64)));")
        _copy(printer, pack, name, split=pack in splits, wait=bool(splits) and pack is splits[-1])
        printer.active_packs[pack.key] = pack
        opened.append((pack, heap))
    return opened


def close_packs(printer: Printer, opened: list[tuple[Pack, bool]]) -> None:
    for pack, heap in opened:
        printer.active_packs.pop(pack.key, None)
        if heap:
            printer.emit(f"free({buffer_name(pack)});")


def shared_buffers(buffers: dict[str, tuple[str, int]]) -> tuple[list[str], list[str]]:
    """The lines allocating the shared packs' buffers (64-byte aligned) at the top of the function,
    and those freeing them at its end."""
    alloc = [f"{ctype} *restrict {name} = aligned_alloc(64, (sizeof({ctype}) * {size} + 63) / 64 * 64);"
             for name, (ctype, size) in buffers.items()]
    return alloc, [f"free({name});" for name in buffers]


def _copy(printer: Printer, pack: Pack, name: str, *, split: bool = False, wait: bool = True) -> None:
    """Nested loops over the buffer's digits in its order; values outside the array become 0.
    ``split``: the threads of the enclosing region share the outermost digit (``omp for``, with
    its closing barrier unless not ``wait``)."""
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
    span = {x: 1 + sum((d.count - 1) * d.divisor for d in pack.dims if d.loop == x) for x in pack.loops}
    whole = " && ".join(f"{origin_name(pack, x)} >= 0 && {origin_name(pack, x)} + {span[x]} <= {ext}"
                        for x, ext in zip(pack.loops, extents))
    inside = " && ".join(f"{value[x]} >= 0 && {value[x]} < {ext}" for x, ext in zip(pack.loops, extents))
    depth = printer.depth
    for k, (cond, text) in enumerate(((whole, f"{c_name(pack.tensor)}[{flat}]"),
                                      ("", f"{inside} ? {c_name(pack.tensor)}[{flat}] : 0"))):
        printer.emit(f"if ({cond}) {{" if k == 0 else "} else {")
        printer.depth = depth + 1
        if split and pack.dims:
            printer.emit("#pragma omp for schedule(static)" + ("" if wait else " nowait"))
        for d in pack.dims:
            printer.emit(f"for (long {digit[id(d)]} = 0; {digit[id(d)]} < {d.count}; {digit[id(d)]} += 1)")
            printer.depth += 1
        printer.emit(f"{name}[{index}] = {text};")
        printer.depth = depth
    printer.emit("}")


def pack_points(printer: Printer, node: isl.AstNode, info: LoopInfo) -> list[Pack]:
    """The packs whose tiles start inside loop ``node``: no loop of a level above the pack's is inside it."""
    packs = printer.packs_by_rank.get(info.rank)
    if not packs or info.level < 0:
        return []
    out = []
    for pack in packs.values():
        if info.level < pack.level and not _outer_loop_inside(printer, node.for_get_body(), pack.level):
            out.append(pack)
    return out


def _outer_loop_inside(printer: Printer, node: isl.AstNode, level: int) -> bool:
    t = node.get_type()
    if t == isl.ast_node_type.for_:
        if printer.analysis.info(node).level < level:
            return True
        return _outer_loop_inside(printer, node.for_get_body(), level)
    if t == isl.ast_node_type.block:
        lst = node.block_get_children()
        return any(_outer_loop_inside(printer, lst.get_at(k), level) for k in range(lst.n_ast_node()))
    if t == isl.ast_node_type.if_:
        return (_outer_loop_inside(printer, node.if_get_then_node(), level)
                or (node.if_has_else_node() and _outer_loop_inside(printer, node.if_get_else_node(), level)))
    if t == isl.ast_node_type.mark:
        return _outer_loop_inside(printer, node.mark_get_node(), level)
    return False
