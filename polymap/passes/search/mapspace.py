"""The enumerated mapspace of one nest, pruned without losing the best mapping.

Before -> after (gemm ``i, j, k`` on a two-level architecture)::

    nest + arch                    ->  Mapspace: spatial plans x trip patterns x orders x tile configs
    every chain E >= T1 >= ...        ({}, pattern (ijk | -)):  6 orders x 412 configs
    of divisors, every order,         ...
    every spatial subset              stats: space 2.1e6, pruned capacity 1.9e6, dominance ..., left 7,416

The space: per loop a chain of tiles ``E >= T1 >= ... >= T_{n-1}``, each
dividing the one outside it (Timeloop's perfect factorisations); per level
that fans out, a set of at most ``max_spatial`` spatial loops; per level,
an order of the loops; per level below the backing store, the tensors it
keeps (:mod:`polymap.passes.search.bypass` enumerates them and prunes whole
keep plans by an exact bound on the objective).

Pruning, each exact (the best mapping survives, see ``docs/design.md``):

- **capacity**: footprints from the fast path's image sizes, before
  counting; they only grow with tiles, so partial configs (loops not yet
  chosen at 1) that overflow are dropped with everything they extend to;
- **fan-out**: spatial trip counts over the inner instances;
- **dominance**: a loop whose trip count at a level is 1 takes no part in the
  order (orders differing only in where it stands give equal counts), nor
  does a spatial loop (it names the instance, not a step); the innermost
  level's order changes no count (its loops walk single iterations) and is
  the nest's own; a spatial loop of trip count 1 is the same mapping as a
  temporal one;
- **symmetry**: loop permutations that map every tensor's accesses to
  themselves up to a permutation of its dimensions (``p <-> q, r <-> s`` of a
  square convolution) map mappings to mappings with equal counts: only the
  lexicographically smaller tile config of each pair is kept;
- **legality**: once per order class. A nest whose dependence distances are
  componentwise non-negative on its loops is legal under every tiling and
  order (:func:`permutable`); spatial plans are decided once each.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import permutations
from math import factorial, prod
from typing import Iterator

import numpy as np

from polymap.passes.counting.fastcount import tile_footprints
from polymap.passes.counting.fastcount_nest import FastNest
from polymap.machine.arch import Architecture
from polymap.passes.counting.fit import exceeds, fanout_available

PrunedCounts = dict  # reason -> mappings removed


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def chains(extent: int, depth: int) -> np.ndarray:
    """``(C, depth)`` arrays of tiles ``extent >= t1 >= ... >= t_depth``, each dividing the previous."""
    rows = [[]]
    for _ in range(depth):
        rows = [r + [d] for r in rows for d in divisors(r[-1] if r else extent)]
    return np.array(rows, dtype=np.int64).reshape(len(rows), depth)


@dataclass(frozen=True)
class SpatialPlan:
    """Spatial loops (indices) per level, empty where the level does not fan out; and the tensors
    each level keeps (``keep``: per level, or ``()`` for every tensor at every level)."""

    loops: tuple[frozenset[int], ...]
    keep: tuple[frozenset[str], ...] = ()

    def kept(self, nest: FastNest) -> tuple[frozenset[str], ...]:
        """Per level, the tensors it keeps (the backing store keeps every one)."""
        every = frozenset(t.name for t in nest.tensors)
        if not self.keep:
            return tuple(every for _ in self.loops)
        return (every,) + tuple(self.keep[1:])

    def names(self, loops: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(loops[x] for x in sorted(s)) for s in self.loops)


@dataclass(frozen=True)
class Group:
    """Tile configs of one spatial plan and one trip pattern: every order of the pattern applies."""

    plan: int  # index into Mapspace.plans
    pattern: tuple[tuple[int, ...], ...]  # per level but the innermost: temporal loops of trip > 1
    tiles: np.ndarray  # (B, levels, loops); tiles[:, 0] is the whole loop
    inner: tuple[int, ...] = ()  # innermost level: loops that carry a dependence and have tile > 1
    lo: int = 0  # the group's orders are [lo, hi) of the pattern's permutations
    hi: int | None = None

    @property
    def all_orders(self) -> int:
        return prod(factorial(len(p)) for p in self.pattern)

    @property
    def orders(self) -> int:
        return (self.all_orders if self.hi is None else self.hi) - self.lo

    @property
    def size(self) -> int:
        return self.orders * len(self.tiles)

    def order_at(self, index: int) -> tuple[tuple[int, ...], ...]:
        """The ``index``-th combination of per-level permutations (mixed radix, last level fastest)."""
        index += self.lo
        out = []
        for p in reversed(self.pattern):
            n = factorial(len(p))
            out.append(_nth_permutation(p, index % n))
            index //= n
        return tuple(reversed(out))


def _nth_permutation(items: tuple[int, ...], n: int) -> tuple[int, ...]:
    pool, out = list(items), []
    for k in range(len(items), 0, -1):
        f = factorial(k - 1)
        out.append(pool.pop(n // f))
        n %= f
    return tuple(out)


def full_orders(group: Group, plan: SpatialPlan, nloops: int, index: int) -> tuple[tuple[int, ...], ...]:
    """Complete per-level orders: spatial loops, the permutation, then trip-1 loops; innermost: the nest's own."""
    levels = len(plan.loops)
    perm = group.order_at(index)
    out = []
    for k in range(levels):
        if k == levels - 1:
            out.append(tuple(range(nloops)))
            continue
        head = tuple(sorted(plan.loops[k])) + perm[k]
        out.append(head + tuple(x for x in range(nloops) if x not in head))
    return tuple(out)


