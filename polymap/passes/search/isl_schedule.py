"""Candidates from isl's scheduler: skewed, shifted, fused schedules turned into mappings.

isl's scheduler (Pluto-like: outer coincidence, maximal permutable bands)
gets the nest's conflicts (every pair of instances touching one element, one
of them writing, source first in the original order) as validity,
proximity (reuse close in time) and coincidence (parallel loops). Its flat
schedule becomes one ``schedule`` entry per statement, loops ``s0, s1, ...``
shared by all statements (so the sweeps of a time step are fused)::

    seidel-2d   relax[t, i, j] -> [t, t + i, 2t + i + j]
      ->  schedule: {relax: {s0: t, s1: t + i, s2: 2*t + i + j}}
    jacobi-2d   to_b[t, i, j] -> [t, 2t + i, 2t + j], to_a[..] -> [t, 1 + 2t + i, 1 + 2t + j]

The outermost band is permutable: it is tiled in the new coordinates at the
cache levels (tile sizes from a few shapes, ranked by compile's exact
counts), its outer coincident loops run in parallel, and when none is
coincident the tiles of its first two loops are walked by wavefront (the
tiles of one diagonal are independent). Nothing of isl's view is trusted:
every candidate goes through compile's exact check like the others.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace
from typing import Mapping as MappingT

from polymap.islcheck import isl
from polymap.mapping.model import LevelMapping, Mapping, nest_tensors
from polymap.mapping.schedule import ScheduleEntry, coords_map, moves_statements, schedule_entry
from polymap.passes.legality.legality import is_legal
from polymap.passes.schedule.schedule_order import conflict_pairs
from polymap.passes.counting.execution import Steps, reduces, walk_steps
from polymap.passes.counting.footprint import ENUMERATION_LIMIT
from polymap.machine.arch import Architecture
from polymap.poly import KernelModel, nest_instances

#: Nests with more statements are not given to the scheduler (adi's 14 took seconds, and
#: compile must stay within a few).
MAX_STATEMENTS = 8

#: Statement instances up to which isl candidates beyond the counting budget are counted to rank
#: them (skewed tiles count slowly: jacobi-2d's at 58,000 instances took 94 s on a loaded core).
RANKING_LIMIT = 20_000

#: Nests of several statements deeper than this are not given to the scheduler: its time grows
#: exponentially with the depth when statements depend on each other (heat-3d, 4 deep, 2 s of CPU;
#: jacobi-2d with three more loops around it, 7 deep, minutes). No PolyBench nest of several
#: statements is deeper than 4; one statement (conv2d, 7 deep) takes 0.05 s and stays in.
MAX_SHARED_DEPTH = 4

#: Tile extents tried for the band's loops: (first loop, the loops between, the innermost loop).
TILE_SHAPES = ((8, 64, 64), (16, 32, 32))
#: ... for bands of four loops or more (heat-3d's 8 x 64 x 64 x 64 tiles hold 8 MiB, 16 times L2).
#: Two time steps: heat-3d's skewed space at LARGE has few tiles per diagonal, and the busiest of 2
#: threads (instances per tile counted exactly, dealt round-robin) bounds 2 threads to 1.96x with
#: 2 x 16 tiles, 1.76x with 4 x 16, 1.64x with 8 x 16. The innermost band loop untiled (None) first:
#: a skewed row (``2t + k``) cut at multiples of 128 is split in two pieces at most time steps, each a
#: shorter vector loop with its own peel; whole rows cost heat-3d 25-35% less CPU per core (TSTEPS=100,
#: N=120, one thread: 0.31-0.35 s against 0.41-0.42 s, the original 0.52 s; load 8).
DEEP_TILE_SHAPES = ((2, 16, None), (2, 16, 128))


@dataclass(frozen=True)
class IslSchedule:
    """isl's schedule of one nest: per statement its coordinates; the outer band's shape."""

    entries: tuple[ScheduleEntry, ...]
    loops: tuple[str, ...]
    band: int  # members of the outermost band (its loops are loops[:band])
    coincident: tuple[bool, ...]  # per band member
    constant: tuple[str, ...] = ()  # loops that only order the statements (see distributed)

    @property
    def band_loops(self) -> tuple[str, ...]:
        """The band's loops (the ones tiled), outer first."""
        moving = [x for x in self.loops if x not in self.constant]
        return tuple(moving[:self.band])


