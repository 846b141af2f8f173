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

A loop that carries a conflict may still be shared out *in chunks of an inner loop*: when the
loops from it down to a parallel loop ``L`` form a chain (each the only statement of the one
above) and every conflict among the statements under it stays within one iteration of ``L``
(:meth:`~.ast_build.LoopAnalysis.chunkable`), each thread takes one contiguous chunk of ``L``'s
range and walks the whole chain over it; each element's updates keep their order, so the results
are bit-identical. ``L``'s bounds must not depend on the loops of the chain. One barrier per
execution of the chain instead of one per iteration of its outer loop (or none shared at all when
``L`` alone is too small: gramschmidt's ``R[k, j] += Q[i, k] * A[i, j]`` over ``i`` around ``j``
ran in ``omp single``, about half the flops on one thread)::

    for i ...  (a reduction)          #pragma omp for schedule(static)
      for j ...  (parallel)           for part in 0..threads   (b, e: part's share of j's range)
        R[j] += Q[i] * A[i, j]          for i ...
                                          for j in b..e  R[j] += Q[i] * A[i, j]

The chunked loop is tried before the loops inside it (fewer barriers); the same sizes rule
applies, the work of one execution being every instance under the chunked loop and the trips
those of ``L``. Chunks are made only in a nest that the plain rule shares out somewhere already:
the cost model (``passes/counting/execution.py``) sees one thread loop per nest and no chunks, so a
nest it charges one thread stays on one in the code. symm at LARGE (``i`` around ``k`` around
``j``, nothing shared) chunked in ``j`` spent twice the CPU on two threads for the same busiest
thread (0.32-0.35 s against 0.34-0.50 s on one, load 9-12, bit-identical) and added 3000 barriers.

Decisions are keyed by the node's *path* from the root (child positions),
since ISL hands out a new Python object per visit.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

from polymap.islcheck import isl
from polymap.poly import count, fix_params, points, to_int
from polymap.codegen.ast_build import LoopAnalysis, LoopInfo, children, expr_ids, statements_under
from polymap.passes.counting.execution import MIN_WORK  # the cost model's rule for threads: one definition

#: Statement instances of a rescheduled nest up to which the planner may count time points by walking
#: them once (about 8 us a point with the fixed dimensions skipped) instead of barvinok's count of each
#: projection; see ``_walkable``.
ENUMERATE_POINTS = 50_000
#: ... and varying time dimensions from which they are walked: barvinok's count of a projection grows
#: with its dimension (heat-3d's 7: 0.13 s each, walking 20,480 points 0.16 s; jacobi-2d's and
#: fdtd-2d's 6: 4-12 ms each, walking them 0.23-0.35 s).
WALK_DIMS = 7


Path = tuple


def child_paths(node: isl.AstNode, path: Path) -> list[tuple[isl.AstNode, Path]]:
    """The children of ``node`` with their paths (the printer walks with the same keys)."""
    t = node.get_type()
    tags = {isl.ast_node_type.for_: ("b",), isl.ast_node_type.mark: ("m",)}
    if t == isl.ast_node_type.block:
        # a block in a block (ISL nests them) is one sequence: its statements are siblings of the
        # ones around it, so that consecutive ones can share one ``omp single`` or one chunk loop
        return [(c, path + (k,)) for k, c in enumerate(_flat(node))]
    names = ("t", "e") if t == isl.ast_node_type.if_ else tags.get(t, ())
    return [(c, path + (k,)) for c, k in zip(children(node), names)]


def _flat(block: isl.AstNode) -> Iterator[isl.AstNode]:
    """The statements of ``block``, those of the blocks inside it in their place."""
    for c in children(block):
        if c.get_type() == isl.ast_node_type.block:
            yield from _flat(c)
        else:
            yield c


