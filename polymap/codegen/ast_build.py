"""The kernel's whole schedule and its ISL AST: what every code printer walks.

One time space holds the kernel: the mapped nests use their mapped schedule
(:func:`polymap.passes.schedule.tiling.mapped_schedule`), every other statement its
original 2d+1 schedule. Dimension 0 is the top-level textual rank (so nests
keep their order); the rest is padded with zeros to one common length::

    gemm, mapping DRAM order (i, j, k), GLB tile {i: 32, j: 32, k: 16} order (k, i, j)
    acc[i, j, k] -> [0, fl(i/32), fl(j/32), 1, fl(k/16), 1, k%16, i%32, j%32, 1]
    init[i, j]   -> [0, fl(i/32), fl(j/32), 0, 0,        0, 0,    i%32, j%32, 0]

ISL's AST generator names the iterator of a loop over time dimension ``k``
``c<k>``, which is how :func:`ast_loops_info` tells, for every AST ``for``,
which dimension it walks: its level, its loop, whether the mapping made it
spatial, and whether it is *parallel* (no two conflicting statement
instances — same element, one a write — lie in different iterations of it
while agreeing on every outer dimension; a reduction loop is not parallel).

Typical use by a printer::

    ks = kernel_schedule(model, [mapping])
    root = build_ast(model, ks.union, separate=ks.separate)
    info = ast_loops_info(ks, root)          # {iterator name: LoopInfo}
    for node in walk(root): ...              # for / if / block / user nodes
    name, args = user_statement(user_node)   # "acc", (AstExpr for i, j, k)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

from polymap.islcheck import isl
from polymap.mapping.model import Mapping as MappingModel
from polymap.mapping.schedule import mapped_nests, moves_statements
from polymap.poly import KernelModel, isl_name, param_set, textual_rank
from polymap.passes.schedule.tiling import mapped_schedule

#: ISL names the iterator of time dimension k like this (``c0``, ``c1``...).
ITERATOR_PREFIX = "c"

#: Time vectors longer than this have their runs of fixed dimensions cut before ISL builds their AST
#: (:func:`build_ast`): gramschmidt's wavefront (42 dimensions) took ISL 5.1 s whole, ludcmp's (37)
#: 2.2 s, attention's 0.9 s; cut, the code of all 45 examples with such vectors stayed the same. Up to
#: here ISL took at most 1.4 s (nussinov, 32) and the cut changed code (heat-3d's bounds, 27).
CUT_DIMS = 32


@dataclass(frozen=True)
class DimInfo:
    """What time dimension ``index`` means for the statements of one top-level item."""

    index: int
    level: int  # mapping level (-1: not a mapped loop: original schedule, padding or text rank)
    loop: str  # loop name ("" when the dimension is no loop of the mapping)
    kind: str  # "top" | "coord" | "phase" | "text" | "original" | "pad"
    spatial: bool = False


@dataclass(frozen=True)
class KernelSchedule:
    """The whole kernel in one time space.

    ``union`` maps every statement instance to its time vector; ``dims`` gives,
    per top-level rank, the meaning of each dimension; ``mapped`` names the
    mapped nests (by nest index) and ``top_rank`` the top-level rank of each
    statement.
    """

    model: KernelModel
    union: isl.UnionMap
    length: int
    dims: tuple[tuple[int, tuple[DimInfo, ...]], ...]  # (top rank, dims) pairs
    top_rank: tuple[tuple[str, int], ...]  # (statement, top rank)
    mapped: tuple[int, ...]
    separate: tuple[tuple[int, int], ...] = ()  # (top rank, dim): loops ISL separates (see build_ast)

    def dims_of(self, rank: int) -> tuple[DimInfo, ...]:
        return dict(self.dims)[rank]

    def rank_of(self, statement: str) -> int:
        return dict(self.top_rank)[statement]


@dataclass(frozen=True)
class LoopInfo:
    """One AST ``for`` loop: the time dimension it walks and what may run in parallel."""

    iterator: str
    dim: int
    rank: int  # top-level rank of the statements under it
    level: int
    loop: str
    spatial: bool  # the mapping made it spatial
    parallel: bool  # carries no conflict (see the module docstring)
    innermost: bool  # no for loop inside it
    statements: tuple[str, ...]


def _pad(m: isl.Map, front: int, length: int) -> isl.Map:
    """Add the top rank in front of ``m``'s range and zeros after it up to ``length`` dims."""
    n = m.dim(isl.dim_type.out)
    space = m.get_space()
    params = [space.get_dim_name(isl.dim_type.param, k) for k in range(space.dim(isl.dim_type.param))]
    outs = [f"o{k}" for k in range(n)]
    full = [str(front)] + outs + ["0"] * (length - 1 - n)
    shift = isl.Map(f"[{', '.join(params)}] -> {{ [{', '.join(outs)}] -> [{', '.join(full)}] }}")
    return m.apply_range(shift)


