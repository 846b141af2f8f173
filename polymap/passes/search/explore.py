"""Evaluating the mapspace in work items: the part that runs on workers (local processes or Dask).

Before -> after::

    Mapspace groups  ->  WorkItem(group tiles, plan, order range)  ->  ItemResult(best few, rows for CSV)

A work item carries only plain data (the :class:`FastNest`, the
architecture, NumPy tiles), so it pickles to another process or machine and
needs no ISL there. Every mapping has a global index ``(group, order,
row)``; results are ranked by ``(objective, tie-breaks, index)``, so the
merge is the same however the items were spread over workers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from polymap.passes.counting.cost_model import (
    Objective,
    array_cost,
    rank_terms,
)
from polymap.passes.counting.fastcount import BatchCounts, Structure
from polymap.passes.counting.fastcount_orders import OrderTerms, all_orders, entries_by_order, multicast_by_order
from polymap.passes.counting.fastcount_nest import FastNest
from polymap.passes.search.mapspace import Group, SpatialPlan
from polymap.machine.arch import Architecture

COUNT_NAMES = ("fills", "writebacks", "reads", "updates")


@dataclass(frozen=True)
class Part:
    """Level 0's orders ``[first_lo, first_hi)`` of one group, with every order of the other levels
    and every tile config; ``legal`` masks the group's order combinations (shape: perms per level)."""

    group: int
    data: Group
    first_lo: int
    first_hi: int
    legal: np.ndarray

    @property
    def size(self) -> int:
        """Legal mappings in the part."""
        return int(self.legal[self.first_lo:self.first_hi].sum()) * len(self.data.tiles)

    @property
    def per_first(self) -> int:
        """Order combinations per order of level 0."""
        return int(np.prod(self.legal.shape[1:], dtype=np.int64))


@dataclass(frozen=True)
class WorkItem:
    """Parts of groups of one spatial plan, evaluated together (their tiles share the order terms)."""

    index: int
    nest: FastNest
    arch: object  # polymap.machine.arch.Architecture (plain frozen data)
    plan: SpatialPlan
    parts: tuple[Part, ...]
    objective: Objective
    keep: int  # best entries to return
    rows: bool  # return every evaluated mapping (for --csv)

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)


@dataclass(frozen=True)
class Scored:
    """One evaluated mapping: its rank key and where it lives in the space."""

    key: tuple[float, float, float, int, int, int]  # objective, then the other two, then the index
    energy: float
    cycles: float
    group: int
    order: int
    row: int


@dataclass(frozen=True)
class ItemResult:
    index: int
    evaluated: int
    best: tuple[Scored, ...]
    table: dict | None  # column name -> array, every evaluated mapping (for --csv)