@dataclass(frozen=True)
class ParallelPlan:
    """The OpenMP decisions for one kernel (paths of AST nodes)."""

    parallel_for: frozenset = frozenset()  # "omp parallel for": a region of one loop
    regions: frozenset = frozenset()  # "omp parallel" on a sequential loop
    worksharing: frozenset = frozenset()  # "omp for" inside a region
    holds: frozenset = frozenset()  # nodes inside a region with worksharing loops under them
    chunks: frozenset = frozenset()  # (path, inner path): shared out in chunks of the inner loop
    joined: frozenset = frozenset()  # chunked loops that run in the chunk loop of the one before them


def chunk_bounds(node: isl.AstNode) -> tuple[isl.AstExpr, isl.AstExpr, bool] | None:
    """``(lower, upper, inclusive)`` of a ``for`` node walking ``lower <= it < upper`` (``<= upper``
    when inclusive) in steps of 1, or None for other conditions and steps."""
    it = node.for_get_iterator().get_id().get_name()
    inc, cond = node.for_get_inc(), node.for_get_cond()
    if inc.get_type() != isl.ast_expr_type.int or int(inc.get_val().to_python()) != 1 \
            or cond.get_type() != isl.ast_expr_type.op:
        return None
    op = cond.get_op_type()
    if op not in (isl.ast_expr_op_type.lt, isl.ast_expr_op_type.le):
        return None
    lhs, rhs = cond.op_get_arg(0), cond.op_get_arg(1)
    if lhs.get_type() != isl.ast_expr_type.id or lhs.get_id().get_name() != it:
        return None
    return node.for_get_init(), rhs, op == isl.ast_expr_op_type.le


def _free_bounds(node: isl.AstNode, chain: set[str]) -> bool:
    """Steps of 1 from ``lower`` to ``upper`` (:func:`chunk_bounds`), free of ``chain``'s iterators and its own."""
    bounds = chunk_bounds(node)
    if bounds is None:
        return False
    lower, upper, _ = bounds
    return not (expr_ids(lower) | expr_ids(upper)) & (chain | {node.for_get_iterator().get_id().get_name()})


def _same_bounds(a: isl.AstNode, b: isl.AstNode) -> bool:
    """Do for nodes ``a`` and ``b`` walk the same range (same bound expressions, same iterator)?"""
    x, y = chunk_bounds(a), chunk_bounds(b)
    if x is None or y is None or x[2] != y[2]:
        return False
    return all(e.to_C_str() == f.to_C_str() for e, f in zip(x[:2], y[:2])) \
        and a.for_get_iterator().to_C_str() == b.for_get_iterator().to_C_str()


