"""The mapped schedule: where every statement instance runs under a mapping.

A mapping (``mapping.md``) tiles the nest's loops per memory level, orders
them per level and marks some spatial. This module turns it into one ISL map
per statement, from instances to a time vector shared by the nest::

    level 0 loops (in level 0's order) | level 1 loops | ... | textual rank

For loop ``x`` and a statement that has it, the coordinate at level ``l`` is
the index of the level-``l+1`` tile that holds ``x`` inside the level-``l``
tile: with ``r_0 = x`` and tile extents ``T_1, T_2, ...`` (``T_n = 1`` below
the innermost level, so its loops walk single iterations)::

    c_l = floor(r_l / T_{l+1})        r_{l+1} = r_l mod T_{l+1}

Tiles are aligned at 0 on every loop (tile ``c`` of extent ``T`` covers
``c*T <= x < (c+1)*T``), so edge tiles are partial and a triangular domain
is simply intersected with every tile. A loop whose tile is ``None`` (the
whole loop) does not split at that level: its coordinate there is 0.

A statement that lacks loop ``x`` gets a *phase* in front of the coordinate:
0 when it precedes every loop named ``x`` in the text (it runs before all
their iterations), 2 when it follows (after), 1 for statements that have the
loop. Phase dimensions exist only for loops that some statement lacks. The
last dimension is the textual rank, so instances with equal coordinates run
in textual order.

Before/after for gemm with ``GLB: tile {i: 32, j: 32, k: 16}`` over two
levels (DRAM order i, j, k; GLB order k, i, j)::

    acc[i, j, k] -> [0, i, 0, j, 0, k, 0]                         (original)
    acc[i, j, k] -> [fl(i/32), fl(j/32), 1, fl(k/16),             (DRAM)
                     1, k mod 16, i mod 32, j mod 32, 1]          (GLB, text)
    init[i, j]   -> [fl(i/32), fl(j/32), 0, 0, 0, 0, i mod 32, j mod 32, 0]
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterator

from polymap import ir
from polymap.islcheck import isl
from polymap.mapping.schedule import mapped_nests, mapping_statements, statement_coords
from polymap.poly import KernelModel, StatementModel, cached, isl_name
from polymap.mapping.model import LevelMapping, Mapping

PHASE_BEFORE, PHASE_HAS, PHASE_AFTER = 0, 1, 2


@dataclass(frozen=True)
class TimeDim:
    """One dimension of the mapped time vector."""

    level: int  # index of the level whose loops this dimension walks (-1: textual rank)
    loop: str  # loop name ("" for the textual rank)
    kind: str  # "phase" | "coord" | "text"
    spatial: bool = False


@dataclass(frozen=True)
class MappedSchedule:
    """Per statement of the nest, the map from instances to mapped time."""

    model: KernelModel
    mapping: object  # polymap.mapping.model.Mapping (duck-typed: loops, levels[].tile/order/spatial)
    dims: tuple[TimeDim, ...]
    maps: tuple[tuple[str, isl.Map], ...]  # (statement name, map), textual order

    @property
    def statements(self) -> tuple[StatementModel, ...]:
        return tuple(self.model.statement(name) for name, _ in self.maps)

    def map_of(self, statement: str) -> isl.Map:
        return dict(self.maps)[statement]

    @cached_property
    def union(self) -> isl.UnionMap:
        out = isl.UnionMap.empty(self.model.context.get_space())
        for _, m in self.maps:
            out = out.union(isl.UnionMap.from_map(m))
        return out

    def level_slice(self, level: int) -> tuple[int, int]:
        """``(start, stop)``: the dimensions that walk the loops at ``level``."""
        idx = [k for k, d in enumerate(self.dims) if d.level == level]
        return (idx[0], idx[-1] + 1) if idx else (0, 0)

    def dims_outside(self, level: int) -> int:
        """How many leading dimensions belong to levels outside ``level`` (a residency of it)."""
        return sum(1 for d in self.dims if 0 <= d.level < level)


def loop_phase(kernel: ir.Kernel, nest: int, stmt: ir.StatementContext, loop: str) -> int:
    """Where a statement stands with respect to loop ``loop`` of the nest (see module doc)."""
    if loop in stmt.iterators:
        return PHASE_HAS
    positions = [pos for pos in _loop_positions(kernel.nests()[nest], (nest_index(kernel, nest),)) if pos[1] == loop]
    if positions and all(stmt.position < p for p, _ in positions):
        return PHASE_BEFORE
    return PHASE_AFTER


def nest_index(kernel: ir.Kernel, nest: int) -> int:
    """Index in ``kernel.body`` of the ``nest``-th top-level loop."""
    return [k for k, n in enumerate(kernel.body) if isinstance(n, ir.Loop)][nest]


def _loop_positions(loop: ir.Loop, pos: tuple[int, ...]) -> Iterator[tuple[tuple[int, ...], str]]:
    """``((position, var), ...)`` for ``loop`` and every loop inside it (positions as in StatementContext)."""
    yield pos, loop.var

    def walk(nodes: tuple[ir.Node, ...], prefix: tuple[int, ...]) -> Iterator[tuple[tuple[int, ...], str]]:
        for k, n in enumerate(nodes):
            here = prefix + (k,)
            if isinstance(n, ir.Loop):
                yield here, n.var
                yield from walk(n.body, here)
            elif isinstance(n, ir.If):
                yield from walk(n.then, here + (0,))
                yield from walk(n.orelse, here + (1,))

    yield from walk(loop.body, pos)


def _tile_coords(var: str, tiles: list[int | None], levels: int, absolute: bool = False) -> list[str]:
    """ISL text of the coordinate of ``var`` at each level (``tiles[l]`` is level l's extent)."""
    inner = list(tiles[1:]) + [1]  # level l walks tiles of extent inner[l]
    out, rest = [], var
    for size in inner:
        if size is None:
            out.append("0")
            continue
        if size == 1 and absolute and rest != "0":
            out.append(f"({var})")  # the point itself: the same order as its offset in the tile
        else:
            out.append(f"({rest})" if size == 1 else f"floor(({rest})/{size})")
        rest = f"(({rest}) mod {size})" if size != 1 else "0"
    return out


def mapped_schedule(model: KernelModel, mapping: Mapping, *, absolute: bool = False) -> MappedSchedule:
    """The mapped schedule of the nests ``mapping`` maps (see the module docstring), built once per
    model and mapping: one candidate's legality, fit and counts each ask for it, and building it
    costs ISL about 0.4 s on gramschmidt at LARGE (ISL objects are immutable: sharing is safe)."""
    if not isinstance(mapping, Mapping):  # an order mapping (duck-typed) need not be hashable
        return _build_mapped_schedule(model, mapping, absolute=absolute)
    return cached(model, ("mapped schedule", mapping, absolute),
                  lambda: _build_mapped_schedule(model, mapping, absolute=absolute))


def _build_mapped_schedule(model: KernelModel, mapping: Mapping, *, absolute: bool = False) -> MappedSchedule:
    kernel = model.kernel
    statements = mapping_statements(model, mapping)
    loops = tuple(mapping.loops)
    coords_of = {s.name: statement_coords(mapping, s) for s in statements}
    partial = {x for x in loops if any(x not in coords_of[s.name] for s in statements)}
    plain = not getattr(mapping, "schedule", ()) and len(mapped_nests(mapping)) == 1
    n = len(mapping.levels)
    dims: list[TimeDim] = []
    for l, lv in enumerate(mapping.levels):
        for x in lv.order:
            if x in partial:
                dims.append(TimeDim(l, x, "phase"))
            dims.append(TimeDim(l, x, "coord", x in lv.spatial))
    dims.append(TimeDim(-1, "", "text"))

    tiles = {x: [lv.tile[k] for lv in mapping.levels] for k, x in enumerate(loops)}
    waves = {l: tuple(getattr(lv, "wavefront", ())) for l, lv in enumerate(mapping.levels)}
    prefix = f"[{', '.join(isl_name(p) for p in model.params)}]"
    maps = []
    for rank, s in enumerate(statements):
        have = coords_of[s.name]
        coords = {x: _tile_coords(have[x], tiles[x], n, absolute) for x in loops if x in have}
        out = []
        for d in dims[:-1]:
            if d.kind == "phase":
                phase = (loop_phase(kernel, mapping.nest, s.context, d.loop) if plain
                         else statement_phase(statements, coords_of, s, d.loop))
                out.append(str(phase))
            elif d.loop not in coords:
                out.append("0")
            elif waves[d.level] and d.loop == waves[d.level][0]:
                a, b = waves[d.level]
                out.append(f"({coords[a][d.level]}) + ({coords[b][d.level]})")
            else:
                out.append(coords[d.loop][d.level])
        out.append(str(rank))
        tup = f"{s.name}[{', '.join(isl_name(v) for v in s.loops)}]"
        m = isl.Map(f"{prefix} -> {{ {tup} -> [{', '.join(out)}] }}").intersect_domain(s.domain)
        maps.append((s.name, m))
    return MappedSchedule(model, mapping, tuple(dims), tuple(maps))


def statement_phase(statements: tuple[StatementModel, ...], coords_of: dict[str, dict[str, str]],
                    s: StatementModel, loop: str) -> int:
    """The phase rule over statements: before (0) when ``s`` precedes, in the text, every
    statement that has ``loop``; after (2) otherwise; 1 when it has the loop."""
    if loop in coords_of[s.name]:
        return PHASE_HAS
    having = [t.context.position for t in statements if loop in coords_of[t.name]]
    return PHASE_BEFORE if having and all(s.context.position < p for p in having) else PHASE_AFTER


def order_mapping(kernel: ir.Kernel, nest: int, loops: tuple[str, ...], order: tuple[str, ...]) -> Mapping:
    """The mapping that runs ``nest`` in loop ``order`` (missing loops follow in nest order):
    one untiled level, which is what ``--order`` means."""
    full = tuple(order) + tuple(x for x in loops if x not in order)
    return Mapping(kernel.name, nest, tuple(loops), (LevelMapping("order", (None,) * len(loops), full, (), ()),))
