"""Register tiles: the innermost mapping level's box unrolled and jammed around its reduction loop.

When the innermost level (``RF`` on ``host``) tiles a small box of loops
that index the target of one ``+=``/``-=`` statement, and the loop right
around that box is a reduction loop the target does not depend on, the
accumulators live in local variables for the whole reduction loop: loaded
once before it, stored once after it. Along the target's unit-stride loop
the accumulators are GCC/Clang vectors when the box row is a whole number
of 16-byte vectors. The tile's shape comes from the mapping (chosen for the
host's vector unit by :mod:`polymap.passes.search.register_mapping`); the
vector width is chosen when the file is built, so that the same C runs
everywhere::

    for (k ...) for (i in 0..14) for (j in 0..32) C[i, j] += A[i, k] * B[k, j]
      ->
    #if defined(__AVX512F__)          64-byte vectors (2 per row: 28 zmm accumulators)
      if (the box is full) {
        polymap_f32x16 acc_0_0 = load(&C[i0 + 0, j0 + 0]), acc_0_16 = load(&C[i0, j0 + 16]), ...
        for (k ...) { acc_0_0 += A[i0, k] * load(&B[k, j0]); ... }   (28 independent FMAs)
        store(&C[i0, j0], acc_0_0); ...
      } else {                         an edge box: the same, with masked loads and stores
        rows past the edge load and store nothing (mask 0) and read their last valid row
      }
    #elif defined(__AVX2__)           32-byte vectors, edges by maskload/maskstore
    #else                             16-byte vectors, edges by the generic loops
    #endif

Several reduction loops right around the box (conv2d's ``c { r { s { box
of O } } }``, each a different kernel loop the target does not depend on)
make one tile: the accumulators are loaded before the outermost and stored
after it, the loops printed inside in their order (docs/design.md, "conv2d
as an implicit GEMM").

An initialisation of the box's elements that the mapping places at the
first update (register_mapping's ``init: {i: i, j: j, k: 0}``) is printed by
ISL inside the box under a guard, ``if (k_LLC == 0 && k == 0) init; acc``;
the tile takes it in (:class:`FoldedInit`): where the guard holds at the
loop's first step the accumulators start from the init's value (``= 0``:
C is not loaded) or are loaded and scaled once (``*= beta``); at a later
step, the same there. Its value must be one for the whole box (a literal
or a scalar), broadcast exactly.

Legal because every element keeps its own updates in the original order
(only the memory round-trips between them are removed): the target must not
depend on the reduction loop, distinct box points must hit distinct
elements (each box loop a bare subscript of its own dimension), and no
other reference in the statement may touch the target's tensor.

Rounding: an update ``c += x * y`` (``c -= x * y``) of a vectorised tile is
one fused multiply-add (``polymap_fma_*``) where the build has FMA (the
64-byte variant, and the 32-byte one with ``__FMA__``), as GCC contracts the
same statement of the original program at ``-O3 -march=native``; elsewhere
it is rounded twice, as the rest of the file (see ``docs/design.md``).
"""
from __future__ import annotations

from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from itertools import product
from typing import TYPE_CHECKING, Callable

from polymap import ir
from polymap.islcheck import isl
from polymap.codegen.ast_build import LoopInfo, expr_args, user_statement
from polymap.codegen.ast_build import expr_ids as ids  # the emitter reads it as regtile.ids too
from polymap.codegen.c import packing
from polymap.codegen.c.expr import C_TYPES, ValuePrinter, ast_expr, c_name
from polymap.codegen.c.parallel import Path, child_paths
from polymap.passes.counting.execution import loads_lanewise, loop_coefficient, vectorises
from polymap.passes.counting.packs import reads_panel
from polymap.passes.frontend.types import combine_type


if TYPE_CHECKING:  # annotations only: the emitter builds on this module
    from polymap.codegen.c.emitter import _Printer as Printer
    from polymap.poly import StatementModel

#: (preprocessor condition, vector bytes, edge boxes masked), tried in order when the file is built
VARIANTS = (("defined(__AVX512F__)", 64, True), ("defined(__AVX2__)", 32, True), ("", 16, False))
#: the largest vectorised box: 28 zmm accumulators (of 32: B's vectors and a broadcast left over)
MAX_VECTOR_BYTES = 28 * 64
MAX_SCALAR_ACCUMULATORS = 16
#: the operators of an initialisation the register tile starts its accumulators from (C's own arithmetic)
FOLDED_OPS = ("=", "*=", "/=", "+=", "-=")
_ITEMSIZE = {"f32": 4, "f64": 8}


def _vtypes() -> str:
    lines = []
    for dtype, ctype in (("f32", "float"), ("f64", "double")):
        for nbytes in (64, 32, 16):
            name = f"polymap_{dtype}x{nbytes // _ITEMSIZE[dtype]}"
            lines.append(f"typedef {ctype} {name} __attribute__((vector_size({nbytes})));")
            lines.append(f"typedef {ctype} {name}_u __attribute__((vector_size({nbytes}), "
                         f"aligned({_ITEMSIZE[dtype]}), may_alias));")
    return "\n".join(lines)