def _aff_text(aff: isl.Aff, iterators: tuple[str, ...], params: tuple[str, ...]) -> str | None:
    """``2*t + i + 1`` from an affine ISL expression (None when it has divisions or fractions)."""
    if aff.dim(isl.dim_type.div) or not aff.get_denominator_val().is_one():
        return None
    terms = []
    for kind, names in ((isl.dim_type.in_, iterators), (isl.dim_type.param, params)):
        for j, name in enumerate(names):
            c = aff.get_coefficient_val(kind, j).to_python()
            if c:
                terms.append(name if c == 1 else f"-{name}" if c == -1 else f"{c}*{name}")
    const = aff.get_constant_val().to_python()
    if const or not terms:
        terms.append(str(const))
    text = " + ".join(terms)
    return text.replace("+ -", "- ")


class NoSchedule(Exception):
    """isl's scheduler gave up on a nest (its message says why): the source has no candidate there."""


def isl_schedule(model: KernelModel, nest: int) -> IslSchedule | None:
    """isl's schedule of ``nest`` with the exact conflicts as validity, proximity and coincidence."""
    stmts = model.nest_statements(nest)
    if not stmts or len(stmts) > MAX_STATEMENTS:
        return None
    depth = max(len(s.loops) for s in stmts)
    if len(stmts) > 1 and depth > MAX_SHARED_DEPTH:
        raise NoSchedule(f"not tried: the nest is {depth} loops deep with {len(stmts)} statements, and isl's "
                         f"scheduler is exponential in that depth (polymap tries it up to {MAX_SHARED_DEPTH})")
    ctx = model.context
    domain = isl.UnionSet.empty(ctx.get_space())
    for s in stmts:
        domain = domain.union(isl.UnionSet.from_set(s.domain))
    deps = isl.UnionMap.empty(ctx.get_space())
    for _, _, rel in conflict_pairs(model, stmts):
        deps = deps.union(isl.UnionMap.from_map(rel))
    sc = isl.ScheduleConstraints.on_domain(domain.intersect_params(ctx)).set_context(ctx)
    deps = deps.coalesce()
    sc = sc.set_validity(deps).set_proximity(deps).set_coincidence(deps)
    try:
        schedule = sc.compute_schedule()
    except isl.Error as exc:  # isl's way of saying it found none ("unable to carry dependences")
        raise NoSchedule(f"isl's scheduler found no schedule ({str(exc).splitlines()[0]})") from None
    node = schedule.get_root().get_child(0)
    band, coincident = 0, ()
    if node.get_type() == isl.schedule_node_type.band and node.band_get_permutable():
        band = node.band_n_member()
        coincident = tuple(bool(node.band_member_get_coincident(j)) for j in range(band))
    flat = schedule.get_map()
    taken = set(model.params) | {d.name for d in model.kernel.decls} | {x for s in stmts for x in s.loops}
    entries = []
    n = None
    loops: tuple[str, ...] = ()
    for s in stmts:
        maps: list[isl.Map] = []
        flat.foreach_map(lambda x: maps.append(x) if x.get_tuple_name(isl.dim_type.in_) == s.name else None)
        if len(maps) != 1:
            return None
        m = maps[0]
        width = m.dim(isl.dim_type.out)
        if n is None:
            n = width
            names, k = [], 0
            while len(names) < n:
                if f"s{k}" not in taken:
                    names.append(f"s{k}")
                k += 1
            loops = tuple(names)
        if width != n:
            return None
        pma = isl.PwMultiAff.from_map(m)
        if pma.n_piece() != 1:
            return None
        exprs = []
        for j in range(n):
            pieces: list = []
            pma.get_pw_aff(j).foreach_piece(lambda _set, aff: pieces.append(aff))
            text = _aff_text(pieces[0], s.loops, model.params) if len(pieces) == 1 else None
            if text is None:
                return None
            exprs.append(text)
        entries.append(schedule_entry(model, s.name, loops, tuple(exprs)))
    return IslSchedule(tuple(entries), loops, band, coincident)