@dataclass
class Mapspace:
    """The pruned space of one nest; ``stats`` says how big the space was and why the rest went."""

    nest: FastNest
    fanouts: tuple[int, ...]
    plans: tuple[SpatialPlan, ...]
    groups: list[Group]
    space: int
    pruned: PrunedCounts = field(default_factory=dict)

    @property
    def remaining(self) -> int:
        return sum(g.size for g in self.groups)


# --------------------------------------------------------------------------- footprints


def footprints(nest: FastNest, lengths: np.ndarray, keep: frozenset[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(elements, bytes)`` of one tile per row of ``lengths`` (B, loops): the fast path's footprint
    (:func:`~polymap.passes.counting.fastcount.tile_footprints`) of the tensors in ``keep`` (None: every tensor)."""
    cols = {x: np.asarray(lengths[:, x], dtype=np.int64) for x in range(lengths.shape[1])}
    return tile_footprints(nest, cols, [t for t in nest.tensors if keep is None or t.name in keep])


def _fits(nest: FastNest, arch: Architecture, tiles: np.ndarray, keep: tuple[frozenset[str], ...]) -> np.ndarray:
    ok = np.ones(len(tiles), dtype=bool)
    for k in range(1, len(arch.levels)):
        lv = arch.levels[k]
        if not lv.bounded:
            continue
        elems, nbytes = footprints(nest, tiles[:, k], keep[k])
        ok &= ~np.asarray(exceeds(lv, elems, nbytes), dtype=bool)
    return ok


# --------------------------------------------------------------------------- symmetry


def symmetries(nest: FastNest, fixed: frozenset[int] = frozenset()) -> list[tuple[int, ...]]:
    """Non-identity loop permutations that map every tensor's subscripts to a permutation of themselves
    and leave the loops in ``fixed`` (those that carry dependences: legality is not symmetric) in place."""
    m = len(nest.loops)
    if m > 8:
        return []
    out = []
    for sigma in permutations(range(m)):
        if sigma == tuple(range(m)) or any(nest.extents[x] != nest.extents[sigma[x]] for x in range(m)):
            continue
        if any(sigma[x] != x for x in fixed):
            continue
        if all(_maps_to_itself(t.subscripts, sigma) for t in nest.tensors):
            out.append(sigma)
    return out


def _maps_to_itself(subscripts: tuple, sigma: tuple[int, ...]) -> bool:
    """The renamed subscripts are the same multiset (a permutation of the tensor's dimensions)."""
    image = sorted(tuple((sigma[x], a) for x, a in sub) for sub in subscripts)
    return image == sorted(tuple(sub) for sub in subscripts)


def _canonical(tiles: np.ndarray, plan: SpatialPlan, sigmas: list[tuple[int, ...]]) -> np.ndarray:
    """Rows kept by the symmetry pruning: no symmetry maps the (plan, tiles) to a smaller row."""
    keep = np.ones(len(tiles), dtype=bool)
    flat = tiles.reshape(len(tiles), -1)
    for sigma in sigmas:
        if any(frozenset(sigma[x] for x in s) != s for s in plan.loops):
            continue  # the mirror has another spatial plan: its own group decides
        inverse = np.argsort(sigma)
        mirrored = tiles[:, :, inverse].reshape(len(tiles), -1)
        diff = mirrored - flat
        first = np.argmax(diff != 0, axis=1)
        smaller = diff[np.arange(len(tiles)), first] < 0
        keep &= ~smaller
    return keep


# --------------------------------------------------------------------------- building


def plan_space(nest: FastNest, arch: Architecture) -> int:
    """Mappings of one plan before any pruning: tile configs x every order at every level."""
    n, m = len(arch.levels), len(nest.loops)
    return prod(len(chains(e, n - 1)) for e in nest.extents) * factorial(m) ** n


def build_mapspace(nest: FastNest, arch: Architecture, plans: tuple[SpatialPlan, ...], *,
                   symmetric: bool = True, fixed: frozenset[int] = frozenset()) -> Mapspace:
    """Every tile config of every plan that fits, grouped by trip pattern (see the module doc)."""
    n, m = len(arch.levels), len(nest.loops)
    fanouts = tuple(fanout_available(arch, k) for k in range(n))
    per_loop = [chains(e, n - 1) for e in nest.extents]
    orders_all = factorial(m) ** n
    space = plan_space(nest, arch) * len(plans)
    pruned = {"capacity": 0, "fan-out": 0, "spatial trip 1": 0, "symmetry": 0, "order dominance": 0}
    sigmas = symmetries(nest, fixed) if symmetric else []
    groups: list[Group] = []
    for p, plan in enumerate(plans):
        tiles, lost = _plan_configs(nest, arch, plan, per_loop, fanouts)
        for reason, count in lost.items():
            pruned[reason] += count * orders_all
        if sigmas and len(tiles):
            keep = _canonical(tiles, plan, sigmas)
            pruned["symmetry"] += int((~keep).sum()) * orders_all
            tiles = tiles[keep]
        kept = 0
        for pattern, inner, rows in _patterns(tiles, plan, n, m, fixed, nest.init_loop):
            g = Group(p, pattern, rows, inner)
            groups.append(g)
            kept += g.size
        pruned["order dominance"] += len(tiles) * orders_all - kept
    return Mapspace(nest, fanouts, plans, groups, space, pruned)


def _plan_configs(nest: FastNest, arch: Architecture, plan: SpatialPlan, per_loop: list[np.ndarray],
                  fanouts: tuple[int, ...]) -> tuple[np.ndarray, dict[str, int]]:
    """``(B, n, m)`` tiles of ``plan`` that fit and fan out, and how many (full) configs each rule removed."""
    n, m = len(arch.levels), len(nest.loops)
    lost = {"capacity": 0, "fan-out": 0, "spatial trip 1": 0}
    rows = np.zeros((1, n, m), dtype=np.int64)
    rows[:, 0] = nest.extents
    rows[:, 1:] = 1
    remaining = prod(len(c) for c in per_loop)
    for x in range(m):
        ch = per_loop[x]
        remaining //= len(ch)
        cand = np.repeat(rows, len(ch), axis=0)
        cand[:, 1:, x] = np.tile(ch, (len(rows), 1))
        full = np.concatenate([cand[:, :, x], np.ones((len(cand), 1), dtype=np.int64)], axis=1)
        trip = full[:, :-1] // full[:, 1:]
        ok = np.ones(len(cand), dtype=bool)
        for k in range(n):
            if x in plan.loops[k]:
                ok &= trip[:, k] > 1
        lost["spatial trip 1"] += int((~ok).sum()) * remaining
        cand = cand[ok]
        ok = np.ones(len(cand), dtype=bool)
        for k in range(n):
            sp = [y for y in plan.loops[k] if y <= x]
            if sp:
                need = np.ones(len(cand), dtype=np.int64)
                for y in sp:
                    inner = cand[:, k + 1, y] if k + 1 < n else 1
                    need = need * (cand[:, k, y] // inner)
                ok &= need <= fanouts[k]
        lost["fan-out"] += int((~ok).sum()) * remaining
        cand = cand[ok]
        ok = _fits(nest, arch, cand, plan.kept(nest))
        lost["capacity"] += int((~ok).sum()) * remaining
        rows = cand[ok]
    return rows, lost


def _patterns(tiles: np.ndarray, plan: SpatialPlan, n: int, m: int, fixed: frozenset[int], init_loop: int | None
             ) -> Iterator[tuple[tuple[tuple[int, ...], ...], tuple[int, ...], np.ndarray]]:
    """``(pattern, inner, rows)`` groups: per level but the innermost, the temporal loops with trip
    count > 1; at the innermost, the loops of ``fixed`` (carrying dependences) with tile > 1."""
    if not len(tiles):
        return
    trips = tiles[:, :-1] // tiles[:, 1:]  # (B, n-1, m): level k walks tiles of level k+1
    temporal = np.ones((n - 1, m), dtype=bool)
    for k in range(n - 1):
        for x in plan.loops[k]:
            temporal[k, x] = False
    moving = (trips > 1) & temporal[None]
    if init_loop is not None and n > 1:
        # an initialisation's residency precedes the loop it lacks at the outermost level, so that
        # loop steps there (init -> tile 0) even with one tile: its place in the order counts
        moving[:, 0, init_loop] = True
    inner = (tiles[:, -1] > 1) & np.isin(np.arange(m), sorted(fixed))[None]
    bits_all = np.concatenate([moving.reshape(len(tiles), -1), inner], axis=1)
    weights = 1 << np.arange(bits_all.shape[1], dtype=np.int64)
    keys = (bits_all * weights).sum(axis=1)
    order = np.argsort(keys, kind="stable")
    bounds = np.flatnonzero(np.diff(keys[order])) + 1
    width = (n - 1) * m
    for members in np.split(order, bounds):
        key = int(keys[members[0]])  # the bits, decoded in Python: numpy per group costs more
        pattern = tuple(tuple(x for x in range(m) if key >> (k * m + x) & 1) for k in range(n - 1))
        yield pattern, tuple(x for x in range(m) if key >> (width + x) & 1), tiles[members]


def merged(first: Mapspace, second: Mapspace) -> Mapspace:
    """One space of both (``second``'s groups after ``first``'s, its plan indices shifted)."""
    shift = len(first.plans)
    groups = list(first.groups) + [replace(g, plan=g.plan + shift) for g in second.groups]
    pruned = dict(first.pruned)
    for reason, count in second.pruned.items():
        pruned[reason] = pruned.get(reason, 0) + count
    return Mapspace(first.nest, first.fanouts, first.plans + second.plans, groups, first.space + second.space, pruned)
