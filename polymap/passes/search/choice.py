"""What ``compile`` maps when the user gives no mapping: the best legal, fitting candidate per nest.

Per nest, the candidates are the register blocking
(:mod:`polymap.passes.search.register_mapping`), the default heuristic
(:mod:`polymap.passes.search.default_mapping`), the interchanges that make the
innermost loop unit stride (:mod:`polymap.passes.search.interchange`), isl's
schedules (:mod:`polymap.passes.search.isl_schedule`), the best mappings of the search
(:func:`polymap.passes.search.search.search_mappings`, with a budget of
evaluations, :attr:`ChoiceOptions.search_evaluations`; on a nest outside the
fast counter's class only with ISL counts allowed,
:attr:`ChoiceOptions.search_isl_counts`, none by default) and always the
*original order*. Each is checked (legality:
:func:`polymap.passes.legality.legality.is_legal`, the exact verdict without witnesses; fit:
:func:`polymap.passes.counting.fit.fit_problems`) and counted exactly
(:func:`polymap.passes.counting.counting.count_mapping`), then ranked by
the objective (:class:`~polymap.passes.counting.cost_model.Objective`,
cycles then energy by default; between equal objective values, fewer strided
references first, :func:`rank`)::

    gemm 1024^3 on host
      register tiles   cycles 5.4e+08  energy 4.1e+09 pJ   <- chosen
      default          cycles 6.6e+08  ...
      original order   cycles 2.1e+09  ...

Which candidates are considered depends on work counts only, never on the
machine's load: the same input gives the same choice. Wall-clock limits
(:attr:`ChoiceOptions.candidate_limit_seconds`,
:attr:`ChoiceOptions.search_limit_seconds`) only stop runaway work (ISL on
a triangle at large sizes can take minutes); a candidate they stop is
rejected *and the choice says so* (:attr:`NestChoice.stopped`).

A nest whose loops share a name (jacobi-2d's two sweeps) is first given
distinct names (:func:`polymap.passes.frontend.rename.distinct_loop_names`): a
mapping names each loop once, so it would otherwise fuse them. The
original order is counted as the mapping that walks every loop at the
backing store (tile 1 below it: the program's order, no reuse assumed);
when it wins, the nest keeps its original schedule (no mapping).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from math import prod
from typing import Any, Callable, Mapping as MappingT

from polymap import ir
from polymap.budget import Budget, Pending, Piece
from polymap.machine.arch import Architecture
from polymap.mapping.model import (LevelMapping, Mapping, mapping_loop_extents, nest_loops, nest_tensors,
                                   resolved_tile)
from polymap.passes.counting.cost_model import (CostReport, Objective, compute_term, mapping_execution, evaluate,
                                                team_term)
from polymap.passes.counting.counting import count_mapping
from polymap.passes.counting.fastcount import fast_counts
from polymap.passes.counting.footprint import DTYPE_BYTES
from polymap.passes.counting.counts import Counts
from polymap.passes.counting.fit import FitProblem, capacity_problems, fit_check, fit_check_counted
from polymap.passes.counting.residency import ResidencyMaps, residency_maps, same_residencies
from polymap.passes.frontend.expansion import expand_scalars, kernel_expansions
from polymap.passes.frontend.rename import distinct_loop_names, repeated_loop_names
from polymap.passes.legality.legality import is_legal
from polymap.passes.search.default_mapping import choose_mapping
from polymap.passes.search.interchange import interchange_mappings, mapping_strided_weight
from polymap.passes.search.register_mapping import register_mappings
from polymap.passes.search.search import in_fast_class, search_mappings
from polymap.passes.search.isl_schedule import checked_sizes, isl_proposals, reduced_sizes
from polymap.passes.search.variants import neighbours
from polymap.poly import KernelModel, build_model, nest_instances

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ChoiceOptions:
    """How ``compile`` chooses a mapping per nest. Budgets count work, so the choice is reproducible."""

    objective: Objective = Objective.CYCLES
    """What the ranking minimises (ties broken by energy, or by cycles for the others)."""
    search_evaluations: int = 300
    """Tile vectors the search evaluates per loop order; 0 leaves the search out."""
    search_top: int = 3
    """Best mappings of the search that become candidates."""
    search_isl_counts: int = 0
    """ISL-path counts the search may make on a nest outside the fast counter's class (0: no search there).
    Each is seconds to minutes at real sizes (barvinok on square tiles at every level: PolyBench gemm at
    LARGE, 35-60 s CPU each), so by default such a nest is ranked among the other candidates only: a work
    count, never the machine's load, decides what is considered (``docs/design.md``)."""
    candidate_limit_seconds: float = 600.0
    """Wall-clock safety limit on one candidate's legality, fit and counts (stops runaway work, reported)."""
    search_limit_seconds: float = 600.0
    """Wall-clock safety limit on the search of one nest (stops runaway work, reported)."""
    count_losers: bool = False
    """Count every candidate. By default (and with the cycles objective) a candidate whose compute term
    alone (:func:`compute_bound`) exceeds the cycles of another counted candidate by more than
    :data:`NEAR_TIE` is left uncounted: it cannot be chosen, and its counts were most of compile's time
    (gramschmidt's original order and interchange: 4.5 s of 7 s of CPU, issue 9). True where the losers'
    counts are wanted too (``--tune`` times the model's best few; calibration)."""


#: why compile drops an illegal candidate (``polymap check --mapping`` on it gives the witnesses)
ILLEGAL_CANDIDATE = "illegal: it changes which write some read sees or which write is final"


@dataclass(frozen=True)
class ComputeBound:
    """A candidate's compute term, counted without its traffic: its cycles are at least ``cycles``."""

    cycles: float
    threads: int