def _instances(model: KernelModel, nest: int, params: MappingT[str, int]) -> int:
    if any(p not in params for p in model.params):
        return 0
    return nest_instances(model, nest, params)


def countable(model: KernelModel, nest: int, params: MappingT[str, int] | None) -> bool:
    """Can compile count a skewed, fused or wavefront mapping of ``nest`` exactly at ``params`` within
    its work budget (:data:`RANKING_LIMIT` statement instances, enumerated)? Symbolic: yes.

    The budget is the ranking one, not :data:`ENUMERATION_LIMIT` (what a count *may* enumerate):
    point walks cost about 165 us CPU per instance (jacobi-1d at 20,000 instances: 3.3 s per
    candidate), so at 2,000,000 (jacobi-1d LARGE, 1,998,000) each candidate took minutes; beyond
    the budget they are ranked at :func:`reduced_sizes` instead."""
    return not params or _instances(model, nest, params) <= RANKING_LIMIT


def reduced_sizes(model: KernelModel, nest: int, params: MappingT[str, int]) -> dict[str, int]:
    """``params`` with the largest value halved (ties: the first parameter) until the nest has at
    most :data:`RANKING_LIMIT` instances: where isl candidates beyond the counting budget are
    ranked (``docs/design.md``)."""
    small = dict(params)
    names = [p for p in model.params if p in small]
    while _instances(model, nest, small) > RANKING_LIMIT:
        big = max(names, key=lambda p: (small[p], -names.index(p)))
        if small[big] <= 2:
            break
        small[big] = max(2, small[big] // 2)
    return small


def checked_sizes(model: KernelModel, nest: int, mapping: Mapping, params: MappingT[str, int]) -> dict[str, int]:
    """The sizes compile checks (fits) and ranks ``mapping`` of ``nest`` at: ``params``, or
    :func:`reduced_sizes` for a mapping that moves statements (skewed, fused or wavefront: isl's
    schedules) whose exact counts at ``params`` are beyond the work budget (:func:`countable`).

    The one rule for both sides: the choice ranks isl's candidates by it
    (``choice._rank_beyond_budget``), a cache hit re-checks a remembered mapping by it."""
    values = dict(params)
    if moves_statements(model, mapping) and not countable(model, nest, values):
        return reduced_sizes(model, nest, values)
    return values


def _as_written(model: KernelModel, entry: ScheduleEntry) -> bool:
    """The entry only walks the statement's own iterators in their order (constants between):
    the original order again, which compile's other candidates already cover."""
    moving = [e for e in entry.exprs if not e.lstrip("-").isdigit()]
    return tuple(moving) == model.statement(entry.statement).loops


def _fresh_loop(taken: set[str]) -> str:
    k = 0
    while f"s{k}" in taken:
        k += 1
    return f"s{k}"


def distributed(model: KernelModel, sched: IslSchedule) -> IslSchedule | None:
    """The fused statements distributed over the innermost loop (None for a single statement).

    A constant coordinate (the statement's place among the fused ones) goes in front of the
    innermost loop, so each statement walks it in a loop of its own::

        to_b: [t, 2t + i, 2t + j]        ->  [t, 2t + i, 0, 2t + j]
        to_a: [t, 2t + i + 1, 2t + j + 1] ->  [t, 2t + i + 1, 1, 2t + j + 1]

    Fused in one innermost loop, a statement that reads what the one before it wrote an
    iteration earlier (jacobi-2d's ``to_a`` reads ``B[i][j-1]``) makes every vector load wait for a
    partly overlapping store; distributed, each loop is a plain unit-stride sweep.
    """
    if len(sched.entries) < 2 or not sched.loops:
        return None
    taken = set(model.params) | {d.name for d in model.kernel.decls}
    taken |= {x for e in sched.entries for x in model.statement(e.statement).loops}
    loops: tuple[str, ...] = ()
    for _ in range(len(sched.loops) + 1):  # s0, s1, ... in order again
        loops += (_fresh_loop(taken | set(loops)),)
    moving = [k for k in range(len(sched.loops)) if any(not e.exprs[k].lstrip("-").isdigit() for e in sched.entries)]
    if not moving:
        return None
    cut = moving[-1]  # in front of the innermost loop that moves (trailing constants only order)
    extra = loops[cut]
    renamed = dict(zip(sched.loops, loops[:cut] + loops[cut + 1:]))
    entries = tuple(ScheduleEntry(e.statement, loops, e.exprs[:cut] + (str(q),) + e.exprs[cut:],
                                  e.isl[:cut] + (str(q),) + e.isl[cut:]) for q, e in enumerate(sched.entries))
    return IslSchedule(entries, loops, sched.band, sched.coincident,
                       tuple(renamed[x] for x in sched.constant) + (extra,))


def isl_proposals(model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int] | None, *,
                  to_count: bool = True) -> tuple[list[tuple[str, Mapping]], str | None, float]:
    """:func:`isl_mappings`, why there are none when isl's scheduler gave up (else None), and the wall
    seconds it all took (isl's scheduler and building its candidates: what a user of ``compile`` is
    told the scheduler cost, issue 9)."""
    start = time.perf_counter()
    try:
        found, gave_up = isl_mappings(model, nest, arch, params, to_count=to_count), None
    except NoSchedule as exc:
        found, gave_up = [], str(exc)
    return found, gave_up, time.perf_counter() - start


