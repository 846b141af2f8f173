"""Exact dependences of a kernel, from the polyhedral model.

Two analyses, both symbolic in the parameters:

* **value-based** (the default): ISL dataflow (``UnionAccessInfo``). A RAW
  dependence links a read to the write whose value it sees, a WAW one links a
  write to the previous write of the same element, a WAR one links a read to
  the next write of its element (no write in between).
* **memory-based**: every pair of instances that touch the same element, at
  least one writing, source first in the original order.

Accesses are *tagged* (``[acc[i, j, k] -> acc_r2[]] -> C[i, j]``) so that
every dependence is known per pair of references; :class:`Dependence` keeps
the tags, :func:`group` merges them per (kind, statements, tensor) for the
report. Scalars are 0-d tensors and need no special case.

Sketch for gemm (value-based)::

    RAW init -> acc  C  { init[i, j] -> acc[i, j, 0] }
    RAW acc  -> acc  C  { acc[i, j, k] -> acc[i, j, k + 1] }   carried by k
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping as MappingT, Sequence

from polymap.islcheck import isl
from polymap.poly import Access, KernelModel, StatementModel, cached

KINDS = ("RAW", "WAR", "WAW")


@dataclass(frozen=True)
class Dependence:
    """A dependence between two references: ``relation`` maps source to sink instances."""

    kind: str  # "RAW" | "WAR" | "WAW"
    source: str  # statement names
    sink: str
    tensor: str
    relation: isl.Map  # source[...] -> sink[...], untagged
    source_tag: str = ""
    sink_tag: str = ""
    #: Both ends are the target of one reduction statement (``+=`` ...): the
    #: code generator may combine partial results instead of ordering them.
    reduction: bool = False


# --------------------------------------------------------------------------- tagging


def access_index(model: KernelModel) -> dict[str, tuple[StatementModel, Access]]:
    """``tag -> (statement, access)`` for every reference of the kernel."""
    return {a.tag: (s, a) for s in model.statements for a in s.accesses}


def is_target_access(stmt: StatementModel, access: Access) -> bool:
    """True for a reduction statement's write and its implicit read of the target."""
    if not stmt.stmt.is_reduction:
        return False
    return access.kind == "write" or access is stmt.reads[-1]


def _tag_map(stmt: StatementModel, tag: str) -> isl.Map:
    """``S[i, j] -> tag[]`` over the statement's domain."""
    tag_set = isl.Set.universe(isl.Space.set_alloc(stmt.domain.get_ctx(), 0, 0)).set_tuple_name(tag)
    return isl.Map.from_domain_and_range(stmt.domain, tag_set.align_params(stmt.domain.get_space()))


def tagged_access(stmt: StatementModel, access: Access) -> isl.Map:
    """``[S[i] -> tag[]] -> X[e]``."""
    return _tag_map(stmt, access.tag).range_product(access.relation).uncurry()


def tagged_schedule(stmt: StatementModel, access: Access, schedule: isl.Map) -> isl.Map:
    """``[S[i] -> tag[]] -> time`` for a schedule of the statement ``S[i] -> time``."""
    return _tag_map(stmt, access.tag).domain_map().apply_range(schedule)


def maps_of(umap: isl.UnionMap) -> list[isl.Map]:
    """The maps of a union map, one per pair of spaces."""
    out: list[isl.Map] = []
    umap.foreach_map(out.append)
    return out


def _union(maps: Iterable[isl.Map], space: isl.Space) -> isl.UnionMap:
    out = isl.UnionMap.empty(space)
    for m in maps:
        out = out.union(isl.UnionMap.from_map(m))
    return out


@dataclass(frozen=True)
class TaggedProgram:
    """Tagged reads, writes and schedule of a set of statements under one schedule."""

    reads: isl.UnionMap
    writes: isl.UnionMap
    schedule: isl.UnionMap

    @property
    def before(self) -> isl.UnionMap:
        """``a -> b`` for tagged instances where ``a`` runs strictly before ``b``."""
        return self.schedule.lex_lt_union_map(self.schedule)


def tag_program(model: KernelModel, statements: Iterable[StatementModel],
                schedule_of: Callable[[StatementModel], isl.Map]) -> TaggedProgram:
    """Tag every access of ``statements``; ``schedule_of`` gives each statement's schedule."""
    space = model.context.get_space()
    reads, writes, sched = [], [], []
    for s in statements:
        sm = schedule_of(s)
        for a in s.accesses:
            (reads if a.kind == "read" else writes).append(tagged_access(s, a))
            sched.append(tagged_schedule(s, a, sm))
    return TaggedProgram(_union(reads, space), _union(writes, space), _union(sched, space))


def flow(sinks: isl.UnionMap, must: isl.UnionMap, schedule: isl.UnionMap,
         may: isl.UnionMap | None = None) -> isl.UnionFlow:
    """ISL dataflow: which source instance each sink instance depends on (last before it)."""
    info = isl.UnionAccessInfo.from_sink(sinks).set_must_source(must)
    if may is not None:
        info = info.set_may_source(may)
    return info.set_schedule_map(schedule).compute_flow()