VECTOR_TYPES = f"""\
/* Register tiles: GCC vectors of 64, 32 or 16 bytes (the widest the build's -m flags allow is used);
   the _u types load/store unaligned, alias-safe. Edge tiles: AVX-512 masks, AVX2 maskload/maskstore;
   polymap_maskr_*(a, n): the lanes a..n-1 (a triangle's diagonal box, rows starting at different columns).
   polymap_fma_*: a register tile's multiply-accumulate c + a * b in one rounding where the build has FMA
   (64- and 32-byte vectors), as GCC contracts the same statement of the original program; the 16-byte
   variant, whose edges take the generic loops, rounds twice everywhere (see docs/design.md). */
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
{_vtypes()}
#if defined(__AVX512F__)
#define polymap_fma_f32x16(a, b, c) ((polymap_f32x16)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#define polymap_fma_f64x8(a, b, c) ((polymap_f64x8)_mm512_fmadd_pd((__m512d)(a), (__m512d)(b), (__m512d)(c)))
static inline __mmask16 polymap_mask_f32x16(long n) {{ return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u); }}
static inline __mmask8 polymap_mask_f64x8(long n) {{ return n >= 8 ? (__mmask8)0xFF : n <= 0 ? (__mmask8)0 : (__mmask8)((1u << n) - 1u); }}
static inline __mmask16 polymap_maskr_f32x16(long a, long n) {{ return (__mmask16)(polymap_mask_f32x16(n) & (__mmask16)~polymap_mask_f32x16(a)); }}
static inline __mmask8 polymap_maskr_f64x8(long a, long n) {{ return (__mmask8)(polymap_mask_f64x8(n) & (__mmask8)~polymap_mask_f64x8(a)); }}
#define polymap_mload_f32x16(m, p) ((polymap_f32x16)_mm512_maskz_loadu_ps((m), (p)))
#define polymap_mload_f64x8(m, p) ((polymap_f64x8)_mm512_maskz_loadu_pd((m), (p)))
#define polymap_mstore_f32x16(m, p, v) _mm512_mask_storeu_ps((p), (m), (__m512)(v))
#define polymap_mstore_f64x8(m, p, v) _mm512_mask_storeu_pd((p), (m), (__m512d)(v))
#endif
#if defined(__AVX2__) && defined(__FMA__)
#define polymap_fma_f32x8(a, b, c) ((polymap_f32x8)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define polymap_fma_f64x4(a, b, c) ((polymap_f64x4)_mm256_fmadd_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
#else
#define polymap_fma_f32x8(a, b, c) ((c) + (a) * (b))
#define polymap_fma_f64x4(a, b, c) ((c) + (a) * (b))
#endif
#define polymap_fma_f32x4(a, b, c) ((c) + (a) * (b))
#define polymap_fma_f64x2(a, b, c) ((c) + (a) * (b))
#if defined(__AVX2__)
static inline __m256i polymap_mask_f32x8(long n) {{ return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }}
static inline __m256i polymap_mask_f64x4(long n) {{ return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n < 0 ? 0 : n > 4 ? 4 : n), _mm256_setr_epi64x(0, 1, 2, 3)); }}
static inline __m256i polymap_maskr_f32x8(long a, long n) {{ return _mm256_andnot_si256(polymap_mask_f32x8(a), polymap_mask_f32x8(n)); }}
static inline __m256i polymap_maskr_f64x4(long a, long n) {{ return _mm256_andnot_si256(polymap_mask_f64x4(a), polymap_mask_f64x4(n)); }}
#define polymap_mload_f32x8(m, p) ((polymap_f32x8)_mm256_maskload_ps((p), (m)))
#define polymap_mload_f64x4(m, p) ((polymap_f64x4)_mm256_maskload_pd((p), (m)))
#define polymap_mstore_f32x8(m, p, v) _mm256_maskstore_ps((p), (m), (__m256)(v))
#define polymap_mstore_f64x4(m, p, v) _mm256_maskstore_pd((p), (m), (__m256d)(v))
#endif
"""


@dataclass(frozen=True)
class BoxLoop:
    """One loop of the register box: its AST iterator, its kernel loop and its trip count."""

    iterator: str
    loop: str
    count: int
    init: isl.AstExpr
    upper: str  # C text of the inclusive upper bound
    rhs: isl.AstExpr | None = None  # the bound as ISL wrote it (printed per row when it depends on them)
    strict: bool = False  # rhs is an exclusive bound
    per_row: bool = False  # the bound depends on the outer box loops (a triangle's diagonal tiles)
    starts_per_row: bool = False  # so does the start (``j in i..M``): full rows only where all start alike
    moves: bool = False  # the bound depends on the reduction loop (trmm's rows ``i < k``)


@dataclass(frozen=True)
class FoldedInit:
    """An initialisation of the box's elements that the mapping places at a step of the reduction loop
    (register_mapping's ``init: {i: i, j: j, k: 0}``): ISL prints it in the box under ``guard``."""

    statement: str
    args: tuple[isl.AstExpr, ...]
    guard: isl.AstExpr  # reads the reduction loop's iterator and outer ones, no box iterator


@dataclass(frozen=True)
class RegisterTile:
    """A matched reduction loop (with any reduction loops nested right inside it) and its box (outer
    -> inner) and statement."""

    reduction: isl.AstNode
    box: tuple[BoxLoop, ...]
    statement: str
    args: tuple[isl.AstExpr, ...]
    lanes: int  # 1: scalar accumulators; else lanes per vector along the innermost box loop
    init: FoldedInit | None = None  # the accumulators start from its value where its guard holds
    #: reduction loops of other kernel loops between ``reduction`` and the box, outer -> inner (conv2d's
    #: ``r, s`` under ``c``): printed in their order inside ``reduction``, each element's updates in
    #: the original order, the accumulators loaded before ``reduction`` and stored after it
    inner: tuple[isl.AstNode, ...] = ()
    #: the target is not unit stride along the innermost box loop (conv2d's ``O[n, k, p, q]`` in a
    #: tile along the output channels ``k``): each vector of accumulators is loaded and stored lane
    #: by lane, once before the reduction loops and once after them
    lanewise: bool = False


def _single(n: isl.AstNode) -> isl.AstNode | None:
    """Through marks and one-element blocks; None for a block of several nodes."""
    while True:
        t = n.get_type()
        if t == isl.ast_node_type.mark:
            n = n.mark_get_node()
        elif t == isl.ast_node_type.block:
            lst = n.block_get_children()
            if lst.n_ast_node() != 1:
                return None
            n = lst.get_at(0)
        else:
            return n


