"""Is a new schedule of a loop nest legal? Exact, with witnesses.

Formal statement: the new schedule is legal iff every read sees the same
writer as in the original program (or still none), and every element has
the same final writer. Only the nest is rescheduled; statements outside it
keep their place, so comparing the nest alone is exact.

Definition, by ISL dataflow (reads from writes) and final writers under
the original and the new (mapped) schedule: they are equal iff the relations
A-D of :func:`~polymap.passes.legality.reaching_writers.violated_relations` are
empty. That needs a dataflow analysis under the new, tiled schedule, which
is slow; it stays as the reference the tests compare with.

Method, in three steps, each exact:

1. when the new schedule keeps every memory-based dependence (every
   conflicting pair, :func:`~polymap.passes.schedule.schedule_order.keeps_conflicts`)
   in its original order, per element writes keep their order and reads
   their place among them: legal, no dataflow at all;
2. else :func:`~polymap.passes.legality.reaching_writers.keeps_writers` decides with
   the original dataflow and the new order of conflicting pairs only (a
   flipped pair need not change any writer: a WAR against a dead value...);
3. only an illegal schedule asks for
   :func:`~polymap.passes.legality.reaching_writers.writer_changes`, the same
   relations in full, and turns each (kind, source, sink, tensor) into one
   violation with the closest witness pair (:mod:`polymap.passes.legality.witness`)::

     RAW  w -> r, the read now runs first       "... the new order runs the read first"
     WAR  r -> w2, a later write now comes first "... so the read sees the wrong value"
     WAW  w2 -> w, an earlier write now lands between w and its reader r
     WAW  x -> f, x is now the last write of an element instead of f

The original schedule's dataflow, the dependences and the new order of
each pair of statements are computed once (cached per model / per check).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping as MappingT, Sequence

from polymap.islcheck import isl
from polymap.machine.arch import Architecture
from polymap.passes.counting.fit import fit_problems
from polymap.poly import KernelModel, StatementModel, cached
from polymap.passes.legality import witness as W
from polymap.passes.dependences.dependences import maps_of, memory_based
from polymap.passes.legality.reaching_writers import (
    keeps_writers,
    original_dataflow,
    writer_changes,
)
from polymap.passes.schedule.schedule_order import ScheduleOrder, conflict_pairs, keeps_conflicts
from polymap.mapping.model import Mapping
from polymap.passes.dependences.loop_classes import loop_classes, skew_hint
from polymap.mapping.schedule import coords_map, new_coordinates, statement_coords
from polymap.passes.schedule.tiling import mapped_schedule
from polymap.passes.schedule.tiling import MappedSchedule
from polymap.passes.dependences.dependences import Dependence
from polymap.passes.dependences.loop_classes import LoopClass
from polymap.passes.legality.reaching_writers import Dataflow


@dataclass(frozen=True)
class Violation:
    """One violated dependence (or a capacity / fan-out problem), JSON-ready."""

    kind: str  # RAW | WAR | WAW | capacity | fanout
    reason: str
    source: str = ""
    sink: str = ""
    tensor: str = ""
    witness: W.Witness | None = None
    extra: tuple[tuple[str, object], ...] = ()

    def to_json(self) -> dict:
        if self.kind in ("capacity", "fanout"):
            return {"kind": self.kind, **dict(self.extra), "reason": self.reason}
        out = {"kind": self.kind, "source": self.source, "sink": self.sink, "tensor": self.tensor}
        if self.witness is not None:
            out["witness"] = self.witness.to_json()
        out.update(dict(self.extra))
        out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class Verdict:
    """The answer of ``check``: legal or not, why, and advice."""

    legal: bool
    violations: tuple[Violation, ...] = ()
    notes: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict, compare=False)


def _groups(model: KernelModel, rel: isl.UnionMap, near: tuple[int, int]) -> dict[tuple, list[isl.Map]]:
    """The maps of tagged ``rel`` per (statement at ``near[0]``, statement at ``near[1]``, tensor)."""
    out: dict[tuple, list[isl.Map]] = {}
    for m in maps_of(rel):
        if m.is_empty():
            continue
        lv = W.leaves(m.wrap().get_space())
        (s, tag), (t, _) = lv[near[0]], lv[near[1]]
        out.setdefault((s, t, W.tensor_of(model, tag)), []).append(m)
    return out


def _witnessed(model: KernelModel, rel: isl.UnionMap, near: tuple[int, int], given: MappingT[str, int] , seen: set, kind: str, make: Callable[[W.Choice, str, tuple[int, ...], str], Violation]) -> list[Violation]:
    """One violation per group of ``rel`` not ``seen`` yet (for ``kind``), phrased by ``make``."""
    out = []
    for (s, t, tensor), maps in sorted(_groups(model, rel, near).items()):
        if (kind, s, t, tensor) in seen:
            continue
        seen.add((kind, s, t, tensor))
        choice = W.choose(model, maps, given, near=near)
        assert choice is not None, "a non-empty relation has a point"
        params = dict(choice.params)
        el = W.element_of(model, choice.tags[near[0]], choice.instances[near[0]], params)
        out.append(make(choice, tensor, el, W.element_text(tensor, el)))
    return out


def _violations(model: KernelModel, stmts: Sequence[StatementModel], order: ScheduleOrder, given: MappingT[str, int] ) -> list[Violation]:
    """The violations of :func:`~polymap.passes.legality.reaching_writers.writer_changes`, one per
    (kind, source, sink, tensor), each with the closest witness pair."""
    ch = writer_changes(model, stmts, order)
    old = original_dataflow(model, tuple(stmts))
    seen: set = set()

    def raw(c: W.Choice, tensor: str, el: tuple[int, ...], text: str) -> Violation:
        w, r = c.instances
        return Violation("RAW", W.raw_read_first(w, r, text), w.statement, r.statement, tensor,
                         W.Witness(w, r, tensor, el, c.params))

    def war(c: W.Choice, tensor: str, el: tuple[int, ...], text: str) -> Violation:
        r, w2 = c.instances
        return Violation("WAR", W.war_write_first(r, w2, text), r.statement, w2.statement, tensor,
                         W.Witness(r, w2, tensor, el, c.params))

    def between(c: W.Choice, tensor: str, el: tuple[int, ...], text: str) -> Violation:
        w, r, w2 = c.instances
        return Violation("WAW", W.waw_in_between(w, r, w2, text), w2.statement, w.statement, tensor,
                         W.Witness(w2, w, tensor, el, c.params))

    def final(c: W.Choice, tensor: str, el: tuple[int, ...], text: str) -> Violation:
        x, f = c.instances
        return Violation("WAW", W.waw_final(x, f, text), x.statement, f.statement, tensor,
                         W.Witness(x, f, tensor, el, c.params))

    # (4) splits by which pair flips: the read and a later write, or a write before its writer
    war_between = old.order.keep(ch.between.domain_factor_range())
    out = _witnessed(model, ch.read_first, (0, 1), given, seen, "RAW", raw)
    out += _witnessed(model, ch.input_overwritten.union(war_between), (0, 1), given, seen, "WAR", war)
    out += _witnessed(model, _write_before_writer(old, ch.between), (2, 0), given, seen, "WAW", between)
    out += _witnessed(model, ch.final_swaps, (0, 1), given, seen, "WAW", final)
    return out


def _write_before_writer(old: Dataflow, between: isl.UnionMap) -> isl.UnionMap:
    """The triples ``[w -> r] -> w2`` of ``between`` where ``w2`` came before ``w`` originally."""
    pairs = old.order.keep(between.domain_factor_domain(), flip=True)  # w -> w2 with w2 <o w
    return between.intersect(old.flows.domain_map().apply_range(pairs))


def compact_maps(mapped: MappedSchedule) -> dict[str, isl.Map]:
    """The mapped schedule without the time dimensions that are 0 for every statement.

    A coordinate at level ``l`` is 0 when the next level's tile of its loop
    is whole (``None``); dropping a dimension that is equal for all instances
    keeps the lexicographic order of every pair, and spares ISL the
    existential variables of its floor/mod expression.
    """
    return _without(mapped, _whole_dims(mapped))


def _whole_dims(mapped: MappedSchedule) -> set[int]:
    """The coordinates :func:`compact_maps` drops: 0 for every instance (the next level's tile is whole)."""
    mapping, n = mapped.mapping, len(mapped.mapping.levels)
    return {d for d, td in enumerate(mapped.dims) if td.kind == "coord" and td.level < n - 1
            and mapping.levels[td.level + 1].tile[list(mapping.loops).index(td.loop)] is None}


def _without(mapped: MappedSchedule, drop: set[int]) -> dict[str, isl.Map]:
    """Every statement's time map without the dimensions ``drop``, each run of them in one projection
    (last run first: each projection simplifies a map with divisions again)."""
    runs: list[list[int]] = []
    for d in sorted(drop):
        if runs and runs[-1][0] + runs[-1][1] == d:
            runs[-1][1] += 1
        else:
            runs.append([d, 1])
    out = {}
    for name, m in mapped.maps:
        for first, count in reversed(runs):
            m = m.project_out(isl.dim_type.out, first, count)
        out[name] = m
    return out


def agreeing_loops(model: KernelModel, mapped: MappedSchedule) -> frozenset[str]:
    """The loops of the mapping on which the two instances of every conflicting pair of the nest (same
    element, one of them writing) have the same coordinate: both statements have the loop, and its
    value (the iterator, or a schedule entry's expression) is equal. conv2d's only conflicts are the
    updates of one ``O[n, k, p, q]``: ``n, k, p, q`` agree, ``c, r, s`` differ.

    Every time dimension of such a loop (its phase, which is "has the loop" for both; its tile index
    and offset at every level, functions of the coordinate alone) is then equal for every such pair,
    so the order of any two conflicting instances is decided by the other dimensions
    (:func:`order_maps`). Computed once per model, statements and coordinates."""
    mapping, stmts = mapped.mapping, mapped.statements
    coords = {s.name: statement_coords(mapping, s) for s in stmts}
    key = ("agreeing loops", tuple(mapping.loops), tuple((s.name, tuple(sorted(coords[s.name].items()))) for s in stmts))
    return cached(model, key, lambda: _agreeing(model, stmts, coords, tuple(mapping.loops)))


def _agreeing(model: KernelModel, stmts: tuple[StatementModel, ...], coords: dict[str, dict[str, str]],
              loops: tuple[str, ...]) -> frozenset[str]:
    pairs = conflict_pairs(model, stmts)
    values: dict[tuple[str, str], isl.Map] = {}  # S[i] -> [coordinate on x], built once per statement and loop

    def value(s: str, x: str) -> isl.Map:
        if (s, x) not in values:
            values[(s, x)] = coords_map(model, model.statement(s), {x: coords[s][x]})
        return values[(s, x)]

    def agree(s: str, t: str, rel: isl.Map, x: str) -> bool:
        """Do the two instances of every pair of ``rel`` (``S[i] -> T[j]``) have one coordinate on ``x``?"""
        if x not in coords[s] or x not in coords[t]:
            return False  # a statement that lacks the loop is ordered against it by its phase: it decides
        both = rel.apply_domain(value(s, x)).apply_range(value(t, x))  # [u] -> [v] per pair
        return both.is_subset(isl.Map.identity(both.get_space()))

    return frozenset(x for x in loops if all(agree(s, t, rel, x) for s, t, rel in pairs))


def order_maps(model: KernelModel, mapped: MappedSchedule) -> dict[str, isl.Map]:
    """:func:`compact_maps` also without the dimensions of the :func:`agreeing_loops`: the maps that
    order every conflicting pair as the whole mapped schedule does (on those dimensions the two
    instances of such a pair are equal), and the only pairs legality orders are conflicting ones (or
    one instance with itself): :func:`~polymap.passes.schedule.schedule_order.keeps_conflicts` orders
    the pairs of :func:`~polymap.passes.schedule.schedule_order.conflict_pairs`, and
    :func:`~polymap.passes.legality.reaching_writers.keeps_writers` flows, write-read and
    write-write pairs of one element. A dimension walking tiles by diagonals (``a + b``) goes only
    when both of its loops agree.

    Their floor/mod dimensions are what ISL's order of a pair costs: conv2d's orders (7 loops, tiled
    at every level) without ``n, k, p, q``."""
    agree = agreeing_loops(model, mapped)
    drop = _whole_dims(mapped)
    if agree:
        waves = [tuple(getattr(lv, "wavefront", ())) for lv in mapped.mapping.levels]
        for d, td in enumerate(mapped.dims):
            if td.kind not in ("coord", "phase") or td.loop not in agree:
                continue
            wave = waves[td.level]
            if td.kind == "coord" and wave and td.loop == wave[0] and wave[1] not in agree:
                continue  # the diagonal a + b: equal only when b agrees too
            drop.add(d)
    return _without(mapped, drop)


def schedule_violations(model: KernelModel, mapped: MappedSchedule, *, params: MappingT[str, int] | None = None
                        ) -> list[Violation]:
    """Every way the mapped schedule ``mapped`` (a :class:`MappedSchedule`) changes the results."""
    stmts, maps = mapped.statements, compact_maps(mapped)
    if keeps_conflicts(model, stmts, maps):
        return []
    order = ScheduleOrder(maps)  # shared: keeps_writers fills its cache, the witnesses reuse it
    if keeps_writers(model, stmts, maps, order=order):
        return []
    return _violations(model, stmts, order, params)


def is_legal_schedule(model: KernelModel, mapped: MappedSchedule) -> bool:
    """True iff the mapped schedule keeps every reaching and final writer (symbolically), ordering
    the pairs by the dimensions that can tell them apart (:func:`order_maps`)."""
    maps = order_maps(model, mapped)
    return keeps_conflicts(model, mapped.statements, maps) or keeps_writers(model, mapped.statements, maps)


# --------------------------------------------------------------------------- spatial loops


def _step_at(mapped: MappedSchedule, d: int, like: isl.Map) -> isl.Map:
    """``[t] -> [u]``: times that agree on mapped dims ``< d`` and differ at ``d``."""
    n = len(mapped.dims)
    t = ", ".join(f"t{k}" for k in range(n))
    u = ", ".join(f"u{k}" for k in range(n))
    cond = " and ".join([f"t{k} = u{k}" for k in range(d)] + [f"t{d} != u{d}"])
    return isl.Map(f"{{ [{t}] -> [{u}] : {cond} }}").align_params(like.get_space())


def _carried_at(mapped: MappedSchedule, dep: Dependence, d: int) -> isl.Map:
    """The pairs of ``dep`` that agree on mapped dims ``< d`` and differ at ``d``."""
    ma, mb = mapped.map_of(dep.source), mapped.map_of(dep.sink)
    return dep.relation.intersect(ma.apply_range(_step_at(mapped, d, ma)).apply_range(mb.reverse()))


def _time_pairs(mapped: MappedSchedule, dep: Dependence) -> isl.Map:
    """``dep``'s pairs as ``(source time, sink time)``: built once per dependence, so that whether a
    spatial dim carries it is one intersection with :func:`_step_at` (not a composition per dim)."""
    return dep.relation.apply_domain(mapped.map_of(dep.source)).apply_range(mapped.map_of(dep.sink))


def spatial_findings(model: KernelModel, mapped: MappedSchedule, *, params: MappingT[str, int] | None = None
                     ) -> tuple[list[Violation], list[str]]:
    """Dependences carried by spatial loops: violations, and notes for combinable reductions."""
    if not any(dim.spatial for dim in mapped.dims):
        return [], []
    deps = memory_based(model, mapped.statements)
    times = [_time_pairs(mapped, dep) for dep in deps]
    violations, notes, seen = [], [], set()
    for d, dim in enumerate(mapped.dims):
        if not dim.spatial:
            continue
        level = mapped.mapping.levels[dim.level].level
        step = _step_at(mapped, d, times[0]) if times else None
        for dep, pairs in zip(deps, times):
            if pairs.intersect(step.align_params(pairs.get_space())).is_empty():
                continue  # not carried at d
            if dep.reduction:
                note = (f"spatial loop {dim.loop} at level {level} splits the reduction of {dep.source} "
                        f"on {dep.tensor}: the generated code combines the partial results")
                if note not in notes:
                    notes.append(note)
                continue
            key = (dep.kind, dep.source, dep.sink, dep.tensor, d)
            if key in seen:
                continue
            seen.add(key)
            carried = _carried_at(mapped, dep, d)  # the instance pairs, for the witness
            violations.append(_spatial_violation(model, dep, carried, dim.loop, level, params))
    return violations, notes


def _spatial_violation(model: KernelModel, dep: Dependence, carried: isl.Map, loop: str, level: str, params: MappingT[str, int]) -> Violation:
    choice = W.choose(model, [carried], params, tagged=False)
    assert choice is not None, "a non-empty relation has a point"
    (a, b), values = choice.instances, dict(choice.params)
    el = W.element_of(model, dep.source_tag, a, values)
    wit = W.Witness(a, b, dep.tensor, el, choice.params)
    reason = W.spatial_race(a, b, W.element_text(dep.tensor, el), dep.kind, loop, level)
    extra = (("spatial", {"loop": loop, "level": level}),)
    return Violation(dep.kind, reason, dep.source, dep.sink, dep.tensor, wit, extra)


# --------------------------------------------------------------------------- notes


def _effective_order(mapping: Mapping) -> list[str]:
    """Loops in the order they first vary in the mapped schedule (outermost first)."""
    out: list[str] = []
    inner = [lv.tile for lv in mapping.levels[1:]] + [(1,) * len(mapping.loops)]
    for lv, tiles in zip(mapping.levels, inner):
        for x in lv.order:
            if x not in out and tiles[mapping.loops.index(x)] is not None:
                out.append(x)
    return out + [x for x in mapping.loops if x not in out]


def reduction_outward_notes(model: KernelModel, mapping: Mapping, classes: MappingT[str, LoopClass], original: tuple[str, ...]) -> list[str]:
    """Say so when a reduction loop now runs outside a parallel loop that used to enclose it."""
    new = _effective_order(mapping)
    notes = []
    for r, rc in classes.items():
        if not rc.reduction or r not in new:
            continue
        passed = [p for p in original[:original.index(r)] if classes[p].parallel and p in new
                  and new.index(p) > new.index(r)] if r in original else []
        if not passed:
            continue
        tensors = sorted({d.tensor for d in rc.carried})
        notes.append(f"reduction loop {r} now runs outside {', '.join(passed)}: partial sums of "
                     f"{', '.join(tensors)} live across whole {', '.join(passed)} sweeps "
                     f"(more live data, travelling further up the memory hierarchy)")
    return notes


# --------------------------------------------------------------------------- check


def is_legal(model: KernelModel, mapping: Mapping) -> bool:
    """Exact legality of ``mapping`` (schedule and spatial loops) as a yes/no answer, cached.

    The same answer as ``check_mapping(...).legal`` without an architecture,
    without witnesses, notes or hints.
    """
    return cached(model, ("legal", mapping), lambda: _decide(model, mapping))


def _decide(model: KernelModel, mapping: Mapping) -> bool:
    mapped = mapped_schedule(model, mapping)
    if not is_legal_schedule(model, mapped):
        return False
    if not any(lm.spatial for lm in mapping.levels):
        return True
    return not spatial_findings(model, mapped)[0]




def check_mapping(model: KernelModel, mapping: Mapping, *, arch: Architecture | None = None, params: MappingT[str, int] | None = None
                  ) -> Verdict:
    """Legality of a whole mapping (or an ``order_mapping``): order, tiles, spatial loops, and,
    with ``arch``, fan-out and capacity."""
    mapped = mapped_schedule(model, mapping)
    violations = schedule_violations(model, mapped, params=params)
    spatial, notes = spatial_findings(model, mapped, params=params)
    violations += spatial
    hints = []
    # the skew hint and the reduction notes speak of the loops of one nest as written
    plain = not new_coordinates(model, mapping) and len(getattr(mapping, "nests", ()) or (0,)) == 1
    if violations and plain:
        hint = skew_hint(model, mapped.statements, tuple(mapping.loops))
        if hint:
            hints.append(hint)
    elif plain:
        classes = loop_classes(model)
        notes += reduction_outward_notes(model, mapping, classes, tuple(mapping.loops))
    if arch is not None:
        violations += _arch_violations(model, mapping, arch, params)
    return Verdict(not violations, tuple(violations), tuple(notes), tuple(hints))


def _arch_violations(model: KernelModel, mapping: Mapping, arch: Architecture,
                     params: MappingT[str, int] | None) -> list[Violation]:
    """Fan-out and capacity problems (:mod:`polymap.passes.counting.fit`) as violations."""
    out = []
    for p in fit_problems(model, mapping, arch, dict(params or {})):
        if p.kind == "fanout":
            walk = " x ".join(f"{x}: {t}" for x, t in p.loops)
            reason = (f"levels[{p.level_index}] ({p.level}): spatial loops need {p.footprint} instances of "
                      f"{p.inner} ({walk}), but each {p.level} instance has {p.capacity}")
        else:
            reason = (f"level {p.level} would hold {p.footprint} {p.unit} at once "
                      f"but has capacity {p.capacity}")
        out.append(Violation(p.kind, reason, extra=tuple(p.to_json().items())[1:]))
    return out