def kernel_schedule(model: KernelModel, mappings: Sequence = ()) -> KernelSchedule:
    """The whole kernel's schedule, with ``mappings`` (one per mapped nest) applied.

    A mapping is anything :func:`polymap.passes.schedule.tiling.mapped_schedule` takes
    (``nest``, ``loops``, ``levels``). Statements of unmapped nests and
    statements outside every loop keep their original schedule (its first
    dimension, the top rank, is kept; the rest follows it).
    """
    by_nest = {n: m for m in mappings for n in mapped_nests(m)}
    parts: list[tuple[str, int, isl.Map]] = []  # (statement, top rank, map without the top rank)
    dim_tables: dict[int, tuple[DimInfo, ...]] = {}
    separate: list[tuple[int, int]] = []
    for mapping in sorted(mappings, key=lambda m: m.nest):
        rescheduled = _rescheduled(model, mapping)
        ms = mapped_schedule(model, mapping, absolute=rescheduled)
        first = _top_rank(model, ms.maps[0][0]) if ms.maps else 0
        moving = [k for k, d in enumerate(ms.dims) if d.kind == "coord" and any(
            m.plain_get_val_if_fixed(isl.dim_type.out, k).is_nan() for _, m in ms.maps)]
        if rescheduled and moving:
            separate.append((first, moving[-1] + 1))  # +1: the top rank stands in front
        for name, m in ms.maps:
            rank = first  # fused nests share the first one's top-level rank
            parts.append((name, rank, m))
            dim_tables[rank] = tuple(
                DimInfo(k + 1, d.level, d.loop, d.kind, d.spatial) for k, d in enumerate(ms.dims))
    for s in model.statements:
        if s.context.nest in by_nest:
            continue
        rank = _top_rank(model, s.name)
        drop_top = s.schedule.project_out(isl.dim_type.out, 0, 1)
        parts.append((s.name, rank, drop_top))
        dim_tables.setdefault(rank, tuple(
            DimInfo(k + 1, -1, "", "original") for k in range(model.time_dims - 1)))
    length = 1 + max((m.dim(isl.dim_type.out) for _, _, m in parts), default=0)
    union = isl.UnionMap.empty(model.context.get_space())
    for _, rank, m in parts:
        union = union.union(isl.UnionMap.from_map(_pad(m, rank, length)))
    dims = []
    for rank, table in sorted(dim_tables.items()):
        full = (DimInfo(0, -1, "", "top"),) + table
        full += tuple(DimInfo(k, -1, "", "pad") for k in range(len(full), length))
        dims.append((rank, full))
    return KernelSchedule(model, union, length, tuple(dims),
                          tuple((n, r) for n, r, _ in parts), tuple(sorted(by_nest)), tuple(separate))


def _rescheduled(model: KernelModel, mapping: MappingModel) -> bool:
    """Does the mapping give statements new coordinates, fuse nests or walk tiles by diagonals?

    Such nests are printed with their innermost loop over the coordinate itself (not its offset in
    the tile, see :func:`polymap.passes.schedule.tiling.mapped_schedule`) and that loop *separated*
    by ISL (one loop per set of statements it runs, no guard inside): skewed, fused statements
    otherwise run under an ``if`` per statement per point, which no compiler vectorises. Entries
    that only place a statement on loops it lacks (gemm's initialisation folded into the first
    block of ``k``) are not: the loops and the packed panels stay those of the plain mapping, and
    the one guard left (``init`` at the first ``k``) is the register tile's to realise
    (:mod:`polymap.codegen.c.regtile`).
    """
    return moves_statements(model, mapping)