def isl_mappings(model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int] | None, *,
                 to_count: bool = True) -> list[tuple[str, Mapping]]:
    """Candidate mappings from isl's schedule of ``nest`` (``[(source, mapping)]``; none without a band).

    ``to_count`` false: at any size (for code only; compile counts every candidate it ranks).
    Raises :class:`NoSchedule` when isl's scheduler finds no schedule for the nest."""
    if to_count and params and _instances(model, nest, params) > ENUMERATION_LIMIT:
        return []  # their exact counts (barvinok on skewed tiles) would not finish within a candidate's limit
    sched = isl_schedule(model, nest)
    if sched is None or sched.band < 1 or all(_as_written(model, e) for e in sched.entries):
        return []
    names = arch.level_names
    if len(names) < 3:
        return []
    split = distributed(model, sched)
    out = []
    walks: dict[bool, list[PointWalk]] = {}
    for shape in DEEP_TILE_SHAPES if len(sched.band_loops) >= 4 else TILE_SHAPES:
        m = _tiled(model, nest, sched, names, shape)
        band_tile = dict(zip(m.loops, m.levels[max(1, len(names) - 3)].tile))
        words = "x".join(str(band_tile[x] or "all") for x in sched.band_loops)
        source = f"isl schedule {words}" + (" wavefront" if any(lv.wavefront for lv in m.levels) else "")
        used = sched
        if split is not None:
            apart = _tiled(model, nest, split, names, shape)
            if is_legal(model, apart):  # for every size: the choice does not depend on them
                m, source, used = apart, source + " distributed", split
        key = used is split
        if key not in walks:
            walks[key] = point_walks(model, used)
        for walk in walks[key][1:]:  # the first is the schedule's own order
            walked = _walked(m, walk)
            if is_legal(model, walked):  # for every size, like the distribution above
                m, source = walked, source + f" | points {walk.words}"
                break
        out.append((source, m))
    return out


