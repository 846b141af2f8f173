"""Residencies: what each level holds, step by step, as ISL relations.

A *residency* of level ``l`` (``mapping.md``, "What the counts mean") is one
iteration of all loops of the levels outside ``l``: in the mapped schedule
(:func:`polymap.passes.schedule.tiling.mapped_schedule`) the values of the first
``dims_outside(l)`` time dimensions. The spatial dimensions among them name
the *instance* of ``l``; the others order its residencies in time. Only the
residency points some statement instance reaches exist (an instance of ``l``
that gets no work at an edge tile keeps its data across the gap).

Per tensor ``X`` the relations are maps from residency points (spatial and
temporal coordinates together) to elements of ``X``::

    held        r -> e   e in D(r): accessed by some instance of residency r
    written     r -> e   written in r
    write_first r -> e   the first access to e in r is a write its instance
                         does not also read (an instance reads before it writes)

and per level ``next``: ``r -> r'``, the next residency of the same instance.
For gemm with ``GLB`` tiles ``{i: 32, j: 32, k: 16}`` (DRAM order i, j, k),
the GLB residencies are ``[i0, j0, phase, k0]`` and
``held(A) = { [i0, j0, 1, k0] -> A[i, k] : 32 i0 <= i < 32 i0 + 32, 16 k0 <= k < ... }``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Mapping as MappingT

from polymap.islcheck import isl
from polymap.poly import KernelModel, param_set, points
from polymap.passes.counting.residency_order import successor
from polymap.passes.schedule.tiling import MappedSchedule, TimeDim, mapped_schedule
from polymap.mapping.model import Mapping
from polymap.poly import IslObject


@dataclass(frozen=True)
class Events:
    """Every access of the nest to one tensor, keyed by the full mapped time vector."""

    tensor: str
    reads: isl.Map  # [t] -> X[e]
    writes: isl.Map  # [t] -> X[e]

    @cached_property
    def accesses(self) -> isl.Map:
        return self.reads.union(self.writes)


@dataclass(frozen=True)
class TensorResidency:
    """One tensor seen by one level: see the module docstring."""

    tensor: str
    held: isl.Map
    written: isl.Map
    write_first: isl.Map

    @cached_property
    def held_points(self) -> list[tuple[int, ...]]:
        """The ``(residency, element)`` pairs of ``held`` (parameters fixed), walked once for the
        counts by points that read them (the footprint and the writebacks, issue 9)."""
        return points(self.held)


@dataclass(frozen=True)
class LevelResidency:
    """The residencies of one level and, per tensor, what they hold."""

    level: int
    depth: int  # number of time dimensions a residency fixes (dims_outside(level))
    spatial: tuple[int, ...]  # positions (< depth) of the spatial dimensions: the instance id
    points: isl.Set  # residency points reached by some statement instance
    tensors: tuple[TensorResidency, ...]

    def tensor(self, name: str) -> TensorResidency:
        return next(t for t in self.tensors if t.tensor == name)

    @cached_property
    def next(self) -> isl.Map:
        """``r -> r'``: the lexicographic successor of ``r`` among the points of the same instance."""
        return successor(self.points, self.spatial)

    @cached_property
    def not_before(self) -> isl.Map:
        """``r -> r'`` with ``r <= r'`` (same instance): used to find where a stay ends."""
        later = self.points.lex_le_set(self.points)
        for j in self.spatial:
            later = later.equate(isl.dim_type.in_, j, isl.dim_type.out, j)
        return later


@dataclass(frozen=True)
class Residencies:
    """Everything the counting pass needs for one mapping (parameters fixed or not)."""

    schedule: MappedSchedule
    time_maps: tuple[isl.Map, ...]  # per statement of the nest: instance -> time (params fixed if given)
    events: tuple[Events, ...]
    levels: tuple[LevelResidency, ...]
    dims: tuple[TimeDim, ...] = ()  # the time dimensions kept in time_maps (constant ones dropped)

    def events_of(self, tensor: str) -> Events:
        return next(e for e in self.events if e.tensor == tensor)