def _simple_value(e: ir.Expr, dtype: str, dtypes: dict) -> bool:
    """Refs of the target's type, literals, ``+ - *`` and negation only (no casts of vectors)."""
    match e:
        case ir.Ref(tensor=t):
            return dtypes[t] == dtype  # subscripts are integers: not values
        case ir.Const():
            return True
        case ir.BinOp(op="+" | "-" | "*", lhs=a, rhs=b):
            return _simple_value(a, dtype, dtypes) and _simple_value(b, dtype, dtypes)
        case ir.Neg(operand=a):
            return _simple_value(a, dtype, dtypes)
    return False


def match(printer: Printer, node: isl.AstNode, info: LoopInfo) -> RegisterTile | None:
    """The register tile rooted at reduction loop ``node``, or None when the pattern does not hold."""
    mapping = printer.mappings_by_rank.get(info.rank)
    if mapping is None or info.level < 0:
        return None
    last = len(mapping.levels) - 1
    if info.level >= last or any(level == last for level, _ in printer.loop_stack):
        return None  # (inside a tile's box: its edge boxes print the loops of its reductions as they are)
    box: list[BoxLoop] = []
    inside = node.for_get_body()
    body = _single(inside)
    # further loops of other kernel loops right inside this one, down to the box (conv2d's ``c, r, s``
    # over one box of ``O``): reduction loops too if the target does not depend on them (checked
    # below), and the accumulators stay in registers across all of them. A tile loop and a point
    # loop of one kernel loop (gemm's ``k`` blocks around ``k``) are not taken together: the outer
    # one does not match, as before, and the inner one is the tile's reduction
    reductions: list[isl.AstNode] = []
    seen = {info.loop}
    while body is not None and body.get_type() == isl.ast_node_type.for_:
        bi = printer.analysis.info(body)
        if bi.level == last or bi.level < 0 or not bi.loop or bi.loop in seen:
            break
        seen.add(bi.loop)
        reductions.append(body)
        inside = body.for_get_body()
        body = _single(inside)
    red_it = {r.for_get_iterator().get_id().get_name() for r in [node] + reductions}
    inner_ids: set[str] = set()
    while body is not None and body.get_type() == isl.ast_node_type.for_:
        bi = printer.analysis.info(body)
        if bi.level != last or not bi.loop:
            return None
        count = mapping.levels[last].tile[mapping.loops.index(bi.loop)]
        it = body.for_get_iterator().get_id().get_name()
        cond = body.for_get_cond()
        inc = body.for_get_inc()
        if count is None or count < 2 or inc.get_type() != isl.ast_expr_type.int or int(inc.get_val().to_python()) != 1:
            return None
        if cond.get_type() != isl.ast_expr_type.op or cond.get_op_type() not in (
                isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt):
            return None
        lhs, rhs = expr_args(cond)
        if lhs.get_type() != isl.ast_expr_type.id or lhs.get_id().get_name() != it:
            return None
        outer_its = {b.iterator for b in box}
        if ids(body.for_get_init()) & red_it:
            return None  # the box starts elsewhere at each step of the reduction loop
        moves = bool(ids(rhs) & red_it)  # its end does: full at some steps only (emit_moving)
        starts = bool(ids(body.for_get_init()) & outer_its)  # rows may start at different columns
        upper = ast_expr(rhs, printer.names)
        strict = cond.get_op_type() == isl.ast_expr_op_type.lt
        if strict:
            upper = f"({upper}) - 1"
        box.append(BoxLoop(it, bi.loop, int(count), body.for_get_init(), upper, rhs, strict,
                           bool(ids(rhs) & outer_its), starts, moves))
        inner_ids.add(it)
        inside = body.for_get_body()
        body = _single(inside)
    folded = _folded_init(inside, inner_ids) if box and body is None else None
    if folded is not None:
        folded, body = folded
    if not box or body is None or body.get_type() != isl.ast_node_type.user:
        return None
    if any(b.per_row or b.starts_per_row for b in box[:-1]):
        return None  # only the row loop (the innermost) may start or end per row
    if any(b.moves for b in box) and any(b.per_row or b.starts_per_row for b in box):
        return None  # one kind of partial box at a time
    if reductions and (folded is not None or any(b.moves for b in box)):
        return None  # several reduction loops: no folded init, no moving box (one kind of tile at a time)
    name, args = user_statement(body)
    sm = printer.model.statement(name)
    stmt = sm.stmt
    decl = printer.decls[stmt.target.tensor]
    if stmt.op not in ("+=", "-=") or decl.dtype not in _ITEMSIZE or decl.is_scalar:
        return None
    if folded is not None and (any(b.moves for b in box) or not _foldable(printer, folded, name, args)):
        return None
    if not _simple_value(stmt.value, decl.dtype, {d.name: d.dtype for d in printer.kernel.decls}):
        return None
    if any(r.tensor == stmt.target.tensor for r in ir.subexpressions(stmt.value) if isinstance(r, ir.Ref)) \
            and not any(b.moves for b in box):
        return None  # (emit_moving checks, per step, that such a read misses the box)
    target_vars = [ir.variables(s) for s in stmt.target.indices]
    if any(x in set().union(*target_vars) for x in seen):
        return None  # the target moves with a reduction loop
    if any(packing.pack_points(printer, r, printer.analysis.info(r)) for r in reductions):
        return None  # a panel copied inside one of them: printed by the loops that copy it
    positions = []
    for b in box:
        pos = [k for k, s in enumerate(stmt.target.indices) if isinstance(s, ir.Var) and s.name == b.loop]
        if len(pos) != 1 or sum(b.loop in v for v in target_vars) != 1:
            return None
        positions.append(pos[0])
    if len(set(positions)) != len(positions):
        return None
    inner = box[-1]
    lanes = 16 // _ITEMSIZE[decl.dtype]
    packs = printer.packs_by_rank.get(info.rank, {})
    # the cost model's rule for a register tile's lanes (execution.vectorises): one definition
    vector = inner.count % lanes == 0 and vectorises(stmt, inner.loop, tile=True,
                                                     packed=lambda r: _packed_unit(packs, r, inner.loop))
    lanewise = vector and loads_lanewise(stmt, inner.loop, lanes)  # the cost model's rule (pass_cycles)
    if lanewise and any(b.moves or b.starts_per_row for b in box):
        # emit_moving and a diagonal box's row masks load and store the target in vectors
        vector = lanewise = False
    points = 1
    for b in box:
        points *= b.count
    if vector and points * _ITEMSIZE[decl.dtype] > MAX_VECTOR_BYTES:
        return None
    if not vector and points > MAX_SCALAR_ACCUMULATORS:
        return None
    return RegisterTile(node, tuple(box), name, args, lanes if vector else 1, folded, tuple(reductions), lanewise)


