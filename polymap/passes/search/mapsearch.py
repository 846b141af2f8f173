"""The mapspace search of ``polymap search``: build, prune, evaluate on workers, merge, confirm.

Before -> after::

    model, nest, arch, params, SearchOptions
      -> Mapspace (mapspace.py): plans x patterns x orders x tiles, pruned exactly
      -> legality once per order class (the time dims of the loops that carry dependences)
      -> WorkItems (explore.py) on local processes or a Dask cluster, at most
         ``max_evaluations`` mappings, in index order
      -> the best ``top`` by (objective, the other two, index): the same on any workers
      -> a second round over the keep plans (bypass.py) whose floor on the objective is not
         above the first round's ``kept``-th best (every tensor kept everywhere is the first)
      -> each confirmed by the ISL path (legality with its own tiles, counts equal)

Nests outside the fast path's class (statements lacking more than one loop, non-box domains)
are searched over the small candidate set of :mod:`polymap.passes.search.space`
with the ISL path alone, under the same budget.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import combinations, product
from typing import Callable, Mapping as MappingT

import numpy as np

from polymap.islcheck import isl
from polymap.mapping.model import LevelMapping, Mapping, loop_extents
from polymap.passes.counting.cost_model import (
    CostReport,
    Objective,
    evaluate,
    mapping_execution,
    objective_value,
    rank_terms,
)
from polymap.passes.counting.counting import count_mapping, isl_count_mapping
from polymap.passes.counting.fit import capacity_problems, fanout_problems
from polymap.passes.counting.fastcount import Evaluator, Structure, fast_counts
from polymap.passes.counting.fastcount_orders import all_orders
from polymap.passes.counting.fastcount_nest import FastNest, NotSupported, analyse_nest
from polymap.passes.dependences.dependences import memory_based
from polymap.passes.dependences.loop_classes import distance_set
from polymap.passes.search.executors import Executor, LocalExecutor
from polymap.passes.search.explore import ItemResult, Scored, evaluate_item, work_items
from polymap.passes.search.bypass import floor, keep_plans
from polymap.passes.search.mapspace import (Group, Mapspace, SpatialPlan, build_mapspace, full_orders, merged,
                                            plan_space)
from polymap.passes.search.search import is_legal
from polymap.passes.search.space import SearchSpace
from polymap.machine.arch import Architecture
from polymap.poly import KernelModel


@dataclass(frozen=True)
class SearchOptions:
    """What ``polymap search`` was asked for."""

    objective: Objective = Objective.ENERGY
    top: int = 5
    max_evaluations: int | None = 5_000_000  # mappings evaluated at most (None: the whole pruned space)
    max_spatial: int = 2  # spatial loops per level that fans out
    symmetric: bool = True  # prune mirror images under the nest's symmetries
    chunk: int = 200_000  # evaluations per work item
    csv_rows: bool = False  # keep every evaluated mapping's counts
    isl_candidates: int = 12  # mappings the ISL-only search counts (nests outside the fast path)
    bypass: bool = True  # search which tensors each level keeps (else: every tensor at every level)


@dataclass(frozen=True)
class Progress:
    evaluated: int
    total: int
    pruned: int
    best: float | None
    rate: float  # evaluations per second


@dataclass(frozen=True)
class Found:
    """One result: the mapping and its cost (ISL path), and whether the fast path agreed."""

    mapping: Mapping
    cost: CostReport
    objective: float
    confirmed: bool  # legal with its own tiles, and fast counts == ISL counts


@dataclass
class SearchResult:
    """The best mappings of one nest and what the search went through."""

    kernel: str
    nest: int
    objective: Objective
    found: list[Found]
    space: int = 0
    pruned: dict = field(default_factory=dict)
    evaluated: int = 0
    seconds: float = 0.0
    exhaustive: bool = True  # the whole pruned space was evaluated
    path: str = "fast"  # "fast" or "isl"
    notes: list[str] = field(default_factory=list)
    table: list[ItemResult] = field(default_factory=list)
    context: object = None  # (FastNest, Mapspace) for the CSV writer
    phases: dict = field(default_factory=dict)  # seconds: build, legality, evaluate, confirm

    @property
    def best(self) -> Found | None:
        return self.found[0] if self.found else None


# --------------------------------------------------------------------------- legality


def carrying_loops(model: KernelModel, nest: int, loops: tuple[str, ...]) -> frozenset[int]:
    """Loops with a non-zero distance in some memory-based dependence of the nest."""
    out: set[int] = set()
    stmts = model.nest_statements(nest)
    for dep in memory_based(model, stmts):
        delta = distance_set(model, dep)
        for k in range(delta.dim(isl.dim_type.set)):
            if k in out or k >= len(loops):
                continue
            zero = isl.Set(f"{{ [{', '.join(f'd{j}' for j in range(delta.dim(isl.dim_type.set)))}] : d{k} = 0 }}")
            if not delta.subtract(zero.align_params(delta.get_space())).is_empty():
                out.add(k)
    return frozenset(out)


def _level_key(perm: tuple[int, ...], spatial: frozenset[int], carrying: frozenset[int]) -> tuple:
    """The time dims of one level that decide legality: carrying loops that step, in time order."""
    return tuple((x, True) for x in sorted(spatial & carrying)) + tuple((x, False) for x in perm if x in carrying)


# --------------------------------------------------------------------------- mappings


def mapping_of(model: KernelModel, nest: FastNest, arch: Architecture, plan: SpatialPlan,
               orders: tuple[tuple[int, ...], ...], tiles_row: list[list[int]]) -> Mapping:
    loops = nest.loops
    kept = plan.kept(nest)
    levels = []
    for k, lv in enumerate(arch.levels):
        tile = tuple(None if k == 0 or int(tiles_row[k][x]) >= nest.extents[x] else int(tiles_row[k][x])
                     for x in range(len(loops)))
        keep = tuple(t.name for t in nest.tensors if t.name in kept[k])
        levels.append(LevelMapping(lv.name, tile, tuple(loops[x] for x in orders[k]),
                                   tuple(loops[x] for x in sorted(plan.loops[k])), keep))
    return Mapping(model.kernel.name, nest.nest, loops, tuple(levels))


def _spatial_plans(model: KernelModel, nest: FastNest, arch: Architecture, options: SearchOptions,
                   carrying: frozenset[int], notes: list[str]) -> tuple[SpatialPlan, ...]:
    n, m = len(arch.levels), len(nest.loops)
    fan = [arch.inner_instances(k) // arch.levels[k].instances for k in range(n)]
    per_level = []
    for k in range(n):
        if fan[k] <= 1:
            per_level.append([frozenset()])
            continue
        ok = []
        for x in range(m):
            if nest.extents[x] <= 1:
                continue
            plan = SpatialPlan(tuple(frozenset([x]) if j == k else frozenset() for j in range(n)))
            structure = Structure(tuple(tuple(range(m)) for _ in range(n)), plan.loops,
                                  tuple(frozenset(t.name for t in nest.tensors) for _ in range(n)))
            try:
                Evaluator(nest, structure)
            except NotSupported as exc:
                notes.append(f"spatial {nest.loops[x]} at {arch.levels[k].name} not searched: {exc}")
                continue
            probe = mapping_of(model, nest, arch, plan, structure.orders,
                               [[e if j == 0 else (e if j <= k else 1) for e in nest.extents] for j in range(n)])
            if is_legal(model, probe):
                ok.append(x)
        subsets = [frozenset()] + [frozenset(c) for r in range(1, options.max_spatial + 1)
                                   for c in combinations(ok, r)]
        per_level.append(subsets)
    return tuple(SpatialPlan(tuple(p)) for p in product(*per_level))


def _countable(nest: FastNest, plans: tuple[SpatialPlan, ...], notes: list[str]) -> tuple[SpatialPlan, ...]:
    """The plans the fast path counts: a halo loop spread at two levels of one multicast span (with
    the plan's bindings) is not (the ISL path would be needed for each of its mappings)."""
    out = []
    m, dropped = len(nest.loops), 0
    for plan in plans:
        try:
            Evaluator(nest, Structure(tuple(tuple(range(m)) for _ in plan.loops), plan.loops, plan.kept(nest)))
        except NotSupported:
            dropped += 1
            continue
        out.append(plan)
    if dropped:
        notes.append(f"{dropped} spatial plans not searched: a halo loop spatial at two levels of one multicast span")
    return tuple(out)


def legal_mask(model: KernelModel, space: Mapspace, group: Group, nest: FastNest, arch: Architecture, carrying: frozenset[int],
               cache: dict) -> np.ndarray:
    """Legality of every order combination of the group (shape: permutations per level), decided once
    per class: two instances in dependence differ only in carrying loops, so the mapped schedule orders
    them by those loops' time dims alone (``docs/design.md``). So the whole mask depends only on the
    pattern, the spatial carrying loops per level and the innermost carrying loops, and is reused
    across the groups (tile configs, other spatial loops, keep plans) that share them."""
    plan = space.plans[group.plan]
    whole = ("mask", group.pattern, tuple(s & carrying for s in plan.loops), group.inner)
    if whole not in cache:
        cache[whole] = _legal_mask(model, plan, group, nest, arch, carrying, cache)
    return cache[whole]


def _legal_mask(model: KernelModel, plan: SpatialPlan, group: Group, nest: FastNest, arch: Architecture,
                carrying: frozenset[int], cache: dict) -> np.ndarray:
    perms = [all_orders(p) for p in group.pattern]
    ids, reps = [], []
    for k, level_perms in enumerate(perms):
        keys: dict = {}
        level_ids = np.empty(len(level_perms), dtype=np.int64)
        for i, perm in enumerate(level_perms):
            level_ids[i] = keys.setdefault(_level_key(perm, plan.loops[k], carrying), len(keys))
        ids.append(level_ids)
        reps.append([int(np.flatnonzero(level_ids == j)[0]) for j in range(len(keys))])
    table = np.empty(tuple(len(r) for r in reps), dtype=bool)
    first = group.tiles[0].tolist()
    for combo in np.ndindex(*table.shape):
        index = [reps[k][j] for k, j in enumerate(combo)]
        # the carrying dims in time order, levels flattened: the same sequence is the same order
        # of dependent instances (tile sizes only move the boundaries within one loop's dims)
        key = (sum((_level_key(perms[k][i], plan.loops[k], carrying) for k, i in enumerate(index)), ()),
               tuple(sorted(x for s in plan.loops for x in s if x in carrying)), group.inner)
        if key not in cache:
            orders = tuple(tuple(sorted(plan.loops[k])) + perms[k][i] for k, i in enumerate(index))
            full = tuple(o + tuple(x for x in range(len(nest.loops)) if x not in o) for o in orders)
            full = full + (tuple(range(len(nest.loops))),)
            cache[key] = is_legal(model, mapping_of(model, nest, arch, plan, full, first))
        table[combo] = cache[key]
    return table[np.ix_(*ids)]


# --------------------------------------------------------------------------- the search


def search_nest(model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int], *, options: SearchOptions = SearchOptions(),
                executor: Executor | None = None, progress: Callable[[Progress], None] | None = None) -> SearchResult:
    """The best ``options.top`` legal, fitting mappings of ``nest`` on ``arch`` (module doc).

    Two rounds: the plans that keep every tensor everywhere, then the other keep plans whose
    floor (:mod:`polymap.passes.search.bypass`) is not above the round's ``kept``-th best.
    """
    start = time.monotonic()
    try:
        fast = analyse_nest(model, nest, dict(params))
    except NotSupported as exc:
        return _search_isl(model, nest, arch, params, options, f"outside the fast path ({exc})", start)
    notes: list[str] = []
    carrying = carrying_loops(model, nest, fast.loops)
    spatial = _countable(fast, _spatial_plans(model, fast, arch, options, carrying, notes), notes)
    space = build_mapspace(fast, arch, spatial, symmetric=options.symmetric, fixed=carrying)
    phases = {"build": time.monotonic() - start}
    kept = max(options.top * 4, options.top + 8)
    run = _Run(model, fast, arch, options, executor or LocalExecutor(1), progress, carrying, kept, start)
    run.evaluate(space, 0)
    skipped = False
    if options.bypass:
        others = keep_plans(fast, arch)[1:]
        limit = run.best[kept - 1].key[0] if len(run.best) >= kept else float("inf")
        survivors = []
        space.pruned["bypass floor"] = 0
        for plan_keep in others:
            value = float(objective_value(options.objective, *floor(fast, arch, plan_keep)))
            if value > limit:
                space.pruned["bypass floor"] += plan_space(fast, arch) * len(spatial)
                space.space += plan_space(fast, arch) * len(spatial)
            else:
                survivors.append(plan_keep)
        budget_left = options.max_evaluations is None or run.total < options.max_evaluations
        if survivors and not budget_left:
            # the budget ended in the first round: these plans are counted in the space, not built
            space.space += plan_space(fast, arch) * len(spatial) * len(survivors)
            skipped = True
        elif survivors:
            t0 = time.monotonic()
            plans = tuple(SpatialPlan(p.loops, keep) for keep in survivors for p in spatial)
            more = build_mapspace(fast, arch, _countable(fast, plans, notes), symmetric=options.symmetric,
                                  fixed=carrying)
            phases["build"] += time.monotonic() - t0
            offset = len(space.groups)
            space = merged(space, more)
            run.evaluate(space, offset)
        notes.append(f"bypass: {len(others) + 1} keep plans, {len(others) - len(survivors)} removed whole by "
                     f"their floor on the objective, "
                     + (f"{len(survivors)} not reached within the budget" if skipped
                        else f"{len(survivors) + 1} searched"))
    phases["legality"], phases["evaluate"] = run.legality_seconds, run.evaluate_seconds
    t0 = time.monotonic()
    run.results.sort(key=lambda r: r.index)
    found = _confirm(model, fast, arch, params, space, space.groups, run.best, options)
    phases["confirm"] = time.monotonic() - t0
    remaining = sum(g.size for g in space.groups) - space.pruned.get("illegal", 0)
    return SearchResult(model.kernel.name, nest, options.objective, found, space.space, dict(space.pruned),
                        run.done, time.monotonic() - start, run.total >= remaining and not skipped, "fast", notes,
                        run.results if options.csv_rows else [], (fast, space, space.groups), phases)