@dataclass(frozen=True)
class Candidate:
    """One mapping considered for a nest; ``mapping`` None is the original schedule."""

    source: str
    mapping: Mapping | None
    counted: Mapping  # the mapping whose counts rank it (the original order's own expression)
    legal: bool | None  # None: never checked (a compute bound already lost, see ``bound``)
    problems: tuple[str, ...] = ()
    report: CostReport | None = None
    fit: tuple[FitProblem, ...] = ()
    ranked_at: tuple[tuple[str, int], ...] = ()
    """The reduced sizes it was ranked at (beyond the counting budget; ``report`` is None then)."""
    strided: int | None = None
    """The strided references of its innermost walk, the tie-break of :func:`rank` (set when ranked)."""
    footprints: tuple[tuple[int, int] | None, ...] = ()
    """Every level's ``(elements, bytes)`` its fit was checked on where its report is still to be counted (a
    remembered mapping ISL counts: ``api._start_costs`` passes them on to the count)."""
    bound: ComputeBound | None = None
    """Its compute term where that alone lost to a counted candidate, so it was neither checked nor counted
    (``legal`` None then, "not checked", but for the original order, which is always legal:
    :attr:`ChoiceOptions.count_losers`)."""

    def key(self, objective: Objective = Objective.CYCLES) -> tuple[float, float]:
        if self.report is None:
            return (float("inf"), float("inf"))
        return objective.key(self.report)


@dataclass(frozen=True)
class NestChoice:
    nest: int
    chosen: Candidate
    candidates: tuple[Candidate, ...]  # ranked: usable ones first, best first
    objective: Objective = Objective.CYCLES
    stopped: tuple[str, ...] = ()
    """What a wall-clock safety limit stopped (empty: the choice depended on work counts only)."""
    skipped: tuple[str, ...] = ()
    """Candidate sources that could not apply to the nest, each with why (isl's scheduler giving up)."""
    scheduler_seconds: float | None = None
    """Wall seconds of isl's scheduler on the nest with building its candidates (None: not run, e.g. a
    remembered choice). Reported, never decided on: the choice depends on work counts only."""


@dataclass(frozen=True)
class KernelChoice:
    """The kernel the code is generated for (loops renamed when needed) and one choice per nest."""

    kernel: ir.Kernel
    model: KernelModel
    nests: tuple[NestChoice, ...]
    renamed: tuple[tuple[int, tuple[str, ...]], ...]
    counted_at: tuple[tuple[str, int], ...] = ()
    """The sizes the candidates' reports were counted at (empty: unknown, e.g. a remembered choice)."""
    counted_for: Architecture | None = None
    """The architecture they were counted for (None: unknown)."""
    expanded: tuple[tuple[str, str], ...] = ()
    """Local scalars expanded into arrays before the choice, each with the loop that indexes it, in the
    names of the kernel as written (``(("temp2", "j"),)``); what the written mappings' ``expand`` says."""

    @property
    def mappings(self) -> tuple[Mapping, ...]:
        return tuple(n.chosen.mapping for n in self.nests if n.chosen.mapping is not None)

    def report_of(self, mapping: Mapping, arch: Architecture, params: MappingT[str, int]) -> CostReport | None:
        """The chosen candidate's own report for ``mapping`` when it was counted exactly for ``arch`` at
        ``params`` (the counts :func:`_evaluate` made: compile need not count the winner twice), else None."""
        if self.counted_for != arch or not self.counted_at or dict(self.counted_at) != dict(params):
            return None
        for n in self.nests:
            c = n.chosen
            if c.mapping is mapping and c.counted == mapping and not c.ranked_at:
                return c.report
        return None


def original_mapping(kernel: ir.Kernel, nest: int, arch: Architecture) -> Mapping:
    """The original order as a mapping: every loop walked at the backing store, tile 1 below."""
    loops = nest_loops(kernel, nest)
    keep = nest_tensors(kernel, nest)
    levels = tuple(LevelMapping(lv.name, (1,) * len(loops), tuple(loops), (), keep) for lv in arch.levels)
    return Mapping(kernel.name, nest, tuple(loops), levels)


def kernel_to_map(kernel: ir.Kernel) -> tuple[ir.Kernel, tuple[tuple[str, str], ...]]:
    """The kernel compile maps, and the scalars expanded in it: loops sharing a name renamed apart, and
    each local scalar that passes no value between the iterations of a loop an array along it (symm's
    ``temp2[j]``: the same results bit for bit, and the loop may then move). The written mappings
    record the expansion (``Mapping.expand``), so every command that reads them maps this kernel."""
    expanded = kernel_expansions(kernel)
    return distinct_loop_names(expand_scalars(kernel, dict(expanded))), expanded


def natural_original_mapping(model: KernelModel, nest: int, arch: Architecture,
                             params: MappingT[str, int]) -> Mapping:
    """The original order with the reuse any cache gives it: each level between the backing store and
    the innermost holds the largest block of the innermost loops (whole loops inside, a piece of the
    next when every statement has it and every loop inside it) whose bounding boxes fit it, within
    the level above; the order is the program's, so the schedule is the original's (strip-mined
    only: a piece of a loop around a statement that lacks an inner loop would move that statement,
    ``mapping.md``; checked by brute force in ``tests/test_original_reuse.py``)::

        atax (M=1900, N=2100) on host: LLC the whole nest; L2 i=1, j and j_2 whole; L1 single iterations

    :func:`original_mapping` (tile 1 below the backing store) assumes no reuse at all: its DRAM
    traffic there is 20 M elements where A (4 M) is read once.
    """
    kernel = model.kernel
    base = original_mapping(kernel, nest, arch)
    loops = base.loops
    extents = mapping_loop_extents(kernel, base, params, model=model)
    sizes = {t: DTYPE_BYTES.get(kernel.decl(t).dtype, 4) for t in nest_tensors(kernel, nest)}

    def fits(tile: dict[str, int], level: int) -> bool:
        elements = {t: _box(model, nest, t, tile) for t in sizes}
        return not arch.levels[level].exceeded_by(sum(elements.values()),
                                                  sum(n * sizes[t] for t, n in elements.items()))

    stmts = model.nest_statements(nest)
    # loops that every statement has, with every loop inside them: only these may be cut in pieces
    perfect = {x for j, x in enumerate(loops) if stmts and all(set(loops[j:]) <= set(s.loops) for s in stmts)}
    levels = list(base.levels)
    outer = {x: max(1, extents[x]) for x in loops}
    for k in range(1, len(levels) - 1):
        tile = {x: 1 for x in loops}
        for x in reversed(loops):
            tile[x] = outer[x]
            if fits(tile, k):
                continue
            lo, hi = 1, outer[x] if x in perfect else 1  # a piece of x would reorder a statement lacking a loop
            while lo < hi:
                tile[x] = (lo + hi + 1) // 2
                lo, hi = (tile[x], hi) if fits(tile, k) else (lo, tile[x] - 1)
            tile[x] = lo
            break
        levels[k] = dataclasses.replace(levels[k], tile=tuple(tile[x] for x in loops))
        outer = tile
    return dataclasses.replace(base, levels=tuple(levels))


