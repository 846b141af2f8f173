"""Exact counts of a mapping: fills, writebacks, reads, updates, footprints.

Implements ``mapping.md`` ("What the counts mean") with ISL set operations
on the residency relations of :mod:`polymap.passes.counting.residency` and barvinok
cardinality. For level ``l``, tensor ``X`` kept there, ``D = held``::

    stays      = |D| - |D & prev.D|                        (a stay of e starts at r)
    fills      = stays - (|write_first| - |write_first & prev.D|)   (not born by a plain write)
    writebacks = |{ (end of the stay, e) : e written during the stay }|
                 (= stays when every residency holding e writes it)
    reads      = fills of the nearest inner levels keeping X, one read per
                 (parent instance, step, element) (multicast), or one per
                 read reference per statement instance at the innermost keeper
    updates    = writebacks of the nearest inner keeper, or one per write per
                 statement instance at the innermost keeper
    footprint  = max over residencies of sum_X |D_X(r)|

The backing store (level 0) has reads and updates only. Every count is a
piecewise quasi-polynomial in the kernel's parameters; with ``params``
given the relations are built with the numbers substituted for the
parameters (much faster) unless ``symbolic`` asks for the formulas too.
Counting ``|A| - |A & B|`` instead of ``|A - B|`` keeps barvinok away from
the many disjuncts a difference splits into; the difference itself is only
built for multicast (spatial children). Footprints are numbers even for
``symbolic``. This module's :func:`count_mapping`
is the stable entry point later passes (closed forms, mapping search) build on; it
takes the fast exact path (:mod:`polymap.passes.counting.fastcount`) where that applies
and :func:`isl_count_mapping`, the relations above, otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass

from polymap.islcheck import isl
from polymap.poly import KernelModel, count, isl_name, points, to_int
from polymap.passes.counting.counts import COUNT_NAMES, Counts, LevelCounts, TensorCounts
from polymap.passes.counting.fastcount import fast_path
from polymap.passes.counting.footprint import enumerable, level_footprint
from polymap.passes.counting.residency import LevelResidency, Residencies, residencies
from polymap.passes.schedule.tiling import TimeDim
from polymap.driver import param_values
from polymap.machine.arch import Architecture
from polymap.mapping.model import Mapping
from typing import Mapping as MappingT, Union
from polymap.poly import IslObject

#: A count in the parameters, as barvinok gives it.
Quasi = Union[isl.PwQPolynomial, isl.UnionPwQPolynomial]

# --------------------------------------------------------------------------- helpers


def _card(obj: IslObject) -> Quasi:
    """Barvinok count of a set or a map (all pairs)."""
    return count(obj)


def _card_by_points(obj: IslObject) -> Quasi:
    """The same count by enumerating the points (parameters fixed): ``isl_set_count_val``.

    Exact like barvinok; much faster on the skewed, wavefront tilings of a
    schedule, whose relations carry many divisions, at the sizes such
    mappings are counted (barvinok took 100 s where this takes a fraction).
    """
    s = obj.wrap() if isinstance(obj, isl.Map) else obj
    n = s.count_val().to_python()
    names = [s.get_space().get_dim_name(isl.dim_type.param, k) for k in range(s.dim(isl.dim_type.param))]
    return isl.PwQPolynomial(f"[{', '.join(names)}] -> {{ {n} }}")


def _formula_text(pw: isl.PwQPolynomial | isl.UnionPwQPolynomial) -> str:
    return str(pw.coalesce()) if hasattr(pw, "coalesce") else str(pw)


def _keepers(mapping: Mapping, tensor: str) -> list[int]:
    """Levels keeping ``tensor``, outermost first (level 0 always)."""
    return [l for l, lm in enumerate(mapping.levels) if l == 0 or tensor in lm.keep]


def _previously_held(lr: LevelResidency, tensor: str) -> isl.Map:
    """``r -> e``: e is held in the residency before r (of the same instance)."""
    return lr.next.reverse().apply_range(lr.tensor(tensor).held)


def _writeback_ends(lr: LevelResidency, tensor: str) -> isl.Set:
    """``[r -> e]``: e leaves after residency r at the end of a stay in which it was written."""
    t = lr.tensor(tensor)
    leaving = t.held.subtract(lr.next.apply_range(t.held))
    ident = isl.Map.identity(t.held.range().get_space().map_from_set())
    # a write at r_w is sent back when its stay ends: the first leaving point at or after r_w
    step = lr.not_before.product(ident)
    step = step.intersect_domain(t.written.wrap()).intersect_range(leaving.wrap())
    return step.lexmin().range()


def _residency_order(lr: LevelResidency) -> dict[tuple, dict[tuple, int]]:
    """Per instance of the level (its spatial coordinates), each residency's place in time order."""
    order: dict[tuple, dict[tuple, int]] = {}
    for r in sorted(points(lr.points)):
        inst = tuple(r[j] for j in lr.spatial)
        seq = order.setdefault(inst, {})
        seq[r] = len(seq)
    return order