def node_at(node: isl.AstNode, path: Path, target: Path) -> isl.AstNode:
    """The node at path ``target`` below ``node`` (whose own path is ``path``)."""
    for key in target[len(path):]:
        node = next(c for c, p in child_paths(node, path) if p[-1] == key)
        path = path + (key,)
    return node


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
        # the schedule at these sizes and each statement's time points, built once: per question they were
        # most of the plan's time (3mm: 49 copies of the whole schedule with its parameters fixed, 0.35 s)
        self._ranges: dict[str, isl.UnionSet] = {}
        self._fixed: isl.UnionMap | None = None
        self._walked: dict[str, list[tuple[int, ...]]] = {}

    def plan(self, root: isl.AstNode) -> ParallelPlan:
        items = child_paths(root, ()) if root.get_type() == isl.ast_node_type.block else [(root, ())]
        pf, regions, ws, holds, chunks, joined = set(), set(), set(), set(), set(), set()
        for node, path in items:
            chosen: list[tuple[isl.AstNode, Path, tuple[Path, ...]]] = []
            for spatial_only in (True, False):
                item_chunks: dict[Path, Path] = {}
                self._choose(node, path, (), spatial_only, chosen, None)
                if chosen:
                    # chunks only in a nest the plain rule shares out already (module docstring)
                    chosen.clear()
                    self._choose(node, path, (), spatial_only, chosen, item_chunks)
                    break
            joined |= self._join(node, path, chosen, item_chunks)
            chunks.update(item_chunks.items())
            by_anchor: dict[Path, list] = {}
            for _, p, loops_above in chosen:
                if not loops_above:
                    pf.add(p)
                else:
                    by_anchor.setdefault(loops_above[0], []).append(p)
            for anchor, inner in by_anchor.items():
                regions.add(anchor)
                ws.update(inner)
                for p in inner:
                    holds.update(p[:k] for k in range(len(anchor), len(p)))
        return ParallelPlan(frozenset(pf), frozenset(regions), frozenset(ws), frozenset(holds), frozenset(chunks),
                            frozenset(joined))

    def _choose(self, node: isl.AstNode, path: Path, loops_above: tuple[Path, ...], spatial_only: bool,
                out: list[tuple[isl.AstNode, Path, tuple[Path, ...]]], chunks: dict[Path, Path] | None) -> None:
        if node.get_type() == isl.ast_node_type.for_:
            info = self.analysis.info(node)
            if self.opaque(node, info):
                return
            wanted = info.parallel and (info.spatial or not spatial_only or info.rank not in self.spatial_ranks)
            if wanted and self._worth(info):
                out.append((node, path, loops_above))
                return
            inner = None if chunks is None or info.parallel or spatial_only and info.rank in self.spatial_ranks \
                else self._chunk_loop(node, path, info)
            if inner is not None:
                out.append((node, path, loops_above))
                chunks[path] = inner[0]
                return
            loops_above = loops_above + (path,)
        for c, p in child_paths(node, path):
            self._choose(c, p, loops_above, spatial_only, out, chunks)

    def _join(self, item: isl.AstNode, item_path: Path, chosen: list, chunks: dict[Path, Path]) -> set[Path]:
        """Shared loops that join the chunked loop before them (one chunk per thread, no barrier between).

        A chunked loop's next sibling, shared out too, joins it when it can be chunked along the
        same time dimension with the same bounds and no conflict among the statements of both
        differs there within one iteration of the loops around them: a thread's chunk of the second
        reads and writes only what its chunk of the first did (gramschmidt's ``A[i, j] -= Q[i, k]
        * R[k, j]`` after ``R[k, j] += Q[i, k] * A[i, j]``, both chunked along ``j``), so the two
        run as one, and the barrier between them goes. The second loop then runs in chunks of
        ``j`` even when it had a parallel loop of its own (``i``): it is joined only to a chunked
        loop, never made one. (A loop chunked on its own joins the same way.)
        """
        joined: set[Path] = set()
        shared = {p: (n, above) for n, p, above in chosen}
        for node, p, above in chosen:
            if p not in chunks or p in joined or not above or not isinstance(p[-1], int):
                continue
            inner = next(c for c in self._chain(node, p) if c[1] == chunks[p])
            enclosing = self.analysis.info(node_at(item, item_path, above[-1])).dim + 1 if above else 1
            statements = statements_under(node)
            q = p[:-1] + (p[-1] + 1,)
            while q in shared and shared[q][1] == above:
                nxt = shared[q][0]
                match = next((c for c in self._chain(nxt, q) if c[2].dim == inner[2].dim), None)
                every = statements + statements_under(nxt)
                if match is None or not match[2].parallel or not _free_bounds(match[0], match[3]) \
                        or not _same_bounds(match[0], inner[0]) \
                        or not self.analysis.chunkable(inner[2].rank, enclosing, inner[2].dim, every):
                    break
                chunks[q] = match[1]
                joined.add(q)
                statements = every
                q = q[:-1] + (q[-1] + 1,)
        return joined

    def _chain(self, node: isl.AstNode, path: Path) -> Iterator[tuple[isl.AstNode, Path, LoopInfo, set[str]]]:
        """The loops below for node ``node`` while each is the only statement of the one above
        (marks skipped): ``(node, path, info, iterators from node's down to the one above it)``."""
        chain: set[str] = {node.for_get_iterator().get_id().get_name()}
        n, p = node, path
        while True:
            (n, p), = child_paths(n, p)
            while n.get_type() == isl.ast_node_type.mark:
                (n, p), = child_paths(n, p)
            if n.get_type() != isl.ast_node_type.for_:
                return
            info = self.analysis.info(n)
            if self.opaque(n, info):
                return
            yield n, p, info, set(chain)
            chain.add(n.for_get_iterator().get_id().get_name())

    def _chunk_loop(self, node: isl.AstNode, path: Path, info: LoopInfo) -> tuple[Path, LoopInfo] | None:
        """The loop (path, info) whose chunks ``node`` may be shared out in (module docstring), or None."""
        if info.rank < 0:
            return None
        statements = statements_under(node)
        for n, p, inner, chain in self._chain(node, path):
            if inner.rank == info.rank and inner.parallel and _free_bounds(n, chain) and self._worth(inner, info) \
                    and self.analysis.chunkable(info.rank, info.dim, inner.dim, statements):
                return p, inner
        return None

    # ---- sizes
    def _worth(self, info: LoopInfo, around: LoopInfo | None = None) -> bool:
        """Enough iterations for every thread, and enough work per execution (one barrier).

        ``around``: the loop shared out in chunks of ``info``'s (one execution is one of ``around``'s).
        """
        if self.params is None:
            return True
        if info.rank < 0 or not info.statements:
            return False
        outer = self._points(info.statements, info.dim)
        if outer == 0:
            return False
        trips = self._points(info.statements, info.dim + 1) / outer
        executions = outer if around is None else self._points(info.statements, around.dim)
        work = self._points(info.statements, None) / executions
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
                self._images[key] = to_int(count(fix_params(dom, model, self.params)), self.params)
            elif self._walkable(statements):
                # the distinct prefixes of the statements' time points, walked once per statement:
                # barvinok's count of each projection of a skewed, tiled schedule took 0.58 s of
                # heat-3d's 1.4 s of C (issue 9); the same number
                seen: set[tuple[int, ...]] = set()
                for s in statements:
                    seen.update(p[:dims] for p in self._time_points(s))
                self._images[key] = len(seen)
            else:
                image = isl.UnionSet.empty(model.context.get_space())
                for s in statements:
                    image = image.union(self._range(s))
                obj = image if image.is_empty() else isl.UnionSet.from_set(  # empty: no instance at these sizes
                    isl.Set.from_union_set(image).project_out(isl.dim_type.set, dims, ks.length - dims))
                self._images[key] = to_int(count(obj), self.params)
        return self._images[key]

    def _walkable(self, statements: tuple[str, ...]) -> bool:
        """Count ``statements``' time points by walking them: few instances, of nests whose mapping
        gives statements new coordinates (``KernelSchedule.separate``: skewed, fused, wavefronts),
        with many varying dimensions (``WALK_DIMS``), where barvinok's count of a projection takes a
        tenth of a second. A plain mapping's projections it counts in a millisecond (3mm's 49 in
        0.02 s; walking them took 0.7 s)."""
        ks = self.analysis.ks
        moved = {rank for rank, _ in ks.separate}
        return all(ks.rank_of(s) in moved for s in statements) \
            and max(self._varying(s) for s in statements) >= WALK_DIMS \
            and sum(self._points((s,), None) for s in statements) <= ENUMERATE_POINTS

    def _varying(self, statement: str) -> int:
        """How many of ``statement``'s time dimensions take more than one value (at most: those ISL
        does not see fixed)."""
        kind = isl.dim_type.set
        sets: list[isl.Set] = []
        self._range(statement).foreach_set(sets.append)
        return max((sum(one.plain_get_val_if_fixed(kind, k).is_nan() for k in range(one.dim(kind)))
                    for one in sets), default=0)

    def _time_points(self, statement: str) -> list[tuple[int, ...]]:
        """The time points of ``statement`` at the planner's sizes, walked once."""
        if statement not in self._walked:
            self._walked[statement] = points(self._range(statement))
        return self._walked[statement]

    def _range(self, statement: str) -> isl.UnionSet:
        """The time points of ``statement`` at the planner's sizes."""
        if statement not in self._ranges:
            ks = self.analysis.ks
            if self._fixed is None:
                self._fixed = fix_params(ks.union, ks.model, self.params)
            domain = isl.UnionSet.from_set(ks.model.statement(statement).domain)
            self._ranges[statement] = self._fixed.intersect_domain(domain).range()
        return self._ranges[statement]