def _project_prefix(obj: isl.Map | isl.Set, depth: int, total: int, dim_type: isl.dim_type) -> isl.Map | isl.Set:
    """Keep only the first ``depth`` of ``total`` dimensions of type ``dim_type``."""
    return obj.project_out(dim_type, depth, total - depth) if total > depth else obj


def tensor_events(model: KernelModel, ms: MappedSchedule, time_maps: tuple[isl.Map, ...], tensor: str,
                  params: isl.Set | None = None) -> Events:
    """All reads and writes of ``tensor`` by the nest, as ``time -> element`` maps.

    With ``params`` (the parameter set fixing their values) the access
    relations get the numbers too (the time maps must have them already), so
    the events have no parameters.
    """
    reads = writes = None
    for st, tmap in zip(ms.statements, time_maps):
        inverse = tmap.reverse()
        for acc in st.accesses:
            if acc.tensor != tensor:
                continue
            relation = acc.relation if params is None else without_params(acc.relation.intersect_params(params))
            rel = inverse.apply_range(relation)
            if acc.kind == "read":
                reads = rel if reads is None else reads.union(rel)
            else:
                writes = rel if writes is None else writes.union(rel)
    space = _event_space(model, ms, time_maps, tensor)
    return Events(tensor, reads if reads is not None else isl.Map.empty(space),
                  writes if writes is not None else isl.Map.empty(space))


def _event_space(model: KernelModel, ms: MappedSchedule, time_maps: tuple[isl.Map, ...], tensor: str) -> isl.Space:
    for st, tmap in zip(ms.statements, time_maps):
        for acc in st.accesses:
            if acc.tensor == tensor:
                space = acc.relation.get_space()
                if not tmap.dim(isl.dim_type.param):
                    space = space.drop_dims(isl.dim_type.param, 0, space.dim(isl.dim_type.param))
                return tmap.get_space().range().map_from_domain_and_range(space.range())
    raise KeyError(tensor)


def _write_first(ev: Events, depth: int, total: int) -> isl.Map:
    """``r -> e``: some write of ``e`` in residency ``r`` comes before every read of ``e`` in ``r``."""
    # a write whose instance also reads the element (``+=``) has a read at the same time: never first
    writes = ev.writes.subtract(ev.reads)
    if writes.is_empty() or ev.reads.is_empty():
        return _project_prefix(writes, depth, total, isl.dim_type.in_)
    plain = _project_prefix(writes, depth, total, isl.dim_type.in_)
    if plain.intersect(_project_prefix(ev.reads, depth, total, isl.dim_type.in_)).is_empty():
        return plain  # no residency reads what it plainly writes (gemm's init runs in a phase of its own)
    # t_w -> t_r: t_r at or before t_w within the same residency (first `depth` dims equal)
    before = isl.Map.lex_ge(writes.domain().get_space())
    for j in range(depth):
        before = before.equate(isl.dim_type.in_, j, isl.dim_type.out, j)
    before = before.intersect_domain(writes.domain()).intersect_range(ev.reads.domain())
    preceded = writes.intersect(before.apply_range(ev.reads))
    return _project_prefix(writes.subtract(preceded), depth, total, isl.dim_type.in_)


