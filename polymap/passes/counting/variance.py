"""Pessimistic cycles: what the exact counts can bound that the nominal model assumes away.

The cost model's cycles (:mod:`polymap.passes.counting.cost_model`) already
charge the busiest unit exactly: partial vectors and uneven thread shares
are in its compute term (:mod:`polymap.passes.counting.execution`). What it
still assumes is that every tile stays resident. The counts and tiles bound
one way it does not::

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
from math import gcd, prod
from typing import Iterator, Mapping as MappingT

from polymap import ir
from polymap.mapping.model import Mapping
from polymap.passes.counting.execution import effective_tiles
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

    kind: str  # "cache sets" (partial vectors and thread shares are in the nominal compute term)
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


def row_sets(stride_bytes: int, sets: int, line_bytes: int) -> int:
    """Distinct sets that the first lines of rows ``stride_bytes`` apart fall into."""
    if stride_bytes % line_bytes:
        return sets  # not line-aligned: the rows drift across the sets
    return sets // gcd(stride_bytes // line_bytes, sets)


def variance(kernel: ir.Kernel, mapping: Mapping, arch: Architecture, cycle_terms: tuple[tuple[str, float], ...],
             extents: MappingT[str, int], params: MappingT[str, int], *,
             options: VarianceOptions = VarianceOptions()) -> Variance:
    """The pessimistic cycles of ``mapping`` from its nominal ``cycle_terms`` (see the module docstring)."""
    bounds = _sets(kernel, mapping, arch, extents, params, options)
    terms = dict(cycle_terms)
    pess = {name: value * prod(b.factor for b in bounds if b.term in (name, "all")) for name, value in terms.items()}
    binding = max(pess, key=lambda n: pess[n])
    nominal = max(terms.values())
    return Variance(nominal, pess[binding], binding, tuple(b for b in bounds if b.factor > 1))


def _sets(kernel: ir.Kernel, mapping: Mapping, arch: Architecture, extents: MappingT[str, int], params: MappingT[str, int],
          options: VarianceOptions) -> list[Bound]:
    out = []
    for k in range(1, len(mapping.levels)):
        spec = arch.levels[k]
        if spec.capacity_bytes is None or spec.name == "RF":
            continue
        sets = max(1, spec.capacity_bytes // (options.line_bytes * options.ways))
        tile = effective_tiles(mapping, extents)[k]
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
