"""A simple legal mapping for ``compile`` when the user gives none (a search may replace it).

Per nest: the original loop order, square tiles at every level with a
capacity, sized so that the level's footprint is about a third of its
capacity, the innermost walking level reordered so that the unit-stride
loop of the written tensor runs innermost (``i, k, j`` for gemm), and the
outermost parallel loop spatial across the first level with several
instances (the cores)::

    gemm 1024^3 on host (DRAM, LLC, L2 x2, L1 x2, RF x2):
      DRAM order i j k | LLC tile {i: 256} order i j k, spatial i | L2 tile 128 |
      L1 tile 32 order i k j | RF tile 1

Each candidate is checked (:func:`polymap.passes.legality.legality.is_legal_schedule`); when tiling is
illegal (LU, Cholesky, Seidel) the nest keeps its original order untiled.

A reduction nest (gemm-like: ``C[.., i, j] += ...`` over a loop ``k`` that
does not index ``C``) first tries the BLIS-like blocking of
:mod:`polymap.passes.search.register_mapping`, whose innermost level is a register tile
the C emitter unrolls and jams.
"""
from __future__ import annotations

from math import prod
from typing import Mapping as MappingT

from polymap.islcheck import isl
from polymap.mapping.model import (
    LevelMapping,
    Mapping,
    loop_extents,
    nest_loops,
    nest_tensors,
)
from polymap.passes.counting.fit import fanout_problems
from polymap.poly import KernelModel
from polymap.tensors import numpy_dtype
from polymap.codegen.ast_build import kernel_schedule, LoopAnalysis
from polymap.ir import subexpressions, Var
from polymap.passes.legality.legality import is_legal_schedule
from polymap.passes.schedule.tiling import mapped_schedule
from polymap.passes.search.register_mapping import register_mapping
from polymap.machine.arch import Architecture
from polymap.machine.arch import Level
from typing import Iterable

_SIZES = (512, 256, 128, 64, 32, 16, 8, 4, 2)


def choose_mappings(model: KernelModel, arch: Architecture, params: MappingT[str, int]) -> tuple[Mapping, ...]:
    """:func:`choose_mapping` for every nest of the kernel (nests it declines are left out)."""
    out = []
    for nest in range(len(model.kernel.nests())):
        m = choose_mapping(model, nest, arch, params)
        if m is not None:
            out.append(m)
    return tuple(out)


def choose_mapping(model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int]) -> Mapping | None:
    """A legal mapping of ``nest`` on ``arch`` at sizes ``params`` (see the module docstring)."""
    kernel = model.kernel
    loops = nest_loops(kernel, nest)
    if not loops:
        return None
    extents = loop_extents(kernel, nest, params)
    keep = nest_tensors(kernel, nest)
    blocked = register_mapping(model, nest, arch, params)
    if blocked is not None and _legal(model, blocked):
        return blocked
    untiled = _untiled(kernel.name, nest, loops, arch, keep)
    tiles = _tiles(model, nest, loops, arch, extents)
    point = _point_order(model, nest, loops)
    for order in dict.fromkeys((point, loops)):
        candidate = _tiled(kernel.name, nest, loops, arch, keep, tiles, order)
        if _legal(model, candidate):
            return _with_spatial(model, candidate, arch, extents, tiles)
    return untiled if _legal(model, untiled) else None


def _untiled(kernel: str, nest: int, loops: tuple[str, ...], arch: Architecture, keep: tuple[str, ...]) -> Mapping:
    levels = tuple(LevelMapping(lv.name, (None,) * len(loops), tuple(loops), (), keep) for lv in arch.levels)
    return Mapping(kernel, nest, tuple(loops), levels)


def _tiled(kernel: str, nest: int, loops: tuple[str, ...], arch: Architecture, keep: tuple[str, ...],
           tiles: list[tuple[int | None, ...]], point_order: tuple[str, ...]) -> Mapping:
    n = len(arch.levels)
    levels = []
    for k, lv in enumerate(arch.levels):
        order = tuple(point_order) if k == n - 2 else tuple(loops)
        levels.append(LevelMapping(lv.name, tiles[k], order, (), keep))
    return Mapping(kernel, nest, tuple(loops), tuple(levels))


def _tiles(model: KernelModel, nest: int, loops: tuple[str, ...], arch: Architecture, extents: MappingT[str, int]
          ) -> list[tuple]:
    """Per level, the tile: None at the backing store, square where there is a capacity, 1 innermost."""
    n = len(arch.levels)
    out: list[tuple] = []
    current = {x: None for x in loops}
    for k, lv in enumerate(arch.levels):
        if k == n - 1 and n > 1:
            out.append(tuple(1 for _ in loops))
            continue
        cap = _capacity_bytes(lv)
        if k > 0 and cap is not None:
            size = next((t for t in _SIZES if _footprint(model, nest, t, extents) <= cap / 3), 1)
            for x in loops:
                bound = extents[x] if current[x] is None else current[x]
                current[x] = None if size >= extents[x] else min(size, bound)
        out.append(tuple(current[x] for x in loops))
    return out