#: Statement depth up to which the original order's own reuse is counted with ISL when the fast counter
#: cannot (atax's second nest at LARGE, two loops per statement: 0.7 s). Deeper nests outside the fast
#: class are refused, i.e. the candidate is kept: heat-3d's four-deep statements took ISL over 100 s.
#: A work count, not a clock: the choice stays the same on a loaded machine.
NATURAL_ISL_DEPTH = 2


def gains_on_original(model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int],
                      candidate: Candidate, original: Candidate) -> bool:
    """Does ``candidate`` beat the original order by more than threads (``docs/design.md``, "The
    original's own reuse")?

    Yes when it computes faster per thread than the original (read off the reports: no count), or when
    its slowest memory level moves less than the original's, counted with the reuse the original's own
    order has (:func:`natural_original_mapping`). Otherwise all it has over the original is its
    threads, and those the model overrates where a nest is shared out only in part (atax's tiles: the
    reduction runs in ``omp single``; 4x slower than the original on one thread, which the model did
    not see). The natural original is counted by the fast counter, or by ISL for statements at most
    :data:`NATURAL_ISL_DEPTH` deep; beyond that the question is refused and the answer is yes.
    """
    if candidate.report is None or (original.report is None and original.bound is None) or arch.vector is None:
        return True  # an accelerator's spatial units are what it is built for, not OpenMP's threads

    def memory(r: CostReport) -> float:  # the traffic's cycles: a level's term less the team's (level_term)
        return max((c for name, c in r.cycle_terms if name != "compute"), default=0.0) - team_term(arch, r.execution)

    def per_thread(r: CostReport) -> float:
        return dict(r.cycle_terms)["compute"] * r.execution.threads

    # the original left uncounted (it lost on its compute term alone) has that term, which is all this needs
    theirs = (per_thread(original.report) if original.report is not None
              else original.bound.cycles * original.bound.threads)
    if per_thread(candidate.report) < theirs:
        return True  # the compute term does not depend on the counts: the original's is the same
    natural = natural_original_mapping(model, nest, arch, params)
    counts = fast_counts(model, natural, arch, params=dict(params))
    if counts is None:
        if max((len(s.loops) for s in model.nest_statements(nest)), default=0) > NATURAL_ISL_DEPTH:
            return True
        counts = count_mapping(model, natural, arch, params=dict(params))
    extents = mapping_loop_extents(model.kernel, original.counted, params, model=model)
    mine = evaluate(counts, arch, execution=mapping_execution(model, original.counted, arch, extents))
    return memory(candidate.report) < memory(mine) or per_thread(candidate.report) < per_thread(mine)


def mapped_instances(model: KernelModel, mapping: Mapping, params: MappingT[str, int]) -> int:
    """The statement instances of the nests ``mapping`` maps (``Counts.instances`` of its counts, which
    depend on the nests alone, not on the mapping)."""
    return sum(nest_instances(model, nest, params) for nest in mapping.mapped_nests)


def compute_bound(model: KernelModel, mapping: Mapping, arch: Architecture, params: MappingT[str, int]) -> ComputeBound:
    """``mapping``'s compute term as :func:`_evaluate` counts it (the same execution, less the panels'
    copies), without its traffic: a lower bound on its cycles (:func:`~polymap.passes.counting.cost_model.compute_term`).
    Milliseconds where the counts take seconds (gramschmidt's original order: 2.4 s)."""
    extents = mapping_loop_extents(model.kernel, mapping, params, model=model)
    # without the panels' copies: which tensors are packed follows the keeps, which the fit may change
    # (fit_keeps), so the counted mapping may copy less; the term without them bounds it either way
    # (trmm at LARGE: the register tiles' bound with A's panel, 1.97e7, beat their own count, 1.953e7)
    execution = dataclasses.replace(mapping_execution(model, mapping, arch, extents), packs=1.0, pack_cycles=0.0)
    return ComputeBound(compute_term(arch, mapped_instances(model, mapping, params), execution), execution.threads)


def loses(bound: ComputeBound | None, cycles: float) -> bool:
    """Does a candidate with compute ``bound`` rank below one of ``cycles`` whatever its counts? Yes when
    its compute term alone is more than :data:`NEAR_TIE` above them: then it is neither first nor
    among the near ties :func:`near_ties_first` reorders (those are within NEAR_TIE of the best, whose
    cycles are at most ``cycles``)."""
    return bound is not None and bound.cycles > cycles * (1 + NEAR_TIE)


def _uncounted(source: str, mapping: Mapping | None, counted: Mapping, bound: ComputeBound, best: float) -> Candidate:
    """A candidate left uncounted because its compute term alone lost (:attr:`ChoiceOptions.count_losers`)."""
    why = (f"not counted: its compute term alone, {bound.cycles:.4g} cycles, exceeds the {best:.4g} cycles of "
           f"a counted candidate, so it cannot be chosen")
    # legality unknown (None), not False: nothing was checked, and "illegal" would tell a reader a falsehood
    return Candidate(source, mapping, counted, True if mapping is None else None, (why,), bound=bound)