@dataclass(frozen=True)
class PointWalk:
    """How the innermost tiled level walks the points of one tile: its loop order, and a
    wavefront ``(a, b)`` (diagonals ``a + b``, then ``b``) or none. ``innermost``: the last loop of
    the order that moves (constants after it only order statements); ``chain``: it carries a
    recurrence (a statement reads what an earlier iteration of it wrote, other than through an
    update's accumulator: each iteration waits for the last); ``unit``: every access is invariant
    or unit-stride along it; ``carried``: it carries any conflict at all (conservative);
    ``reduces``: an update's target is invariant along it (one accumulator: each iteration waits for
    the last one's subtraction, through memory when the target's array is also read);
    ``stores_unit``: every written access is invariant or unit-stride along it."""

    order: tuple[str, ...]
    wavefront: tuple[str, ...]
    innermost: str
    chain: bool
    unit: bool
    carried: bool
    reduces: bool = False
    stores_unit: bool = True

    @property
    def rank(self) -> tuple[bool, bool, bool, bool, bool]:
        """Smaller is better: no recurrence, then unit-stride stores, then no accumulator chain, then
        unit stride everywhere, then nothing carried. A strided *read* costs less than an accumulator
        chain (cholesky, N=1000, one thread: ``j`` innermost, ``A[j][k]`` strided, 0.076-0.082 s CPU
        against 0.121-0.142 s with ``k`` innermost); strided *stores* cost more (lu with ``i``
        innermost: 0.48 s against 0.40 s with ``k``)."""
        return (self.chain, not self.stores_unit, self.reduces, not self.unit, self.carried)

    @property
    def words(self) -> str:
        if self.wavefront:
            a, b = self.wavefront
            return f"by diagonals {a} + {b}"
        return "in order " + " ".join(self.order)


def point_walks(model: KernelModel, sched: IslSchedule) -> list[PointWalk]:
    """The schedule's own point order first, then, when its innermost loop carries a recurrence or
    is not unit-stride, the walks of a tile's points that do better on those two, best first.

    Inside a tile of a permutable band every dependence has non-negative distances along every
    band loop, so the points may be walked in another order of the band loops, or by diagonals
    of its last two ``(a, b)``: a dependence along ``b`` alone then has ``a + b`` growing and is
    carried by the diagonal, so the loop over ``b`` carries none. seidel-2d's ``A[i][j-1]``,
    written one iteration earlier, made each point wait for the last (8 additions and a
    division); walked by diagonals its points overlap: 3.2x less CPU. lu's own walk has ``k``
    innermost (``A[k][j]`` strided); ``k`` outermost in the tile and ``j`` innermost
    (right-looking) is unit-stride: 2x less CPU. A permutation is tried with the
    statement-ordering constants where they stand and after every loop (lu's ``l_div`` must
    precede the ``l_acc`` that read it within one ``k``). Nothing here is trusted: each walk is
    checked exactly before it is used (:func:`isl_mappings`), and the first legal one replaces the
    own walk.
    """
    moving = [x for x in sched.loops if x not in sched.constant]
    band = sched.band_loops
    conflicts = _coordinate_pairs(model, sched, chains=False)
    chains = _coordinate_pairs(model, sched, chains=True)

    def walk(order: tuple[str, ...], wave: tuple[str, ...]) -> PointWalk:
        inner = [x for x in order if x not in sched.constant][-1]
        steps = _steps(model, sched, inner, wave)  # one ISL pass, read by the three predicates
        return PointWalk(order, wave, inner, _carried(chains, sched, order, wave, inner),
                         _unit_stride(steps), _carried(conflicts, sched, order, wave, inner),
                         reduces(steps), _unit_stride(steps, stores=True))

    own = walk(sched.loops, ())
    if len(band) < 2 or (not own.chain and own.unit and not own.reduces):
        return [own]
    others = []
    for x in reversed(band[:-1]):  # another band loop innermost, the rest in their order
        again = [y for y in moving if y != x] + [x]
        feed = iter(again)
        others.append(walk(tuple(y if y in sched.constant else next(feed) for y in sched.loops), ()))
        if sched.constant:
            others.append(walk(tuple(again) + sched.constant, ()))
        if sched.constant or len(band) > 2:  # the innermost loop outermost in the tile (right-looking lu)
            first = [band[-1]] + [y for y in moving if y not in (band[-1], x)] + [x]
            others.append(walk(tuple(first) + sched.constant, ()))
    if band[-1] == moving[-1]:
        others.append(walk(sched.loops, (band[-2], band[-1])))
    better = [w for w in others if w.rank[:4] < own.rank[:4]]
    seen: set = set()
    unique = [w for w in sorted(better, key=lambda w: w.rank)
              if (w.order, w.wavefront) not in seen and not seen.add((w.order, w.wavefront))]
    return [own] + unique


