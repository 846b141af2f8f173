"""Where the C code forks threads: one OpenMP region per nest, on its outermost parallel loop.

Per top-level item of the AST (one nest), the *chosen* loops are the
outermost loops that carry no conflict (:class:`~.ast_build.LoopAnalysis`;
a reduction is a conflict) — the mapping's spatial loops first when it has
any. A chosen loop with no loop around it gets ``omp parallel for``. A chosen
loop inside sequential loops (a time loop) does not fork per iteration: the
region opens once on the outermost enclosing loop, every thread walks the
sequential loops (same bounds, private iterators), the chosen loops are
shared out with ``omp for`` and whatever else runs in ``omp single``; both
end with a barrier, so the time steps stay ordered::

    for t ...                         #pragma omp parallel
      for i ...  (parallel)           for t ...
        B[i] = f(A)                     #pragma omp for schedule(static)
      x = g(B)                          for i ... B[i] = f(A)
                                        #pragma omp single
                                        { x = g(B) }

With ``params`` (the sizes the code is generated for) a loop is not shared
out when it has fewer than 2 x threads iterations or when one execution of
it (one barrier) covers fewer than :data:`MIN_WORK` statement instances
(a spatial loop of the mapping needs only one iteration per thread);
its inner loops are tried instead. Without ``params`` nothing is pruned (the
code is valid, and tested, for every size).

Decisions are keyed by the node's *path* from the root (child positions),
since ISL hands out a new Python object per visit.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping

from polymap.islcheck import isl
from polymap.poly import count, fix_params, to_int
from polymap.codegen.ast_build import LoopAnalysis, LoopInfo, children
from polymap.passes.counting.execution import MIN_WORK  # the cost model's rule for threads: one definition


Path = tuple


def child_paths(node: isl.AstNode, path: Path) -> list[tuple[isl.AstNode, Path]]:
    """The children of ``node`` with their paths (the printer walks with the same keys)."""
    t = node.get_type()
    tags = {isl.ast_node_type.for_: ("b",), isl.ast_node_type.mark: ("m",)}
    if t == isl.ast_node_type.if_:
        names = ("t", "e")
    elif t == isl.ast_node_type.block:
        names = tuple(range(len(children(node))))
    else:
        names = tags.get(t, ())
    return [(c, path + (k,)) for c, k in zip(children(node), names)]


@dataclass(frozen=True)
class ParallelPlan:
    """The OpenMP decisions for one kernel (paths of AST nodes)."""

    parallel_for: frozenset = frozenset()  # "omp parallel for": a region of one loop
    regions: frozenset = frozenset()  # "omp parallel" on a sequential loop
    worksharing: frozenset = frozenset()  # "omp for" inside a region
    holds: frozenset = frozenset()  # nodes inside a region with worksharing loops under them


def default_threads() -> int:
    return max(2, os.cpu_count() or 2)


class Planner:
    """Chooses the parallel loops of every top-level item (see the module docstring)."""

    def __init__(self, analysis: LoopAnalysis, *, params: Mapping[str, int] | None,
                 opaque: Callable[[isl.AstNode, LoopInfo], bool], spatial_ranks: frozenset[int] = frozenset(),
                 threads: int | None = None) -> None:
        self.analysis = analysis
        self.params = dict(params) if params is not None else None
        self.opaque = opaque  # loops printed as one unit (register tiles): nothing inside is shared
        self.spatial_ranks = spatial_ranks
        self.threads = threads or default_threads()
        self._images: dict = {}

    def plan(self, root: isl.AstNode) -> ParallelPlan:
        items = child_paths(root, ()) if root.get_type() == isl.ast_node_type.block else [(root, ())]
        pf, regions, ws, holds = set(), set(), set(), set()
        for node, path in items:
            chosen: list[tuple[Path, tuple[Path, ...]]] = []
            for spatial_only in (True, False):
                self._choose(node, path, (), spatial_only, chosen)
                if chosen:
                    break
            by_anchor: dict[Path, list] = {}
            for p, loops_above in chosen:
                if not loops_above:
                    pf.add(p)
                else:
                    by_anchor.setdefault(loops_above[0], []).append(p)
            for anchor, inner in by_anchor.items():
                regions.add(anchor)
                ws.update(inner)
                for p in inner:
                    holds.update(p[:k] for k in range(len(anchor), len(p)))
        return ParallelPlan(frozenset(pf), frozenset(regions), frozenset(ws), frozenset(holds))

    def _choose(self, node: isl.AstNode, path: Path, loops_above: tuple[Path, ...], spatial_only: bool,
                out: list[tuple[Path, tuple[Path, ...]]]) -> None:
        if node.get_type() == isl.ast_node_type.for_:
            info = self.analysis.info(node)
            if self.opaque(node, info):
                return
            wanted = info.parallel and (info.spatial or not spatial_only or info.rank not in self.spatial_ranks)
            if wanted and self._worth(info):
                out.append((path, loops_above))
                return
            loops_above = loops_above + (path,)
        for c, p in child_paths(node, path):
            self._choose(c, p, loops_above, spatial_only, out)

    # ---- sizes
    def _worth(self, info: LoopInfo) -> bool:
        """Enough iterations for every thread, and enough work per execution (one barrier)."""
        if self.params is None:
            return True
        if info.rank < 0 or not info.statements:
            return False
        outer = self._points(info.statements, info.dim)
        if outer == 0:
            return False
        trips = self._points(info.statements, info.dim + 1) / outer
        work = self._points(info.statements, None) / outer
        # a spatial loop of the mapping is cut to one chunk per core on purpose
        return trips >= (1 if info.spatial else 2) * self.threads and work >= MIN_WORK

    def _points(self, statements: tuple[str, ...], dims: int | None) -> int:
        """Distinct time points of ``statements`` on the first ``dims`` dims (None: instances)."""
        key = (statements, dims)
        if key not in self._images:
            ks = self.analysis.ks
            model = ks.model
            if dims is None:
                dom = isl.UnionSet.empty(model.context.get_space())
                for s in statements:
                    dom = dom.union(isl.UnionSet.from_set(model.statement(s).domain))
                obj = fix_params(dom, model, self.params)
            else:
                image = isl.UnionSet.empty(model.context.get_space())
                sched = fix_params(ks.union, model, self.params)
                for s in statements:
                    part = sched.intersect_domain(isl.UnionSet.from_set(model.statement(s).domain))
                    image = image.union(part.range())
                obj = image if image.is_empty() else isl.UnionSet.from_set(  # empty: no instance at these sizes
                    isl.Set.from_union_set(image).project_out(isl.dim_type.set, dims, ks.length - dims))
            self._images[key] = to_int(count(obj), self.params)
        return self._images[key]