def choose(kernel: ir.Kernel, arch: Architecture, params: MappingT[str, int], *,
           options: ChoiceOptions = ChoiceOptions(), progress: Progress | None = None,
           budget: Budget | None = None) -> KernelChoice:
    """The mapping of every nest of ``kernel`` (see the module docstring).

    Every candidate runs in a child under ``budget`` (:class:`polymap.budget.Budget`, the one
    mechanism): the options' safety limits stop runaway pieces (reported), and the choice refuses
    (``BudgetExceeded``) when the whole budget runs out.
    """
    budget = budget if budget is not None else Budget()
    renamed = tuple(sorted(repeated_loop_names(kernel).items()))
    kernel, expanded = kernel_to_map(kernel)
    model = build_model(kernel)
    nests = []
    todo = [nest for nest in range(len(kernel.nests())) if nest_loops(kernel, nest)]
    # each nest's search starts while the nest before it is chosen (its proposals are the parent's work on
    # one core, and the search often the longest piece: 3mm's three took 0.7 s each, one after the other)
    searches: dict[int, tuple[Piece, Pending | None, tuple[str, ...]]] = {}
    try:
        for k, nest in enumerate(todo):
            for ahead in todo[k:k + 2]:
                if ahead not in searches:
                    searches[ahead] = _start_search(model, ahead, arch, dict(params), options, budget)
            if progress:
                progress(f"choosing a mapping for nest {nest}...")
            nests.append(choose_nest(model, nest, arch, params, options=options, budget=budget,
                                     searching=searches[nest]))
    finally:
        for _, pending, _ in searches.values():
            if pending is not None:
                pending.cancel()
    return KernelChoice(kernel, model, tuple(nests), renamed, tuple(sorted(dict(params).items())), arch,
                        expanded)


def _counted(c: Candidate) -> bool:
    """A candidate the original order is ranked against: legal and counted at the given sizes."""
    return c.legal and c.report is not None


def _start_search(model: KernelModel, nest: int, arch: Architecture, params: dict[str, int], options: ChoiceOptions,
                  budget: Budget) -> tuple[Piece | None, Pending | None, tuple[str, ...]]:
    """The nest's search (:func:`_search`) started in a child of its own, with why it was left out."""
    piece, unsearched = _search(model, nest, arch, params, options)
    if piece is None:
        return None, None, unsearched
    return piece, budget.start(piece.fn, piece.args, piece.kwargs, what=piece.what, limit=piece.limit,
                               timed_out=piece.timed_out), unsearched