@dataclass
class _Run:
    """The evaluation rounds of one search: legality per order class, work items, the merged best."""

    model: KernelModel
    fast: FastNest
    arch: Architecture
    options: SearchOptions
    executor: Executor
    progress: Callable[[Progress], None] | None
    carrying: frozenset[int]
    kept: int
    start: float
    cache: dict = field(default_factory=dict)
    results: list[ItemResult] = field(default_factory=list)
    best: list[Scored] = field(default_factory=list)
    done: int = 0
    total: int = 0
    legality_seconds: float = 0.0
    evaluate_seconds: float = 0.0

    def evaluate(self, space: Mapspace, first: int) -> None:
        """Evaluate ``space.groups[first:]`` within what is left of the budget."""
        t0 = time.monotonic()
        budget = self.options.max_evaluations
        left = None if budget is None else max(budget - self.total, 0)
        # legality of the groups the budget reaches (in index order), not of the whole space
        masks, legal = [], 0
        for g in space.groups[first:]:
            if left is not None and legal >= left:
                break
            masks.append(legal_mask(self.model, space, g, self.fast, self.arch, self.carrying, self.cache))
            legal += int(masks[-1].sum()) * len(g.tiles)
        groups = space.groups[first:first + len(masks)]
        illegal = sum(int((~m).sum()) * len(g.tiles) for g, m in zip(groups, masks))
        space.pruned["illegal"] = space.pruned.get("illegal", 0) + illegal
        t1 = time.monotonic()
        self.legality_seconds += t1 - t0
        items = work_items(groups, masks, space.plans, self.fast, self.arch, objective=self.options.objective,
                           keep=self.kept, rows=self.options.csv_rows, chunk=self.options.chunk, budget=left,
                           first_group=first, first_item=len(self.results))
        self.total += sum(it.size for it in items)
        pruned = sum(space.pruned.values())
        for res in self.executor.map(evaluate_item, items):
            self.results.append(res)
            self.done += res.evaluated
            self.best = sorted(self.best + list(res.best), key=lambda s: s.key)[:self.kept]
            if self.progress is not None:
                elapsed = max(time.monotonic() - self.start, 1e-9)
                self.progress(Progress(self.done, self.total, pruned, self.best[0].key[0] if self.best else None,
                                       self.done / elapsed))
        self.evaluate_seconds += time.monotonic() - t1