def _capacity_bytes(level: Level) -> int | None:
    if level.capacity_bytes is not None:
        return level.capacity_bytes
    if level.capacity_elements is not None:
        return level.capacity_elements * 4
    return None


def _footprint(model: KernelModel, nest: int, size: int, extents: MappingT[str, int]) -> int:
    """Bytes of the tensors one square tile of side ``size`` touches (bounding boxes)."""
    boxes: dict[str, tuple[int, ...]] = {}
    for s in model.nest_statements(nest):
        for a in s.accesses:
            dims = []
            for sub in a.ref.indices:
                names = {e.name for e in subexpressions(sub) if isinstance(e, Var) and e.name in extents}
                dims.append(max(1, sum(min(size, extents[v]) for v in names)))
            old = boxes.get(a.tensor, ())
            boxes[a.tensor] = tuple(max(p, q) for p, q in zip(dims, old)) if old else tuple(dims)
    dtypes = {d.name: d.dtype for d in model.kernel.decls}
    return sum(prod(box) * numpy_dtype(dtypes[t]).itemsize for t, box in boxes.items())


def _point_order(model: KernelModel, nest: int, loops: tuple[str, ...]) -> tuple[str, ...]:
    """The original order with the written tensors' unit-stride loop moved innermost."""
    for s in reversed(model.nest_statements(nest)):
        idx = s.stmt.target.indices
        if idx and isinstance(idx[-1], Var) and idx[-1].name in loops:
            last = idx[-1].name
            return tuple(x for x in loops if x != last) + (last,)
    return tuple(loops)


def _with_spatial(model: KernelModel, mapping: Mapping, arch: Architecture, extents: MappingT[str, int],
                  tiles: list[tuple[int | None, ...]]) -> Mapping:
    """Make the outermost parallel loop spatial across the first level with several instances."""
    fan_level = next((k for k in range(len(arch.levels) - 1)
                      if arch.inner_instances(k) // arch.levels[k].instances > 1), None)
    if fan_level is None:
        return mapping
    fan = arch.inner_instances(fan_level) // arch.levels[fan_level].instances
    ks = kernel_schedule(model, (mapping,))
    analysis = LoopAnalysis(ks)
    rank, dims = ks.dims[[r for r, _ in ks.dims].index(ks.rank_of(model.nest_statements(mapping.nest)[0].name))]
    candidates = [d.loop for d in dims if d.kind == "coord" and d.level == fan_level and analysis.is_parallel(rank, d.index)]
    if not candidates:
        return mapping
    x = candidates[0]
    k = mapping.loops.index(x)
    inner = tiles[fan_level + 1][k] or extents[x]
    levels = list(mapping.levels)
    for lv in range(1, fan_level + 1):
        tile = list(levels[lv].tile)
        tile[k] = None if fan * inner >= extents[x] else fan * inner
        levels[lv] = LevelMapping(levels[lv].level, tuple(tile), levels[lv].order, levels[lv].spatial, levels[lv].keep)
    lm = levels[fan_level]
    levels[fan_level] = LevelMapping(lm.level, lm.tile, (x,) + tuple(y for y in lm.order if y != x), (x,), lm.keep)
    out = Mapping(mapping.kernel, mapping.nest, mapping.loops, tuple(levels))
    if fanout_problems(out, arch, extents) or not _legal(model, out):
        return mapping
    return out


def _legal(model: KernelModel, mapping: Mapping) -> bool:
    """Does ``mapping`` keep every dependence (the legality pass's exact, cached test)?"""
    return is_legal_schedule(model, mapped_schedule(model, mapping))


def dependence_violation(model: KernelModel, mapping: Mapping) -> isl.UnionMap | None:
    """Pairs of conflicting instances (same element, one writes) that ``mapping`` runs out of order.

    None when the mapping keeps every such pair in its original order. Only
    the nest's statements are compared: the rest of the kernel keeps its
    place around the nest, so pairs with one end outside it cannot flip.
    """
    stmts = model.nest_statements(mapping.nest)
    space = model.context.get_space()

    def union(maps: Iterable[isl.Map]) -> isl.UnionMap:
        out = isl.UnionMap.empty(space)
        for m in maps:
            out = out.union(isl.UnionMap.from_map(m))
        return out

    w = union(a.relation for s in stmts for a in s.writes)
    r = union(a.relation for s in stmts for a in s.reads)
    orig = union(s.schedule for s in stmts)
    conflicts = w.apply_range(w.reverse()).union(w.apply_range(r.reverse())).union(r.apply_range(w.reverse()))
    deps = conflicts.intersect(orig.lex_lt_union_map(orig))
    new = mapped_schedule(model, mapping).union
    bad = deps.intersect(new.lex_ge_union_map(new))
    return None if bad.is_empty() else bad