def _top_rank(model: KernelModel, statement: str) -> int:
    """The first coordinate of a statement's original schedule (its top-level textual rank)."""
    return textual_rank(model.kernel, model.statement(statement).stmt)[0]


def build_ast(model: KernelModel, schedule: isl.UnionMap, *,
              params: Mapping[str, int] | None = None, separate: Sequence[tuple[int, int]] = ()) -> isl.AstNode:
    """ISL's AST for ``schedule`` (instances -> time) under the kernel's context.

    With ``params`` the parameters are fixed to those numbers (smaller code,
    for printers that generate code for one size); without, the code is valid
    for every parameter value of the context. ``separate`` lists ``(top rank,
    dim)`` pairs whose loop ISL splits into one loop per set of statements it
    runs (its ``separate`` option), so that no guard is left inside them.
    The loop over time dimension ``k`` is named ``c<k>`` (:func:`iterator_dim`)
    whatever dimensions ISL is spared (below).
    """
    context = model.context
    if params is not None:
        context = context.intersect(param_set(model, params))
        schedule = schedule.intersect_params(param_set(model, params))
    maps: list[isl.Map] = []
    schedule.foreach_map(maps.append)
    n = maps[0].dim(isl.dim_type.out) if maps else 0
    # of each run of dimensions fixed for every instance, all but the last, in a long vector (see below)
    every = _fixed_dims(maps, n) if n > CUT_DIMS else {}
    fixed = {d: v for d, v in every.items() if d + 1 in every}
    kept = [k for k in range(n) if k not in fixed]
    build = isl.AstBuild.from_context(context)
    if fixed:
        # The padding and the text ranks shared by every statement (most of a long time vector:
        # gramschmidt's wavefront varies in 11 of 42 dims) are cut short before ISL sees them: its AST
        # build spends its time per dimension (gramschmidt: 5.1 s, 0.4 s with them cut). ISL's code
        # depends on the fixed dimensions, though, in ways no rule tried keeps for every kernel
        # (every one dropped: lu's, jacobi-2d's and nussinov's code changed; all but one of each run:
        # heat-3d's bounds did), so only vectors longer than CUT_DIMS, where ISL's time is seconds,
        # are cut (their code compared: the same); the loops keep the names of the full vector's
        # dimensions (c<k>), and test_schedule_codegen.py checks gramschmidt's AST against the
        # whole vector's and that cut vectors' code computes the same where it differs.
        squeezed = isl.UnionMap.empty(schedule.get_space())
        for m in maps:
            for k in sorted(fixed, reverse=True):
                m = m.project_out(isl.dim_type.out, k, 1)
            squeezed = squeezed.union(isl.UnionMap.from_map(m))
        schedule = squeezed
        ids = isl.IdList.alloc(context.get_ctx(), len(kept))
        for k in kept:
            ids = ids.add(isl.Id(f"{ITERATOR_PREFIX}{k}", context=context.get_ctx()))
        build = build.set_iterators(ids)
    options = [_separate_option(kept, fixed, rank, dim) for rank, dim in separate if dim in kept]
    options = [o for o in options if o is not None]
    if options:
        build = build.set_options(isl.UnionMap("{ " + "; ".join(options) + " }"))
    return build.node_from_schedule_map(schedule)


def _fixed_dims(maps: Sequence[isl.Map], n: int) -> dict[int, int]:
    """The time dimensions with one and the same integer value in every map: ``{dim: value}``."""
    fixed: dict[int, int] = {}
    for k in range(n):
        values = set()
        for m in maps:
            v = m.plain_get_val_if_fixed(isl.dim_type.out, k)
            if v.is_nan() or not v.is_int():
                break
            values.add(v.to_python())
        else:
            if len(values) == 1:
                fixed[k] = values.pop()
    return fixed


