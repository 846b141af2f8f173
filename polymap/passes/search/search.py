"""Mapping search: rank legal, fitting mappings of one nest by their exact counts.

Candidates (``compile`` without ``--mapping``):

- loop orders: every permutation of up to four loops, otherwise the
  original order and each loop moved innermost; one order for every level;
  an order is kept only when :func:`polymap.passes.legality.legality.check_mapping`
  says it is legal;
- tiles: at every level with a capacity, square tiles whose footprint is
  near a third of the capacity (the closed form), then a sweep of powers of
  two and divisors around that side, per loop;
- spatial: the outermost loop that carries no dependence (not even a
  reduction), over the inner instances of the first level that fans out,
  with a tile that divides evenly.

Objective: one of :class:`~polymap.passes.counting.cost_model.Objective`
(cycles, then energy, by default; the formulas of ``mapping.md`` live in
:mod:`~polymap.passes.counting.cost_model`); only mappings whose footprint
fits every level (:mod:`~polymap.passes.counting.fit`). The fast path
(:mod:`polymap.passes.counting.fastcount`) ranks whole batches when the nest is in
its class; the winners are then checked once more (legality of their own
tiles) and reported with the fast path's exact counts (``recount=True``
recounts them with the ISL path,
:func:`polymap.passes.counting.counting.isl_count_mapping`, seconds to minutes at real
sizes). Otherwise a small candidate set is ranked with the ISL path alone.

Time: legality is a yes/no answer (:func:`is_legal`, no witnesses), cached
per model and mapping. ``seconds`` bounds the wall time: orders are tested
(original order first) until it runs out, and candidates are confirmed
until one is found after it ran out.
"""
from __future__ import annotations

import heapq
import time
from itertools import groupby
from typing import Iterator, Mapping as MappingT

import numpy as np

from polymap.machine.arch import Architecture
from polymap.mapping.model import Mapping
from polymap.passes.counting.cost_model import CostReport, Objective, mapping_execution, evaluate, rank_key
from polymap.passes.counting.counting import Counts, isl_count_mapping
from polymap.passes.counting.fit import exceeds, fanout_problems
from polymap.passes.counting.fastcount import evaluator_for, fast_counts
from polymap.passes.counting.fastcount_nest import NotSupported, analyse_nest
from polymap.passes.search.space import FEW_ORDERS, SearchSpace, candidate_tiles
from polymap.passes.legality.legality import is_legal
from polymap.poly import KernelModel


def _fits(counts: Counts, arch: Architecture) -> bool:
    return not any(lv.footprint is not None and exceeds(spec, lv.footprint, lv.footprint_bytes)
                   for lv, spec in zip(counts.levels, arch.levels))


def _legal(model: KernelModel, mapping: Mapping, params: MappingT[str, int] | None = None) -> bool:
    return is_legal(model, mapping)


def _report(model: KernelModel, mapping: Mapping, arch: Architecture, params: MappingT[str, int],
            extents: MappingT[str, int], *, recount: bool = True) -> CostReport | None:
    counts = None if recount else fast_counts(model, mapping, arch, params=dict(params))
    if counts is None:
        counts = isl_count_mapping(model, mapping, arch, params=dict(params))
    if not _fits(counts, arch):
        return None
    return evaluate(counts, arch, execution=mapping_execution(model, mapping, arch, extents))


def search_mappings(model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int], *, top: int = 10,
                    budget: int = 4000, confirm: int = 3, seconds: float | None = 5.0,
                    recount: bool = False, objective: Objective = Objective.CYCLES, isl_counts: int = 6
                    ) -> list[tuple[Mapping, CostReport]]:
    """Legal, fitting mappings of ``nest`` on ``arch``, best first by ``objective``
    (:class:`~polymap.passes.counting.cost_model.Objective`: cycles then energy by default).

    ``budget`` bounds the tile vectors evaluated per loop order with the fast
    path; the best ``confirm`` are checked for legality with their own tiles
    and reported with exact counts (the fast path's, or the ISL path's with
    ``recount`` or outside its class). ``seconds`` (None: no limit) bounds the
    time spent on orders and confirmations, see the module docstring. Outside the
    fast path's class at most ``isl_counts`` candidates are counted (a work bound).
    """
    params = dict(params)
    deadline = None if seconds is None else time.monotonic() + seconds
    # outside the fast path's class only the first few legal orders are ranked: the legality of the
    # others (seconds each at real sizes) is not asked
    enough = None if in_fast_class(model, nest, params) else FEW_ORDERS
    space = SearchSpace.build(model, nest, arch, params, deadline=deadline, enough=enough)
    if space is None:
        return []
    try:
        ranked, want = _rank_fast(model, space, budget, objective), confirm
    except NotSupported:
        ranked, want, recount = space.few_candidates(isl_counts), top, True
    out: list[tuple[Mapping, CostReport]] = []
    for m in ranked:
        late = deadline is not None and time.monotonic() > deadline
        if len(out) >= want or (late and out):
            break
        if fanout_problems(m, arch, space.extents) or not is_legal(model, m):
            continue
        rep = _report(model, m, arch, params, space.extents, recount=recount)
        if rep is not None:
            out.append((m, rep))
    out.sort(key=lambda mr: objective.key(mr[1]))
    return out[:top]