def batch_cost(batch: BatchCounts, arch: Architecture, T: np.ndarray, structure: Structure) -> tuple[np.ndarray, np.ndarray]:
    """``(energy pJ, cycles)`` arrays from a batch's counts (:func:`~polymap.passes.counting.cost_model.array_cost`)."""
    active = np.ones(T.shape[0], dtype=np.int64)
    for k, sp in enumerate(structure.spatial):
        for x in sp:
            active = active * (T[:, k, x] // T[:, k + 1, x])
    energy, cycles = array_cost(arch, batch.instances, batch.counts, active)
    return np.broadcast_to(energy, (T.shape[0],)).astype(float), cycles


def _resolved(tiles: np.ndarray) -> np.ndarray:
    B, n, m = tiles.shape
    return np.concatenate([tiles, np.ones((B, 1, m), dtype=np.int64)], axis=1)


def item_counts(item: WorkItem, terms: OrderTerms, part: Part, rows: slice
               ) -> tuple[list[dict[str, dict[str, np.ndarray]]], np.ndarray]:
    """``(counts[l][X][name], T)``: arrays of shape (orders..., B) for one part (its ``rows`` of ``terms``)."""
    g, nest, n = part.data, item.nest, len(item.arch.levels)
    perms = [all_orders(p) for p in g.pattern]
    perms[0] = perms[0][part.first_lo:part.first_hi]
    entries = entries_by_order(terms, tuple(perms), rows)
    multicast = multicast_by_order(terms, tuple(perms), rows)
    T = terms.T[rows]
    counts = []
    for l in range(n):
        per = {}
        for t in nest.tensors:
            if l == 0 or t.name in terms.keep[l]:
                per[t.name] = terms.ev._tensor_counts(l, t, T, entries, multicast)
        counts.append(per)
    return counts, T


def costs_of(counts: list[dict], arch: Architecture, T: np.ndarray, plan: SpatialPlan, instances: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """``(energy, cycles)`` broadcast to the full (orders..., B) shape
    (:func:`~polymap.passes.counting.cost_model.array_cost`)."""
    active = np.ones(T.shape[0], dtype=np.int64)
    for k, sp in enumerate(plan.loops):
        for x in sp:
            active = active * (T[:, k, x] // T[:, k + 1, x])
    return array_cost(arch, instances, counts, active)


def evaluate_item(item: WorkItem) -> ItemResult:
    """Exact counts of every legal mapping of the item, the best ``keep`` and optionally all rows."""
    keep = item.plan.kept(item.nest)
    tiles = np.concatenate([p.data.tiles for p in item.parts])
    terms = OrderTerms(item.nest, item.plan.loops, keep, tiles)
    best: list[Scored] = []
    tables = []
    start, evaluated = 0, 0
    for part in item.parts:
        rows = slice(start, start + len(part.data.tiles))
        start = rows.stop
        found, count, table = _evaluate_part(item, terms, part, rows)
        best = sorted(best + found, key=lambda s: s.key)[:item.keep]
        evaluated += count
        if table is not None:
            tables.append(table)
    table = {k: np.concatenate([t[k] for t in tables]) for k in tables[0]} if tables else None
    return ItemResult(item.index, evaluated, tuple(best), table)


def _evaluate_part(item: WorkItem, terms: OrderTerms, part: Part, rows: slice
                  ) -> tuple[list[Scored], int, dict[str, np.ndarray] | None]:
    counts, T = item_counts(item, terms, part, rows)
    energy, cycles = costs_of(counts, item.arch, T, item.plan, item.nest.instances)
    B = T.shape[0]
    legal = part.legal[part.first_lo:part.first_hi]
    shape = legal.shape + (B,)
    energy = np.broadcast_to(energy, shape).reshape(-1)
    cycles = np.broadcast_to(cycles, shape).reshape(-1)
    ok = np.broadcast_to(legal[..., None], shape).reshape(-1)
    a, b, c = rank_terms(item.objective, energy, cycles)
    a = np.where(ok, a, np.inf)
    flat = np.flatnonzero(ok)
    best: list[Scored] = []
    if len(flat):
        kth = min(item.keep, len(flat)) - 1
        limit = np.partition(a[flat], kth)[kth]
        cand = flat[a[flat] <= limit]
        cand = cand[np.lexsort((cand, c[cand], b[cand], a[cand]))][:item.keep]
        base = part.first_lo * part.per_first
        for f in cand:
            order, row = base + int(f) // B, int(f) % B
            best.append(Scored((float(a[f]), float(b[f]), float(c[f]), part.group, order, row),
                               float(energy[f]), float(cycles[f]), part.group, order, row))
    table = _rows(item, part, counts, energy, cycles, flat, shape) if item.rows else None
    return best, len(flat), table


def _rows(item: WorkItem, part: Part, counts: list[dict], energy: np.ndarray, cycles: np.ndarray,
          flat: np.ndarray, shape: tuple[int, ...]) -> dict:
    B = shape[-1]
    base = part.first_lo * part.per_first
    table = {"group": np.full(len(flat), part.group), "order": base + flat // B, "row": flat % B,
             "energy_pj": energy[flat], "cycles": cycles[flat]}
    for l, per in enumerate(counts):
        name = item.arch.levels[l].name
        for x, cnt in per.items():
            for what in COUNT_NAMES:
                if what in cnt:
                    table[f"{name}.{x}.{what}"] = np.broadcast_to(cnt[what], shape).reshape(-1)[flat]
    return table


def work_items(groups: Sequence[Group], legal: Sequence[np.ndarray], plans: Sequence[SpatialPlan],
               nest: FastNest, arch: Architecture, *, objective: Objective, keep: int, rows: bool, chunk: int,
               budget: int | None, max_rows: int = 4096, first_group: int = 0,
               first_item: int = 0) -> list[WorkItem]:
    """The space cut into items of about ``chunk`` legal evaluations (small groups of one plan
    together, up to ``max_rows`` tile configs), in index order, up to ``budget`` evaluations.
    ``groups`` are the space's groups from ``first_group`` on; items are numbered from ``first_item``."""
    parts: list[Part] = []
    left = budget
    for i, group in enumerate(groups):
        g, mask = first_group + i, legal[i]
        n0 = mask.shape[0]
        per0 = mask.reshape(n0, -1).sum(axis=1) * len(group.tiles)
        lo = 0
        while lo < n0:
            if left is not None and left <= 0:
                break
            hi, size = lo, 0
            while hi < n0 and (hi == lo or size + per0[hi] <= chunk):
                size += int(per0[hi])
                hi += 1
                if left is not None and size >= left:
                    break
            if size:
                parts.append(Part(g, group, lo, hi, mask))
                if left is not None:
                    left -= size
            lo = hi
    items: list[WorkItem] = []
    batch: list[Part] = []
    for part in parts:
        if batch and (batch[0].data.plan != part.data.plan or sum(p.size for p in batch) + part.size > chunk
                      or sum(len(p.data.tiles) for p in batch) + len(part.data.tiles) > max_rows):
            items.append(WorkItem(first_item + len(items), nest, arch, plans[batch[0].data.plan], tuple(batch),
                                  objective, keep, rows))
            batch = []
        batch.append(part)
    if batch:
        items.append(WorkItem(first_item + len(items), nest, arch, plans[batch[0].data.plan], tuple(batch),
                              objective, keep, rows))
    return items