def _walked(mapping: Mapping, walk: PointWalk) -> Mapping:
    """``mapping`` with ``walk`` at the level that walks single points (the one above the last)."""
    levels = list(mapping.levels)
    k = len(levels) - 2
    levels[k] = replace(levels[k], order=walk.order, wavefront=walk.wavefront)
    return replace(mapping, levels=tuple(levels))


def _coordinate_pairs(model: KernelModel, sched: IslSchedule, *, chains: bool) -> isl.UnionMap:
    """Pairs of the nest's instances as pairs of points in the schedule's loops, source first in the
    original order: every conflicting pair, or (``chains``) only a write and a later read of its
    value by the same statement, other than through the accumulator of an update (``A[i][j] -=
    ...`` keeps ``A[i][j]`` in a register): the recurrences that serialise a loop."""
    entries = {e.statement: e for e in sched.entries}
    stmts = [model.statement(name) for name in entries]
    coords = {s.name: coords_map(model, s, dict(zip(entries[s.name].loops, entries[s.name].isl)), sched.loops)
              for s in stmts}
    out = isl.UnionMap.empty(model.context.get_space())
    if not chains:
        for src, dst, rel in conflict_pairs(model, stmts):
            out = out.union(isl.UnionMap.from_map(rel.apply_domain(coords[src]).apply_range(coords[dst])))
        return out
    for s in stmts:
        for t in (s,):
            for w in (a for a in s.accesses if a.kind != "read"):
                for r in (a for a in t.accesses if a.kind == "read"):
                    if w.tensor != r.tensor or r.relation.is_equal(w.relation):
                        continue
                    rel = w.relation.apply_range(r.relation.reverse()).intersect(s.schedule.lex_lt_map(t.schedule))
                    if not rel.is_empty():
                        out = out.union(isl.UnionMap.from_map(rel.apply_domain(coords[s.name]).apply_range(coords[t.name])))
    return out


def _keys(loops: tuple[str, ...], order: tuple[str, ...], wave: tuple[str, ...], var: str) -> list[str]:
    """The walk's loop values, outer first, over ISL variables ``var0, var1, ...`` (one per loop)."""
    name = {x: f"{var}{k}" for k, x in enumerate(loops)}
    return [f"{name[x]} + {name[wave[1]]}" if wave and x == wave[0] else name[x] for x in order]


def _carried(conflicts: isl.UnionMap, sched: IslSchedule, order: tuple[str, ...], wave: tuple[str, ...],
             inner: str) -> bool:
    """Do two conflicting instances agree on every loop of the walk before ``inner`` and differ in
    it? Then it carries the conflict (tiles aside: equal elsewhere, they can only be told apart by
    it). Constants after it do not matter: they order statements within one of its iterations."""
    a, b = _keys(sched.loops, order, wave, "a"), _keys(sched.loops, order, wave, "b")
    k = order.index(inner)
    cond = [f"{x} = {y}" for x, y in zip(a[:k], b[:k])] + [f"{a[k]} < {b[k]}"]
    n = len(sched.loops)
    probe = isl.UnionMap(f"{{ [{', '.join(f'a{j}' for j in range(n))}] -> [{', '.join(f'b{j}' for j in range(n))}] : "
                         f"{' and '.join(cond)} }}")
    return not conflicts.intersect(probe.align_params(conflicts.get_space())).is_empty()


def _steps(model: KernelModel, sched: IslSchedule, inner: str, wave: tuple[str, ...]) -> Steps:
    """:func:`polymap.passes.counting.execution.walk_steps` of the schedule's statements."""
    coords = []
    for e in sched.entries:
        st = model.statement(e.statement)
        coords.append((st, coords_map(model, st, dict(zip(e.loops, e.isl)), sched.loops)))
    return walk_steps(model, coords, sched.loops, inner, wave)


def _unit_stride(steps: Steps, *, stores: bool = False) -> bool:
    """Is every access (``stores``: every written one) invariant or unit-stride (last subscript +0 or
    +1, the others fixed) from one iteration of the walk's innermost loop to the next (``steps``:
    :func:`_steps`)?"""
    for _st, acc, deltas in steps:
        if stores and acc.kind != "write":
            continue
        rank = deltas.dim(isl.dim_type.set)
        if rank == 0:
            continue
        zero, name = ["0"] * rank, deltas.get_tuple_name()
        allowed = isl.Set(f"{{ {name}[{', '.join(zero)}]; {name}[{', '.join(zero[:-1] + ['1'])}] }}")
        if not deltas.is_subset(allowed.align_params(deltas.get_space())):
            return False
    return True