def _folded_init(inside: isl.AstNode, box_ids: set[str]) -> tuple[FoldedInit, isl.AstNode] | None:
    """The box's body ``if (guard) init; acc`` (an initialisation the mapping places at a step of the
    reduction loop), as (the init, the acc node), or None for any other body."""
    while inside.get_type() == isl.ast_node_type.mark:
        inside = inside.mark_get_node()
    if inside.get_type() != isl.ast_node_type.block:
        return None
    kids = inside.block_get_children()
    if kids.n_ast_node() != 2:
        return None
    first, second = kids.get_at(0), _single(kids.get_at(1))
    if first.get_type() != isl.ast_node_type.if_ or first.if_has_else_node() or second is None \
            or second.get_type() != isl.ast_node_type.user:
        return None
    then = _single(first.if_get_then_node())
    guard = first.if_get_cond()
    if then is None or then.get_type() != isl.ast_node_type.user or ids(guard) & box_ids:
        return None
    name, args = user_statement(then)
    return FoldedInit(name, args, guard), second


def _foldable(printer: Printer, init: FoldedInit, name: str, args: tuple) -> bool:
    """Is ``init`` a write (``=``, or ``*=``, ``/=``, ``+=``, ``-=`` of a value) of the very element ``name``
    updates (the same target at the same point) with a value of the target's type that reads no element
    moving with the box (one value for the whole box: a broadcast) and not the target's tensor?"""
    sm, im = printer.model.statement(name), printer.model.statement(init.statement)
    if im.stmt.op not in FOLDED_OPS or im.stmt.target.tensor != sm.stmt.target.tensor:
        return False
    dtypes = {d.name: d.dtype for d in printer.kernel.decls}
    if not _simple_value(im.stmt.value, dtypes[sm.stmt.target.tensor], dtypes):
        return False
    if any(isinstance(r, ir.Ref) and (r.tensor == sm.stmt.target.tensor or r.indices)
           for r in ir.subexpressions(im.stmt.value)):
        return False  # a scalar operand or a literal only (gemm's 0, a beta): the same for every box point

    def target(stmt_model: StatementModel, stmt_args: tuple) -> str:
        env = {v: ast_expr(a, printer.names, top=False) for v, a in zip(stmt_model.loops, stmt_args)}
        return printer.ref(stmt_model.stmt.target, ValuePrinter(printer.kernel, env, None))
    return target(im, init.args) == target(sm, args)


def _packed_unit(packs: dict, r: ir.Ref, loop: str) -> bool:
    """Is ``r`` read from a packed panel whose last, unit-stride dimension is ``loop``? (the model's rule:
    :func:`~polymap.passes.counting.packs.reads_panel`)"""
    return reads_panel(packs, r, loop)


def _vector_refs_ready(printer: Printer, tile: RegisterTile) -> bool:
    """Every vector read is unit stride in memory here (a panel it needs is live)."""
    stmt = printer.model.statement(tile.statement).stmt
    inner = tile.box[-1].loop
    return vectorises(stmt, inner, tile=True, packed=lambda r: _packed_unit(printer.active_packs, r, inner))


def variant_lanes(count: int, dtype: str, nbytes: int) -> int:
    """Lanes per vector of a box row of ``count`` elements with ``nbytes``-byte registers (widest that divides)."""
    lanes = nbytes // _ITEMSIZE[dtype]
    while lanes > 1 and count % lanes:
        lanes //= 2
    return lanes


def emit(printer: Printer, tile: RegisterTile, *, path: Path = (), mode: str = "serial") -> None:
    """Print the tile in every build variant (see the module docstring) with the generic fallback."""
    printer.uses_vectors = printer.uses_vectors or tile.lanes > 1
    box = tile.box
    last = len(printer.mappings_by_rank[printer.analysis.info(tile.reduction).rank].levels) - 1
    red = printer.analysis.info(tile.reduction)
    coords = {(last, b.loop): b.iterator for b in box}
    for r in (tile.reduction,) + tile.inner:  # packed subscripts read the reduction loops' coordinates too
        ri = printer.analysis.info(r)
        coords[(ri.level, ri.loop)] = r.for_get_iterator().get_id().get_name()
    saved = dict(printer.loop_stack)
    printer.loop_stack.update(coords)
    lo = {b.iterator: f"polymap_lo_{c_name(b.loop)}" for b in box}
    printer.emit("{")
    printer.depth += 1
    for b in box:  # a start per row (the innermost loop's only): row 0's, the others compared in _variant
        printer.emit(f"const long {lo[b.iterator]} = {row_expr(printer, tile, lo, b.init, (0,) * (len(box) - 1))};")
    moving = any(b.moves for b in box)
    if (tile.lanes > 1 and not _vector_refs_ready(printer, tile)) or (
            moving and (tile.lanes == 1 or printer.packs_by_rank.get(red.rank))):
        printer.for_loop(tile.reduction, path, mode, register_tiles=False)  # the panel is not live here
    elif moving:
        dtype = printer.decls[printer.model.statement(tile.statement).stmt.target.tensor].dtype
        for k, (cond, nbytes, masked) in enumerate(VARIANTS):
            lanes = variant_lanes(box[-1].count, dtype, nbytes)
            printer.lines.append(("#if " if k == 0 else "#elif " if cond else "#else") + cond
                                 + f"  /* {nbytes}-byte vectors: {lanes} x {dtype} */")
            emit_moving(printer, tile, lo, lanes, path, mode,
                        masked=masked and lanes * _ITEMSIZE[dtype] == nbytes)
        printer.lines.append("#endif")
    elif tile.lanes == 1:
        _variant(printer, tile, lo, 1, False, path, mode)
    else:
        dtype = printer.decls[printer.model.statement(tile.statement).stmt.target.tensor].dtype
        for k, (cond, nbytes, masked) in enumerate(VARIANTS):
            lanes = variant_lanes(box[-1].count, dtype, nbytes)
            printer.lines.append(("#if " if k == 0 else "#elif " if cond else "#else") + cond
                                 + f"  /* {nbytes}-byte vectors: {lanes} x {dtype} */")
            _variant(printer, tile, lo, lanes, masked and lanes * _ITEMSIZE[dtype] == nbytes, path, mode)
        printer.lines.append("#endif")
    printer.loop_stack = saved
    printer.depth -= 1
    printer.emit("}")


