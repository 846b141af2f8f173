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

from polymap.passes.counting.cost_model import compute_cycles, compute_energy, level_cycles, level_energy
from polymap.passes.counting.fastcount import BatchCounts, Evaluator, Structure
from polymap.passes.counting.fastcount_nest import FastNest
from polymap.passes.search.mapspace import Group, SpatialPlan, full_orders

OBJECTIVES = ("energy", "cycles", "edp")
COUNT_NAMES = ("fills", "writebacks", "reads", "updates")


@dataclass(frozen=True)
class WorkItem:
    """Orders ``[order_lo, order_hi)`` of one group, every tile config of it."""

    index: int
    nest: FastNest
    arch: object  # polymap.machine.arch.Architecture (plain frozen data)
    plan: SpatialPlan
    group: int
    group_data: Group
    order_lo: int
    order_hi: int
    objective: str
    keep: int  # best entries to return
    rows: bool  # return every evaluated mapping (for --csv)

    @property
    def size(self) -> int:
        return (self.order_hi - self.order_lo) * len(self.group_data.tiles)


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


def batch_cost(batch: BatchCounts, arch, T: np.ndarray, structure: Structure) -> tuple[np.ndarray, np.ndarray]:
    """``(energy pJ, cycles)`` arrays from a batch's counts, by the formulas of ``mapping.md``.

    The same formulas as :func:`polymap.passes.counting.cost_model.evaluate`, on arrays.
    """
    B = T.shape[0]
    energy = np.full(B, compute_energy(arch, batch.instances), dtype=float)
    terms = []
    for l, per in enumerate(batch.counts):
        spec = arch.levels[l]
        moved = np.zeros(B, dtype=np.int64)
        for c in per.values():
            energy = energy + level_energy(spec, c["reads"] + c.get("writebacks", 0), c.get("fills", 0) + c["updates"])
            moved = moved + c["reads"] + c["updates"]
        term = level_cycles(spec, moved)
        if term is not None:
            terms.append(term)
    active = np.ones(B, dtype=np.int64)
    for k, sp in enumerate(structure.spatial):
        for x in sp:
            active = active * (T[:, k, x] // T[:, k + 1, x])
    cycles = compute_cycles(arch, batch.instances, active)
    for t in terms:
        cycles = np.maximum(cycles, t)
    return energy, cycles


def _resolved(tiles: np.ndarray) -> np.ndarray:
    B, n, m = tiles.shape
    return np.concatenate([tiles, np.ones((B, 1, m), dtype=np.int64)], axis=1)


def structure_of(item: WorkItem, order: int) -> Structure:
    n = len(item.arch.levels)
    names = frozenset(t.name for t in item.nest.tensors)
    orders = full_orders(item.group_data, item.plan, len(item.nest.loops), order)
    return Structure(orders, item.plan.loops, tuple(names for _ in range(n)))


def _rank(objective: str, energy: np.ndarray, cycles: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    edp = energy * cycles
    if objective == "energy":
        return energy, cycles, edp
    if objective == "cycles":
        return cycles, energy, edp
    return edp, energy, cycles


def evaluate_item(item: WorkItem) -> ItemResult:
    """Exact counts of every mapping of the item (fast path), the best ``keep`` and optionally all rows."""
    tiles = item.group_data.tiles
    T = _resolved(tiles)
    best: list[Scored] = []
    table: dict[str, list] | None = {} if item.rows else None
    for o in range(item.order_lo, item.order_hi):
        structure = structure_of(item, o)
        batch = Evaluator(item.nest, structure).evaluate(tiles)
        assert batch.exact.all(), "divisor tiles are always in the fast path's exact class"
        energy, cycles = batch_cost(batch, item.arch, T, structure)
        a, b, c = _rank(item.objective, energy, cycles)
        pick = np.lexsort((np.arange(len(a)), c, b, a))[:item.keep]
        best.extend(Scored((float(a[r]), float(b[r]), float(c[r]), item.group, o, int(r)),
                           float(energy[r]), float(cycles[r]), item.group, o, int(r)) for r in pick)
        best = sorted(best, key=lambda s: s.key)[:item.keep]
        if table is not None:
            _append_rows(table, item, o, batch, energy, cycles)
    out_table = None if table is None else {k: np.concatenate(v) for k, v in table.items()}
    return ItemResult(item.index, item.size, tuple(best), out_table)


def _append_rows(table: dict, item: WorkItem, order: int, batch: BatchCounts,
                 energy: np.ndarray, cycles: np.ndarray) -> None:
    B = len(energy)
    add = table.setdefault
    add("group", []).append(np.full(B, item.group))
    add("order", []).append(np.full(B, order))
    add("row", []).append(np.arange(B))
    add("energy_pj", []).append(energy)
    add("cycles", []).append(cycles)
    for l, per in enumerate(batch.counts):
        name = item.arch.levels[l].name
        for x, c in per.items():
            for what in COUNT_NAMES:
                if what in c:
                    add(f"{name}.{x}.{what}", []).append(np.broadcast_to(c[what], (B,)).astype(np.int64))
        if batch.footprint[l] is not None:
            add(f"{name}.footprint", []).append(batch.footprint[l])


def work_items(groups: Sequence[Group], plans: Sequence[SpatialPlan], nest: FastNest, arch, *,
               objective: str, keep: int, rows: bool, chunk: int,
               budget: int | None) -> list[WorkItem]:
    """The space cut into items of about ``chunk`` evaluations, in index order, up to ``budget`` evaluations."""
    items: list[WorkItem] = []
    left = budget
    for g, group in enumerate(groups):
        per_order = len(group.tiles)
        step = max(1, chunk // max(per_order, 1))
        for lo in range(0, group.orders, step):
            hi = min(group.orders, lo + step)
            if left is not None:
                if left <= 0:
                    return items
                hi = min(hi, lo + max(1, left // per_order))
            item = WorkItem(len(items), nest, arch, plans[group.plan], g, group, lo, hi, objective, keep, rows)
            items.append(item)
            if left is not None:
                left -= item.size
            if hi < min(group.orders, lo + step):
                return items
    return items
