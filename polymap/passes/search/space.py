"""The candidates of the mapping search: legal loop orders, closed-form tiles and a sweep around them.

Closed form: at a level with capacity ``C`` elements, the side ``s`` of a
square tile (every loop ``min(s, extent)``) is the largest whose footprint
is at most ``C / 3`` (a third each for inputs, outputs and the next tile
streaming in). The sweep draws, per loop and level, powers of two from
``s / 4`` to ``4 s`` and the loop's divisors in that range, nested inward.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import permutations
from math import prod

import numpy as np

from polymap import ir
from polymap.mapping.model import LevelMapping, Mapping, loop_extents, nest_loops, nest_tensors
from polymap.passes.counting.cost_model import array_cost
from polymap.passes.counting.execution import batch_execution
from polymap.passes.counting.fit import exceeds, fanout_available
from polymap.passes.dependences.loop_classes import loop_classes
from polymap.passes.legality.legality import is_legal
from polymap.machine.arch import Architecture
from polymap.poly import KernelModel
from typing import Iterator, Mapping as MappingT
from polymap.machine.arch import Level
from polymap.passes.counting.fastcount import BatchCounts

MAX_PERMUTED = 4  # all orders up to this many loops
FEW_ORDERS = 3  # the legal orders the ISL path ranks (:meth:`SearchSpace.few_candidates`)


@dataclass(frozen=True)
class SearchSpace:
    model: object
    nest: int
    arch: object
    params: dict
    loops: tuple[str, ...]
    extents: dict
    keep: tuple[str, ...]
    sides: tuple[int | None, ...]  # per level: closed-form square side (None: whole)
    spatial: tuple[tuple[int, str], ...]  # (level, loop) candidates, outermost first
    orders: tuple[tuple[str, ...], ...]  # legal orders

    @classmethod
    def build(cls, model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int], *,
              deadline: float | None = None, enough: int | None = None) -> "SearchSpace | None":
        """The space of ``nest``; orders are tested for legality (original first) until ``deadline``
        (a ``time.monotonic()`` value; at least one order is always tested) or until ``enough`` legal
        ones are found (None: all; the ISL path ranks only the first few, :meth:`few_candidates`)."""
        loops = nest_loops(model.kernel, nest)
        extents = loop_extents(model.kernel, nest, params, model=model)
        if not loops or not all(extents.values()):
            return None
        sides = _closed_form_sides(model, nest, arch, extents)
        classes = loop_classes(model, nests=(nest,))
        parallel = [x for x in loops if x in classes and classes[x].parallel]
        fan = next((k for k in range(len(arch.levels)) if _fanout(arch, k) > 1), None)
        spatial = tuple((fan, x) for x in parallel[:2]) if fan is not None else ()
        space = cls(model, nest, arch, dict(params), tuple(loops), extents,
                    nest_tensors(model.kernel, nest), sides, spatial, ())
        legal = []
        for n, o in enumerate(_orders(loops)):
            if n and deadline is not None and time.monotonic() > deadline:
                break
            if enough is not None and len(legal) >= enough:
                break
            if is_legal(model, space.mapping(o, sides)):
                legal.append(o)
        return cls(**{**space.__dict__, "orders": tuple(legal)})

    def mapping(self, order: tuple[str, ...], sides: tuple[int | None, ...], spatial: tuple[int, str] | None = None
               ) -> Mapping:
        """One order at every level, square tiles of the given sides, optionally one spatial loop."""
        levels = []
        for k, lv in enumerate(self.arch.levels):
            s = sides[k]
            tile = tuple(None if s is None or s >= self.extents[x] else s for x in self.loops)
            sp = (spatial[1],) if spatial is not None and spatial[0] == k else ()
            levels.append(LevelMapping(lv.name, tile, tuple(order), sp, self.keep))
        return Mapping(self.model.kernel.name, self.nest, self.loops, tuple(levels))

    def structures(self) -> Iterator[Mapping]:
        """Templates (order, spatial choice) whose tiles the sweep replaces."""
        for order in self.orders:
            yield self.mapping(order, self.sides)
            for sp in self.spatial:
                yield self.mapping(order, self.sides, sp)

    def few_candidates(self, limit: int = 6) -> list[Mapping]:
        """A small set for the ISL path: closed-form tiles (and halved) for the first legal orders."""
        out = []
        half = tuple(None if s is None else max(1, s // 2) for s in self.sides)
        for order in self.orders[:FEW_ORDERS]:
            out += [self.mapping(order, self.sides), self.mapping(order, half)]
        return out[:limit]

    def with_tiles(self, template: Mapping, row: np.ndarray) -> Mapping:
        levels = tuple(LevelMapping(lm.level, tuple(None if int(t) <= 0 or int(t) >= self.extents[x] and k == 0
                                                    else int(t) for x, t in zip(self.loops, row[k])),
                                    lm.order, lm.spatial, lm.keep)
                       for k, lm in enumerate(template.levels))
        return Mapping(template.kernel, template.nest, template.loops, levels)

    def batch_objective(self, batch: BatchCounts, template: Mapping, tiles: np.ndarray, *,
                        copies: bool | np.ndarray = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(energy, cycles, ok)`` arrays: ok = exact, fitting, and within fan-out. ``copies``: the rows
        whose panels' copies count (``batch_execution``; the others' cycles are a lower bound).

        The formulas are :mod:`~polymap.passes.counting.cost_model`'s and the
        fit rules :mod:`~polymap.passes.counting.fit`'s, applied to arrays.
        """
        arch = self.arch
        n = len(arch.levels)
        ok = batch.exact.copy()
        for l in range(1, n):
            ok &= ~np.asarray(exceeds(arch.levels[l], batch.footprint[l], batch.footprint_bytes[l]), dtype=bool)
        ev_T = _resolve(tiles, self.extents, self.loops)
        for k, lm in enumerate(template.levels):
            need = np.ones(len(tiles), dtype=np.int64)
            for x in lm.spatial:
                j = self.loops.index(x)
                need = need * -(-ev_T[:, k, j] // ev_T[:, k + 1, j])
            ok &= need <= fanout_available(arch, k)
        # the active units: the spatial loops' trips, or on a CPU the code's threads x lanes (one rule)
        units, waste, team = batch_execution(self.model, template, arch, self.extents, ev_T, tiles, copies=copies,
                                             team=True)
        energy, cycles = array_cost(arch, batch.instances, batch.counts, units, waste, team=team)
        return np.broadcast_to(energy, (len(tiles),)).astype(float), cycles, ok


def _fanout(arch: Architecture, k: int) -> int:
    return fanout_available(arch, k)


def _resolve(tiles: np.ndarray, extents: dict, loops: tuple[str, ...]) -> np.ndarray:
    b, n, m = tiles.shape
    out = np.empty((b, n + 1, m), dtype=np.int64)
    out[:, 0] = [extents[x] for x in loops]
    for k in range(1, n):
        t = tiles[:, k]
        out[:, k] = np.where(t <= 0, out[:, k - 1], np.minimum(t, out[:, k - 1]))
    out[:, n] = 1
    return out


def _orders(loops: tuple[str, ...]) -> list[tuple[str, ...]]:
    if len(loops) <= MAX_PERMUTED:
        return list(permutations(loops))
    out = [tuple(loops)]
    for x in loops:
        o = tuple(y for y in loops if y != x) + (x,)
        if o not in out:
            out.append(o)
    return out


def _capacity_elements(model: KernelModel, nest: int, level: Level) -> int | None:
    if level.capacity_elements is not None:
        return level.capacity_elements
    if level.capacity_bytes is not None:
        sizes = {"f32": 4, "f64": 8, "i32": 4, "i64": 8}
        widest = max(sizes.get(model.kernel.decl(x).dtype, 4) for x in nest_tensors(model.kernel, nest))
        return level.capacity_bytes // widest
    return None


def square_footprint(model: KernelModel, nest: int, side: int, extents: dict) -> int:
    """Elements one square tile of ``side`` touches: per reference, the box of its subscripts' ranges."""
    boxes: dict[str, tuple[int, ...]] = {}
    for s in model.nest_statements(nest):
        for a in s.accesses:
            dims = []
            for sub in a.ref.indices:
                names = {e.name for e in ir.subexpressions(sub) if isinstance(e, ir.Var) and e.name in extents}
                dims.append(max(1, sum(min(side, extents[v]) for v in names) - max(len(names) - 1, 0)))
            old = boxes.get(a.tensor)
            boxes[a.tensor] = tuple(max(p, q) for p, q in zip(dims, old)) if old else tuple(dims)
    return sum(prod(b) for b in boxes.values())


def _closed_form_sides(model: KernelModel, nest: int, arch: Architecture, extents: MappingT[str, int]
                      ) -> tuple[int | None, ...]:
    sides: list[int | None] = [None]
    bound = max(extents.values())
    for lv in arch.levels[1:]:
        cap = _capacity_elements(model, nest, lv)
        if cap is None:
            sides.append(sides[-1])
            continue
        s = 1
        while s < bound and square_footprint(model, nest, s + 1, extents) <= cap / 3:
            s += 1
        bound = s
        sides.append(s)
    return tuple(sides)


def _sweep(side: int | None, extent: int) -> list[int]:
    if side is None:
        return [0]
    lo, hi = max(1, side // 4), max(1, side * 4)
    vals = {1 << p for p in range(0, 20) if lo <= (1 << p) <= hi}
    vals |= {d for d in range(lo, min(hi, extent) + 1) if extent % d == 0}
    vals.add(side)
    return sorted(v for v in vals if v <= extent) or [1]


def candidate_tiles(space: SearchSpace, template: Mapping, budget: int, seed: int = 0) -> np.ndarray:
    """``(B, levels, loops)`` tiles: the closed form first, then random draws from the sweep, nested inward."""
    rng = np.random.default_rng(seed)
    n, m = len(space.arch.levels), len(space.loops)
    ext = np.array([space.extents[x] for x in space.loops])
    choices = [[_sweep(space.sides[k], space.extents[x]) for x in space.loops] for k in range(n)]
    rows = np.zeros((budget, n, m), dtype=np.int64)
    for k in range(1, n):
        for j in range(m):
            rows[:, k, j] = rng.choice(choices[k][j], size=budget)
    rows[0, 1:] = [[0 if s is None else min(s, e) for e in ext] for s in space.sides[1:]]
    parent = np.broadcast_to(ext, (budget, m)).copy()
    for k in range(1, n):  # nest inward: a tile is at most its parent
        rows[:, k] = np.where(rows[:, k] <= 0, parent, np.minimum(rows[:, k], parent))
        parent = rows[:, k].copy()
    for k, lm in enumerate(template.levels):  # spatial: the inner tile splits evenly over the instances
        for x in lm.spatial:
            j = space.loops.index(x)
            outer = ext[j] if k == 0 else rows[:, k, j]
            fan = _fanout(space.arch, k)
            inner = np.maximum(1, -(-outer // fan))
            if k + 1 < n:
                rows[:, k + 1, j] = inner
                for kk in range(k + 2, n):
                    rows[:, kk, j] = np.minimum(rows[:, kk, j], rows[:, kk - 1, j])
    return np.unique(rows, axis=0)