def emit_moving(printer: Printer, tile: RegisterTile, lo: dict, lanes: int, path: Path, mode: str, *,
                masked: bool = False) -> None:
    """A box whose end depends on the reduction loop (trmm: ``for k { for i < k ... }``): the steps
    of the reduction loop run in order, each either as the generic loops (a partial box) or, for a
    run of steps where the box is full, in the vector accumulators, loaded before the run and stored
    after it. Every element still takes its updates in the order of the reduction loop::

        for (k = init; k in range && box partial at k; k++) { the box's loops }
        if (k in range) { load; for (; k in range && box full at k; k++) { FMAs } store; }
        for (; k in range; k++) { the box's loops }

    ``masked`` (a build with mask registers or maskload): "full" asks only the loops that move with
    the reduction loop; a box cut by the array's edge in a loop that does not move (trmm's last
    column panel, 16 of 32 columns at N = 1200) runs its run of steps in the accumulators with
    masked loads and stores, as :func:`_variant`'s edge boxes do. In the generic loops for every
    step, that panel's CPU time made the thread that had it the last to finish (trmm at LARGE on
    2 threads: 8-10% more than the other, which had 16 more columns; RESULTS.md, session 23).
    """
    red = tile.reduction
    info = printer.analysis.info(red)
    with printer.loop_variable(red, info) as it:
        init = ast_expr(red.for_get_init(), printer.names)
        cond = ast_expr(red.for_get_cond(), printer.names)
        inc = ast_expr(red.for_get_inc(), printer.names)
        full, fixed = [], []  # fixed: the loops that do not move, each full or (masked) cut by an edge
        for b in tile.box:  # the bounds printed here, where the reduction loop's iterator has its name
            upper = ast_expr(b.rhs, printer.names)
            test = f"({upper}){' - 1' if b.strict else ''} - {lo[b.iterator]} == {b.count - 1}"
            (fixed if masked and not b.moves else full).append(test)
        disjoint = _reads_miss_box(printer, tile, lo)
        if disjoint is None:
            printer.for_loop(red, path, mode, register_tiles=False)
            return
        full_text = " && ".join(full + disjoint)
        (body, bp), = child_paths(red, path)

        def generic(more: str) -> None:
            printer.emit(f"for (; ({cond}) && {more}; {it} += {inc}) {{")
            printer.loop_stack[(info.level, info.loop)] = red.for_get_iterator().get_id().get_name()
            printer.nested(body, bp, mode)
            printer.loop_stack.pop((info.level, info.loop), None)
            printer.emit("}")

        printer.emit("{")
        printer.depth += 1
        printer.emit(f"long {it} = {init};")
        generic(f"!({full_text})")
        printer.emit(f"if ({cond}) {{")
        printer.depth += 1
        run = (it, f"({cond}) && {full_text}", inc)
        if fixed:
            printer.emit(f"if ({' && '.join(fixed)}) {{")
            printer.depth += 1
        _accumulate(printer, tile, lo, lanes, None, run=run)
        if fixed:
            printer.depth -= 1
            printer.emit("} else {")
            printer.depth += 1
            # an edge box: the moving loops are full in the run (their count is the box's), the others
            # end where the array does (their bounds do not depend on the reduction loop)
            count = {}
            for b in tile.box:
                if b.moves:
                    count[b.iterator] = str(b.count)
                else:
                    count[b.iterator] = f"polymap_n_{c_name(b.loop)}"
                    printer.emit(f"const long {count[b.iterator]} = {b.upper} - {lo[b.iterator]} + 1;")
            _accumulate(printer, tile, lo, lanes, count, run=run)
            printer.depth -= 1
            printer.emit("}")
        printer.depth -= 1
        printer.emit("}")
        generic("1")
        printer.depth -= 1
        printer.emit("}")