@dataclass(frozen=True)
class Stays:
    """One tensor's stays at one level, walked point by point (parameters fixed): the numbers
    :meth:`_Counter.entering_count`, :meth:`_Counter.fill_count` and :meth:`_Counter.writebacks` give
    by ISL relations, from the ``(residency, element)`` pairs the footprints walk already."""

    entering: int
    """Stays that start: pairs of ``held`` whose element the residency before (``next``) did not hold."""
    born: int
    """... of those, pairs of ``write_first`` (the stay starts with a plain write: no fill)."""
    dirty: int
    """Stays with a write in them: each is written back when it ends."""


def _stays_by_points(lr: LevelResidency, tensor: str, order: dict[tuple, dict[tuple, int]] | None = None) -> Stays:
    """:class:`Stays` of ``tensor`` at the level ``lr``: per instance of the level, its residencies
    in time order (``order``: the level's :func:`_residency_order`, the same for every tensor; the
    order ``next`` follows); per element, the runs of consecutive residencies holding it (stays).

    ``|held| - |held & prev|`` counts the pairs whose element the residency before did not hold (a run
    starts there), ``|write_first| - |write_first & prev|`` the same among ``write_first``'s pairs, and
    ``|_writeback_ends|`` the runs with a write in them: the same numbers as counting those relations
    (``count_val`` scanned heat-3d's skewed, wavefront residencies in 1.6 s of a 4.5 s count; walking
    the pairs once, a fraction of that, issue 9)."""
    t = lr.tensor(tensor)
    depth, spatial = lr.depth, lr.spatial
    order = _residency_order(lr) if order is None else order
    # a residency's coordinates include its instance's: one lookup gives its place in that instance's order
    place = {r: pos for seq in order.values() for r, pos in seq.items()}
    written = set(points(t.written))
    runs: dict[tuple, list[tuple[int, bool]]] = {}
    for p in t.held_points:
        r = p[:depth]
        runs.setdefault((tuple([r[j] for j in spatial]), p[depth:]), []).append((place[r], p in written))
    entering = dirty = 0
    starts: set[tuple] = set()  # (instance, element, place) where a stay starts
    for key, seq in runs.items():
        seq.sort()
        wrote, last = False, None
        for pos, w in seq:
            if last is None or pos != last + 1:  # the residency before did not hold the element
                entering += 1
                starts.add((key, pos))
                dirty += wrote
                wrote = False
            wrote, last = wrote or w, pos
        dirty += wrote
    born = 0
    if not t.write_first.is_empty():
        # write_first's pairs are held pairs (both project the nest's accesses the same way)
        for p in points(t.write_first):
            r = p[:depth]
            born += ((tuple([r[j] for j in spatial]), p[depth:]), place[r]) in starts
    return Stays(entering, born, dirty)


def _same_residencies_as(res: Residencies, outer: int, inner: int) -> bool:
    """Are level ``inner``'s residencies those of level ``outer``, in the same order, so that every stay,
    fill and writeback of a tensor both keep is the same?

    Yes when the time dimensions ``inner`` fixes beyond ``outer``'s are not spatial and are determined by
    ``outer``'s: the projection of ``inner``'s residency points onto ``outer``'s dimensions is injective.
    Each residency of ``inner`` then holds the statement instances of one residency of ``outer``, and the
    lexicographic orders agree (two points differ within ``outer``'s dimensions already). The original
    order's levels below the backing store (tiles of 1: each adds only the phases of the loops some
    statement lacks, fixed by the statement) are one and the same: fdtd-2d's writebacks and successors
    were built four times (issue 9).

    Not the question :func:`~polymap.passes.counting.residency.level_residency` (``alike=``) answers,
    "are ``inner``'s relations ``outer``'s?" (equal depth only, then shared outright): past equal depth
    the relations differ in their dimensions, and only the numbers made of the stays are the same, so
    only those are taken from ``outer`` (:meth:`_Counter._counted_at`; the parent's reads through
    ``inner``'s own ``fills`` and the footprints are not). Equal depth is this rule's case with nothing
    to project, answered without ISL. Nor is it
    :func:`~polymap.passes.counting.residency.same_residencies`, which compares two mappings."""
    a, b = res.levels[outer], res.levels[inner]
    if a.depth > b.depth or any(d.spatial for d in res.dims[a.depth:b.depth]):
        return False
    if b.depth == a.depth:  # the projection drops nothing (level_residency shares the relations too)
        return True
    n = b.points.dim(isl.dim_type.set)
    onto = isl.Map.identity(b.points.get_space().map_from_set()).intersect_domain(b.points)
    return onto.project_out(isl.dim_type.out, a.depth, n - a.depth).is_injective()