def in_fast_class(model: KernelModel, nest: int, params: MappingT[str, int]) -> bool:
    """Is the nest in the fast path's class (:func:`polymap.passes.counting.fastcount_nest.analyse_nest`)?"""
    try:
        analyse_nest(model, nest, params)
    except NotSupported:
        return False
    return True


#: Candidates whose panels' copies :func:`_rank_fast` counts at a time (in the order of their lower bounds).
COPY_CHUNK = 64


def _rank_fast(model: KernelModel, space: SearchSpace, budget: int, objective: Objective) -> Iterator[Mapping]:
    """Every candidate of every legal structure, ranked with the fast path (fitting, exact ones).

    The order is that of every candidate's key (objective, tie-breaker, then the order found), the
    panels' copies counted (``batch_execution``). Planning a row's panels and counting its copies
    costs about 0.1 ms in Python, a second for gemm's 5400 rows, so they are counted only for the
    rows that may come first: the rows are sorted by their keys without the copies, a lower bound
    (the copies only add cycles, and a key does not decrease with the cycles), and a row is given
    once no row still uncounted has a lower bound below its key. Mappings are built lazily too:
    only the first few are ever confirmed."""
    slots: list[tuple] = []
    bounds = []
    for template in space.structures():
        ev = evaluator_for(model, template, space.params)
        tiles = candidate_tiles(space, template, budget)
        if not len(tiles):
            continue
        batch = ev.evaluate(tiles)
        energy, cycles, ok = space.batch_objective(batch, template, tiles, copies=False)
        for b in np.flatnonzero(ok):
            bounds.append((*rank_key(objective, float(energy[b]), float(cycles[b])), len(bounds), len(slots), b))
        slots.append((batch, template, tiles))
    bounds.sort(key=lambda s: (s[0], s[1], s[2]))
    return _exact_order(space, objective, slots, bounds)


def _exact_order(space: SearchSpace, objective: Objective, slots: list[tuple], bounds: list[tuple]
                 ) -> Iterator[Mapping]:
    """:func:`_rank_fast`'s candidates in the order of their keys with the copies: ``bounds`` (lower key,
    tie-breaker, order found, slot, row) sorted, ``slots`` each template's (counts, template, tiles)."""
    counted: list[tuple] = []  # a heap of (key, tie-breaker, order found, slot, row) with the copies
    nxt = 0
    while nxt < len(bounds) or counted:
        while nxt < len(bounds) and (not counted or bounds[nxt][:3] < counted[0][:3]):
            chunk = sorted(bounds[nxt:nxt + COPY_CHUNK], key=lambda s: s[3])
            nxt += COPY_CHUNK
            for slot, group in groupby(chunk, key=lambda s: s[3]):
                group = list(group)
                batch, template, tiles = slots[slot]
                mask = np.zeros(len(tiles), dtype=bool)
                mask[[s[4] for s in group]] = True
                energy, cycles, _ = space.batch_objective(batch, template, tiles, copies=mask)
                for _, _, found, _, b in group:
                    heapq.heappush(counted, (*rank_key(objective, float(energy[b]), float(cycles[b])), found, slot, b))
        _, _, _, slot, b = heapq.heappop(counted)
        yield space.with_tiles(slots[slot][1], slots[slot][2][b])


def best_mapping(model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int]) -> Mapping | None:
    """Drop-in for :func:`polymap.passes.search.default_mapping.choose_mapping`: the best legal fitting mapping, or None."""
    found = search_mappings(model, nest, arch, params, top=1)
    return found[0][0] if found else None


def explain(mapping: Mapping, report: CostReport) -> str:
    """Why this mapping: per level its tile, order, traffic and arithmetic intensity."""
    lines = [f"mapping of nest {mapping.nest}: energy {report.energy_pj:.4g} pJ, "
             f"{report.cycles:.4g} cycles ({report.counts.instances} statement instances)"]
    intensity = {name: float("inf") if value is None else value for name, value in report.intensity}
    width = max(len(lv.name) for lv in report.counts.levels)
    for lm, lv in zip(mapping.levels, report.counts.levels):
        tile = ", ".join(f"{x}: {t}" for x, t in zip(mapping.loops, lm.tile) if t is not None) or "whole"
        traffic = lv.reads + lv.updates
        fp = "" if lv.footprint is None else f", footprint {lv.footprint}"
        sp = f", spatial {' '.join(lm.spatial)}" if lm.spatial else ""
        lines.append(f"  {lv.name:<{width}}  tile {{{tile}}} order {' '.join(lm.order)}{sp}: "
                     f"{traffic} elements to inner levels, intensity {intensity[lv.name]:.3g}{fp}")
    return "\n".join(lines)