def _reads_miss_box(printer: Printer, tile: RegisterTile, lo: dict) -> list[str] | None:
    """C conditions that every read of the target's tensor misses the box's elements at this step
    of the reduction loop (trmm's ``B[k, j]`` while the box holds rows ``i < k``): in some dimension
    the read's range over the box lies outside the target's. Subscripts are affine in the box loops
    (None otherwise: no register tile), so the ranges are the extremes over the box's corners."""
    sm = printer.model.statement(tile.statement)
    stmt = sm.stmt
    reads = [r for r in ir.subexpressions(stmt.value) if isinstance(r, ir.Ref) and r.tensor == stmt.target.tensor]
    if not reads:
        return []
    loops = [b.loop for b in tile.box]
    if any(loop_coefficient(e, x) is None for r in reads + [stmt.target] for e in r.indices for x in loops):
        return None
    corners = list(product(*((0, b.count - 1) for b in tile.box)))

    def at(corner: tuple[int, ...]) -> ValuePrinter:
        names = dict(printer.names)
        names.update({b.iterator: f"({lo[b.iterator]} + {off})" for b, off in zip(tile.box, corner)})
        return ValuePrinter(printer.kernel, {v: ast_expr(a, names, top=False) for v, a in zip(sm.loops, tile.args)},
                            None)

    def extreme(f: str, texts: list[str]) -> str:
        out = texts[0]
        for t in texts[1:]:
            out = f"polymap_{f}({out}, {t})"
        return out

    printers = [at(c) for c in corners]
    out = []
    for r in reads:
        apart = []
        for mine, theirs in zip(r.indices, stmt.target.indices):
            rv = [vp.index(mine) for vp in printers]
            tv = [vp.index(theirs) for vp in printers]
            apart.append(f"({extreme('max', rv)} < {extreme('min', tv)} || {extreme('min', rv)} > {extreme('max', tv)})")
        out.append("(" + " || ".join(apart) + ")")
    return out


def _rows(tile: RegisterTile) -> list[tuple[int, ...]]:
    return list(product(*(range(b.count) for b in tile.box[:-1])))


def row_expr(printer: Printer, tile: RegisterTile, lo: dict, e: isl.AstExpr, row: tuple[int, ...]) -> str:
    """``e`` (a bound of the innermost box loop) in row ``row`` (offsets of the outer box loops)."""
    names = dict(printer.names)
    names.update({b.iterator: f"({lo[b.iterator]} + {off})" for b, off in zip(tile.box[:-1], row)})
    return ast_expr(e, names)


def row_upper(printer: Printer, tile: RegisterTile, lo: dict, row: tuple[int, ...]) -> str:
    """The innermost box loop's inclusive upper bound in row ``row`` (offsets of the outer box loops)."""
    inner = tile.box[-1]
    if not inner.per_row:
        return inner.upper
    text = row_expr(printer, tile, lo, inner.rhs, row)
    return f"({text}) - 1" if inner.strict else text


def _variant(printer: Printer, tile: RegisterTile, lo: dict, lanes: int, masked: bool, path: Path, mode: str) -> None:
    """The full-box fast path, then the edge boxes: masked when ``masked``, else the generic loops."""
    box = tile.box
    inner = box[-1]
    count = {b.iterator: f"polymap_n_{c_name(b.loop)}" for b in box}
    rows = _rows(tile)
    full = [f"{b.upper} - {lo[b.iterator]} == {b.count - 1}" for b in box[:-1]]
    uppers = [row_upper(printer, tile, lo, r) for r in rows] if inner.per_row else [inner.upper]
    full += [f"{u} - {lo[inner.iterator]} == {inner.count - 1}" for u in uppers]
    if inner.starts_per_row:  # a triangle's diagonal box (rows starting at different columns): the
        # generic loops; every other box has all its rows starting at row 0's column, lo
        full += [f"{row_expr(printer, tile, lo, inner.init, r)} == {lo[inner.iterator]}" for r in rows[1:]]
    printer.emit(f"if ({' && '.join(full)}) {{")
    printer.depth += 1
    _accumulate(printer, tile, lo, lanes, None)
    printer.depth -= 1
    printer.emit("} else {")
    printer.depth += 1
    starts = {}
    if masked and inner.starts_per_row and _diagonal_maskable(printer, tile):
        # a triangle's diagonal box: its vectors cover the tile's columns from the first (the box
        # iterator's 0, where every full box starts), so that no operand address leaves the panel
        # (a packed one included); each row's lanes from its own first column. Checked at run time:
        # every row starts at or after column 0 and the box ends within the tile's columns
        base = f"polymap_b_{c_name(inner.loop)}"
        printer.emit(f"const long {base} = 0;")
        for r in rows:
            starts[r] = f"polymap_s_{c_name(inner.loop)}_" + "_".join(map(str, r))
            start = row_expr(printer, tile, lo, inner.init, r) if any(r) else lo[inner.iterator]
            printer.emit(f"const long {starts[r]} = {start} - {base};")
        ends = uppers if inner.per_row else [inner.upper]
        checks = [f"{starts[r]} >= 0" for r in rows] + [f"{u} - {base} <= {inner.count - 1}" for u in ends]
        printer.emit(f"if ({' && '.join(checks)}) {{")
        printer.depth += 1
        lo = {**lo, inner.iterator: base}
    if masked and (starts or not inner.starts_per_row):
        for b in box[:-1]:
            printer.emit(f"const long {count[b.iterator]} = {b.upper} - {lo[b.iterator]} + 1;")
        if inner.per_row:
            widest = "0"
            for r, u in zip(rows, uppers):
                name = count[inner.iterator] + "_" + "_".join(map(str, r))
                valid = " && ".join(f"{off} < {count[b.iterator]}" for b, off in zip(box[:-1], r) if off) or "1"
                printer.emit(f"const long {name} = ({valid}) ? polymap_min({inner.count}, {u} - {lo[inner.iterator]} + 1) : 0;")
                widest = f"polymap_max({widest}, {name})"
            printer.emit(f"const long {count[inner.iterator]} = {widest};")
        else:
            printer.emit(f"const long {count[inner.iterator]} = {inner.upper} - {lo[inner.iterator]} + 1;")
        _accumulate(printer, tile, lo, lanes, count, starts=starts or None)
    if starts:
        printer.depth -= 1
        printer.emit("} else {")
        printer.depth += 1
    if not masked or starts or inner.starts_per_row:
        printer.for_loop(tile.reduction, path, mode, register_tiles=False)
    if starts:
        printer.depth -= 1
        printer.emit("}")
    printer.depth -= 1
    printer.emit("}")