def _separate_option(kept: Sequence[int], fixed: Mapping[int, int], rank: int, dim: int) -> str | None:
    """ISL's ``separate`` option for the loop over ``dim`` of top rank ``rank``, in the kept dims.

    None when the top rank (dimension 0) is fixed to another rank: no instance is there.
    """
    t = ", ".join(f"t{k}" for k in range(len(kept)))
    where = kept.index(dim)
    if 0 in fixed:
        return f"[{t}] -> separate[{where}]" if fixed[0] == rank else None
    return f"[{t}] -> separate[{where}] : t{kept.index(0)} = {rank}"


# --------------------------------------------------------------------------- walking the AST


def children(node: isl.AstNode) -> list[isl.AstNode]:
    """The direct child nodes (a block's list, a for's body, an if's branches)."""
    t = node.get_type()
    if t == isl.ast_node_type.block:
        lst = node.block_get_children()
        return [lst.get_at(k) for k in range(lst.n_ast_node())]
    if t == isl.ast_node_type.for_:
        return [node.for_get_body()]
    if t == isl.ast_node_type.if_:
        out = [node.if_get_then_node()]
        if node.if_has_else_node():
            out.append(node.if_get_else_node())
        return out
    if t == isl.ast_node_type.mark:
        return [node.mark_get_node()]
    return []


def walk(node: isl.AstNode) -> Iterator[isl.AstNode]:
    """Every node, pre-order."""
    yield node
    for c in children(node):
        yield from walk(c)


def expr_args(expr: isl.AstExpr) -> list[isl.AstExpr]:
    """The arguments of an operation expression."""
    return [expr.op_get_arg(k) for k in range(expr.op_get_n_arg())]


def expr_ids(e: isl.AstExpr) -> set[str]:
    """The identifiers an AST expression reads."""
    t = e.get_type()
    if t == isl.ast_expr_type.id:
        return {e.get_id().get_name()}
    if t == isl.ast_expr_type.op:
        return set().union(*(expr_ids(a) for a in expr_args(e)))
    return set()


def user_statement(node: isl.AstNode) -> tuple[str, tuple[isl.AstExpr, ...]]:
    """A user node's statement name and the AST expressions of its original iterators.

    ``acc(c1, c2, 16 * c4 + c6)`` -> ``("acc", (c1, c2, 16 * c4 + c6))``: the
    k-th expression is the value of the statement's k-th loop iterator.
    """
    call = node.user_get_expr()
    args = expr_args(call)
    return args[0].get_id().get_name(), tuple(args[1:])


def iterator_dim(name: str) -> int | None:
    """``"c7"`` -> 7: the time dimension an AST iterator walks (None for other ids)."""
    if name.startswith(ITERATOR_PREFIX) and name[len(ITERATOR_PREFIX):].isdigit():
        return int(name[len(ITERATOR_PREFIX):])
    return None


def statements_under(node: isl.AstNode) -> tuple[str, ...]:
    """Names of the statements (user nodes) inside ``node``, first occurrence order."""
    seen: dict[str, None] = {}
    for n in walk(node):
        if n.get_type() == isl.ast_node_type.user:
            seen.setdefault(user_statement(n)[0], None)
    return tuple(seen)


def ast_loops_info(ks: KernelSchedule, root: isl.AstNode) -> list[LoopInfo]:
    """One :class:`LoopInfo` per AST for loop, in pre-order (the order :func:`walk` visits them).

    Iterator names are not unique (two sibling loops may walk the same
    dimension), so printers match loops by visiting order, or call
    :func:`loop_info` on the node at hand.
    """
    analysis = LoopAnalysis(ks)
    return [analysis.info(n) for n in walk(root) if n.get_type() == isl.ast_node_type.for_]


def loop_info(ks: KernelSchedule, node: isl.AstNode) -> LoopInfo:
    """The :class:`LoopInfo` of one AST for node (see :class:`LoopAnalysis` to reuse work)."""
    return LoopAnalysis(ks).info(node)


