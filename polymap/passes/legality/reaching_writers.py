"""Does a new schedule keep every read's writer and every element's final writer? Yes or no, exactly.

The legality checker (:mod:`polymap.passes.legality.legality`) compares the dataflow
of the original and the new schedule, which needs a dataflow analysis
(``lexmax`` per read) under the new, tiled schedule: slow, but it yields
witnesses. A yes/no answer needs only the original dataflow and the order of
conflicting pairs under the new schedule. With ``F`` the original flows
(writer ``w -> r`` read, tagged per reference), ``WR``/``WW`` the pairs of
writes and reads/writes of one element, and ``<n`` the new order, the new
schedule keeps every writer iff these four relations are empty:

1. ``(w, r) in F`` with ``r <n w``: the read now runs before its writer;
2. ``(w2, r) in WR`` with ``w2 <n r`` and ``r`` without an original writer:
   a read of an input now sees a write;
3. ``(f, w2) in WW`` with ``f`` an original final writer and ``f <n w2``:
   another write now comes last;
4. ``r -> w2`` with ``(w, r) in F``, ``(w, w2) in WW``, ``w <n w2 <n r``:
   another write of the element now lands between ``r`` and its writer.

Proof sketch: under the new order the writer of ``r`` is the last ``<n``
write of its element before ``r``. If ``r`` had writer ``w``, that is still
``w`` iff ``w <n r`` (1) and no write of the element falls between (4); if
``r`` had none, iff no write of its element comes first (2). The final
writer of an element is unchanged iff no write of it follows the old final
writer (3). This is the definition of legality of
:mod:`polymap.passes.legality.legality`, so both answers agree (tested against brute
force and against each other).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from polymap.islcheck import isl
from polymap.poly import KernelModel, StatementModel, cached
from polymap.passes.dependences.dependences import TaggedProgram, final_writers, flow, tag_program
from polymap.passes.schedule.schedule_order import ScheduleOrder


@dataclass(frozen=True)
class Dataflow:
    """The tagged program, must flows and final writers of a set of statements under one schedule."""

    prog: TaggedProgram
    flows: isl.UnionMap  # [w -> tag] -> [r -> tag]
    finals: isl.UnionMap  # [w -> tag] -> X[e]
    order: ScheduleOrder


def dataflow(model: KernelModel, stmts: tuple[StatementModel, ...], maps: dict[str, isl.Map]) -> Dataflow:
    """ISL dataflow of ``stmts`` scheduled by ``maps`` (statement name -> time map)."""
    order = ScheduleOrder(maps)
    prog = tag_program(model, stmts, lambda s: maps[s.name])
    flows = flow(prog.reads, prog.writes, prog.schedule).get_must_dependence()
    return Dataflow(prog, flows, final_writers(prog, order), order)


def original_dataflow(model: KernelModel, stmts: tuple[StatementModel, ...]) -> Dataflow:
    """The dataflow of the original schedule, once per model and statement set."""
    key = ("dataflow", tuple(s.name for s in stmts))
    return cached(model, key, lambda: dataflow(model, stmts, {s.name: s.schedule for s in stmts}))


def violated_relations(model: KernelModel, stmts: Sequence[StatementModel], new_schedule_of: Callable[[StatementModel], isl.Map]) -> dict[str, isl.UnionMap]:
    """The reference definition of legality: dataflow under both schedules, compared.

    With ``<o``/``<n`` "runs before" in the original/new order, the new
    schedule keeps every reaching and final writer iff these (tagged)
    relations, keyed ``A``..``D``, are empty:

    A. RAW ``(w, r)`` an original flow with ``r <n w``      (the read runs first)
    B. WAR ``(w2, r)`` a new flow with ``r <o w2``          (a later write now comes first)
    C. WAW ``(w2, r)`` a new flow, ``w2 <o r``, not original, ``w(r) <n r``
    D. WAW ``(x, f)`` a new final writer ``x`` that is not the original ``f``

    Slow (a dataflow analysis under the new schedule): the legality check
    uses :func:`keeps_writers` and :func:`writer_changes`; tests compare.
    """
    stmts = tuple(stmts)
    old = original_dataflow(model, stmts)
    new = dataflow(model, stmts, {s.name: new_schedule_of(s) for s in stmts})
    a = new.order.keep(old.flows, flip=True)  # the read now runs first
    b = old.order.keep(new.flows, flip=True)  # the new writer used to come after the read
    moved = new.order.keep(old.flows).range()  # reads whose writer still runs first
    c = old.order.keep(new.flows).subtract(old.flows).intersect_range(moved)
    changed = new.finals.subtract(old.finals)
    d = changed.apply_range(old.finals.reverse())
    return {"A": a, "B": b, "C": c, "D": d}


@dataclass(frozen=True)
class _Facts:
    old: Dataflow
    wr: isl.UnionMap  # tagged write -> tagged read of the same element, any order
    ww: isl.UnionMap  # tagged write -> tagged write of the same element, any order
    unwritten: isl.UnionSet  # tagged reads with no original writer


def _facts(model: KernelModel, stmts: tuple[StatementModel, ...]) -> _Facts:
    def compute() -> _Facts:
        old = original_dataflow(model, stmts)
        p = old.prog
        return _Facts(old, p.writes.apply_range(p.reads.reverse()), p.writes.apply_range(p.writes.reverse()),
                      p.reads.domain().subtract(old.flows.range()))

    return cached(model, ("writer_facts", tuple(s.name for s in stmts)), compute)


def keeps_writers(model: KernelModel, stmts: Sequence[StatementModel], maps: dict[str, isl.Map], *,
                  order: ScheduleOrder | None = None) -> bool:
    """True iff scheduling ``stmts`` by ``maps`` keeps every reaching and final writer (module doc).

    ``order`` (a :class:`ScheduleOrder` of ``maps``) shares its per-pair
    cache with a later :func:`writer_changes`.
    """
    stmts = tuple(stmts)
    facts = _facts(model, stmts)
    new = order if order is not None else ScheduleOrder(maps)
    if not new.keep(facts.old.flows, flip=True).is_empty():  # 1
        return False
    wr_new = new.keep(facts.wr)
    if not wr_new.intersect_range(facts.unwritten).is_empty():  # 2
        return False
    ww_new = new.keep(facts.ww)
    if not ww_new.intersect_domain(facts.old.finals.domain()).is_empty():  # 3
        return False
    between = facts.old.flows.reverse().apply_range(ww_new)  # r -> w2 after r's writer
    return between.intersect(wr_new.reverse()).is_empty()  # 4


@dataclass(frozen=True)
class WriterChanges:
    """Relations 1-4 of the module docstring in full (tagged instances), each pair flipping order.

    ``read_first`` ``w -> r`` (1); ``input_overwritten`` ``r -> w2`` (2:
    ``r`` had no writer, ``r <o w2``, ``w2 <n r``); ``between``
    ``[w -> r] -> w2`` (4: ``w <n w2 <n r``, so ``r <o w2`` or ``w2 <o w``);
    ``final_swaps`` ``x -> f`` (3 made concrete: ``x`` is an element's last
    write under the new order, ``f`` under the original one, ``x <o f``).
    """

    read_first: isl.UnionMap
    input_overwritten: isl.UnionMap
    between: isl.UnionMap
    final_swaps: isl.UnionMap


def writer_changes(model: KernelModel, stmts: Sequence[StatementModel], order: ScheduleOrder) -> WriterChanges:
    """Every way the schedule of ``order`` changes a reaching or final writer (empty iff legal).

    No dataflow under the new schedule: the new last writers are computed
    only for the tensors whose original last writer is overtaken (3).
    """
    stmts = tuple(stmts)
    facts = _facts(model, stmts)
    flows = facts.old.flows
    read_first = order.keep(flows, flip=True)
    wr_new = order.keep(facts.wr)
    ww_new = order.keep(facts.ww)
    inputs = wr_new.intersect_range(facts.unwritten).reverse()
    between = flows.domain_map().apply_range(ww_new).intersect(flows.range_map().apply_range(wr_new.reverse()))
    overtaken = ww_new.intersect_domain(facts.old.finals.domain())
    return WriterChanges(read_first, inputs, between, _final_swaps(facts, order, overtaken))


def _final_swaps(facts: _Facts, order: ScheduleOrder, overtaken: isl.UnionMap) -> isl.UnionMap:
    """``x -> f``: new last write ``x`` of an element whose original last write ``f`` it replaces."""
    if overtaken.is_empty():
        return overtaken
    all_writes = _maps(facts.old.prog.writes)
    tensor_of = {_tag(m): m.get_tuple_name(isl.dim_type.out) for m in all_writes}
    tags: list[str] = []
    overtaken.range().foreach_set(lambda s: tags.append(s.unwrap().get_tuple_name(isl.dim_type.out)))
    tensors = {tensor_of[t] for t in tags}
    writes = isl.UnionMap.empty(facts.old.prog.writes.get_space())
    for m in all_writes:  # only the writes of the tensors concerned
        if m.get_tuple_name(isl.dim_type.out) in tensors:
            writes = writes.union(isl.UnionMap.from_map(m))
    later = order.keep(writes.apply_range(writes.reverse()))
    new_finals = writes.subtract_domain(later.domain())
    return new_finals.subtract(facts.old.finals).apply_range(facts.old.finals.reverse())


def _maps(umap: isl.UnionMap) -> list[isl.Map]:
    out: list[isl.Map] = []
    umap.foreach_map(out.append)
    return out


def _tag(tagged_access: isl.Map) -> str:
    return tagged_access.get_space().domain().unwrap().get_tuple_name(isl.dim_type.out)
