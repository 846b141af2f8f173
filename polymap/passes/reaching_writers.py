"""Does a new schedule keep every read's writer and every element's final writer? Yes or no, exactly.

The legality checker (:mod:`polymap.passes.legality`) compares the dataflow
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
:mod:`polymap.passes.legality`, so both answers agree (tested against brute
force and against each other).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..islcheck import isl
from ..poly import KernelModel, StatementModel
from .dependences import TaggedProgram, final_writers, flow, tag_program
from .schedule_order import ScheduleOrder, cached


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


def keeps_writers(model: KernelModel, stmts, maps: dict[str, isl.Map]) -> bool:
    """True iff scheduling ``stmts`` by ``maps`` keeps every reaching and final writer (module doc)."""
    stmts = tuple(stmts)
    facts = _facts(model, stmts)
    new = ScheduleOrder(maps)
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