def choose_nest(model: KernelModel, nest: int, arch: Architecture, params: MappingT[str, int], *,
                options: ChoiceOptions = ChoiceOptions(), budget: Budget | None = None,
                searching: tuple[Piece | None, Pending | None, tuple[str, ...]] | None = None) -> NestChoice:
    """Rank the candidates of one nest; the original order wins when nothing else is legal and fits.

    ``searching``: the nest's search already started (:func:`_start_search`); else it runs beside the
    candidates."""
    budget = budget if budget is not None else Budget()
    kernel = model.kernel
    params = dict(params)
    budget.check(f"the register-tile and default candidates of nest {nest}")
    proposals = [p for rule in RULES.values() for p in rule(model, nest, arch, params)]
    budget.check(f"isl's scheduler on nest {nest}")
    scheduled, isl_gave_up, scheduler_seconds = isl_proposals(model, nest, arch, params, to_count=False)
    skipped = () if isl_gave_up is None else (f"isl schedule: {isl_gave_up}",)
    # isl's candidates whose exact counts are beyond the work budget are ranked at reduced sizes instead
    beyond = [(s, m) for s, m in scheduled if checked_sizes(model, nest, m, params) != params]
    proposals += [(s, m) for s, m in scheduled if not any(m is b for _, b in beyond)]
    if searching is None:
        search, unsearched = _search(model, nest, arch, params, options)
        started = None
    else:
        search, started, unsearched = searching
    skipped += unsearched
    seen = set()
    limit = options.candidate_limit_seconds
    pieces: list[Piece] = []
    proposed: list[tuple[str, Mapping]] = []  # what each of the pieces evaluates
    for source, m in proposals:
        if m is None:
            continue
        text = repr(m.to_dict())
        if text in seen:
            continue
        seen.add(text)
        # the heuristics' blockings may overflow a level the code does not care about: bypass it
        late = Candidate(source, m, m, False, (f"stopped by the wall-clock safety limit of {limit:g} s",))
        pieces.append(Piece(_evaluate, (model, source, m, m, arch, params), {"fit": not source.startswith("search")},
                            limit, late, f"the candidate '{source}' of nest {nest}"))
        proposed.append((source, m))
    original = original_mapping(kernel, nest, arch)
    late = Candidate("original order", None, original, True, (f"not counted within the safety limit of {limit:g} s",))
    # the original order is counted beside them (last: on speculation, when a core is free), though it is
    # only ranked when another candidate is legal and counted: one after the other, it added its whole
    # time to the choice's wall time (gramschmidt: 2 s of 8)
    speculative = Piece(_evaluate, (model, "original order", None, original, arch, params), {}, limit, late,
                        f"the original order of nest {nest}")

    # candidates whose compute term alone loses to a counted one are not counted (count_losers): each is
    # started only if it may still win, the likeliest winners (least compute) first, and, to give the same
    # answer however the pieces raced, those that lose to the best counted one end up uncounted
    prune = options.objective is Objective.CYCLES and not options.count_losers
    bounds = [compute_bound(model, m, arch, params) if prune else None for _, m in proposed]
    original_bound = compute_bound(model, original, arch, params) if prune else None
    order = sorted(range(len(pieces)), key=lambda k: bounds[k].cycles if bounds[k] is not None else 0.0)
    run = ([search] if search is not None and started is None else []) + [pieces[k] for k in order]
    lead = len(run) - len(order)  # the search's place in run, when it runs

    def best_counted(results: list[Any]) -> float:
        """The fewest cycles of the candidates (not the original order) and search winners counted so far."""
        best = float("inf")
        for r in results:
            for c in (r if isinstance(r, list) else [r]):
                counted = isinstance(c, Candidate) and _counted(c)
                report = c[1] if isinstance(c, tuple) else c.report if counted else None
                best = min(best, report.cycles) if report is not None else best
        return best

    def ranks_any(results: list[Any]) -> bool:
        """Is some candidate (or some search winner) legal and counted, so that the original is ranked, and
        may the original still win?"""
        # a search still running may yet find winners: then the original is awaited as if wanted
        some = started is not None or any(bool(r) if isinstance(r, list) else r is not None and _counted(r)
                                          for r in results)
        return some and not loses(original_bound, best_counted(results))

    def needed(k: int, results: list[Any]) -> bool:
        """May piece ``k`` of ``run`` (the original order last) still win against those counted so far?"""
        bound = original_bound if k == len(run) else bounds[order[k - lead]] if k >= lead else None
        return not loses(bound, best_counted(results[:len(run)]))

    # the search and each candidate in a child of its own, as many at once as there are cores: the same
    # answers as one after the other (issue 9)
    if run:
        ran = budget.run_all(run + [speculative], wanted=ranks_any, needed=needed if prune else None)
        first = ran.pop()
    else:
        ran, first = [], None
    def count_original() -> Candidate:
        """The original order counted now (not run beside the candidates, or left uncounted and kept)."""
        return budget.run(_evaluate, (model, "original order", None, original, arch, params), {},
                          limit=limit, timed_out=late, what=f"the original order of nest {nest}")

    found: list[tuple[Mapping, CostReport]] = []
    stopped: tuple[str, ...] = ()
    if search is not None:
        found = ran.pop(0) if started is None else started.result()
        if found is search.timed_out:
            found = []
            stopped += (f"search: stopped by the wall-clock safety limit of {options.search_limit_seconds:g} s",)
    others: list[Candidate] = [None] * len(pieces)  # type: ignore[list-item]
    for j, k in enumerate(order):
        others[k] = ran[j]
    best = best_counted(others + [found])
    for k, (source, m) in enumerate(proposed):
        if loses(bounds[k], best):  # whether it was counted or not: the same answer however they raced
            others[k] = _uncounted(source, m, m, bounds[k], best)
    for piece, cand in zip(pieces, others):
        if cand is piece.timed_out:
            stopped += (f"{cand.source}: not decided within the safety limit of {limit:g} s",)
    # the search's winners were checked (legal with their own tiles, fitting) and counted exactly by
    # the search: they are ranked with those counts, never counted a second time
    for k, (m, report) in enumerate(found):
        text = repr(m.to_dict())
        if text not in seen:
            seen.add(text)
            others.append(Candidate(f"search #{k + 1}", m, m, True, (), report))
    if any(_counted(c) for c in others):
        if loses(original_bound, best):
            first = _uncounted("original order", None, original, original_bound, best)
        elif first is None:  # not run beside the candidates: counted now
            first = count_original()
        if first is late:
            stopped += (f"original order: not counted within the safety limit of {limit:g} s",)
        candidates = [first] + others
    else:  # nothing to rank against: the original order wins without being counted
        candidates = [Candidate("original order", None, original, True, ("the only legal, fitting candidate",))]
        candidates += others
    ranked_ones = [c for c in candidates if c.legal and (c.report is not None or c.mapping is None)]
    rest = [c for c in candidates if c not in ranked_ones]
    usable = near_ties_first(sorted((with_strided(model, nest, c, params) for c in ranked_ones),
                                    key=lambda c: rank(model, nest, c, params, options.objective)),
                             options.objective)
    chosen = usable[0] if usable else candidates[0]
    if chosen.mapping is not None and usable and usable[-1] is not chosen:
        kept = next((c for c in usable if c.mapping is None), None)
        if kept is not None and not budget.run(gains_on_original, (model, nest, arch, params, chosen, kept), {},
                                               limit=limit, timed_out=True,
                                               what=f"the original order's own reuse in nest {nest}"):
            if kept.bound is not None:  # kept after all though its compute term lost: counted, as before
                kept = count_original()
            why = ("kept: the chosen candidate's only gain was threads (no less traffic than the original order "
                   "holding what fits, no faster per thread)")
            kept = dataclasses.replace(kept, problems=kept.problems + (why,))
            usable = [kept] + [c for c in usable if c.mapping is not None]
            chosen = kept
    if beyond and chosen.legal:
        ranked = _rank_beyond_budget(model, nest, arch, params, chosen, beyond, options, budget)
        winner = [c for c in ranked if c.ranked_at]
        usable = winner + usable + [c for c in ranked if c.legal and not c.ranked_at]
        rest += [c for c in ranked if not c.legal]
        chosen = usable[0]
    return NestChoice(nest, chosen, tuple(usable + rest), options.objective, stopped, skipped, scheduler_seconds)


#: compile's rules that make a nest's candidates from the sizes alone (no counting), by the source their
#: candidates carry up to its first blank-separated words: what :func:`reblocked` makes again at other sizes
RULES: dict[str, Callable[[KernelModel, int, Architecture, dict[str, int]], list[tuple[str, Mapping | None]]]] = {
    "register tiles": lambda model, nest, arch, params: list(register_mappings(model, nest, arch, params)),
    "default": lambda model, nest, arch, params: [("default", choose_mapping(model, nest, arch, params))],
    "interchange": lambda model, nest, arch, params: list(interchange_mappings(model, nest, arch, params)),
}