def _diagonal_maskable(printer: Printer, tile: RegisterTile) -> bool:
    """May a diagonal box compute the lanes left of a row's first column? Each operand that moves
    along the row loop reads it as its last, bare subscript and depends on no other box loop
    (covariance's ``data[k, j]``): those lanes read columns of the tile, valid for every row, and
    only the target's lanes are masked per row."""
    stmt = printer.model.statement(tile.statement).stmt
    inner = tile.box[-1].loop
    others = {b.loop for b in tile.box[:-1]}
    for r in ir.subexpressions(stmt.value):
        if not isinstance(r, ir.Ref):
            continue
        used = set().union(*map(ir.variables, r.indices)) if r.indices else set()
        if inner not in used:
            continue
        last = r.indices[-1]
        if used & others or not (isinstance(last, ir.Var) and last.name == inner) or \
                any(inner in ir.variables(x) for x in r.indices[:-1]):
            return False
    return True


def _accumulate(printer: Printer, tile: RegisterTile, lo: dict, lanes: int, count: dict | None,
                run: tuple[str, str, str] | None = None, starts: dict | None = None) -> None:
    """Load the accumulators, run the reduction loop, store them; ``count``: masked (edge box);
    ``run``: (iterator, condition, increment) of a run of its steps, the iterator declared outside
    (:func:`emit_moving`); ``starts``: per row, the name of its first column's offset from ``lo``
    (a diagonal box: the lanes before it are computed from the operands, which are valid there,
    and neither loaded from nor stored to the target)."""
    sm = printer.model.statement(tile.statement)
    stmt = sm.stmt
    dtype = printer.decls[stmt.target.tensor].dtype
    box = tile.box
    inner = box[-1]
    vtype = f"polymap_{dtype}x{lanes}" if lanes > 1 else C_TYPES[dtype]
    steps = [range(b.count) for b in box[:-1]] + [range(0, inner.count, lanes)]
    points = list(product(*steps))
    name = "_".join

    def offset(b: BoxLoop, off: int) -> str:
        if count is None or b is inner or off == 0:
            return f"({lo[b.iterator]} + {off})"
        # a row past the edge reads its last valid row; its mask is 0, so it writes nothing
        return f"({lo[b.iterator]} + polymap_min({off}, {count[b.iterator]} - 1))"

    def printer_at(point: tuple[int, ...], target_mask: str | None = None) -> ValuePrinter:
        names = dict(printer.names)
        names.update({b.iterator: offset(b, off) for b, off in zip(box, point)})
        env = {v: ast_expr(a, names, top=False) for v, a in zip(sm.loops, tile.args)}
        vp = ValuePrinter(printer.kernel, env, None)
        vp.ast_names = names  # packed subscripts: the box iterators' texts

        def ref_text(r: ir.Ref) -> str:
            text = printer.ref(r, vp)
            if lanes == 1 or not any(inner.loop in ir.variables(s) for s in r.indices):
                return text
            if count is None:
                return f"(*({vtype}_u *)&{text})"
            mask = target_mask if r is stmt.target else f"polymap_mc_{point[-1]}"
            return f"polymap_mload_{dtype}x{lanes}({mask}, &{text})"
        vp.ref_text = ref_text
        return vp

    acc = {p: "polymap_acc_" + name(map(str, p)) for p in points}
    tmask = {p: "polymap_mt_" + name(map(str, p)) for p in points}

    def lane_ref(p: tuple[int, ...], lane: int) -> str:
        """The target's element at lane ``lane`` of the vector at ``p`` (a lane-wise target)."""
        return printer.ref(stmt.target, printer_at(p[:-1] + (p[-1] + lane,)))

    def lane_ok(p: tuple[int, ...], lane: int) -> str:
        """Is lane ``lane`` of the vector at ``p`` inside the edge box (its row valid, its column in range)?"""
        rows = [f"{off} < {count[b.iterator]}" for b, off in zip(box[:-1], p[:-1]) if off]
        n_row = count[inner.iterator] + ("_" + "_".join(map(str, p[:-1])) if inner.per_row else "")
        return "(" + " && ".join(rows + [f"{p[-1] + lane} < {n_row}"]) + ")"
    if count is not None:
        mtype = {16: "__mmask16", 8: "__mmask8" if dtype == "f64" else "__m256i", 4: "__m256i"}[lanes]
        for off in steps[-1]:
            printer.emit(f"const {mtype} polymap_mc_{off} = polymap_mask_{dtype}x{lanes}("
                         f"{count[inner.iterator]} - {off});")
        for p in points:
            rows = " && ".join(f"{off} < {count[b.iterator]}" for b, off in zip(box[:-1], p[:-1]) if off) or "1"
            n_row = count[inner.iterator] + ("_" + "_".join(map(str, p[:-1])) if inner.per_row else "")
            if starts is not None:
                printer.emit(f"const {mtype} {tmask[p]} = polymap_maskr_{dtype}x{lanes}("
                             f"{starts[p[:-1]]} - {p[-1]}, {rows} ? {n_row} - {p[-1]} : 0);")
            else:
                printer.emit(f"const {mtype} {tmask[p]} = polymap_mask_{dtype}x{lanes}("
                             f"{rows} ? {n_row} - {p[-1]} : 0);")
    red = tile.reduction
    named = nullcontext(run[0]) if run is not None else printer.loop_variable(red, printer.analysis.info(red))
    with named as it, ExitStack() as stack:
        # the reduction loops inside ``red`` (conv2d's r, s), named while the tile is printed
        nested = [(r, stack.enter_context(printer.loop_variable(r, printer.analysis.info(r)))) for r in tile.inner]
        start = ast_expr(red.for_get_init(), printer.names) if run is None else None
        init = _init_value(printer, tile, dtype, vtype, lanes) if run is None else None

        def each(line: Callable[[tuple[int, ...]], str]) -> None:
            for p in points:
                printer.emit(line(p))

        def load(p: tuple[int, ...]) -> str:
            if tile.lanewise and lanes > 1:
                return "(" + vtype + "){" + ", ".join(
                    f"{lane_ok(p, lane)} ? {lane_ref(p, lane)} : 0" if count is not None else lane_ref(p, lane)
                    for lane in range(lanes)) + "}"
            return printer_at(p, tmask[p]).ref_text(stmt.target)

        if init is None:
            each(lambda p: f"{vtype} {acc[p]} = {load(p)};")
        else:
            # the mapping placed the initialisation at the step of the reduction loop where its guard
            # holds: at the first step the accumulators start from it (a plain write: C is not read,
            # BLIS's beta = 0; ``*= beta``: C loaded and scaled once), at any later one they take it
            # then (exact for any guard; none for gemm)
            start_value, guard, op = init
            printer.emit("int polymap_first;")
            printer.emit(f"{{ const long {it} = {start}; polymap_first = ({ast_expr(red.for_get_cond(), printer.names)}) "
                         f"&& ({guard}); }}")
            if op == "=":
                printer.emit(f"{vtype} {', '.join(acc[p] for p in points)};")
                printer.emit("if (polymap_first) {")
                each(lambda p: f"  {acc[p]} = {start_value};")
                printer.emit("} else {")
                each(lambda p: f"  {acc[p]} = {load(p)};")
            else:
                each(lambda p: f"{vtype} {acc[p]} = {load(p)};")
                printer.emit("if (polymap_first) {")
                each(lambda p: f"  {acc[p]} {op} {start_value};")
            printer.emit("}")
        if run is not None:
            printer.emit(f"for (; {run[1]}; {run[0]} += {run[2]}) {{")
        else:
            printer.emit(f"for (long {it} = {start}; "
                         f"{ast_expr(red.for_get_cond(), printer.names)}; {it} += {ast_expr(red.for_get_inc(), printer.names)}) {{")
        printer.depth += 1
        for r, r_it in nested:  # in the original order: each element's updates keep theirs
            printer.emit(f"for (long {r_it} = {ast_expr(r.for_get_init(), printer.names)}; "
                         f"{ast_expr(r.for_get_cond(), printer.names)}; {r_it} += {ast_expr(r.for_get_inc(), printer.names)}) {{")
            printer.depth += 1
        if init is not None:
            printer.emit(f"if ({it} != {start} && ({guard})) {{  /* {tile.init.statement} */")
            each(lambda p: f"  {acc[p]} {op} {start_value};")
            printer.emit("}")
        for p in points:
            vp = printer_at(p, tmask[p])
            fused = _fused(vp, stmt, dtype, vtype, inner.loop, acc[p]) if lanes > 1 else None
            if fused is not None:
                printer.emit(f"{acc[p]} = {fused};  /* {tile.statement} */")
                continue
            value = vp.value(stmt.value)
            v = vp.convert(value, combine_type(dtype, value.type))
            printer.emit(f"{acc[p]} {stmt.op} {v};  /* {tile.statement} */")
        for _ in range(len(nested) + 1):
            printer.depth -= 1
            printer.emit("}")
    for p in points:
        vp = printer_at(p, tmask[p])
        if tile.lanewise and lanes > 1:
            for lane in range(lanes):
                store = f"{lane_ref(p, lane)} = {acc[p]}[{lane}];"
                printer.emit(store if count is None else f"if {lane_ok(p, lane)} {store}")
        elif count is None or lanes == 1:
            printer.emit(f"{vp.ref_text(stmt.target)} = {acc[p]};")
        else:
            printer.emit(f"polymap_mstore_{dtype}x{lanes}({tmask[p]}, &{printer.ref(stmt.target, vp)}, {acc[p]});")


