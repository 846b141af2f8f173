"""What ``compile`` maps when the user gives no mapping: the best legal, fitting candidate per nest.

Per nest, the candidates are the register blocking
(:mod:`polymap.passes.search.register_mapping`), the default heuristic
(:mod:`polymap.passes.search.default_mapping`), the best mappings of the search
(:func:`polymap.passes.search.search_mappings`, cut off after a few
seconds) and always the *original order*. Each is checked
(:func:`polymap.passes.legality.legality.check_mapping` with the architecture:
dependences, fan-out, capacities) and counted exactly
(:func:`polymap.passes.counting.counting.count_mapping`), then ranked by the cost
model's cycles, then energy::

    gemm 1024^3 on host
      register tiles   cycles 5.4e+08  energy 4.1e+09 pJ   <- chosen
      default          cycles 6.6e+08  ...
      original order   cycles 2.1e+09  ...

A nest whose loops share a name (jacobi-2d's two sweeps) is first given
distinct names (:func:`polymap.passes.frontend.rename.distinct_loop_names`): a
mapping names each loop once, so it would otherwise fuse them. The
original order is counted as the mapping that walks every loop at the
backing store (tile 1 below it: the program's order, no reuse assumed);
when it wins, the nest keeps its original schedule (no mapping).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Mapping as MappingT

from polymap import ir
from polymap.budget import Budget, ChildFailed
from polymap.mapping.model import LevelMapping, Mapping, loop_extents, mapping_loop_extents, nest_loops, nest_tensors
from polymap.passes.search.isl_schedule import isl_mappings
from polymap.poly import KernelModel, build_model



@dataclass(frozen=True)
class Candidate:
    """One mapping considered for a nest; ``mapping`` None is the original schedule."""

    source: str
    mapping: Mapping | None
    counted: Mapping  # the mapping whose counts rank it (the original order's own expression)
    legal: bool
    problems: tuple[str, ...] = ()
    report: object | None = None  # polymap.passes.counting.cost_model.CostReport

    def key(self) -> tuple[float, float]:
        if self.report is None:
            return (float("inf"), float("inf"))
        return (self.report.cycles, self.report.energy_pj)


@dataclass(frozen=True)
class NestChoice:
    nest: int
    chosen: Candidate
    candidates: tuple[Candidate, ...]  # ranked: usable ones first, best first


@dataclass(frozen=True)
class KernelChoice:
    """The kernel the code is generated for (loops renamed when needed) and one choice per nest."""

    kernel: ir.Kernel
    model: KernelModel
    nests: tuple[NestChoice, ...]
    renamed: tuple[tuple[int, tuple[str, ...]], ...]

    @property
    def mappings(self) -> tuple[Mapping, ...]:
        return tuple(n.chosen.mapping for n in self.nests if n.chosen.mapping is not None)


def original_mapping(kernel: ir.Kernel, nest: int, arch) -> Mapping:
    """The original order as a mapping: every loop walked at the backing store, tile 1 below."""
    loops = nest_loops(kernel, nest)
    keep = nest_tensors(kernel, nest)
    levels = tuple(LevelMapping(lv.name, (1,) * len(loops), tuple(loops), (), keep) for lv in arch.levels)
    return Mapping(kernel.name, nest, tuple(loops), levels)


def choose(kernel: ir.Kernel, arch, params: MappingT[str, int], *, search_seconds: float | None = None,
           progress: Callable[[str], None] | None = None, search_top: int = 3,
           budget: Budget | None = None) -> KernelChoice:
    """The mapping of every nest of ``kernel`` (see the module docstring).

    Every candidate runs under ``budget`` (:class:`polymap.budget.Budget`):
    its ``candidate_seconds`` for one candidate's legality, fit and counts
    (ISL on a triangle at large sizes can take minutes: symm's register
    blocking at LARGE), its ``search_seconds`` (unless ``search_seconds``)
    for the search of one nest; a candidate over its limit is dropped, and
    the choice refuses (``BudgetExceeded``) when the whole budget runs out.
    """
    budget = budget if budget is not None else Budget()
    from polymap.passes.frontend.rename import distinct_loop_names, repeated_loop_names

    renamed = tuple(sorted(repeated_loop_names(kernel).items()))
    kernel = distinct_loop_names(kernel)
    model = build_model(kernel)
    nests = []
    for nest in range(len(kernel.nests())):
        if not nest_loops(kernel, nest):
            continue
        if progress:
            progress(f"choosing a mapping for nest {nest}...")
        nests.append(choose_nest(model, nest, arch, params, search_seconds=search_seconds, search_top=search_top,
                                 budget=budget))
    return KernelChoice(kernel, model, tuple(nests), renamed)


def choose_nest(model: KernelModel, nest: int, arch, params: MappingT[str, int], *,
                search_seconds: float | None = None, search_top: int = 3,
                budget: Budget | None = None) -> NestChoice:
    """Rank the candidates of one nest; the original order wins when nothing else is legal and fits.

    ``search_top`` of the search's best mappings are candidates (``--tune K`` asks for K).
    """
    budget = budget if budget is not None else Budget()
    search_seconds = budget.search_seconds if search_seconds is None else search_seconds
    limit = budget.candidate_seconds
    from polymap.passes.search.default_mapping import choose_mapping
    from polymap.passes.search.register_mapping import register_mappings

    kernel = model.kernel
    proposals: list[tuple[str, Mapping | None]] = []
    for source, make in (("register tiles", lambda: register_mappings(model, nest, arch, params)),
                         ("default", lambda: [("default", choose_mapping(model, nest, arch, params))]),
                         ("isl schedule", lambda: isl_mappings(model, nest, arch, params))):
        try:
            proposals.extend(make())
        except Exception as exc:  # a heuristic that fails is just no candidate
            proposals.append((f"{source} (failed: {type(exc).__name__})", None))
    for k, m in enumerate(_search(model, nest, arch, params, search_seconds, search_top, budget)):
        proposals.append((f"search #{k + 1}", m))
    seen = set()
    others = []
    for source, m in proposals:
        if m is None:
            continue
        text = repr(m.to_dict())
        if text in seen:
            continue
        seen.add(text)
        # the heuristics' blockings may overflow a level the code does not care about: bypass it
        others.append(_run(budget, _evaluate, (model, source, m, m, arch, params), {"fit": not source.startswith("search")},
                           limit, Candidate(source, m, m, False, (f"not decided within {limit:g} s",)),
                           f"the candidate '{source}' of nest {nest}"))
    original = original_mapping(kernel, nest, arch)
    if any(c.legal and c.report is not None for c in others):
        fallback = Candidate("original order", None, original, True, (f"not counted within {limit:g} s",))
        candidates = [_run(budget, _evaluate, (model, "original order", None, original, arch, params), {},
                           limit, fallback, f"the original order of nest {nest}")] + others
    else:  # nothing to rank against: the original order wins without being counted
        candidates = [Candidate("original order", None, original, True, ("the only legal, fitting candidate",))]
        candidates += others
    usable = sorted((c for c in candidates if c.legal and (c.report is not None or c.mapping is None)),
                    key=Candidate.key)
    rest = [c for c in candidates if c not in usable]
    chosen = usable[0] if usable else candidates[0]
    return NestChoice(nest, chosen, tuple(usable + rest))


def fit_keeps(model: KernelModel, mapping: Mapping, arch, params: MappingT[str, int]) -> Mapping:
    """``mapping`` with tensors bypassing the levels they overflow (largest tile box first).

    The loops (and so the generated code) stay the same; only what each level
    is said to hold changes, e.g. BLIS's L2 keeps the block of A, not C::

        L2 tile {i: 504, j: 1024, k: 256} keep A, B, C   (3.9 MiB > 512 KiB)
          -> keep A                                       (504 KiB)
    """
    import dataclasses

    from polymap.mapping.model import resolved_tile
    from polymap.passes.counting.counting import capacity_violations

    extents = mapping_loop_extents(model.kernel, mapping, params, model=model)
    index = {lv.name: k for k, lv in enumerate(arch.levels)}
    for _ in range(sum(len(lm.keep) for lm in mapping.levels)):
        over = capacity_violations(model, mapping, arch, dict(params))
        if not over:
            return mapping
        k = index[over[0]["level"]]
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
    """Elements of ``tensor``'s bounding box over one tile (a sum of subscripts' spans)."""
    from math import prod

    best = 0
    for s in model.nest_statements(nest):
        for a in s.accesses:
            if a.tensor != tensor:
                continue
            spans = []
            for sub in a.ref.indices:
                names = {e.name for e in ir.subexpressions(sub) if isinstance(e, ir.Var) and e.name in tile}
                spans.append(max(1, sum(tile[v] for v in names)))
            best = max(best, prod(spans))
    return best


def _evaluate(model, source, mapping, counted, arch, params, *, fit: bool = False) -> Candidate:
    """Legality first (cheap, exact), then fit (``fit``: by bypassing levels), then the counts."""
    from polymap.mapping.model import check_fanout
    from polymap.passes.counting.cost_model import active_compute_units, evaluate
    from polymap.passes.counting.counting import capacity_violations, count_mapping
    from polymap.passes.legality.legality import check_mapping

    params = dict(params)
    try:
        if mapping is not None:
            verdict = check_mapping(model, mapping, params=params)
            if not verdict.legal:
                return Candidate(source, mapping, counted, False, tuple(v.reason for v in verdict.violations))
            extents = mapping_loop_extents(model.kernel, mapping, params, model=model)
            problems = list(check_fanout(mapping, arch, extents))
            if not problems:
                if fit:
                    mapping = counted = fit_keeps(model, mapping, arch, params)
                problems = [f"level {c['level']} would hold {c['footprint']} {c['unit']} but has capacity "
                            f"{c['capacity']}" for c in capacity_violations(model, mapping, arch, params)]
            if problems:
                return Candidate(source, mapping, counted, False, tuple(problems))
        counts = count_mapping(model, counted, arch, params=params)
        extents = mapping_loop_extents(model.kernel, counted, params, model=model)
        report = evaluate(counts, arch, active_units=active_compute_units(counted, arch, extents))
    except Exception as exc:  # undecided: not a candidate (the original order stays one)
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return Candidate(source, mapping, counted, mapping is None, (reason,))
    return Candidate(source, mapping, counted, True, (), report)


def evaluate_candidate(model: KernelModel, source: str, mapping: Mapping, arch, params: MappingT[str, int], *,
                       fit: bool = True, seconds: float | None = None, budget: Budget | None = None) -> Candidate:
    """One more candidate checked and counted as compile's own are (in a child, within ``seconds``,
    by default the budget's ``candidate_seconds``)."""
    budget = budget if budget is not None else Budget()
    seconds = budget.candidate_seconds if seconds is None else seconds
    undecided = Candidate(source, mapping, mapping, False, (f"not decided within {seconds:.0f} s",))
    return _run(budget, _evaluate, (model, source, mapping, mapping, arch, dict(params)), {"fit": fit}, seconds,
                undecided, f"the candidate '{source}'")