def reblocked(model: KernelModel, nest: int, source: str, arch: Architecture,
              params: MappingT[str, int]) -> Mapping | None:
    """The mapping the rule that made the candidate ``source`` makes at ``params`` (:data:`RULES`; a
    neighbour ``"register tiles / L2 k doubled"`` of it, as :mod:`~polymap.passes.search.variants`
    makes it), with the levels it overflows bypassed as compile bypasses them (:func:`fit_keeps`);
    None for a source no rule makes (the search's, isl's: counted or scheduled at their sizes).

    A remembered choice answers for its shape bucket: syrk's register tiles, blocked for N = 600, cut
    the rows of N = 1000 (same bucket) into four chunks for two cores and overflowed L1; made again by
    their rule at 1000 they fit (``docs/design.md``, "A bucket entry answers for its bucket")."""
    base, *steps = source.split(" / ")
    rule = next((r for name, r in RULES.items() if base == name or base.startswith(name + " ")), None)
    if rule is None:
        return None
    mapping = next((m for label, m in rule(model, nest, arch, dict(params)) if label == base), None)
    for step in steps:
        if mapping is None:
            return None
        extents = mapping_loop_extents(model.kernel, mapping, dict(params), model=model)
        mapping = next((m for label, m in neighbours(mapping, model.kernel, arch, extents) if label == step), None)
    return None if mapping is None else fit_keeps(model, mapping, arch, params)


def rank(model: KernelModel, nest: int, candidate: Candidate, params: MappingT[str, int],
         objective: Objective = Objective.CYCLES) -> tuple[float, float, float]:
    """The sort key of a candidate: the objective, then (on equal objective values: the counts do not see
    strides) the fewer strided references of its innermost walk
    (:func:`polymap.passes.search.interchange.mapping_strided_weight`), then the objective's tie-breaker."""
    value, tie = candidate.key(objective)
    strided = candidate.strided if candidate.strided is not None else _strided(model, nest, candidate, params)
    return (value, float(strided), tie)


#: objective values within this fraction of the best are a tie (the model's terms are estimates: a
#: difference this small orders nothing); design.md, "Ranking ties"
NEAR_TIE = 0.005


def near_ties_first(ranked: list[Candidate], objective: Objective = Objective.CYCLES) -> list[Candidate]:
    """``ranked`` (sorted by :func:`rank`) with the candidates whose objective value is within
    :data:`NEAR_TIE` of the best moved first, ordered among themselves by the tie-breaks of
    :func:`rank` (fewer strided references, again within :data:`NEAR_TIE`, then the objective's
    tie-breaker) before the value.

    covariance's nest at LARGE: ``interchange i,k,j`` 2.526e8 cycles, its register tiles 2.529e8
    (both bound by the traffic of ``data`` or ``cov``, counted at a level its code does not
    reach); energy, 1.2e11 against 1.8e10 pJ, then decides, and the register tiles run 9x faster."""
    if not ranked or ranked[0].report is None:
        return ranked
    best = ranked[0].key(objective)[0]
    near = [c for c in ranked if c.report is not None and c.key(objective)[0] <= best * (1 + NEAR_TIE)]
    if len(near) < 2:
        return ranked
    fewest = min(float(c.strided or 0) for c in near)  # strided weights as near are a tie too

    def key(c: Candidate) -> tuple[float, float, float]:
        strided = float(c.strided or 0)
        return (fewest if strided <= fewest * (1 + NEAR_TIE) else strided, c.key(objective)[1], c.key(objective)[0])

    near.sort(key=key)
    return near + [c for c in ranked if c not in near]


def _strided(model: KernelModel, nest: int, candidate: Candidate, params: MappingT[str, int]) -> int:
    """The strided references of the candidate's innermost walk (0 for one that was not counted)."""
    return int(mapping_strided_weight(model, nest, candidate.mapping, params)) if candidate.report is not None else 0


def with_strided(model: KernelModel, nest: int, candidate: Candidate, params: MappingT[str, int]) -> Candidate:
    """``candidate`` with its :attr:`Candidate.strided` weight."""
    return dataclasses.replace(candidate, strided=_strided(model, nest, candidate, params))


#: How much fewer cycles (or the objective's value) an isl candidate ranked at reduced sizes must have than
#: the choice to replace it: those counts are an extrapolation, and a skewed schedule's code pays what
#: they do not see (tile loops with max/min bounds, short vectors at every skewed tile's edges).
#: jacobi-1d at LARGE: 0.8% fewer cycles at TSTEPS=62, N=125, and its one-thread wavefront code ran
#: 0.60x of the original (both arrays fit in L1: tiles have no reuse to gain). The other isl winners
#: at LARGE won by 2x or more there (docs/design.md, "Reduced-size wins need a margin").
REDUCED_MARGIN = 0.1