def _init_value(printer: Printer, tile: RegisterTile, dtype: str, vtype: str, lanes: int
                ) -> tuple[str, str, str] | None:
    """(the folded initialisation's value for one accumulator, its guard, its operator) as C text, or None.

    The value is the same for every point of the box (:func:`_foldable`); a vector takes it by
    ``v - (vtype){}``, exact for every ``v`` (``-0 - +0`` is ``-0``), as :func:`_fused` broadcasts."""
    if tile.init is None:
        return None
    im = printer.model.statement(tile.init.statement)
    env = {v: ast_expr(a, printer.names, top=False) for v, a in zip(im.loops, tile.init.args)}
    vp = ValuePrinter(printer.kernel, env, None)
    vp.ref_text = lambda r: printer.ref(r, vp)
    value = vp.value(im.stmt.value)
    text = vp.convert(value, dtype)
    return ((f"(({text}) - ({vtype}){{}})" if lanes > 1 else f"({text})"), ast_expr(tile.init.guard, printer.names),
            im.stmt.op)


def _fused(vp: ValuePrinter, stmt: ir.Assign, dtype: str, vtype: str, row: str, acc: str) -> str | None:
    """``acc +/-= x * y`` as ``polymap_fma(+/-x, y, acc)`` (one rounding where the build has FMA), or None.

    An operand that does not move along the row loop is a scalar; ``s - (vtype){}``
    broadcasts it exactly (``x - +0`` is ``x`` for every ``x``, ``-0`` included).
    """
    value = stmt.value
    if not (isinstance(value, ir.BinOp) and value.op == "*"):
        return None
    texts = []
    for operand in (value.lhs, value.rhs):
        printed = vp.value(operand)
        text = vp.convert(printed, combine_type(dtype, printed.type))
        moves = any(isinstance(r, ir.Ref) and any(row in ir.variables(s) for s in r.indices)
                    for r in ir.subexpressions(operand))
        texts.append(text if moves else f"({text} - ({vtype}){{}})")
    x, y = texts
    if stmt.op == "-=":
        x = f"(-{x})"
    return f"polymap_fma_{vtype.removeprefix('polymap_')}({x}, {y}, {acc})"