def _multicast(fills: isl.Map, dims: tuple[TimeDim, ...], parent: int, child_depth: int) -> isl.Map:
    """Drop the spatial dims that tell apart the children one parent instance serves."""
    drop = [j for j, d in enumerate(dims[:child_depth]) if d.spatial and d.level >= parent]
    for j in reversed(drop):
        fills = fills.project_out(isl.dim_type.in_, j, 1)
    return fills


def _per_instance(res: Residencies, instances: list, tensor: str, kind: str) -> Quasi | None:
    """One access per reference of ``kind`` per statement instance, over the nest."""
    total = None
    for st, c in zip(res.schedule.statements, instances):
        for acc in st.accesses:
            if acc.tensor == tensor and acc.kind == kind:
                total = c if total is None else total.add(c)
    return total


class _Counter:
    """Counts as piecewise quasi-polynomials, then numbers at ``params``."""

    def __init__(self, model: KernelModel, mapping: Mapping, res: Residencies, params: MappingT[str, int],
                 symbolic: bool) -> None:
        self.model, self.mapping, self.res = model, mapping, res
        self.params, self.symbolic = params, symbolic
        #: small enough to count by walking points (footprints too: they are numbers even when symbolic)
        self.enumerable = enumerable(model, mapping, params)
        self.card = _card if symbolic or not self.enumerable else _card_by_points
        self.instances = [_card(tmap.domain()) for tmap in res.time_maps]  # per statement
        self._prev: dict = {}
        self._entering: dict = {}
        self._fills: dict = {}
        self._wb: dict = {}
        self._order: dict = {}  # per level, _residency_order (counts by points)
        self._stays: dict = {}  # per (level, tensor), Stays (counts by points)
        #: per level, the outermost level with the same residencies (:func:`_same_residencies_as`)
        self._group = [0] * len(res.levels)
        for l in range(2, len(res.levels)):
            if not symbolic and _same_residencies_as(res, l - 1, l):
                self._group[l] = self._group[l - 1] or l - 1
        for l in range(1, len(res.levels)):
            self._group[l] = self._group[l] or l

    def _counted_at(self, level: int, tensor: str) -> int:
        """The outermost level keeping ``tensor`` whose residencies are ``level``'s: its stays, fills and
        writebacks are ``level``'s (counted once)."""
        group = self._group[level]
        return next(l for l in range(group, level + 1)
                    if self._group[l] == group and any(t.tensor == tensor for t in self.res.levels[l].tensors))

    def number(self, pw: isl.PwQPolynomial | isl.UnionPwQPolynomial) -> int:
        return 0 if pw is None else to_int(pw, self.params)

    def prev(self, level: int, tensor: str) -> isl.Map:
        key = (level, tensor)
        if key not in self._prev:
            self._prev[key] = _previously_held(self.res.levels[level], tensor)
        return self._prev[key]

    def _starts(self, level: int, tensor: str, rel: isl.Map) -> Quasi:
        """``|rel - prev|`` for ``rel`` within held, as ``|rel| - |rel & prev|``.

        Counting an intersection is much cheaper for barvinok than counting a
        difference (which splits into many disjuncts, worse with parameters).
        """
        both = rel.intersect(self.prev(level, tensor))
        return self.card(rel) if both.is_empty() else self.card(rel).sub(self.card(both))

    def stays(self, level: int, tensor: str) -> Stays:
        """The stays of ``tensor`` at ``level`` walked by points (:func:`_stays_by_points`; the residency
        order walked once per level, not once per tensor)."""
        level = self._counted_at(level, tensor)
        key = (level, tensor)
        if key not in self._stays:
            lr = self.res.levels[level]
            if level not in self._order:
                self._order[level] = _residency_order(lr)
            self._stays[key] = _stays_by_points(lr, tensor, self._order[level])
        return self._stays[key]

    def entering_count(self, level: int, tensor: str) -> Quasi:
        """How many stays of ``tensor`` start (element entering or not from the parent)."""
        level = self._counted_at(level, tensor)
        key = (level, tensor)
        if key not in self._entering:
            if self.card is _card_by_points:
                self._entering[key] = isl.PwQPolynomial(f"{{ {self.stays(level, tensor).entering} }}")
            else:
                self._entering[key] = self._starts(level, tensor, self.res.levels[level].tensor(tensor).held)
        return self._entering[key]

    def fill_count(self, level: int, tensor: str) -> Quasi:
        """Stays that start with a read: entering minus those born by a plain write."""
        level = self._counted_at(level, tensor)
        wf = self.res.levels[level].tensor(tensor).write_first
        entering = self.entering_count(level, tensor)
        if wf.is_empty():
            return entering
        if self.card is _card_by_points:
            return entering.sub(isl.PwQPolynomial(f"{{ {self.stays(level, tensor).born} }}"))
        return entering.sub(self._starts(level, tensor, wf))

    def fills(self, level: int, tensor: str) -> isl.Map:
        """``r -> e``: e enters residency r from the parent (not born by a write)."""
        key = (level, tensor)
        if key not in self._fills:
            t = self.res.levels[level].tensor(tensor)
            rel = t.held.subtract(self.prev(level, tensor))
            self._fills[key] = rel if t.write_first.is_empty() else rel.subtract(t.write_first)
        return self._fills[key]

    def writebacks(self, level: int, tensor: str) -> Quasi:
        level = self._counted_at(level, tensor)
        key = (level, tensor)
        if key not in self._wb:
            t = self.res.levels[level].tensor(tensor)
            if t.written.is_empty():
                self._wb[key] = None
            elif t.written.is_equal(t.held):
                # every residency holding e writes it: every stay ends dirty, and a stay ends
                # (leaves, or is still held after the last residency) once per start
                self._wb[key] = self.entering_count(level, tensor)
            elif self.card is _card_by_points:
                self._wb[key] = isl.PwQPolynomial(f"{{ {self.stays(level, tensor).dirty} }}")
            else:
                self._wb[key] = self.card(_writeback_ends(self.res.levels[level], tensor))
        return self._wb[key]

    def _parent_reads(self, level: int, child: int, tensor: str, depth: int) -> Quasi:
        """Fills of ``child`` seen from ``level``: one read per element and step for all the children."""
        if not any(d.spatial and d.level >= level for d in self.res.dims[:depth]):
            return self.fill_count(child, tensor)  # no children to tell apart: one read per fill
        return self.card(_multicast(self.fills(child, tensor), self.res.dims, level, depth))

    def tensor_counts(self, level: int, tensor: str) -> TensorCounts:
        keepers = _keepers(self.mapping, tensor)
        inner = [c for c in keepers if c > level]
        if inner:
            child = inner[0]
            depth = self.res.levels[child].depth
            reads = self._parent_reads(level, child, tensor, depth)
            updates = self.writebacks(child, tensor)
        else:
            reads = _per_instance(self.res, self.instances, tensor, "read")
            updates = _per_instance(self.res, self.instances, tensor, "write")
        pws = {"reads": reads, "updates": updates}
        if level > 0:
            pws["fills"] = self.fill_count(level, tensor)
            pws["writebacks"] = self.writebacks(level, tensor)
        formulas = ()
        if self.symbolic:
            zero = f"[{', '.join(isl_name(p) for p in self.model.params)}] -> {{ 0 }}"
            formulas = tuple((k, _formula_text(pws[k]) if pws[k] is not None else zero)
                             for k in COUNT_NAMES if k in pws)
        nums = {k: self.number(v) for k, v in pws.items()}
        return TensorCounts(tensor, nums.get("fills"), nums.get("writebacks"), nums["reads"],
                            nums["updates"], formulas)


