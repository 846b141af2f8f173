"""Mappings: tiles, loop orders, spatial loops and bindings per level (``mapping.md``).

A mapping file is validated against a kernel and an architecture
(:mod:`polymap.mapping.files`) and becomes a frozen :class:`Mapping` in which
everything the file leaves implicit is spelled out: tiles inherit from the
enclosing level, orders are complete, ``keep`` lists tensor names. For gemm
(loops ``i, j, k``) on ``toy``::

    levels:                               Mapping("gemm", 0, ("i", "j", "k"), (
      - {level: DRAM}                       LevelMapping("DRAM", (None, None, None), ("i", "j", "k"), (), ("A", "B", "C")),
      - {level: GLB, tile: {i: 32},  ->     LevelMapping("GLB", (32, None, None), ("k", "i", "j"), (), ("A", "C")),
         order: [k], keep: [A, C]}
      - {level: RF, tile: {j: 16},          LevelMapping("RF", (32, 16, None), ("j", "i", "k"), ("j",), ("A", "B", "C"))))
         order: [j], spatial: [j]}

``None`` in a tile means "the whole loop": numbers come with
:func:`loop_extents` at given parameter values.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Any, Iterable, Mapping as MappingT

from polymap import ir
from polymap.mapping.schedule import ScheduleEntry, mapping_extents
from polymap.poly import KernelModel, cached, kernel_model, fix_params


@dataclass(frozen=True)
class LevelMapping:
    """The decisions at one architecture level."""

    level: str
    tile: tuple[int | None, ...]
    """Extent of ``Mapping.loops[k]`` in one tile of this level; None: the whole loop."""
    order: tuple[str, ...]
    """Every loop of the nest, outer -> inner, as they walk the next inner level's tiles."""
    spatial: tuple[str, ...]
    """Loops whose iterations go to different instances of the next inner level (or compute)."""
    keep: tuple[str, ...]
    """Tensors stored at this level, in declaration order."""
    wavefront: tuple[str, ...] = ()
    """``(a, b)``: this level walks its tiles of ``a`` and ``b`` by the diagonal ``a + b``, then ``b``."""

    def __post_init__(self) -> None:
        _check_names(f"level {self.level!r}: order", self.order)
        _check_names(f"level {self.level!r}: spatial", self.spatial)
        _check_names(f"level {self.level!r}: keep", self.keep)
        for t in self.tile:
            if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
                raise ValueError(f"level {self.level!r}: tile extent {t!r} is not a positive integer or None")
        outside = [x for x in self.spatial if x not in self.order]
        if outside:
            raise ValueError(f"level {self.level!r}: spatial loop(s) {', '.join(outside)} not in the order "
                             f"{', '.join(self.order)}")
        _check_names(f"level {self.level!r}: wavefront", self.wavefront)
        if self.wavefront and (len(self.wavefront) != 2 or not all(x in self.order for x in self.wavefront)
                               or self.order.index(self.wavefront[0]) > self.order.index(self.wavefront[1])):
            raise ValueError(f"level {self.level!r}: wavefront {', '.join(self.wavefront)} is not two loops of "
                             f"the order {', '.join(self.order)}, the first before the second")


def _check_names(what: str, names: tuple[str, ...]) -> None:
    """``names`` is a tuple of distinct strings (a ValueError otherwise: a bug in the caller)."""
    if not isinstance(names, tuple) or not all(isinstance(x, str) for x in names):
        raise ValueError(f"{what} must be a tuple of names, not {names!r}")
    twice = sorted({x for x in names if names.count(x) > 1})
    if twice:
        raise ValueError(f"{what} lists {', '.join(twice)} more than once: {', '.join(names)}")


