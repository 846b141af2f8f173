"""Pessimistic cycles: what the exact counts can bound that the nominal model assumes away.

The cost model's cycles (:mod:`polymap.passes.counting.cost_model`) are the
best case: every vector lane busy, work spread evenly over the units, every
tile resident. Three things the counts and tiles bound exactly, each a
factor on one cycle term::

    partial vectors   the innermost loop runs in vectors of `lanes`; its tiles' edges waste lanes:
                      N = 100 in tiles of 32, 16 lanes -> 3 x 32 + 16 slots for 100: x1.12 on compute
    thread share      a spatial loop deals one tile to each unit; the last tile is partial and the
                      slowest unit bounds everyone: N = 100 over 2 units in tiles of 64 -> 64 vs 50: x1.28
    cache sets        the rows of a tile at stride S land in sets/gcd(S/line, sets) sets of a cache;
                      more rows than those sets' ways cannot stay: 64 rows of 4 KiB in a 48 KiB
                      12-way cache with 64 sets -> 1 set, 12 rows: x5.3 on the traffic above it

    pessimistic = max over terms of (nominal term x its factors)

and the term that gives it *binds*. ``pessimistic / nominal`` is the
model's named optimism (``derating``). Line size and associativity are not
in architecture files: 64-byte lines and 8 ways are assumed
(:class:`VarianceOptions`).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import ceil, gcd, prod
from typing import Iterator, Mapping as MappingT

from polymap import ir
from polymap.mapping.model import Mapping, resolved_tile
from polymap.passes.counting.footprint import DTYPE_BYTES
from polymap.tensors import shape_of
from polymap.machine.arch import Architecture


@dataclass(frozen=True)
class VarianceOptions:
    line_bytes: int = 64
    ways: int = 8


@dataclass(frozen=True)
class Bound:
    """One factor on one cycle term, and why."""

    kind: str  # "partial vectors", "thread share", "cache sets"
    term: str  # "compute" or a level name
    factor: float
    detail: str


@dataclass(frozen=True)
class Variance:
    nominal_cycles: float
    pessimistic_cycles: float
    binding: str  # the term giving the pessimistic cycles
    bounds: tuple[Bound, ...]

    @property
    def derating(self) -> float:
        return self.pessimistic_cycles / self.nominal_cycles if self.nominal_cycles else 1.0

    def to_json(self) -> dict:
        return {"cycles_nominal": self.nominal_cycles, "cycles_pessimistic": self.pessimistic_cycles,
                "binds": self.binding, "derating": self.derating,
                "bounds": [{"kind": b.kind, "term": b.term, "factor": b.factor, "detail": b.detail}
                           for b in self.bounds]}


def vector_slots(extent: int, tile: int, lanes: int) -> int:
    """Vector lanes issued to run ``extent`` iterations in tiles of ``tile``, ``lanes`` at a time."""
    full, rest = divmod(extent, tile)
    return full * ceil(tile / lanes) * lanes + ceil(rest / lanes) * lanes


def largest_share(extent: int, tile: int) -> int:
    """Iterations of the busiest unit when tiles of ``tile`` go one to a unit (the last one partial)."""
    return min(tile, extent)


def row_sets(stride_bytes: int, sets: int, line_bytes: int) -> int:
    """Distinct sets that the first lines of rows ``stride_bytes`` apart fall into."""
    if stride_bytes % line_bytes:
        return sets  # not line-aligned: the rows drift across the sets
    return sets // gcd(stride_bytes // line_bytes, sets)


def variance(kernel: ir.Kernel, mapping: Mapping, arch: Architecture, cycle_terms: tuple[tuple[str, float], ...],
             extents: MappingT[str, int], params: MappingT[str, int], *,
             options: VarianceOptions = VarianceOptions()) -> Variance:
    """The pessimistic cycles of ``mapping`` from its nominal ``cycle_terms`` (see the module docstring)."""
    bounds = (_vectors(mapping, arch, extents) + _threads(mapping, extents)
              + _sets(kernel, mapping, arch, extents, params, options))
    terms = dict(cycle_terms)
    pess = {name: value * prod(b.factor for b in bounds if b.term in (name, "all")) for name, value in terms.items()}
    binding = max(pess, key=lambda n: pess[n])
    nominal = max(terms.values())
    return Variance(nominal, pess[binding], binding, tuple(b for b in bounds if b.factor > 1))


def effective_tile(mapping: Mapping, level: int, extents: MappingT[str, int]) -> dict[str, int]:
    """Level ``level``'s tile within every enclosing one (a loop left whole stays inside its parent's tile)."""
    tile = resolved_tile(mapping, 0, extents)
    for k in range(1, level + 1):
        tile = {x: min(t, tile[x]) for x, t in resolved_tile(mapping, k, extents).items()}
    return tile


def _vectors(mapping: Mapping, arch: Architecture, extents: MappingT[str, int]) -> list[Bound]:
    lanes = max(1, arch.compute.instances // arch.levels[-1].instances)
    last = len(mapping.levels) - 1
    order = [x for x in mapping.levels[last].order if extents.get(x, 0) > 1]
    if lanes == 1 or not order:
        return []
    x = order[-1]
    tile = effective_tile(mapping, last, extents)[x]
    slots = vector_slots(extents[x], tile, lanes)
    return [Bound("partial vectors", "compute", slots / extents[x],
                  f"loop {x}: {extents[x]} iterations in tiles of {tile}, {lanes} lanes: {slots} slots")]


def _threads(mapping: Mapping, extents: MappingT[str, int]) -> list[Bound]:
    out = []
    for k, lm in enumerate(mapping.levels):
        if not lm.spatial:
            continue
        own = effective_tile(mapping, k, extents)
        inner = effective_tile(mapping, k + 1, extents) if k + 1 < len(mapping.levels) else {x: 1 for x in own}
        trips = {x: ceil(own[x] / inner[x]) if inner[x] else 0 for x in own}
        for x in lm.spatial:
            if trips[x] <= 1:
                continue
            share = largest_share(own[x], inner[x])
            factor = share * trips[x] / own[x]
            out.append(Bound("thread share", "all", factor,
                             f"spatial {x} at {lm.level}: {own[x]} over {trips[x]} units, the largest share {share}"))
    return out


def _sets(kernel: ir.Kernel, mapping: Mapping, arch: Architecture, extents: MappingT[str, int], params: MappingT[str, int],
          options: VarianceOptions) -> list[Bound]:
    out = []
    for k in range(1, len(mapping.levels)):
        spec = arch.levels[k]
        if spec.capacity_bytes is None or spec.name == "RF":
            continue
        sets = max(1, spec.capacity_bytes // (options.line_bytes * options.ways))
        tile = effective_tile(mapping, k, extents)
        worst = None
        for tensor, rows, stride in _row_strides(kernel, tile, params):
            if tensor not in mapping.levels[k].keep:
                continue
            hit = row_sets(stride, sets, options.line_bytes)
            factor = rows / (hit * options.ways)
            if factor > 1 and (worst is None or factor > worst[0]):
                worst = (factor, f"{tensor}: {rows} rows of stride {stride} B in {hit} of {sets} sets "
                                 f"({options.ways}-way assumed)")
        if worst is not None:
            out.append(Bound("cache sets", arch.levels[k - 1].name, worst[0], f"{spec.name} tile, {worst[1]}"))
    return out


def _row_strides(kernel: ir.Kernel, tile: MappingT[str, int], params: MappingT[str, int]
                 ) -> Iterator[tuple[str, int, int]]:
    """(tensor, rows in the tile, row stride in bytes) for the accesses of two or more subscripts
    whose next-to-last subscript is a loop of the nest (row-major: the last dimension is a row)."""
    seen = set()
    for ctx in kernel.statements():
        for ref in (ctx.stmt.target, *ir.reads_of(ctx.stmt)):
            decl = kernel.decl(ref.tensor)
            if decl is None or len(ref.indices) < 2 or ref.tensor in seen:
                continue
            row = ref.indices[-2]
            if not (isinstance(row, ir.Var) and row.name in tile):
                continue
            seen.add(ref.tensor)
            yield ref.tensor, tile[row.name], shape_of(decl, params)[-1] * DTYPE_BYTES[decl.dtype]