def _rank_beyond_budget(model: KernelModel, nest: int, arch: Architecture, params: dict[str, int],
                        chosen: Candidate, scheduled: list[tuple[str, Mapping]], options: ChoiceOptions,
                        budget: Budget) -> list[Candidate]:
    """isl's candidates where their exact counts are beyond the work budget, against the choice
    among the others, all counted exactly at :func:`reduced_sizes` (``docs/design.md``).

    Best first; only an isl candidate that beats the choice there by :data:`REDUCED_MARGIN` keeps ``ranked_at`` (it is
    chosen). Their reports are dropped: counts at other sizes are not the given sizes' counts.
    """
    small = reduced_sizes(model, nest, params)
    words = ", ".join(f"{p}={v}" for p, v in small.items() if params.get(p) != v)
    limit = options.candidate_limit_seconds
    late = Candidate(chosen.source, chosen.mapping, chosen.counted, False, ("not counted",))
    # both sides without the per-call cycles (_evaluate's per_call): fixed costs at reduced sizes are
    # not what the given sizes pay per instance (gemm's register tiles ranked 35x worse at 31x17x18)
    pieces = [Piece(_evaluate, (model, chosen.source, chosen.mapping, chosen.counted, arch, small), {"per_call": False},
                    limit, late, f"the chosen candidate of nest {nest} at reduced sizes")]
    # a candidate with the same residencies there as an earlier one counts the same: counted once
    # (heat-3d's 2x16x16xall and 2x16x16x128 at N=10), then checked and costed with those counts
    # each candidate's time maps built once, when a pair first needs them: compared, not rebuilt, per pair
    built: dict[Mapping, ResidencyMaps] = {}

    def maps_of(m: Mapping) -> ResidencyMaps:
        if m not in built:
            built[m] = residency_maps(model, m, small)
        return built[m]

    alike = [next((j for j in range(k) if same_residencies(model, scheduled[j][1], m, small, maps_of=maps_of)), None)
             for k, (_, m) in enumerate(scheduled)]
    for k, (source, m) in enumerate(scheduled):
        if alike[k] is None:
            pieces.append(_reduced_piece(model, nest, source, m, arch, small, limit))
    base, *firsts = budget.run_all(pieces)  # as many at once as there are cores (issue 9)
    results = dict(zip((k for k, j in enumerate(alike) if j is None), firsts))
    later = [k for k, j in enumerate(alike) if j is not None]
    for k, c in zip(later, budget.run_all([_reduced_piece(model, nest, *scheduled[k], arch, small, limit,
                                                          _counts_of(results[alike[k]], scheduled[alike[k]][1]))
                                           for k in later])):
        results[k] = c
    isl_ones = [results[k] for k in range(len(scheduled))]
    counted: list[tuple[tuple[float, float], Candidate]] = []
    failed: list[Candidate] = []
    for c in isl_ones:
        if not c.legal or c.report is None or base.report is None:
            failed.append(c)
            continue
        mine, theirs = c.key(options.objective)[0], base.key(options.objective)[0]
        note = (f"ranked at reduced sizes ({words}): {options.objective.value} {mine:.3g} against {theirs:.3g} "
                f"for '{chosen.source}', both counted exactly there (at the given sizes the exact counts of "
                f"a skewed schedule are beyond the work budget)")
        counted.append((c.key(options.objective),
                        dataclasses.replace(c, report=None, problems=(note,), ranked_at=tuple(small.items()))))
    counted.sort(key=lambda kc: kc[0])
    ranked = [c for _, c in counted]
    if counted and base.report is not None and counted[0][0][0] < base.key(options.objective)[0] * (1 - REDUCED_MARGIN):
        return ranked[:1] + [dataclasses.replace(c, ranked_at=()) for c in ranked[1:]] + failed
    return [dataclasses.replace(c, ranked_at=()) for c in ranked] + failed


def _reduced_piece(model: KernelModel, nest: int, source: str, mapping: Mapping, arch: Architecture,
                   small: dict[str, int], limit: float, alike: Counts | None = None) -> Piece:
    """The piece that checks and counts an isl candidate at reduced sizes (:func:`_rank_beyond_budget`);
    ``alike``: the counts there of a mapping with the same residencies (:func:`_evaluate`)."""
    late = Candidate(source, mapping, mapping, False, (f"stopped by the wall-clock safety limit of {limit:g} s",))
    return Piece(_evaluate, (model, source, mapping, mapping, arch, small),
                 {"fit": True, "per_call": False, "alike": alike},
                 limit, late, f"the candidate '{source}' of nest {nest} at reduced sizes")


def _counts_of(result: Candidate, proposed: Mapping) -> Counts | None:
    """The exact counts of the mapping ``proposed`` in its evaluation's ``result`` (None when it was not
    counted, or when levels were bypassed to fit: those are another mapping's counts)."""
    return result.report.counts if result.report is not None and result.mapping == proposed else None


def fit_keeps(model: KernelModel, mapping: Mapping, arch: Architecture, params: MappingT[str, int]) -> Mapping:
    """``mapping`` with tensors bypassing the levels they overflow (largest tile box first).

    The loops (and so the generated code) stay the same; only what each level
    is said to hold changes, e.g. BLIS's L2 keeps the block of A, not C::

        L2 tile {i: 504, j: 1024, k: 256} keep A, B, C   (3.9 MiB > 512 KiB)
          -> keep A                                       (504 KiB)
    """
    extents = mapping_loop_extents(model.kernel, mapping, params, model=model)
    for _ in range(sum(len(lm.keep) for lm in mapping.levels)):
        over = capacity_problems(model, mapping, arch, params)
        if not over:
            return mapping
        k = over[0].level_index
        lm = mapping.levels[k]
        if not lm.keep:
            return mapping
        tile = resolved_tile(mapping, k, extents)
        drop = max(lm.keep, key=lambda t: _box(model, mapping.nest, t, tile))
        levels = list(mapping.levels)
        levels[k] = dataclasses.replace(lm, keep=tuple(t for t in lm.keep if t != drop))
        mapping = dataclasses.replace(mapping, levels=tuple(levels))
    return mapping


def _box(model: KernelModel, nest: int, tensor: str, tile: MappingT[str, int]) -> int:
    """Elements of ``tensor``'s bounding box over one tile (a product of subscripts' spans), for each
    reference at most the tile's points over the loops it reads: a reference is a function of those
    loops. A diagonal ``corr[i, i]`` under a tile of 1200 ``i`` touches 1200 elements, not the
    1200 x 1200 box of its two spans, which made ``fit_keeps`` drop ``corr`` before ``data`` from
    correlation's L2 (both then bypassed it, and the register tiles lost to an interchange)."""
    best = 0
    for s in model.nest_statements(nest):
        for a in s.accesses:
            if a.tensor != tensor:
                continue
            spans = []
            used: set[str] = set()
            for sub in a.ref.indices:
                names = {e.name for e in ir.subexpressions(sub) if isinstance(e, ir.Var) and e.name in tile}
                spans.append(max(1, sum(tile[v] for v in names)))
                used |= names
            best = max(best, min(prod(spans), prod(max(1, tile[v]) for v in used)))
    return best