@dataclass(frozen=True)
class Mapping:
    """A validated mapping of nest ``nest`` of ``kernel``; one entry per architecture level."""

    kernel: str
    nest: int
    """The first mapped nest."""
    loops: tuple[str, ...]
    """Every loop of the mapping: the iterators of unlisted statements and the schedule's new loops."""
    levels: tuple[LevelMapping, ...]
    nests: tuple[int, ...] = ()
    """Consecutive top-level nests mapped together (fused); empty means ``(nest,)``."""
    schedule: tuple[ScheduleEntry, ...] = ()
    """New coordinates of the listed statements, in textual order (no identity entries)."""
    expand: tuple[tuple[str, str], ...] = ()
    """Local scalars the mapping treats as arrays, each with the loop that indexes it (``(("temp2", "j"),)``):
    the mapping is of the kernel with them expanded (:func:`polymap.passes.frontend.expansion.kernel_for`),
    which computes the same results bit for bit."""

    @property
    def mapped_nests(self) -> tuple[int, ...]:
        return self.nests or (self.nest,)

    def __post_init__(self) -> None:
        """The invariants every mapping holds, however it was built (a ValueError is a bug in the builder;
        a mapping file's problems are reported earlier, located, by :mod:`polymap.mapping.files`)."""
        if isinstance(self.nest, bool) or not isinstance(self.nest, int) or self.nest < 0:
            raise ValueError(f"mapping of {self.kernel!r}: nest must be an index >= 0, not {self.nest!r}")
        _check_names(f"mapping of {self.kernel!r} nest {self.nest}: loops", self.loops)
        if not isinstance(self.levels, tuple) or not self.levels \
                or not all(isinstance(lm, LevelMapping) for lm in self.levels):
            raise ValueError(f"mapping of {self.kernel!r} nest {self.nest}: levels must be a non-empty tuple "
                             f"of LevelMapping")
        for lm in self.levels:
            if len(lm.tile) != len(self.loops):
                raise ValueError(f"level {lm.level!r}: {len(lm.tile)} tile extents for the nest's "
                                 f"{len(self.loops)} loops ({', '.join(self.loops)})")
            if sorted(lm.order) != sorted(self.loops):
                raise ValueError(f"level {lm.level!r}: order {', '.join(lm.order)} is not a permutation of "
                                 f"the nest's loops {', '.join(self.loops)}")
        if self.nests and (self.nests[0] != self.nest or list(self.nests) != list(range(self.nest, self.nest + len(self.nests)))):
            raise ValueError(f"mapping of {self.kernel!r}: nests {self.nests} are not consecutive from nest {self.nest}")
        if not all(isinstance(e, ScheduleEntry) for e in self.schedule) \
                or len({e.statement for e in self.schedule}) != len(self.schedule):
            raise ValueError(f"mapping of {self.kernel!r}: schedule must hold one ScheduleEntry per listed statement")
        for e in self.schedule:
            _check_names(f"schedule of {e.statement!r}", e.loops)
            unknown = [x for x in e.loops if x not in self.loops]
            if unknown or len(e.exprs) != len(e.loops) or len(e.isl) != len(e.loops):
                raise ValueError(f"schedule of {e.statement!r}: loops {', '.join(e.loops)} do not match the "
                                 f"mapping's loops {', '.join(self.loops)} or its expressions")

    def tile(self, level_index: int) -> dict[str, int | None]:
        """``{loop: extent or None}`` of level ``level_index``'s tile."""
        return dict(zip(self.loops, self.levels[level_index].tile))

    def keeps(self, level_index: int, tensor: str) -> bool:
        return tensor in self.levels[level_index].keep

    def to_dict(self) -> dict[str, Any]:
        """The mapping-file data (YAML/JSON); :func:`polymap.mapping.files.mapping_from_dict`
        reads it back to an equal mapping."""
        levels = []
        for k, lm in enumerate(self.levels):
            entry: dict[str, Any] = {"level": lm.level}
            tile = {x: t for x, t in zip(self.loops, lm.tile) if t is not None}
            if k > 0 and tile:
                entry["tile"] = tile
            entry["order"] = list(lm.order)
            if lm.spatial:
                entry["spatial"] = list(lm.spatial)
            if lm.wavefront:
                entry["wavefront"] = list(lm.wavefront)
            entry["keep"] = list(lm.keep)
            levels.append(entry)
        out: dict[str, Any] = {"kernel": self.kernel}
        if len(self.mapped_nests) > 1:
            out["nests"] = list(self.mapped_nests)
        else:
            out["nest"] = self.nest
        if self.schedule:
            out["schedule"] = {e.statement: dict(zip(e.loops, e.exprs)) for e in self.schedule}
        if self.expand:
            out["expand"] = dict(self.expand)
        out["levels"] = levels
        return out


# --------------------------------------------------------------------------- the nest