def _run(budget: Budget, fn, args: tuple, kwargs: dict, seconds: float, timed_out, what: str):
    """``fn(*args, **kwargs)`` under the budget's limit for one piece (a forked child; ISL cannot be
    interrupted), ``timed_out`` past ``seconds``; the child's error is raised as ``RuntimeError``."""
    try:
        return budget.run(fn, args, kwargs, limit=seconds, timed_out=timed_out, what=what)
    except ChildFailed as exc:
        raise RuntimeError(str(exc)) from None


def _search_mappings(model, nest, arch, params, top: int = 3) -> list[Mapping]:
    from polymap.passes.search.search import search_mappings

    try:
        return [m for m, _ in search_mappings(model, nest, arch, params, top=top, budget=300, confirm=top)]
    except Exception:  # the search is one source of candidates among others
        return []


def _search(model, nest, arch, params, seconds: float, top: int, budget: Budget) -> list[Mapping]:
    """The search's best ``top`` mappings, or none when it takes longer than ``seconds``."""
    if seconds <= 0:
        return []
    return _run(budget, _search_mappings, (model, nest, arch, dict(params), top), {}, seconds, [],
                f"the search of nest {nest}")


def explain(choice: NestChoice, arch) -> list[str]:
    """Lines saying what was chosen for the nest and why (the ranking, traffic and intensity per level)."""
    c = choice.chosen
    what = "the original schedule" if c.mapping is None else c.source
    lines = [f"nest {choice.nest}: {what} (fewest cycles, then energy, among legal fitting candidates)"]
    for cand in choice.candidates:
        mark = "*" if cand is c else " "
        if cand.report is not None:
            lines.append(f"  {mark} {cand.source:16s} cycles {cand.report.cycles:.3g}, "
                         f"energy {cand.report.energy_pj:.3g} pJ, bottleneck {cand.report.bottleneck}")
        elif cand.legal:
            lines.append(f"  {mark} {cand.source:16s} {cand.problems[0] if cand.problems else 'not counted'}")
        else:
            lines.append(f"  {mark} {cand.source:16s} rejected: {cand.problems[0] if cand.problems else 'no counts'}")
    if c.report is not None:
        intensity = dict(c.report.intensity)
        for lv in c.report.counts.levels:
            moved = lv.reads + lv.updates
            i = intensity.get(lv.name)
            lines.append(f"    {lv.name:6s} {moved} elements to inner levels, intensity "
                         f"{'-' if i is None else f'{i:.3g}'} instances/element")
    return lines


def progress_printer(enabled: bool | None = None) -> Callable[[str], None] | None:
    """A callback printing progress on stderr, or None when stderr is no terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return None
    return lambda text: print(text, file=sys.stderr, flush=True)