def _evaluate(model: KernelModel, source: str, mapping: Mapping | None, counted: Mapping, arch: Architecture,
              params: MappingT[str, int], *, fit: bool = False, per_call: bool = True,
              alike: Counts | None = None) -> Candidate:
    """Legality first (cheap, exact), then fit (``fit``: by bypassing levels), then the counts.

    ``alike``: the exact counts at ``params`` of another mapping with the same residencies there
    (:func:`~polymap.passes.counting.residency.same_residencies`): the fit is checked with their
    footprints and they are this mapping's counts, nothing walked again (a mapping that needs levels
    bypassed is counted as usual: the bypass changes what it keeps).

    ``per_call=False`` leaves out what a call costs whatever its size (the team's start and
    barriers, :func:`~polymap.passes.counting.execution.sync_factor`): at :func:`reduced_sizes` those
    fixed cycles outweigh a nest shrunk a thousandfold, and would rank mappings by their thread
    count instead of by what scales to the given sizes. The panels' copies likewise (their boxes are
    the given sizes' tiles). For the same reason it shares out a loop
    however little work one execution covers (``min_work=0``): the fork that does not pay at reduced
    sizes does at the given ones."""
    params = dict(params)
    footprints = res = counts = None
    if mapping is not None:
        if not is_legal(model, mapping):
            # the verdict only, exact and symbolic: the witnesses of check_mapping are for the user's own
            # mapping; for a candidate that loses anyway they cost ISL minutes (symm's register tiles at
            # LARGE: over 300 s, where the verdict takes seconds)
            return Candidate(source, mapping, counted, False, (ILLEGAL_CANDIDATE,))
        # the footprints and residencies the fit was checked with are the counts' (built once: issue 9)
        checked = (fit_check(model, mapping, arch, params) if alike is None or counted != mapping
                   else fit_check_counted(model, mapping, arch, params, dataclasses.replace(alike, mapping=mapping)))
        if fit and checked.problems and all(p.kind == "capacity" for p in checked.problems):
            mapping = counted = fit_keeps(model, mapping, arch, params)
            checked = fit_check(model, mapping, arch, params)
        problems = checked.problems
        if problems:
            return Candidate(source, mapping, counted, False, tuple(_fit_text(p) for p in problems), fit=problems)
        if counted == mapping:  # else they are the mapping's, not those of what is counted
            footprints, res, counts = checked.footprints, checked.res, checked.counts
    if counts is None:  # the fast path's counts came with the fit check where it gives them: not evaluated twice
        counts = count_mapping(model, counted, arch, params=params, footprints=footprints, res=res)
    extents = mapping_loop_extents(model.kernel, counted, params, model=model)
    # beyond per_call, whether a loop is worth a fork at all (MIN_WORK) is a question of the given sizes
    execution = mapping_execution(model, counted, arch, extents, **({} if per_call else {"min_work": 0}))
    if not per_call:
        # nor the panels' copies (execution.pack_cycles): a copy writes its tile's whole box, which the
        # mapping keeps at the given sizes' tiles while reduced_sizes shrink the loops (gemm at LARGE:
        # the register tiles' 352 x 32 panels for k of 18 made isl's schedule, 2x slower, look best)
        execution = dataclasses.replace(execution, sync=1.0, packs=1.0, pack_cycles=0.0)
    report = evaluate(counts, arch, execution=execution)
    return Candidate(source, mapping, counted, True, (), report)


def _fit_text(p: FitProblem) -> str:
    """compile's words for a fit problem."""
    if p.kind == "fanout":
        return (f"its spatial loops at {p.level} need {p.footprint} instances of {p.inner}, "
                f"{p.capacity} available")
    return f"level {p.level} would hold {p.footprint} {p.unit} but has capacity {p.capacity}"


def evaluate_candidate(model: KernelModel, source: str, mapping: Mapping, arch: Architecture,
                       params: MappingT[str, int], *, fit: bool = True, seconds: float | None = None,
                       budget: Budget | None = None) -> Candidate:
    """One more candidate checked and counted as compile's own are (in a child, within ``seconds``,
    by default the options' safety limit)."""
    budget = budget if budget is not None else Budget()
    seconds = ChoiceOptions().candidate_limit_seconds if seconds is None else seconds
    undecided = Candidate(source, mapping, mapping, False, (f"stopped by the wall-clock limit of {seconds:g} s",))
    return budget.run(_evaluate, (model, source, mapping, mapping, arch, dict(params)), {"fit": fit},
                      limit=seconds, timed_out=undecided, what=f"the candidate '{source}'")


def _search_mappings(model: KernelModel, nest: int, arch: Architecture, params: dict[str, int],
                     options: ChoiceOptions) -> list[tuple[Mapping, CostReport]]:
    return search_mappings(model, nest, arch, params, top=options.search_top, budget=options.search_evaluations,
                           confirm=options.search_top, seconds=None, objective=options.objective,
                           isl_counts=options.search_isl_counts)


def _search(model: KernelModel, nest: int, arch: Architecture, params: dict[str, int], options: ChoiceOptions
            ) -> tuple[Piece | None, tuple[str, ...]]:
    """The search of the nest as a piece to run (its result: the best mappings with their exact reports,
    legal with their own tiles and fitting, :func:`polymap.passes.search.search.search_mappings` checked
    them; past its safety limit, its ``timed_out``), or None with why it was left out (outside the
    fast counter's class with no ISL counts allowed, :attr:`ChoiceOptions.search_isl_counts`)."""
    if options.search_evaluations <= 0 or options.search_top <= 0:
        return None, ()
    if options.search_isl_counts <= 0 and not in_fast_class(model, nest, params):
        return None, ("search: the nest is outside the fast counter's class and its ISL-path counts are "
                      "beyond the work budget (ChoiceOptions.search_isl_counts = 0); the other candidates "
                      "were ranked",)
    late: list[tuple[Mapping, CostReport]] = []
    return Piece(_search_mappings, (model, nest, arch, params, options), {}, options.search_limit_seconds, late,
                 f"the search of nest {nest}"), ()
