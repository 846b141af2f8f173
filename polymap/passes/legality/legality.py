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
from polymap.passes.schedule.schedule_order import ScheduleOrder, keeps_conflicts
from polymap.mapping.model import Mapping
from polymap.passes.dependences.loop_classes import loop_classes, skew_hint
from polymap.mapping.schedule import new_coordinates
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
    mapping, n = mapped.mapping, len(mapped.mapping.levels)
    drop = [d for d, td in enumerate(mapped.dims) if td.kind == "coord" and td.level < n - 1
            and mapping.levels[td.level + 1].tile[list(mapping.loops).index(td.loop)] is None]
    out = {}
    for name, m in mapped.maps:
        for d in reversed(drop):
            m = m.project_out(isl.dim_type.out, d, 1)
        out[name] = m
    return out


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
    """True iff the mapped schedule keeps every reaching and final writer (symbolically)."""
    maps = compact_maps(mapped)
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