def final_writers(prog: TaggedProgram, order: isl.UnionMap | None = None) -> isl.UnionMap:
    """``[W -> tag] -> X[e]``: the writes that no later write of the same element follows.

    ``order`` (a :class:`~polymap.passes.schedule.schedule_order.ScheduleOrder` of the
    same schedule) orders only the pairs of writes that share an element,
    much faster than ``prog.before`` on kernels with many references.
    """
    same = prog.writes.apply_range(prog.writes.reverse())  # w -> w' writing one element
    later = order.keep(same) if order is not None else same.intersect(prog.before)
    return prog.writes.subtract_domain(later.domain())


# --------------------------------------------------------------------------- splitting


def split_tagged(umap: isl.UnionMap, kind: str, index: MappingT[str, tuple[StatementModel, Access]]
                ) -> list[Dependence]:
    """One :class:`Dependence` per tagged map ``[S -> t] -> [T -> u]`` of ``umap``."""
    out = []
    for m in maps_of(umap):
        if m.is_empty():
            continue
        src_tag = m.get_space().domain().unwrap().get_tuple_name(isl.dim_type.out)
        dst_tag = m.get_space().range().unwrap().get_tuple_name(isl.dim_type.out)
        (s, a), (t, b) = index[src_tag], index[dst_tag]
        rel = m.domain_factor_domain().range_factor_domain().coalesce()
        red = s.name == t.name and is_target_access(s, a) and is_target_access(t, b)
        out.append(Dependence(kind, s.name, t.name, a.tensor, rel, src_tag, dst_tag, red))
    return out


def _is_read_tag(tag: str) -> bool:
    return tag.rsplit("_", 1)[-1].startswith("r")


# --------------------------------------------------------------------------- analyses


def value_based(model: KernelModel, statements: Iterable[StatementModel] | None = None) -> list[Dependence]:
    """Exact value-based RAW, WAR and WAW dependences in the original schedule."""
    stmts = tuple(model.statements if statements is None else statements)
    prog = tag_program(model, stmts, lambda s: s.schedule)
    index = access_index(model)
    raw = flow(prog.reads, prog.writes, prog.schedule).get_must_dependence()
    waw = flow(prog.writes, prog.writes, prog.schedule).get_must_dependence()
    war_all = flow(prog.writes, prog.writes, prog.schedule, may=prog.reads).get_may_dependence()
    war = isl.UnionMap.empty(war_all.get_space())
    for m in maps_of(war_all):
        if _is_read_tag(m.get_space().domain().unwrap().get_tuple_name(isl.dim_type.out)):
            war = war.union(isl.UnionMap.from_map(m))
    return (split_tagged(raw, "RAW", index) + split_tagged(war, "WAR", index)
            + split_tagged(waw, "WAW", index))


def memory_based(model: KernelModel, statements: Iterable[StatementModel] | None = None,
                 schedule_of: Callable[[StatementModel], isl.Map] | None = None) -> list[Dependence]:
    """Every conflicting pair of accesses, source first under ``schedule_of`` (default: original)."""
    stmts = tuple(model.statements if statements is None else statements)
    if schedule_of is None:  # the original order: computed once per model and statement set
        key = ("memory_based", tuple(s.name for s in stmts))
        return list(cached(model, key, lambda: tuple(_memory_based(stmts, lambda s: s.schedule))))
    return _memory_based(stmts, schedule_of)


def _memory_based(stmts: Sequence[StatementModel], sched: Callable[[StatementModel], isl.Map]) -> list[Dependence]:
    out = []
    for s in stmts:
        for t in stmts:
            before = sched(s).lex_lt_map(sched(t))
            for a in s.accesses:
                for b in t.accesses:
                    if a.tensor != b.tensor or (a.kind == "read" and b.kind == "read"):
                        continue
                    rel = a.relation.apply_range(b.relation.reverse()).intersect(before).coalesce()
                    if rel.is_empty():
                        continue
                    kind = {("write", "read"): "RAW", ("read", "write"): "WAR"}.get((a.kind, b.kind), "WAW")
                    red = s.name == t.name and is_target_access(s, a) and is_target_access(t, b)
                    out.append(Dependence(kind, s.name, t.name, a.tensor, rel, a.tag, b.tag, red))
    return out


def dependences(model: KernelModel, *, memory: bool = False) -> list[Dependence]:
    """The kernel's dependences, value-based unless ``memory``."""
    return memory_based(model) if memory else value_based(model)


def group(deps: Iterable[Dependence]) -> list[Dependence]:
    """Merge dependences per (kind, source, sink, tensor), as ``cli.md`` reports them."""
    merged: dict[tuple, Dependence] = {}
    for d in deps:
        key = (d.kind, d.source, d.sink, d.tensor)
        old = merged.get(key)
        if old is None:
            merged[key] = d
            continue
        rel = old.relation.union(d.relation).coalesce()
        merged[key] = Dependence(d.kind, d.source, d.sink, d.tensor, rel, "", "", old.reduction and d.reduction)
    order = {k: n for n, k in enumerate(KINDS)}
    return sorted(merged.values(), key=lambda d: (order[d.kind], d.source, d.sink, d.tensor))
