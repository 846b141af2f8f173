"""The C backend: one self-contained C file per kernel, printed from ISL's AST.

The signature is fixed by ``cli.md``: every ``in``/``out``/``inout`` tensor
(scalars included) by ``restrict`` pointer to row-major data, in
declaration order, then the parameters as ``long`` in header order::

    kernel gemm(M, N, K) { in A[M, K]; in B[K, N]; out C[M, N] ... }
      ->  void gemm(float *restrict A, float *restrict B, float *restrict C,
                    long M, long N, long K)

The loops come from :mod:`polymap.codegen.ast_build` (the mapped schedule
of each mapped nest, the original schedule elsewhere); this module walks the
AST itself rather than using ISL's printer so that it controls the pragmas:

* OpenMP as :mod:`polymap.codegen.c.parallel` plans it: one region per
  nest on its outermost loop that carries no conflict (the mapping's
  spatial loops first); inside a sequential time loop the region opens
  outside it and the parallel loops are shared with ``omp for``; with
  ``params`` small loops stay sequential;
* ``#pragma omp simd`` on innermost loops that carry no conflict and whose
  accesses the C compiler vectorises (unit-stride or invariant, reads also a
  constant stride: :func:`polymap.passes.counting.execution.vectorises`).

Statements are printed from the IR with the reference's value semantics
(:mod:`polymap.codegen.c.expr`), their iterators replaced by the AST's
expressions for them.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

from polymap import ir
from polymap.islcheck import isl
from polymap.mapping.schedule import mapping_statements, new_coordinates
from polymap.poly import KernelModel, build_model
from polymap.codegen.c import packing, regtile, signature
from polymap.codegen.c.names import DEFAULT_COMMAND, LoopNamer, header
from polymap.codegen.c.parallel import ParallelPlan, Planner, node_at, child_paths, chunk_bounds
from polymap.codegen.ast_build import (
    KernelSchedule,
    LoopAnalysis,
    LoopInfo,
    build_ast,
    expr_ids,
    isl_param_names,
    kernel_schedule,
    user_statement,
    walk,
)
from polymap.codegen.c.expr import (
    _SUFFIX,
    C_TYPES,
    PRELUDE,
    ValuePrinter,
    ast_expr,
    c_name,
)
from polymap.passes.frontend.types import combine_type
from polymap.passes.counting.execution import vectorises
from polymap.machine.arch import Architecture
from polymap.codegen.loop_emitter import MappingsArg, as_mappings
from typing import Mapping as MappingT
from polymap.mapping.model import Mapping

_COMPOUND = {"+=": "+", "-=": "-", "*=": "*", "/=": "/"}
#: How many iterations of a chunked reduction loop update one element held in a local (_unrolled_reduction).
UNROLL = 4


def c_signature(kernel: ir.Kernel) -> str:
    """``void NAME(T1 *restrict X1, ..., long P1, ...)`` as ``cli.md`` fixes it (the original's for C input)."""
    return signature.c_signature(kernel, lambda e: ValuePrinter(kernel, {}, None).index(e))


def emit_c(kernel: ir.Kernel, model: KernelModel | None = None, mapping: MappingsArg = None, *, arch: Architecture | None = None,
           register_tiles: bool = True, params: MappingT[str, int] | None = None, threads: int | None = None, pack: bool = True,
           command: str = DEFAULT_COMMAND, reassociate: bool = False) -> str:
    """The C file for ``kernel`` under ``mapping`` (None: the original loop order everywhere).

    ``mapping`` may also be a sequence of mappings of different nests. ``arch``
    is accepted for symmetry with the other emitters; the printed code does
    not depend on it (tile sizes are in the mapping). ``register_tiles``
    false turns off the unroll-and-jam of :mod:`polymap.codegen.c.regtile`.
    ``params`` (the sizes the code is for) lets small loops stay sequential
    (:mod:`polymap.codegen.c.parallel`); ``threads`` the threads assumed
    there (default: the cores of this machine). ``pack`` false turns off
    the packed panels of :mod:`polymap.codegen.c.packing`. ``command`` is the
    command line the header comment says produced the file (:mod:`polymap.codegen.c.names`). ``reassociate``
    false (the default) keeps the rounding of the original program: every
    element's updates in their original order (no reduction is split or
    reassociated) and no multiply-add contracted into one rounding (FMA),
    which ``-march=native`` would otherwise do, except a register tile's
    ``c += x * y``, one fused multiply-add where the build has FMA, as GCC
    contracts the original statement (:mod:`polymap.codegen.c.regtile`;
    see ``docs/design.md``).
    """
    model = model if model is not None else build_model(kernel)
    mappings = as_mappings(mapping)
    ks = kernel_schedule(model, mappings)
    root = build_ast(model, ks.union, separate=ks.separate)
    printer = _Printer(kernel, model, ks, mappings, register_tiles=register_tiles, pack=pack)
    printer.plan = Planner(printer.analysis, params=params, opaque=printer.is_register_tile,
                           spatial_ranks=printer.spatial_ranks, threads=threads).plan(root)
    body = printer.function(root)
    head = header(kernel, mappings, arch=arch, params=params, command=command)
    head += "" if reassociate else EXACT_ROUNDING
    return (head + PRELUDE + (regtile.VECTOR_TYPES if printer.uses_vectors else "")
            + (THREADS_PRELUDE if printer.plan.chunks else "") + "\n" + body)


#: The team's size where a loop is shared out in one chunk per thread (parallel.py's chunks); 1 when
#: the file is built without OpenMP (the pragmas are ignored, one chunk is the whole range).
THREADS_PRELUDE = """\
#ifndef POLYMAP_THREADS
#define POLYMAP_THREADS
#ifdef _OPENMP
#include <omp.h>
static inline long polymap_threads(void) { return omp_get_num_threads(); }
#else
static inline long polymap_threads(void) { return 1; }
#endif
#endif
"""


#: The original program's rounding: no a * b + c contracted into a fused multiply-add (C's default
#: under GCC is -ffp-contract=fast, so -march=native with FMA would round differently from the
#: reference and from PolyBench built without it; gramschmidt's rank-deficient columns amplify it).
EXACT_ROUNDING = """\
/* Exact rounding: every operation rounded as written (no fused multiply-add) except register tiles'
   c += x * y, one polymap_fma per update where the build has FMA (GCC contracts the original's so). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize ("fp-contract=off")
#endif
"""


class _Printer:
    """A line buffer with indentation, over one kernel's AST."""

    def __init__(self, kernel: ir.Kernel, model: KernelModel, ks: KernelSchedule, mappings: Sequence[Mapping] = (), *,
                 register_tiles: bool = True, pack: bool = True) -> None:
        self.kernel = kernel
        # the mapping of each mapped top-level item (register tiles read the innermost level's tile)
        self.mappings_by_rank = {ks.rank_of(mapping_statements(model, m)[0].name): m
                                 for m in mappings if mapping_statements(model, m)} if register_tiles else {}
        self.uses_vectors = False
        # the packed references of each mapped top-level item, and those whose panel is live where printing
        self.packs_by_rank = {ks.rank_of(model.nest_statements(m.nest)[0].name): packing.plan_packs(model, m)
                              for m in mappings if model.nest_statements(m.nest)} if pack else {}
        self.active_packs: dict = {}
        self.loop_stack: dict = {}  # (level, loop) -> AST iterator of the enclosing mapped loops
        self.model = model
        self.ks = ks
        self.analysis = LoopAnalysis(ks)
        self.lines: list[str] = []
        self.depth = 1
        self.hoisted: dict[str, tuple[str, str]] = {}  # C text of a value computed once -> its local, C type
        self.names = {iname: c_name(p) for iname, p in isl_param_names(model).items()}
        self.decls = {d.name: d for d in kernel.decls}
        self.spatial_ranks = {rank for rank, dims in ks.dims if any(d.spatial for d in dims)}
        self.plan = ParallelPlan()
        self.chunk_ends: dict[tuple, tuple[str, str]] = {}  # inner loop path -> its chunk's C bounds
        self.namer = LoopNamer(kernel, {ks.rank_of(st[0].name): tuple(lm.level for lm in m.levels)
                                        for m in mappings if (st := mapping_statements(model, m))})

    @contextmanager
    def loop_variable(self, n: isl.AstNode, info: LoopInfo) -> Iterator[str]:
        """The readable name of for node ``n``'s iterator, in force while its loop is printed."""
        inner = bool(info.loop) and any(self.analysis.info(f).loop == info.loop for f in walk(n.for_get_body())
                                        if f.get_type() == isl.ast_node_type.for_)
        name = self.namer.name(info, inner_loop_of_same=inner)
        it = n.for_get_iterator().get_id().get_name()
        previous = self.names.get(it)
        self.names[it] = name
        self.namer.open.append(name)
        try:
            yield name
        finally:
            self.namer.open.pop()
            if previous is None:
                del self.names[it]
            else:
                self.names[it] = previous

    def is_register_tile(self, n: isl.AstNode, info: LoopInfo) -> bool:
        """Is ``n`` printed as a register tile (a unit: nothing inside it is shared out)?"""
        return (not info.innermost and info.rank in self.mappings_by_rank
                and regtile.match(self, n, info) is not None)

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line if line else "")

    # ---- the function
    def function(self, root: isl.AstNode) -> str:
        self.lines = [c_signature(self.kernel), "{"]
        for line in signature.prologue(self.kernel):
            self.emit(line)
        locals_ = [d for d in self.kernel.decls if d.role == "local"]
        for d in locals_:
            t = C_TYPES[d.dtype]
            if d.is_scalar:
                self.emit(f"{t} {c_name(d.name)} = 0;")
            else:
                size = " * ".join(f"(long){self._extent(e)}" for e in d.shape)
                self.emit(f"{t} *restrict {c_name(d.name)} = calloc({size} > 0 ? {size} : 1, sizeof({t}));")
        if any(not d.is_scalar for d in locals_):
            names = [c_name(d.name) for d in locals_ if not d.is_scalar]
            self.emit(f"if ({' || '.join('!' + n for n in names)}) {{ "
                      + " ".join(f"free({n});" for n in names) + " return; }")
        top = len(self.lines)
        self.node(root)
        for d in locals_:
            if not d.is_scalar:
                self.emit(f"free({c_name(d.name)});")
        self.lines.append("}")
        self.lines[top:top] = [f"  const {t} {name} = {text};" for text, (name, t) in self.hoisted.items()]
        return "\n".join(self.lines) + "\n"

    def hoist(self, text: str, ctype: str) -> str:
        """The name of a local that holds ``text`` (of type ``ctype``), computed once at the function's top."""
        if text not in self.hoisted:
            self.hoisted[text] = (f"polymap_once_{len(self.hoisted)}", C_TYPES[ctype])
        return self.hoisted[text][0]

    def _extent(self, e: ir.Expr) -> str:
        return ValuePrinter(self.kernel, {}, self.ref).index(e)

    # ---- AST nodes
    # mode: "serial" (no region open), "region" (every thread walks this node), "inside"
    # (one thread, or one share of a worksharing loop, runs it: no more OpenMP but simd)
    def node(self, n: isl.AstNode, path: tuple[int, ...] = (), mode: str = "serial") -> None:
        t = n.get_type()
        if mode == "region" and path not in self.plan.holds and path not in self.plan.worksharing:
            self.emit("#pragma omp single")
            self.emit("{")
            self.nested(n, path, "inside")
            self.emit("}")
            return
        if t == isl.ast_node_type.block:
            kids = child_paths(n, path)
            k = 0
            while k < len(kids):
                c, p = kids[k]
                if mode == "region" and p not in self.plan.holds and p not in self.plan.worksharing:
                    # consecutive one-thread statements share one single (one barrier)
                    run = [kids[k]]
                    while k + 1 < len(kids) and kids[k + 1][1] not in self.plan.holds \
                            and kids[k + 1][1] not in self.plan.worksharing:
                        k += 1
                        run.append(kids[k])
                    self.emit("#pragma omp single")
                    self.emit("{")
                    for rc, rp in run:
                        self.nested(rc, rp, "inside")
                    self.emit("}")
                elif mode == "region" and p in dict(self.plan.chunks) and k + 1 < len(kids) \
                        and kids[k + 1][1] in self.plan.joined:
                    group = [kids[k]]  # a chunked loop and those that join it: one loop over the chunks
                    while k + 1 < len(kids) and kids[k + 1][1] in self.plan.joined:
                        k += 1
                        group.append(kids[k])
                    self._chunked(group, mode)
                else:
                    self.node(c, p, mode)
                k += 1
        elif t == isl.ast_node_type.for_:
            self.for_loop(n, path, mode)
        elif t == isl.ast_node_type.if_:
            (then, tp), *rest = child_paths(n, path)
            self.emit(f"if ({ast_expr(n.if_get_cond(), self.names)}) {{")
            self.nested(then, tp, mode)
            for other, op in rest:
                self.emit("} else {")
                self.nested(other, op, mode)
            self.emit("}")
        elif t == isl.ast_node_type.user:
            self.statement(n)
        elif t == isl.ast_node_type.mark:
            (c, p), = child_paths(n, path)
            self.node(c, p, mode)

    def nested(self, n: isl.AstNode, path: tuple[int, ...], mode: str) -> None:
        self.depth += 1
        self.node(n, path, mode)
        self.depth -= 1

    def for_loop(self, n: isl.AstNode, path: tuple[int, ...] = (), mode: str = "serial", *,
                 register_tiles: bool = True) -> None:
        hoisted = packing.hoisted_packs(self, n, self.analysis.info(n), mode)
        # panels no loop above their level moves: copied once, before the nest. A pack whose statement
        # is not under this node opens nothing; then the loop prints as it is (re-entering would find the
        # same pack hoistable again, without end: syrk at PolyBench LARGE)
        opened = packing.open_packs(self, n, hoisted) if hoisted else []
        if opened:
            self.for_loop(n, path, mode, register_tiles=register_tiles)
            packing.close_packs(self, opened)
            return
        if path in dict(self.plan.chunks) and (mode == "serial" and path in self.plan.parallel_for
                                               or mode == "region" and path in self.plan.worksharing):
            self._chunked([(n, path)], mode)
            return
        info = self.analysis.info(n)
        if register_tiles and not info.innermost and info.rank in self.mappings_by_rank:
            tile = regtile.match(self, n, info)
            if tile is not None:
                regtile.emit(self, tile, path=path, mode="inside" if mode == "region" else mode)
                return
        with self.loop_variable(n, info) as it:
            self._for_loop(n, info, it, path, mode)

    def _on_diagonal(self, info: LoopInfo) -> bool:
        """Does the loop walk the tiles of one diagonal of a wavefront (its second loop ``b``)?

        Those are dealt round-robin (``schedule(static, 1)``): a diagonal's first and last tiles are
        the partial ones at the edges of the skewed space, so contiguous chunks left one thread with
        more of the full ones (heat-3d's 2 x 16 tiles at LARGE: the busiest thread's share bounds
        2 threads to 1.75x, round-robin to 1.96x; jacobi-2d's 8 x 64: 1.88x -> 1.96x, counted
        exactly per diagonal). Round-robin also keeps tile column ``b`` on one thread from one
        diagonal to the next, where its data already is."""
        m = self.mappings_by_rank.get(info.rank)
        if m is None or not 0 <= info.level < len(m.levels) - 2:  # not single points: those go in chunks
            return False
        wave = m.levels[info.level].wavefront
        return bool(wave) and info.loop == wave[1]

    def _uneven(self, n: isl.AstNode, info: LoopInfo) -> bool:
        """Do the loop's iterations do unequal work: a loop of another of the mapping's loops inside
        it has bounds that depend on it (covariance's columns ``j >= i`` under its row blocks)? Those
        are dealt one at a time as threads come free (``schedule(dynamic, 1)``): contiguous chunks
        gave one thread 75% of the triangle, and round-robin (``static, 1``) over covariance's five
        blocks of 252 rows, whose work falls with the row, 60% (blocks 0, 2, 4); dealt on demand
        in the loop's order, longest rows first, the busiest thread has 51% (counted per point,
        tests/test_register_triangles.py), and a thread the machine delays takes fewer. Mappings
        with a ``schedule`` (skewed tiles, whose bounds all depend on the outer tiles) keep theirs, and
        so do loops of single points (as ``_on_diagonal``'s: neighbours dealt to different threads
        would write the same cache lines, ``x[i]`` beside ``x[i + 1]``); an entry that only places a
        statement (covariance's folded ``cov[i, j] = 0``) keeps the program's loops and this rule."""
        m = self.mappings_by_rank.get(info.rank)
        if m is None or new_coordinates(self.model, m) or not 0 <= info.level < len(m.levels) - 2:
            return False
        it = n.for_get_iterator().get_id().get_name()
        for f in walk(n.for_get_body()):
            if f.get_type() == isl.ast_node_type.for_ and self.analysis.info(f).loop != info.loop \
                    and it in expr_ids(f.for_get_init()) | expr_ids(f.for_get_cond()):
                return True
        return False

    def _chunked(self, group: list[tuple[isl.AstNode, tuple]], mode: str) -> None:
        """Loops shared out in one chunk of an inner loop per thread (:mod:`polymap.codegen.c.parallel`):
        the chunk's bounds are computed once from the first one's inner loop (which do not depend on
        the loops between; a joined loop's inner loop has the same), then each loop is printed as it
        is, in order, inside the one loop over the chunks."""
        chunks = dict(self.plan.chunks)
        n, path = group[0]
        lower, upper, inclusive = chunk_bounds(node_at(n, path, chunks[path]))
        if mode == "serial":
            self.emit("#pragma omp parallel")
        self.emit("{")
        self.depth += 1
        self.emit("const long polymap_parts = polymap_threads();")
        self.emit("#pragma omp for schedule(static)")
        self.emit("for (long polymap_part = 0; polymap_part < polymap_parts; polymap_part += 1) {")
        self.depth += 1
        self.emit(f"const long polymap_lo = {ast_expr(lower, self.names)};")
        end = ast_expr(upper, self.names, top=False) + (" + 1" if inclusive else "")
        self.emit(f"const long polymap_n = polymap_max({end} - polymap_lo, 0);")
        self.emit("const long polymap_b = polymap_lo + polymap_n * polymap_part / polymap_parts;")
        self.emit("const long polymap_e = polymap_lo + polymap_n * (polymap_part + 1) / polymap_parts;")
        for n, path in group:
            self.chunk_ends[chunks[path]] = ("polymap_b", "polymap_e")
            if not self._unrolled_reduction(n, path, chunks[path]):
                self.for_loop(n, path, "inside")
            del self.chunk_ends[chunks[path]]
        self.depth -= 1
        self.emit("}")
        self.depth -= 1
        self.emit("}")

    def _unrolled_reduction(self, n: isl.AstNode, path: tuple, inner: tuple) -> bool:
        """Print a chunked loop ``n`` whose only statement is an accumulation into an element that
        does not depend on ``n`` (gramschmidt's ``R[k, j] += Q[i, k] * A[i, j]``, ``n`` walking
        ``i`` around the chunk's ``j``) with ``n`` unrolled by :data:`UNROLL` into its inner loop:
        per ``j``, the element is loaded once into a local, updated for ``i .. i + UNROLL - 1`` in
        that order, and stored once (a loop over the rest of ``i`` after). Every element's updates
        keep their order, and ``j``'s iterations share no element (why ``n`` could be chunked in
        ``j``), so the results are bit-identical; the element's load and store are paid once per
        ``UNROLL`` updates instead of every update (gramschmidt at LARGE, 1 thread: 0.48-0.55 s
        against 0.75-0.89 s, load 13). False (nothing printed) when ``n`` is not of that form."""
        (body, bp), = child_paths(n, path)
        if bp != inner or body.get_type() != isl.ast_node_type.for_ or chunk_bounds(n) is None:
            return False
        (user, _), = child_paths(body, bp)
        if user.get_type() != isl.ast_node_type.user:
            return False
        stmt = self.model.statement(user_statement(user)[0]).stmt
        value_reads = {e.tensor for e in ir.subexpressions(stmt.value) if isinstance(e, ir.Ref)}
        if stmt.op not in _COMPOUND or stmt.target.tensor in value_reads:
            return False
        info, inner_info = self.analysis.info(n), self.analysis.info(body)
        if self.active_packs or packing.pack_points(self, n, info) or packing.pack_points(self, body, inner_info):
            return False  # packed references read the loops' tile coordinates, which this form does not track
        it_ast = n.for_get_iterator().get_id().get_name()
        lower, upper, inclusive = chunk_bounds(n)
        with self.loop_variable(n, info) as it:
            targets = set()
            for shift in (0, 1):
                self.names[it_ast] = f"({it} + {shift})"
                targets.add(self._parts(user)[1])
            self.names[it_ast] = it
            if len(targets) != 1:  # the element depends on n's iterator: not a reduction along n
                return False
            end = ast_expr(upper, self.names, top=False)
            self.emit("{")  # its own scope: the next loop of the chunk may reuse the iterator's name
            self.depth += 1
            self.emit(f"long {it} = {ast_expr(lower, self.names)};")
            self.emit(f"for (; {it} + {UNROLL - 1} {'<=' if inclusive else '<'} {end}; {it} += {UNROLL}) {{")
            self.depth += 1
            with self.loop_variable(body, inner_info) as jt:
                start, stop = self.chunk_ends[bp]
                self.emit("#pragma omp simd")
                self.emit(f"for (long {jt} = {start}; {jt} < {stop}; {jt} += 1) {{")
                self.depth += 1
                name, target, ctype, _, _ = self._parts(user)
                self.emit(f"{ctype} polymap_acc = {target};")
                for shift in range(UNROLL):
                    self.names[it_ast] = f"({it} + {shift})" if shift else it
                    self.emit(f"polymap_acc {stmt.op} {self._parts(user)[3]};  /* {name} */")
                self.names[it_ast] = it
                self.emit(f"{target} = polymap_acc;")
                self.depth -= 1
                self.emit("}")
            self.depth -= 1
            self.emit("}")
            self.emit(f"for (; {it} {'<=' if inclusive else '<'} {end}; {it} += 1) {{")
            self.depth += 1
            self.for_loop(body, bp, "inside")
            self.depth -= 1
            self.emit("}")
            self.depth -= 1
            self.emit("}")
        return True

    def _for_loop(self, n: isl.AstNode, info: LoopInfo, it: str, path: tuple, mode: str) -> None:
        init = ast_expr(n.for_get_init(), self.names)
        cond = ast_expr(n.for_get_cond(), self.names)
        if path in self.chunk_ends:
            init, end = self.chunk_ends[path]
            cond = f"{it} < {end}"
        inc = ast_expr(n.for_get_inc(), self.names)
        # a loop that carries conflicts may still run in lock-step when each goes forward in the body
        simd = info.innermost and self._unit_stride(info) and (
            info.parallel or (info.rank >= 0 and self.analysis.lockstep(info.rank, info.dim)))
        body_mode = mode
        deal = ("schedule(static, 1)" if self._on_diagonal(info) else
                "schedule(dynamic, 1)" if self._uneven(n, info) else "schedule(static)")
        if mode == "serial" and path in self.plan.parallel_for:
            self.emit("#pragma omp parallel for" + (" simd" if simd else "") + f" {deal}")
            body_mode = "inside"
        elif mode == "serial" and path in self.plan.regions:
            self.emit("#pragma omp parallel")
            body_mode = "region"
        elif mode == "region" and path in self.plan.worksharing:
            self.emit("#pragma omp for" + (" simd" if simd else "") + f" {deal}")
            body_mode = "inside"
        elif simd:
            self.emit("#pragma omp simd")
        elif info.spatial and not info.parallel:
            self.emit(f"/* spatial loop {info.loop} carries a dependence: runs sequentially */")
        self.emit(f"for (long {it} = {init}; {cond}; {it} += {inc}) {{")
        (body, bp), = child_paths(n, path)
        self.depth += 1
        opened = packing.open_packs(self, body, packing.pack_points(self, n, info))
        self.depth -= 1
        # packed subscripts read tile coordinates off it (AST iterators, which self.names renames)
        self.loop_stack[(info.level, info.loop)] = n.for_get_iterator().get_id().get_name()
        self.nested(body, bp, body_mode)
        self.loop_stack.pop((info.level, info.loop), None)
        self.depth += 1
        packing.close_packs(self, opened)
        self.depth -= 1
        self.emit("}")

    def _unit_stride(self, info: LoopInfo) -> bool:
        """The C compiler vectorises every statement of the loop along it (``vectorises``)."""
        if not info.loop:
            return False
        # the cost model's rule for lanes (passes/counting/execution.py): one definition
        return all(vectorises(self.model.statement(name).stmt, info.loop) for name in info.statements
                   if info.loop in self.model.statement(name).loops)

    # ---- statements
    def _parts(self, n: isl.AstNode) -> tuple[str, str, str, str, str]:
        """A user node's statement as C text: ``(name, target, target's C type, value, the value's
        type)``, the value converted as the statement's operator combines it with the target."""
        name, args = user_statement(n)
        sm = self.model.statement(name)
        env = {v: ast_expr(a, self.names, top=False) for v, a in zip(sm.loops, args)}
        vp = ValuePrinter(self.kernel, env, None, self.hoist)
        vp.ref_text = lambda r: self.ref(r, vp)
        stmt = sm.stmt
        target = self.ref(stmt.target, vp)
        ttype = self.decls[stmt.target.tensor].dtype
        value = vp.value(stmt.value)
        t = ttype if stmt.op == "=" else combine_type(ttype, value.type)
        return name, target, C_TYPES[ttype], vp.convert(value, t), t

    def statement(self, n: isl.AstNode) -> None:
        name, target, _, v, t = self._parts(n)
        stmt = self.model.statement(name).stmt
        if stmt.op == "=":
            self.emit(f"{target} = {v};  /* {name} */")
            return
        if stmt.op in _COMPOUND:
            self.emit(f"{target} {stmt.op} {v};  /* {name} */")
        else:
            f = f"polymap_{stmt.op[:-1]}_{_SUFFIX[t]}"
            self.emit(f"{target} = {f}({target}, {v});  /* {name} */")

    def ref(self, r: ir.Ref, vp: ValuePrinter | None = None) -> str:
        """``X[flat index]`` (row-major), ``X[0]`` for argument scalars, ``X`` for local scalars."""
        d = self.decls[r.tensor]
        name = c_name(r.tensor)
        if d.is_scalar:
            return name if d.role == "local" else f"{name}[0]"
        vp = vp or ValuePrinter(self.kernel, {}, self.ref)
        pack = self.active_packs.get((r.tensor, tuple(getattr(x, "name", "") for x in r.indices)))
        if pack is not None:
            values = {x: vp.index(sub) for x, sub in zip(pack.loops, r.indices)}
            names = getattr(vp, "ast_names", self.names)
            coords = {key: names.get(it, it) for key, it in self.loop_stack.items()}
            return f"{packing.buffer_name(pack)}[{packing.packed_index(pack, values, coords)}]"
        flat = vp.index(r.indices[0])
        for sub, ext in zip(r.indices[1:], d.shape[1:]):
            flat = f"{flat} * {vp.index(ext)} + {vp.index(sub)}"
            flat = f"({flat})"
        return f"{name}[{flat}]"


def emit_c_for(kernel: ir.Kernel, mappings: Sequence = ()) -> str:
    """Shorthand: build the model and print (tests and benchmarks)."""
    return emit_c(kernel, build_model(kernel), tuple(mappings))