def _confirm(model: KernelModel, fast: FastNest, arch: Architecture, params: MappingT[str, int], space: Mapspace, groups: list[Group], best: list[Scored],
             options: SearchOptions) -> list[Found]:
    out: list[Found] = []
    extents = loop_extents(model.kernel, fast.nest, dict(params))
    for s in best:
        if len(out) >= options.top:
            break
        g = groups[s.group]
        plan = space.plans[g.plan]
        row = g.tiles[s.row].tolist()
        mp = mapping_of(model, fast, arch, plan, full_orders(g, plan, len(fast.loops), s.order), row)
        if not is_legal(model, mp):
            continue
        counts = isl_count_mapping(model, mp, arch, params=dict(params))  # the other path, to compare
        agree = counts == fast_counts(model, mp, arch, params=dict(params))
        cost = evaluate(counts, arch, execution=mapping_execution(model, mp, arch, extents))
        out.append(Found(mp, cost, float(objective_value(options.objective, cost.energy_pj, cost.cycles)), agree))
    return out


def _search_isl(model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int], options: SearchOptions,
                why: str, start: float) -> SearchResult:
    space = SearchSpace.build(model, nest, arch, dict(params))
    result = SearchResult(model.kernel.name, nest, options.objective, [], path="isl", notes=[why])
    if space is None:
        return result
    candidates = []
    for t in space.structures():
        candidates += [t, space.with_tiles(t, _halved(t))]
    limit = options.isl_candidates if options.max_evaluations is None else min(options.isl_candidates,
                                                                              options.max_evaluations)
    result.space = len(candidates)
    found = []
    for mp in candidates[:limit]:
        result.evaluated += 1
        if fanout_problems(mp, arch, space.extents) or capacity_problems(model, mp, arch, dict(params)):
            continue
        if not is_legal(model, mp):
            continue
        counts = count_mapping(model, mp, arch, params=dict(params))
        cost = evaluate(counts, arch, execution=mapping_execution(model, mp, arch, space.extents))
        found.append(Found(mp, cost, float(objective_value(options.objective, cost.energy_pj, cost.cycles)), True))
    found.sort(key=lambda f: rank_terms(options.objective, f.cost.energy_pj, f.cost.cycles))
    result.found = found[:options.top]
    result.exhaustive = limit >= len(candidates)
    result.seconds = time.monotonic() - start
    return result


def _halved(template: Mapping) -> np.ndarray:
    import numpy as np

    return np.array([[0 if t is None else max(1, t // 2) for t in lm.tile] for lm in template.levels])