def nest_loops(kernel: ir.Kernel, nest: int) -> tuple[str, ...]:
    """Distinct iterator names of ``kernel.nests()[nest]``, in order of first appearance.

    ``for k { for i { .. } for i, j { .. } }`` -> ``("k", "i", "j")``.
    """
    out: list[str] = []

    def walk(nodes: Iterable[ir.Node]) -> None:
        for node in nodes:
            if isinstance(node, ir.Loop):
                if node.var not in out:
                    out.append(node.var)
                walk(node.body)
            elif isinstance(node, ir.If):
                walk(node.then)
                walk(node.orelse)

    walk((kernel.nests()[nest],))
    return tuple(out)


def nest_tensors(kernel: ir.Kernel, nest: int) -> tuple[str, ...]:
    """The tensors the statements of nest ``nest`` read or write, in declaration order."""
    used: set[str] = set()
    for ctx in kernel.statements():
        if ctx.nest == nest:
            used.add(ctx.stmt.target.tensor)
            used.update(r.tensor for r in ir.reads_of(ctx.stmt))
    return tuple(d.name for d in kernel.decls if d.name in used)


def loop_extents(kernel: ir.Kernel, nest: int, params: MappingT[str, int], *,
                 model: KernelModel | None = None) -> dict[str, int]:
    """Bounding-box extent (max - min + 1) of each loop over the nest's statement instances.

    A loop no statement instance runs (an empty range at these sizes) has extent 0.
    Computed once per kernel object, nest and parameter values; ``model`` (the
    kernel's :class:`~polymap.poly.KernelModel`) saves building it.
    """
    key = ("loop_extents", nest, tuple(sorted(dict(params).items())))
    return dict(cached(kernel, key, lambda: _loop_extents(kernel, nest, params, model)))


def mapping_loop_extents(kernel: ir.Kernel, mapping: Mapping, params: MappingT[str, int], *,
                         model: KernelModel | None = None) -> dict[str, int]:
    """:func:`loop_extents` of the loops of ``mapping``: for a schedule or fused nests, the
    extents of the new loops over the images of the statements' domains."""
    if not mapping.schedule and len(mapping.mapped_nests) == 1:
        return loop_extents(kernel, mapping.nest, params, model=model)
    if model is None or model.kernel is not kernel:
        model = kernel_model(kernel)
    key = ("mapping_extents", mapping.mapped_nests, mapping.loops, mapping.schedule,
           tuple(sorted(dict(params).items())))
    return dict(cached(kernel, key, lambda: mapping_extents(model, mapping, params)))


def _loop_extents(kernel: ir.Kernel, nest: int, params: MappingT[str, int],
                  model: KernelModel | None) -> dict[str, int]:
    if model is None or model.kernel is not kernel:
        model = kernel_model(kernel)
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    for st in model.nest_statements(nest):
        domain = fix_params(st.domain, model, params)
        if domain.is_empty():
            continue
        for pos, name in enumerate(st.loops):
            lo = domain.dim_min_val(pos).to_python()
            hi = domain.dim_max_val(pos).to_python()
            low[name] = min(low.get(name, lo), lo)
            high[name] = max(high.get(name, hi), hi)
    return {x: (high[x] - low[x] + 1 if x in low else 0) for x in nest_loops(kernel, nest)}


# --------------------------------------------------------------------------- numbers


def resolved_tile(mapping: Mapping, level_index: int, extents: MappingT[str, int]) -> dict[str, int]:
    """Level ``level_index``'s tile in numbers: None becomes the loop's extent, and a
    tile larger than its loop is clipped to it (it covers the whole loop)."""
    return {x: extents[x] if t is None else min(t, extents[x])
            for x, t in mapping.tile(level_index).items()}


def trip_counts(mapping: Mapping, level_index: int, extents: MappingT[str, int]) -> dict[str, int]:
    """How many tiles of the next inner level each loop at level ``level_index`` walks,
    in the level's order: ``ceil(tile_l / tile_{l+1})``, at most (edge tiles walk fewer).

    The innermost level's loops walk single iterations: their trip count is the tile.
    ``extents`` (from :func:`loop_extents`) resolves tiles that are the whole loop.
    """
    outer = resolved_tile(mapping, level_index, extents)
    if level_index + 1 < len(mapping.levels):
        inner = resolved_tile(mapping, level_index + 1, extents)
    else:
        inner = {x: 1 for x in mapping.loops}
    return {x: ceil(outer[x] / inner[x]) if inner[x] else 0 for x in mapping.levels[level_index].order}
