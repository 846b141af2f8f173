"""The default mapping of a reduction nest on a CPU: BLIS-like blocks around a register tile.

For a nest whose last ``+=``/``-=`` statement writes ``C[.., i, j]`` from a
loop ``k`` that does not index ``C`` (gemm, the PolyBench BLAS kernels,
matrix-vector products), on an architecture with at least four levels
(``host``: DRAM, LLC, L2 x cores, L1 x cores, RF)::

    LLC   whole nest, order i, j, k, spatial i   (one chunk of rows per core: one parallel region)
    L2    tile {i: chunk, j: NC, k: KC}          (chunk = M / cores rounded up to MR)
    L1    tile {i: MC, j: NR, k: KC} order j, i, k  (the MC x KC block of A stays in L2,
                                                   the KC x NR panel of B in L1)
    RF    tile {i: MR, j: NR}        order i, j    (MR x NR accumulators in registers)

The C emitter (:mod:`polymap.codegen.c.regtile`) turns the RF box under the
``k`` loop into unrolled-and-jammed vector accumulators. ``j`` is the
target's last subscript (unit stride), ``i`` another bare subscript of it;
``k`` the longest loop that does not index the target; every other loop of
the nest is walked at the DRAM level. f32 uses 6 x 16 (two AVX2 vectors per
row, 12 accumulators), f64 6 x 8; a box that cannot be vectorised (``j``
not unit stride in some read) gets at most 16 scalar accumulators.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping as MappingT

from polymap import ir
from polymap.mapping.model import (
    LevelMapping,
    Mapping,
    loop_extents,
    nest_loops,
    nest_tensors,
)
from polymap.passes.counting.fit import fanout_problems
from polymap.poly import KernelModel


@dataclass(frozen=True)
class Blocking:
    """Block sizes: register tile MR x NR, reduction block KC, row block MC, column block NC."""

    mr: int = 6
    nr: int = 16
    kc: int = 256
    mc: int = 96
    nc: int = 1024


#: per element type, the default blocking (NR = two 32-byte vectors)
BLOCKINGS = {"f32": Blocking(6, 16, 256, 96, 1024), "f64": Blocking(6, 8, 256, 96, 512)}
SCALAR_BLOCKING = Blocking(4, 4, 256, 64, 512)


@dataclass(frozen=True)
class Roles:
    """The loops of the pattern: rows ``i`` (may be empty), unit-stride ``j``, reduction ``k``."""

    i: str | None
    j: str
    k: str
    dtype: str
    vector: bool


def _vars(e: ir.Expr) -> set[str]:
    return {x.name for x in ir.subexpressions(e) if isinstance(x, ir.Var)}


def find_roles(model: KernelModel, nest: int, extents: MappingT[str, int]) -> Roles | None:
    """The pattern's loops in ``nest``, or None when the nest has no such reduction."""
    from polymap.codegen.c.regtile import _unit_last

    loops = nest_loops(model.kernel, nest)
    dtypes = {d.name: d.dtype for d in model.kernel.decls}
    for s in reversed(model.nest_statements(nest)):
        stmt = s.stmt
        idx = stmt.target.indices
        if stmt.op not in ("+=", "-=") or not idx or dtypes[stmt.target.tensor] not in ("f32", "f64"):
            continue
        bare = [x.name for x in idx if isinstance(x, ir.Var) and x.name in s.loops]
        used = set().union(*(_vars(x) for x in idx))
        if not isinstance(idx[-1], ir.Var) or idx[-1].name not in bare:
            continue
        j = idx[-1].name
        i = next((x for x in reversed(bare[:-1]) if sum(x in _vars(y) for y in idx) == 1), None)
        free = [x for x in s.loops if x not in used]
        if not free or sum(j in _vars(y) for y in idx) != 1:
            continue
        k = max(free, key=lambda x: extents.get(x, 0))
        refs = [r for r in ir.subexpressions(stmt.value) if isinstance(r, ir.Ref)]
        vector = all(_unit_last(r, j) for r in refs if j in set().union(*map(_vars, r.indices)))
        if not all(x in loops for x in (i, j, k) if x is not None):
            continue
        return Roles(i, j, k, dtypes[stmt.target.tensor], vector)
    return None


def register_mapping(model: KernelModel, nest: int, arch, params: MappingT[str, int], *,
                     blocking: Blocking | None = None) -> Mapping | None:
    """The mapping of the module docstring, or None (pattern absent, too few levels, does not fit)."""
    if len(arch.levels) < 4:
        return None
    kernel = model.kernel
    loops = nest_loops(kernel, nest)
    extents = loop_extents(kernel, nest, params)
    roles = find_roles(model, nest, extents)
    if roles is None:
        return None
    b = blocking or (BLOCKINGS[roles.dtype] if roles.vector else SCALAR_BLOCKING)
    i, j, k = roles.i, roles.j, roles.k
    mr = b.mr if i is not None else 1
    others = tuple(x for x in loops if x not in (i, j, k))
    n = len(arch.levels)
    cores = max(1, arch.inner_instances(n - 4) // arch.levels[n - 4].instances)

    def tile(rows, cols, red) -> tuple:
        sizes = {i: rows, j: cols, k: red}
        out = []
        for x in loops:
            t = sizes.get(x, 1) if x in sizes else 1
            out.append(None if t is None or t >= max(1, extents.get(x, 1)) else t)
        return tuple(out)

    rf = tuple(1 if t is None else t for t in tile(mr, b.nr, 1))
    rf = tuple(min(t, max(1, extents.get(x, 1))) for t, x in zip(rf, loops))
    ij = tuple(x for x in (i, j) if x is not None)
    keep = nest_tensors(kernel, nest)
    # one chunk of the parallel loop per core, a whole number of register tiles
    par = i if i is not None else j
    step = mr if i is not None else b.nr
    chunk = -(-max(1, extents.get(par, 1)) // cores)
    chunk = -(-chunk // step) * step
    rows = b.mc if i is not None else None
    whole = tuple(None for _ in loops)
    l2 = tile(chunk if i else rows, b.nc if i else chunk, b.kc)
    specs = {
        0: (whole, others + tuple(loops), ()),
        n - 4: (whole, (par,) + tuple(x for x in (i, j, k) if x not in (None, par)) + others,
                (par,) if cores > 1 else ()),
        n - 3: (l2, ij + (k,) + others, ()),
        n - 2: (tile(rows, b.nr, b.kc), others + (j,) + ((i,) if i else ()) + (k,), ()),
        n - 1: (rf, others + (k,) + ij, ()),
    }
    levels = []
    for lv in range(n):
        t, order, spatial = specs.get(lv, (whole, others + tuple(loops), ()))
        levels.append(LevelMapping(arch.levels[lv].name, t, tuple(order), spatial, keep))
    out = Mapping(kernel.name, nest, tuple(loops), tuple(levels))
    if fanout_problems(out, arch, extents):
        levels[n - 4] = LevelMapping(levels[n - 4].level, levels[n - 4].tile, levels[n - 4].order, (), keep)
        out = Mapping(kernel.name, nest, tuple(loops), tuple(levels))
    return out