# --------------------------------------------------------------------------- entry points


def _default_params(model: KernelModel, params: MappingT[str, int]) -> dict[str, int]:
    if params is not None:
        return dict(params)
    return param_values(model.kernel)


def count_mapping(model: KernelModel, mapping: Mapping, arch: Architecture, *, params: dict | None = None,
                  symbolic: bool = False, footprints: tuple[tuple[int, int] | None, ...] | None = None,
                  res: Residencies | None = None) -> Counts:
    """The exact counts of ``mapping`` on ``arch`` (``mapping.md``): the one entry ``cost``, ``compile``
    and ``NAME.json`` count with.

    ``params`` gives the parameter values (None: the kernel's defaults); with
    ``symbolic`` each count also carries its formula (a piecewise
    quasi-polynomial in the parameters, for the given tiles). ``arch`` names
    the levels (``mapping.levels[k]`` is ``arch.levels[k]``).

    Numbers only (not ``symbolic``) of a nest and mapping in the fast path's
    class (:mod:`polymap.passes.counting.fastcount_nest`, checked per mapping) come
    from :func:`~polymap.passes.counting.fastcount.fast_counts`: the same
    :class:`Counts`, equal to the ISL path's (``tests/test_count_paths.py``), in
    milliseconds instead of ISL's seconds. Everything else is counted by
    :func:`isl_count_mapping`.

    ``footprints``: per level, ``(elements, bytes)`` at ``params`` already known (from a fit check:
    :func:`~polymap.passes.counting.fit.fit_check`, or a remembered mapping's
    :func:`~polymap.passes.counting.fit.footprints_and_fast_counts`, which count them the same way),
    not counted again; None entries are counted. ``res``: the mapping's residencies at ``params``, built
    already (:class:`~polymap.passes.counting.fit.FitCheck`), not built again.
    """
    if not symbolic:
        # one evaluation: the counts where exact; in the class but inexact (an edge tile idles a spatial
        # instance), the footprints still are
        fast, fast_footprints = fast_path(model, mapping, arch, params=params)
        if fast is not None:
            return fast
        if fast_footprints is not None:
            footprints = fast_footprints
    return isl_count_mapping(model, mapping, arch, params=params, symbolic=symbolic, footprints=footprints,
                             res=None if symbolic else res)