def level_residency(res_events: tuple[Events, ...], time_maps: tuple[isl.Map, ...], dims: tuple[TimeDim, ...],
                    level: int, kept: tuple[str, ...], *, alike: LevelResidency | None = None) -> LevelResidency:
    """The residencies of ``level`` and what they hold of each tensor in ``kept``.

    ``dims`` describes the dimensions of ``time_maps`` (the mapped schedule's,
    possibly without the constant ones). ``alike``: an outer level whose residencies fix as many
    time dimensions: its residency points and the relations of the tensors it keeps too are this
    level's (built from the same events and prefix), shared rather than built again, and so are the
    points walked on them (:attr:`TensorResidency.held_points`).

    Sharing answers "are this level's *relations* the outer level's?": yes exactly at equal depth,
    decided here without ISL. ``counting._same_residencies_as`` answers a wider question, "are this
    level's *stays* the outer level's?", also yes for a deeper level whose extra dimensions are not
    spatial and are determined by the outer ones (an injective projection). Such a level's relations
    are not the outer's: they have more dimensions, and what reads them by position (``next`` and
    ``not_before``, the parent's reads that project away spatial dimensions, the footprints of what
    this level keeps) needs them as they are; only the numbers made of the stays alone (entering,
    fills, writebacks) carry over, and the counter takes those from the outer level. Equal depth is
    the case of both where the projection drops nothing: the counter answers it by the depths.
    """
    total = len(dims)
    depth = sum(1 for d in dims if 0 <= d.level < level)
    if alike is not None and alike.depth != depth:
        alike = None
    spatial = tuple(j for j, d in enumerate(dims[:depth]) if d.spatial)
    points = alike.points if alike is not None else None
    if points is None:
        for tmap in time_maps:
            rng = _project_prefix(tmap.range(), depth, total, isl.dim_type.set)
            points = rng if points is None else points.union(rng)
        points = points.coalesce()
    shared = {t.tensor: t for t in alike.tensors} if alike is not None else {}
    tensors = []
    for ev in res_events:
        if ev.tensor not in kept:
            continue
        if ev.tensor in shared:
            tensors.append(shared[ev.tensor])
            continue
        held = _project_prefix(ev.accesses, depth, total, isl.dim_type.in_)
        written = _project_prefix(ev.writes, depth, total, isl.dim_type.in_)
        tensors.append(TensorResidency(ev.tensor, held.coalesce(), written.coalesce(),
                                       _write_first(ev, depth, total).coalesce()))
    return LevelResidency(level, depth, spatial, points, tuple(tensors))


def residencies(model: KernelModel, mapping: Mapping, *, params: MappingT[str, int] | None = None,
                tensors: tuple[str, ...] | None = None) -> Residencies:
    """Residency relations of every level of ``mapping`` (parameters fixed when ``params`` is given).

    Level ``l`` describes the tensors ``mapping.levels[l].keep``; the backing
    store (level 0) keeps every tensor but only its residency points are built.
    """
    ms, maps, dims = time_maps(model, mapping, params=params)
    fixed = param_set(model, params) if params is not None else None
    names = tensors if tensors is not None else nest_tensor_names(ms)
    events = tuple(tensor_events(model, ms, maps, x, fixed) for x in names)
    levels = []
    for l, lm in enumerate(mapping.levels):
        # the backing store (level 0) keeps everything and has no fills: nothing to describe
        kept = () if l == 0 else tuple(x for x in names if x in lm.keep)
        # a level with the tiles of the one outside it (heat-3d's L1 and L2: 2 x 16 x 16) has its
        # residencies: shared, with the points walked on them (a fifth of heat-3d's counts, issue 9)
        levels.append(level_residency(events, maps, dims, l, kept, alike=levels[-1] if levels else None))
    return Residencies(ms, maps, events, tuple(levels), dims)


def time_maps(model: KernelModel, mapping: Mapping, *, params: MappingT[str, int] | None = None
              ) -> tuple[MappedSchedule, tuple[isl.Map, ...], tuple[TimeDim, ...]]:
    """The mapped schedule of ``mapping``, its time maps (per statement: instance -> time; parameters
    fixed when ``params`` is given) without the constant dimensions, and the dimensions they keep:
    what :func:`residencies` builds every relation from."""
    ms = mapped_schedule(model, mapping)
    maps = tuple(m for _, m in ms.maps)
    if params is not None:
        # numbers from the start: every later operation works on sets without parameters
        fixed = param_set(model, params)
        maps = tuple(without_params(m.intersect_params(fixed)) for m in maps)
    maps, dims = drop_constant_dims(maps, ms.dims)
    return ms, maps, dims


@dataclass(frozen=True)
class ResidencyMaps:
    """What :func:`same_residencies` compares of one mapping at fixed sizes, built once per mapping
    (:func:`residency_maps`) and compared with any number of others: the time maps (:func:`time_maps`:
    constant dimensions dropped), their statements, and the level and kind of each dimension kept."""

    statements: tuple[str, ...]
    dims: tuple[tuple[int, bool], ...]  # (level, spatial) per dimension of the maps
    maps: tuple[isl.Map, ...]


