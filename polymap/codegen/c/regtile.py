"""Register tiles: the innermost mapping level's box unrolled and jammed around its reduction loop.

When the innermost level (``RF`` on ``host``) tiles a small box of loops
that index the target of one ``+=``/``-=`` statement, and the loop right
around that box is a reduction loop the target does not depend on, the
accumulators live in local variables for the whole reduction loop: loaded
once before it, stored once after it. Along the target's unit-stride loop
the accumulators are GCC/Clang vectors (``vector_size(32)``: one AVX2
register each) when the box is a whole number of vectors wide::

    for (k ...) for (i in 0..6) for (j in 0..16) C[i, j] += A[i, k] * B[k, j]
      ->
    if (the box is full) {
      polymap_v8sf acc_0_0 = load(&C[i0 + 0, j0 + 0]), acc_0_1 = load(&C[i0, j0 + 8]), ...
      for (k ...) { acc_0_0 += A[i0, k] * load(&B[k, j0]); ... }   (12 independent FMAs)
      store(&C[i0, j0], acc_0_0); ...
    } else { the generic loops }

Legal because every element keeps its own updates in the original order
(only the memory round-trips between them are removed): the target must not
depend on the reduction loop, distinct box points must hit distinct
elements (each box loop a bare subscript of its own dimension), and no
other reference in the statement may touch the target's tensor. Edge tiles
(boxes cut by the domain) take the generic code.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from polymap import ir
from polymap.islcheck import isl
from polymap.codegen.ast_build import LoopInfo, expr_args, user_statement
from polymap.codegen.c.expr import C_TYPES, ValuePrinter, ast_expr, common_type

#: Bytes of one vector register (AVX2); a box row that is a multiple of it is vectorised.
VECTOR_BYTES = 32
#: More accumulators than this would spill (16 ymm registers, minus operands).
MAX_VECTOR_ACCUMULATORS = 12
MAX_SCALAR_ACCUMULATORS = 16
_ITEMSIZE = {"f32": 4, "f64": 8}
_VTYPE = {"f32": "polymap_v8sf", "f64": "polymap_v4df"}

VECTOR_TYPES = """\
/* Register tiles: one AVX2 register per vector; the _u types load/store unaligned, alias-safe. */
typedef float polymap_v8sf __attribute__((vector_size(32)));
typedef float polymap_v8sf_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef double polymap_v4df __attribute__((vector_size(32)));
typedef double polymap_v4df_u __attribute__((vector_size(32), aligned(8), may_alias));
"""


@dataclass(frozen=True)
class BoxLoop:
    """One loop of the register box: its AST iterator, its kernel loop and its trip count."""

    iterator: str
    loop: str
    count: int
    init: isl.AstExpr
    upper: str  # C text of the inclusive upper bound


@dataclass(frozen=True)
class RegisterTile:
    """A matched reduction loop with its box (outer -> inner) and statement."""

    reduction: isl.AstNode
    box: tuple[BoxLoop, ...]
    statement: str
    args: tuple[isl.AstExpr, ...]
    lanes: int  # 1: scalar accumulators; else lanes per vector along the innermost box loop


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


def _ids(e: isl.AstExpr) -> set[str]:
    t = e.get_type()
    if t == isl.ast_expr_type.id:
        return {e.get_id().get_name()}
    if t == isl.ast_expr_type.op:
        return set().union(*(_ids(a) for a in expr_args(e)))
    return set()


def _vars(e: ir.Expr) -> set[str]:
    return {x.name for x in ir.subexpressions(e) if isinstance(x, ir.Var)}


def _unit_last(ref: ir.Ref, loop: str) -> bool:
    """``loop`` appears only in the last subscript, as ``loop`` or ``loop + e`` / ``e + loop``."""
    if any(loop in _vars(s) for s in ref.indices[:-1]):
        return False
    last = ref.indices[-1]
    if isinstance(last, ir.Var) and last.name == loop:
        return True
    if isinstance(last, ir.BinOp) and last.op == "+":
        for a, b in ((last.lhs, last.rhs), (last.rhs, last.lhs)):
            if isinstance(a, ir.Var) and a.name == loop and loop not in _vars(b):
                return True
    return False


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


def match(printer, node: isl.AstNode, info: LoopInfo) -> RegisterTile | None:
    """The register tile rooted at reduction loop ``node``, or None when the pattern does not hold."""
    mapping = printer.mappings_by_rank.get(info.rank)
    if mapping is None or info.level < 0:
        return None
    last = len(mapping.levels) - 1
    if info.level >= last:
        return None
    box: list[BoxLoop] = []
    body = _single(node.for_get_body())
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
        bound_ids = _ids(body.for_get_init()) | _ids(rhs)
        if bound_ids & ({node.for_get_iterator().get_id().get_name()} | {b.iterator for b in box}):
            return None  # not a rectangular box invariant in the reduction loop
        upper = ast_expr(rhs, printer.names)
        if cond.get_op_type() == isl.ast_expr_op_type.lt:
            upper = f"({upper}) - 1"
        box.append(BoxLoop(it, bi.loop, int(count), body.for_get_init(), upper))
        inner_ids.add(it)
        body = _single(body.for_get_body())
    if not box or body is None or body.get_type() != isl.ast_node_type.user:
        return None
    name, args = user_statement(body)
    sm = printer.model.statement(name)
    stmt = sm.stmt
    decl = printer.decls[stmt.target.tensor]
    if stmt.op not in ("+=", "-=") or decl.dtype not in _ITEMSIZE or decl.is_scalar:
        return None
    if not _simple_value(stmt.value, decl.dtype, {d.name: d.dtype for d in printer.kernel.decls}):
        return None
    if any(r.tensor == stmt.target.tensor for r in ir.subexpressions(stmt.value) if isinstance(r, ir.Ref)):
        return None
    target_vars = [_vars(s) for s in stmt.target.indices]
    if info.loop in set().union(*target_vars):
        return None  # the target moves with the reduction loop
    positions = []
    for b in box:
        pos = [k for k, s in enumerate(stmt.target.indices) if isinstance(s, ir.Var) and s.name == b.loop]
        if len(pos) != 1 or sum(b.loop in v for v in target_vars) != 1:
            return None
        positions.append(pos[0])
    if len(set(positions)) != len(positions):
        return None
    inner = box[-1]
    lanes = VECTOR_BYTES // _ITEMSIZE[decl.dtype]
    refs = [r for r in ir.subexpressions(stmt.value) if isinstance(r, ir.Ref)] + [stmt.target]
    vector = inner.count % lanes == 0 and all(
        _unit_last(r, inner.loop) for r in refs if inner.loop in set().union(*map(_vars, r.indices)))
    points = 1
    for b in box:
        points *= b.count
    if vector and points // lanes > MAX_VECTOR_ACCUMULATORS:
        return None
    if not vector and points > MAX_SCALAR_ACCUMULATORS:
        return None
    return RegisterTile(node, tuple(box), name, args, lanes if vector else 1)


def emit(printer, tile: RegisterTile, *, path=(), mode: str = "serial") -> None:
    """Print the full-tile fast path and the generic fallback (see the module docstring)."""
    printer.uses_vectors = printer.uses_vectors or tile.lanes > 1
    sm = printer.model.statement(tile.statement)
    stmt = sm.stmt
    dtype = printer.decls[stmt.target.tensor].dtype
    ctype = C_TYPES[dtype]
    box = tile.box
    lo = {b.iterator: f"polymap_lo_{b.iterator}" for b in box}
    printer.emit("{")
    printer.depth += 1
    for b in box:
        printer.emit(f"const long {lo[b.iterator]} = {ast_expr(b.init, printer.names)};")
    full = " && ".join(f"{b.upper} - {lo[b.iterator]} == {b.count - 1}" for b in box)
    printer.emit(f"if ({full}) {{")
    printer.depth += 1
    inner = box[-1]
    steps = [range(b.count) for b in box[:-1]] + [range(0, inner.count, tile.lanes)]
    points = list(product(*steps))

    def printer_at(point) -> ValuePrinter:
        names = dict(printer.names)
        names.update({b.iterator: f"({lo[b.iterator]} + {off})" for b, off in zip(box, point)})
        env = {v: ast_expr(a, names, top=False) for v, a in zip(sm.loops, tile.args)}
        vp = ValuePrinter(printer.kernel, env, None)

        def ref_text(r: ir.Ref) -> str:
            text = printer.ref(r, vp)
            if tile.lanes > 1 and any(inner.loop in _vars(s) for s in r.indices):
                return f"(*({_VTYPE[dtype]}_u *)&{text})"
            return text
        vp.ref_text = ref_text
        return vp

    acc = {p: "polymap_acc_" + "_".join(map(str, p)) for p in points}
    vtype = _VTYPE[dtype] if tile.lanes > 1 else ctype
    for p in points:
        printer.emit(f"{vtype} {acc[p]} = {printer_at(p).ref_text(stmt.target)};")
    red = tile.reduction
    it = red.for_get_iterator().get_id().get_name()
    printer.emit(f"for (long {it} = {ast_expr(red.for_get_init(), printer.names)}; "
                 f"{ast_expr(red.for_get_cond(), printer.names)}; {it} += {ast_expr(red.for_get_inc(), printer.names)}) {{")
    printer.depth += 1
    for p in points:
        vp = printer_at(p)
        value = vp.value(stmt.value)
        v = vp.convert(value, common_type(dtype, value.type))
        printer.emit(f"{acc[p]} {stmt.op} {v};  /* {tile.statement} */")
    printer.depth -= 1
    printer.emit("}")
    for p in points:
        printer.emit(f"{printer_at(p).ref_text(stmt.target)} = {acc[p]};")
    printer.depth -= 1
    printer.emit("} else {")
    printer.depth += 1
    printer.for_loop(red, path, mode, register_tiles=False)
    printer.depth -= 1
    printer.emit("}")
    printer.depth -= 1
    printer.emit("}")