def isl_count_mapping(model: KernelModel, mapping: Mapping, arch: Architecture, *, params: dict | None = None,
                      symbolic: bool = False, footprints: tuple[tuple[int, int] | None, ...] | None = None,
                      res: Residencies | None = None) -> Counts:
    """:func:`count_mapping` by the ISL path alone (residency relations, barvinok or point walks), for any
    mapping: what the fast path is checked against, and what recounts a search's winners. ``footprints``:
    every level's ``(elements, bytes)`` known already (:func:`~polymap.passes.counting.fastcount.fast_path`),
    not counted again; ``res``: the residencies at ``params`` (numbers only), not built again."""
    values = _default_params(model, params)
    if res is None or symbolic:
        res = residencies(model, mapping, params=None if symbolic else values)
    return assemble_counts(model, mapping, arch, res, _Counter(model, mapping, res, values, symbolic),
                           values, symbolic=symbolic, footprints=footprints)


def assemble_counts(model: KernelModel, mapping: Mapping, arch: Architecture | None, res: Residencies,
                    counter: _Counter, values: dict, *, symbolic: bool = False,
                    footprints: tuple[tuple[int, int] | None, ...] | None = None) -> Counts:
    """Every level's counts from ``counter`` (one per counting convention), in the shape of :class:`Counts`;
    ``footprints`` (per level) instead of counting them."""
    names = tuple(t.tensor for t in res.events)
    levels = []
    for l, lm in enumerate(mapping.levels):
        kept = names if l == 0 else tuple(x for x in names if x in lm.keep)
        tensors = tuple(counter.tensor_counts(l, x) for x in kept)
        if l == 0:
            fp = (None, None)
        elif footprints is not None and footprints[l] is not None:
            fp = footprints[l]
        else:
            fp = level_footprint(model, res.levels[l], values, by_points=counter.enumerable)
        name = arch.levels[l].name if arch is not None else lm.level
        levels.append(LevelCounts(name, l, tensors, fp[0], fp[1]))
    inst = None
    for c in counter.instances:
        inst = c if inst is None else inst.add(c)
    return Counts(model.kernel.name, tuple(sorted(values.items())), counter.number(inst), tuple(levels),
                  _formula_text(inst) if symbolic and inst is not None else None, mapping)
