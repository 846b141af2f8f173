"""Which instances a schedule runs first, asked only for the pairs that matter.

``UnionMap.lex_lt_union_map`` orders every pair of spaces of a schedule. For
a tagged program (one copy of a statement's schedule per reference) that is
quadratic in the references, and it dominated the legality check (11 of 13 s
on PolyBench ``adi``). The relations legality filters hold few pairs of
statements, so :class:`ScheduleOrder` orders just those, once per pair::

    order.keep(R)            = { a -> b in R : time(a) <lex time(b) }
    order.keep(R, flip=True) = { a -> b in R : time(b) <lex time(a) }

Tagged instances ``[S[i] -> S_r0[]]`` are ordered by their statement ``S``.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from polymap.islcheck import isl
from polymap.poly import KernelModel, StatementModel, cached

def _statement(space: isl.Space) -> str:
    """The statement of a (possibly tagged, i.e. wrapped) instance space."""
    if space.is_wrapping():
        space = space.unwrap()
        return space.get_tuple_name(isl.dim_type.in_)
    return space.get_tuple_name(isl.dim_type.set)


def _untag(rel: isl.Map) -> tuple[isl.Map | None, isl.Map | None]:
    """``(P_dom, P_rng)``: ``[S[i] -> t[]] -> S[i]`` for each tagged side of ``rel`` (None: untagged)."""
    dom, rng = rel.domain(), rel.range()
    pd = dom.unwrap().domain_map() if dom.is_wrapping() else None
    pr = rng.unwrap().domain_map() if rng.is_wrapping() else None
    return pd, pr


class ScheduleOrder:
    """Strict ``before`` relations of one schedule (statement name -> time map), per pair, cached."""

    def __init__(self, maps: Mapping[str, isl.Map]) -> None:
        self.maps = dict(maps)
        self._lt: dict[tuple[str, str], isl.Map] = {}
        self._kept: dict[tuple[int, bool], tuple[isl.UnionMap, isl.UnionMap]] = {}

    def lt(self, s: str, t: str) -> isl.Map:
        """``S[i] -> T[j]`` where ``S[i]`` runs strictly before ``T[j]``."""
        key = (s, t)
        if key not in self._lt:
            a, b = _decisive_dims(self.maps[s], self.maps[t])
            self._lt[key] = a.lex_lt_map(b)
        return self._lt[key]

    def keep_map(self, rel: isl.Map, *, flip: bool = False) -> isl.Map:
        """The pairs of one map (tagged or not) whose source runs first (sink first with ``flip``)."""
        sp = rel.get_space()
        s, t = _statement(sp.domain()), _statement(sp.range())
        before = self.lt(t, s).reverse() if flip else self.lt(s, t)
        pd, pr = _untag(rel)
        if pd is not None:
            before = pd.apply_range(before)
        if pr is not None:
            before = before.apply_range(pr.reverse())
        return rel.intersect(before)

    def keep(self, rel: isl.UnionMap, *, flip: bool = False) -> isl.UnionMap:
        """:meth:`keep_map` on every map of a union; remembered per ``rel`` object (the
        yes/no test and the witnesses ask for the same relations of the original program)."""
        key = (id(rel), flip)
        if key in self._kept and self._kept[key][0] is rel:
            return self._kept[key][1]
        out = isl.UnionMap.empty(rel.get_space())
        for m in _maps(rel):
            if not m.is_empty():
                out = out.union(isl.UnionMap.from_map(self.keep_map(m, flip=flip)))
        self._kept[key] = (rel, out)  # holding rel keeps its id from being reused
        return out


def _fixed(m: isl.Map, d: int) -> int | None:
    v = m.plain_get_val_if_fixed(isl.dim_type.out, d)
    return None if v.is_nan() else int(v.to_python())


def _decisive_dims(a: isl.Map, b: isl.Map) -> tuple[isl.Map, isl.Map]:
    """``a`` and ``b`` (time maps) with only the dimensions that can decide their lexicographic order.

    A dimension that is the same constant in both is equal for every pair:
    dropping it keeps the order. A dimension that is a different constant in
    each differs for every pair: the order is decided there or before, so
    what follows it goes. Mapped schedules hold many such dimensions (phases,
    loops a statement lacks), and each costs ISL a disjunct with divisions.
    """
    n = a.dim(isl.dim_type.out)
    keep = []
    for d in range(n):
        ca, cb = _fixed(a, d), _fixed(b, d)
        if ca is not None and ca == cb:
            continue
        keep.append(d)
        if ca is not None and cb is not None:
            break
    # project out each run of consecutive dropped dims in one call, last run first (each call
    # simplifies a map with divisions again: one per dim cost most of the legality check)
    drop = [d for d in range(n) if d not in keep]
    runs: list[list[int]] = []
    for d in drop:
        if runs and runs[-1][0] + runs[-1][1] == d:
            runs[-1][1] += 1
        else:
            runs.append([d, 1])
    for first, count in reversed(runs):
        a = a.project_out(isl.dim_type.out, first, count)
        b = b.project_out(isl.dim_type.out, first, count)
    return a, b


def _maps(umap: isl.UnionMap) -> list[isl.Map]:
    out: list[isl.Map] = []
    umap.foreach_map(out.append)
    return out


# --------------------------------------------------------------------------- memory-based fast path


def conflict_pairs(model: KernelModel, statements: Iterable) -> tuple[tuple[str, str, isl.Map], ...]:
    """Per ordered pair of statements, every conflicting pair of instances (same element, at least
    one write), source first in the original order: ``(source, sink, S[i] -> T[j])``.

    Cached per model and statement set; this is the memory-based dependence
    relation, merged over references (the fast path needs no tags).
    """
    stmts = tuple(statements)
    return cached(model, ("conflict_pairs", tuple(s.name for s in stmts)), lambda: _conflict_pairs(stmts))


def _conflict_pairs(stmts: Sequence[StatementModel]) -> tuple[tuple[str, str, isl.Map], ...]:
    out = []
    for s in stmts:
        for t in stmts:
            rel = None
            for a in s.accesses:
                for b in t.accesses:
                    if a.tensor != b.tensor or (a.kind == "read" and b.kind == "read"):
                        continue
                    r = a.relation.apply_range(b.relation.reverse())
                    rel = r if rel is None else rel.union(r)
            if rel is None:
                continue
            rel = rel.intersect(s.schedule.lex_lt_map(t.schedule)).coalesce()
            if not rel.is_empty():
                out.append((s.name, t.name, rel))
    return tuple(out)


def keeps_conflicts(model: KernelModel, statements: Iterable, new_maps: Mapping[str, isl.Map]) -> bool:
    """True when the new schedule runs every conflicting pair in its original order.

    Sufficient for legality: then, per element, writes keep their order and
    every read keeps its place among the writes, so each read has the same
    reaching writer and each element the same final writer. Each pair of
    statements is tested in time space, ``new_s . D . new_t^-1`` against
    ``t >=lex u`` (an equal time also fails, to stay on the safe side);
    the first failing pair stops the test.
    """
    for s, t, rel in conflict_pairs(model, statements):
        a, b = _decisive_dims(new_maps[s], new_maps[t])
        times = rel.apply_domain(a).apply_range(b)
        n = times.dim(isl.dim_type.in_)
        ge = isl.Map.lex_ge(isl.Space.set_alloc(times.get_ctx(), 0, n)).align_params(times.get_space())
        if not times.intersect(ge).is_empty():
            return False
    return True