def _tiled(model: KernelModel, nest: int, sched: IslSchedule, names: tuple[str, ...],
           shape: tuple[int, int, int | None]) -> Mapping:
    """The schedule's band tiled by ``shape`` (first loop, loops between, innermost loop; None: the
    whole loop) at the level above the innermost two (L2 on ``host``), points below; walked by diagonals one level up
    when no band loop is parallel."""
    loops = sched.loops
    band = sched.band_loops
    n = len(names)
    first, middle, last = shape
    extent = {x: first if k == 0 else last if k == len(band) - 1 else middle for k, x in enumerate(band)}
    tile = tuple(extent.get(x) for x in loops)
    wave: tuple[str, ...] = ()
    if not any(sched.coincident) and len(band) >= 2:
        wave = (band[0], band[1])
    tiled = max(1, n - 3)  # the level holding one tile of the band (L2 on host); below: points
    lms = []
    for l in range(n):
        t = (None,) * len(loops) if l < tiled else tile if l < n - 1 else (1,) * len(loops)
        lms.append(LevelMapping(names[l], t, loops, (), nest_tensors(model.kernel, nest),
                                wave if l == tiled - 1 else ()))
    return Mapping(model.kernel.name, nest, loops, tuple(lms), (), sched.entries)


def describe(mapping: Mapping, model: KernelModel) -> list[str]:
    """The schedule of a mapping in words: which statements were skewed, shifted or fused, and why legal."""
    if not mapping.schedule:
        return []
    lines = []
    for e in mapping.schedule:
        st = model.statement(e.statement)
        kinds = set()
        for expr in e.exprs:
            if len([x for x in st.loops if re.search(rf"\b{x}\b", expr)]) > 1:
                kinds.add("skewed")
            if re.search(r"[+-] \d+$", expr) and re.search(r"[A-Za-z_]", expr):
                kinds.add("shifted")
        where = ", ".join(f"{x} = {v}" for x, v in zip(e.loops, e.exprs))
        lines.append(f"{e.statement}({', '.join(st.loops)}) runs at ({where})"
                     + (f": {' and '.join(sorted(kinds))}" if kinds else ""))
    if len(mapping.schedule) > 1:
        lines.append("the statements share the loops " + ", ".join(mapping.loops)
                     + ": their instances are interleaved (fused) along them")
        for k, x in enumerate(mapping.loops):
            values = [e.exprs[k] for e in mapping.schedule]
            if all(v.lstrip("-").isdigit() for v in values) and len(set(values)) > 1 and k + 1 < len(mapping.loops):
                first = " then ".join(e.statement for e in sorted(mapping.schedule, key=lambda e: int(e.exprs[k])))
                lines.append(f"{x} only orders them: within one iteration of the loops before it, {first} each "
                             f"run their own loop over {', '.join(mapping.loops[k + 1:])} (distributed)")
    for k, lv in enumerate(mapping.levels):
        if k == len(mapping.levels) - 2 and not lv.wavefront and lv.order != mapping.loops:
            lines.append(f"at {lv.level} the points of each tile are walked in the order {', '.join(lv.order)} "
                         f"(inside a tile of a permutable band any order of its loops keeps every dependence)")
        if not lv.wavefront:
            continue
        a, b = lv.wavefront
        if k == len(mapping.levels) - 2:  # it walks single points
            lines.append(f"at {lv.level} the points of each tile are walked by diagonals {a} + {b}, then {b} "
                         f"(a dependence along {b} alone is then carried by the diagonal, not by the loop over {b})")
        else:
            lines.append(f"at {lv.level} the tiles of {a} and {b} are walked by diagonals {a} + {b}: "
                         f"the tiles of one diagonal do not depend on each other")
    lines.append("legal: every read still gets its value from the same write and every element keeps "
                 "its last write (checked exactly with the dependences, not taken from the scheduler)")
    return lines