class LoopAnalysis:
    """Computes :class:`LoopInfo` for AST for nodes, caching the parallelism tests."""

    def __init__(self, ks: KernelSchedule) -> None:
        self.ks = ks
        self._conflicts: dict[int, isl.UnionMap] = {}
        self._parallel: dict[tuple[int, int], bool] = {}
        self._chunkable: dict[tuple, bool] = {}

    def is_parallel(self, rank: int, dim: int) -> bool:
        """Does the loop over ``dim`` of top-level item ``rank`` carry no conflict?"""
        key = (rank, dim)
        if key not in self._parallel:
            if rank not in self._conflicts:
                self._conflicts[rank] = _time_conflicts(self.ks, rank)
            self._parallel[key] = _parallel(self._conflicts[rank], self.ks.length, rank, dim)
        return self._parallel[key]

    def lockstep(self, rank: int, dim: int) -> bool:
        """May the loop over ``dim`` of item ``rank`` run its iterations in SIMD lock-step?

        Lock-step (``omp simd``) runs each statement of the body for several
        iterations before the next statement: a conflict carried by the loop
        keeps its order when its source stands strictly before its sink in
        the body (the time dimensions after ``dim``). A conflict inside one
        statement (a read and a write of the same position) is refused.
        """
        key = (rank, -1 - dim)
        if key not in self._parallel:
            if rank not in self._conflicts:
                self._conflicts[rank] = _time_conflicts(self.ks, rank)
            self._parallel[key] = _lockstep(self._conflicts[rank], self.ks.length, rank, dim)
        return self._parallel[key]

    def chunkable(self, rank: int, outer: int, inner: int, statements: tuple[str, ...]) -> bool:
        """May the loop over ``inner`` be cut into chunks shared out *around* the loop over ``outer``?

        ``outer`` encloses ``inner`` and every instance of ``statements`` (those under ``outer``) is
        under ``inner``. A thread that owns a chunk of ``inner``'s range walks ``outer`` over it, so
        two instances in one iteration of the loops around ``outer`` run in their original order
        when they lie in one iteration of ``inner`` (one chunk, one thread) and in any order
        otherwise: legal when no conflict among ``statements`` agrees on every dimension before
        ``outer`` and differs at ``inner`` (a dependence carried by ``outer``, or by a loop between,
        stays within one iteration of ``inner``: gramschmidt's ``R[k, j] += Q[i, k] * A[i, j]``
        carried by ``i`` around ``j``). Conflicts with statements outside ``outer`` are ordered by
        the barriers around the shared loop, as for every worksharing loop.
        """
        key = (rank, outer, inner, statements)
        if key not in self._chunkable:
            conflicts = _time_conflicts(self.ks, rank, frozenset(statements))
            self._chunkable[key] = _chunkable(conflicts, self.ks.length, rank, outer, inner)
        return self._chunkable[key]

    def info(self, node: isl.AstNode) -> LoopInfo:
        ks = self.ks
        it = node.for_get_iterator().get_id().get_name()
        dim = iterator_dim(it)
        stmts = statements_under(node)
        ranks = {ks.rank_of(s) for s in stmts}
        innermost = not any(c.get_type() == isl.ast_node_type.for_ for c in walk(node.for_get_body()))
        if dim is None or len(ranks) != 1:
            return LoopInfo(it, -1 if dim is None else dim, -1, -1, "", False, False, innermost, stmts)
        rank = ranks.pop()
        d = ks.dims_of(rank)[dim]
        loop = d.loop
        if d.kind == "original" and dim % 2 == 1:
            # original 2d+1 schedule: dimension 2k+1 walks the k-th iterator (dim 0 is the top rank)
            loops = ks.model.statement(stmts[0]).loops
            loop = loops[(dim - 1) // 2] if (dim - 1) // 2 < len(loops) else ""
        par = self.is_parallel(rank, dim)
        return LoopInfo(it, dim, rank, d.level, loop, d.spatial, par, innermost, stmts)


def _time_conflicts(ks: KernelSchedule, rank: int, only: frozenset[str] | None = None) -> isl.UnionMap:
    """Pairs of time points of item ``rank`` whose instances touch one element, one writing it.

    Pairs across top-level items never agree on dimension 0, so each item
    is analysed alone (much cheaper for kernels with many nests). ``only``:
    pairs of instances of those statements only.
    """
    m = ks.model
    names = {n for n, r in ks.top_rank if r == rank and (only is None or n in only)}
    space = m.context.get_space()
    w, r = isl.UnionMap.empty(space), isl.UnionMap.empty(space)
    for s in m.statements:
        if s.name in names:
            for a in s.writes:
                w = w.union(isl.UnionMap.from_map(a.relation))
            for a in s.reads:
                r = r.union(isl.UnionMap.from_map(a.relation))
    inst = w.apply_range(w.reverse()).union(w.apply_range(r.reverse())).union(r.apply_range(w.reverse()))
    return inst.apply_domain(ks.union).apply_range(ks.union)


def _parallel(conflicts: isl.UnionMap, length: int, rank: int, dim: int) -> bool:
    """No conflict in the item of top rank ``rank`` agrees before ``dim`` and differs at it: a loop is
    parallel when it can be chunked along itself."""
    return _chunkable(conflicts, length, rank, dim, dim)


def _chunkable(conflicts: isl.UnionMap, length: int, rank: int, outer: int, inner: int) -> bool:
    """No conflict in item ``rank`` agrees before ``outer`` and differs at ``inner``."""
    t = [f"t{k}" for k in range(length)]
    u = [f"u{k}" for k in range(length)]
    eq = [f"t{k} = u{k}" for k in range(outer)] + [f"t0 = {rank}"]
    # the conflicts that agree before ``outer`` first, once; then each sign probes those (as _lockstep)
    probe = isl.UnionMap(f"{{ [{', '.join(t)}] -> [{', '.join(u)}] : {' and '.join(eq)} }}")
    conflicts = conflicts.intersect(probe.align_params(conflicts.get_space()))
    if conflicts.is_empty():
        return True
    for sign in ("<", ">"):
        probe = isl.UnionMap(f"{{ [{', '.join(t)}] -> [{', '.join(u)}] : t{inner} {sign} u{inner} }}")
        if not conflicts.intersect(probe.align_params(conflicts.get_space())).is_empty():
            return False
    return True


def _lockstep(conflicts: isl.UnionMap, length: int, rank: int, dim: int) -> bool:
    """No conflict carried by ``dim`` (source earlier) whose source is not strictly before its
    sink in the body (dimensions after ``dim``): see :meth:`LoopAnalysis.lockstep`."""
    t = [f"t{k}" for k in range(length)]
    u = [f"u{k}" for k in range(length)]
    carried = [f"t{k} = u{k}" for k in range(dim)] + [f"t0 = {rank}", f"t{dim} < u{dim}"]
    not_before = [" and ".join([f"t{j} = u{j}" for j in range(dim + 1, k)] + [f"t{k} > u{k}"])
                  for k in range(dim + 1, length)]
    not_before.append(" and ".join(f"t{j} = u{j}" for j in range(dim + 1, length)) or "t0 = u0")
    # the carried conflicts first, once: each case then probes that (mostly empty) relation, not every
    # conflict of the item (ludcmp's 37 dimensions: a probe of all conflicts per case, 0.3 s a loop)
    probe = isl.UnionMap(f"{{ [{', '.join(t)}] -> [{', '.join(u)}] : {' and '.join(carried)} }}")
    conflicts = conflicts.intersect(probe.align_params(conflicts.get_space()))
    if conflicts.is_empty():
        return True
    for case in not_before:
        probe = isl.UnionMap(f"{{ [{', '.join(t)}] -> [{', '.join(u)}] : {case} }}")
        if not conflicts.intersect(probe.align_params(conflicts.get_space())).is_empty():
            return False
    return True


def isl_param_names(model: KernelModel) -> dict[str, str]:
    """ISL identifier -> kernel parameter name (ISL renames reserved words)."""
    return {isl_name(p): p for p in model.params}