def residency_maps(model: KernelModel, mapping: Mapping, params: MappingT[str, int]) -> ResidencyMaps:
    """The :class:`ResidencyMaps` of ``mapping`` at ``params``."""
    ms, maps, dims = time_maps(model, mapping, params=params)
    return ResidencyMaps(tuple(s.name for s in ms.statements), tuple((d.level, d.spatial) for d in dims), maps)


def same_residencies(model: KernelModel, a: Mapping, b: Mapping, params: MappingT[str, int], *,
                     maps_of: Callable[[Mapping], ResidencyMaps] | None = None) -> bool:
    """Do mappings ``a`` and ``b`` have the same residencies at ``params``, so the same counts and
    footprints (every count is a function of them and of what each level keeps)?

    True when every level keeps the same tensors and the time maps (:func:`time_maps`) are the same
    relations over dimensions of the same levels and kinds. heat-3d's isl candidates ``2x16x16xall``
    and ``2x16x16x128`` at its reduced sizes (``TSTEPS=10, N=10``): the skewed ``2t + k`` spans
    less than 128, so the tile loop of 128 is a constant dimension, dropped, and the two count the
    same (each count took 5 s of CPU, issue 9). A few ISL comparisons, milliseconds.

    ``maps_of``: a mapping's :func:`residency_maps` at ``params`` (default: built for this call); a
    caller comparing many pairs passes one that builds each mapping's once (compile's isl candidates:
    ``choice._rank_beyond_budget``), so the pairs cost comparisons, not builds."""
    if len(a.levels) != len(b.levels) or any(x.level != y.level or set(x.keep) != set(y.keep)
                                             for x, y in zip(a.levels, b.levels)):
        return False
    maps_of = maps_of or (lambda m: residency_maps(model, m, params))
    x, y = maps_of(a), maps_of(b)
    if x.statements != y.statements or x.dims != y.dims:
        return False
    return all(p.get_space().is_equal(q.get_space()) and p.is_equal(q) for p, q in zip(x.maps, y.maps))


def without_params(m: IslObject) -> IslObject:
    """``m`` (a set or map, parameters fixed to numbers) with the parameters substituted away."""
    n = m.dim(isl.dim_type.param)
    return m.project_out(isl.dim_type.param, 0, n).detect_equalities() if n else m


def drop_constant_dims(maps: tuple[isl.Map, ...], dims: tuple[TimeDim, ...]
                      ) -> tuple[tuple[isl.Map, ...], tuple[TimeDim, ...]]:
    """Drop the time dimensions every statement fixes to one and the same integer.

    Such a dimension (a loop of one tile at a level, a phase every statement
    shares, a whole-loop coordinate) orders nothing and names one instance, so
    residencies, their order and their instances are unchanged without it;
    fewer dimensions make every later ISL operation cheaper. Before/after for
    gemm with ``k`` in one tile at GLB: ``[i0, j0, 1, k0, 1, 0, ...]`` ->
    ``[i0, j0, 1, k0, 1, ...]``.
    """
    fixed = None
    for m in maps:
        rng = m.range().detect_equalities()
        vals = [rng.plain_get_val_if_fixed(isl.dim_type.set, j) for j in range(len(dims))]
        here = [None if (v.is_nan() or not v.is_int()) else v.to_python() for v in vals]
        fixed = here if fixed is None else [a if a == b else None for a, b in zip(fixed, here)]
    if not fixed:
        return maps, dims
    drop = [j for j, v in enumerate(fixed) if v is not None]
    for j in reversed(drop):
        maps = tuple(m.project_out(isl.dim_type.out, j, 1) for m in maps)
    return maps, tuple(d for j, d in enumerate(dims) if j not in drop)


def nest_tensor_names(ms: MappedSchedule) -> tuple[str, ...]:
    """Tensors the nest accesses, in declaration order."""
    used = {a.tensor for st in ms.statements for a in st.accesses}
    return tuple(d.name for d in ms.model.kernel.decls if d.name in used)
