"""ISL's AST as IR expressions, loop bounds and names: what the NumPy and ``.loop`` printers share.

Three things the printers of :mod:`polymap.codegen.numpy.emitter` and
:mod:`polymap.codegen.loop_emitter` need on top of :mod:`.ast_build`:

* :func:`point_schedule`: the kernel schedule with every innermost-level
  coordinate ``x mod T`` replaced by ``x`` itself. Given the outer
  coordinates of ``x`` (which come first in the time vector), ``x`` is that
  coordinate plus a function of them, so the order is the same; but the AST
  loop now walks the original iterator, which the printers can bind by
  name and slice over::

      acc[i, j, k] -> [.., fl(i/32), .., i mod 32, ..]   ->   [.., fl(i/32), .., i, ..]
      for c7 in 0..min(32, M - 32*c1)                     ->   for i in 32*c1..min(32*c1 + 32, M)

* :func:`to_ir` / :func:`for_bounds`: AST expressions and ``for`` headers as
  IR expressions (``floord(a, b)`` -> ``floor(a / b)``, ``c <= e`` -> upper
  bound ``e + 1``), with :func:`simplify` folding constants
  (``floor((M - 1) / 32) + 1`` -> ``floor((M + 31) / 32)``).
* :func:`direct_loop`: the original iterator an AST loop walks exactly (every
  statement under it takes the loop's iterator itself as that iterator), and
  :class:`Names` for fresh, collision-free names.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping as MappingT, Sequence

from polymap import ir
from polymap.errors import AnalysisError
from polymap.islcheck import isl
from polymap.mapping.schedule import mapped_nests
from polymap.codegen.ast_build import (
    KernelSchedule,
    LoopInfo,
    expr_args,
    statements_under,
    user_statement,
    walk,
)
from polymap.passes.dependences.loop_classes import kernel_loops
from polymap.poly import KernelModel
from polymap.mapping.model import Mapping

# --------------------------------------------------------------------------- the point schedule


def point_schedule(ks: KernelSchedule, mappings: Sequence[Mapping] = ()) -> KernelSchedule:
    """``ks`` with point coordinates walking the original iterators (see module doc).

    The point coordinate of loop ``x`` is the one at the outermost level whose
    inner tile of ``x`` has extent 1 (below it the coordinates of ``x`` are 0).
    """
    model = ks.model
    by_nest = {n: m for m in mappings for n in mapped_nests(m)}
    out = isl.UnionMap.empty(ks.union.get_space())
    for m in _maps(ks.union):
        name = m.get_tuple_name(isl.dim_type.in_)
        sm = model.statement(name)
        mapping = by_nest.get(sm.context.nest)
        # binding needs every statement of a dimension bound alike: not with schedule entries
        if mapping is not None and not mapping.schedule:
            for d in ks.dims_of(ks.rank_of(name)):
                if d.kind == "coord" and d.loop in sm.loops and d.level == point_level(mapping, d.loop) \
                        and d.loop not in mapping.levels[d.level].wavefront:
                    m = _bind_dim(m, d.index, sm.loops.index(d.loop))
        out = out.union(isl.UnionMap.from_map(m))
    return dataclasses.replace(ks, union=out)


def point_level(mapping: Mapping, loop: str) -> int:
    """The level whose loops walk single iterations of ``loop`` (its inner tile has extent 1)."""
    k = list(mapping.loops).index(loop)
    tiles = [lv.tile[k] for lv in mapping.levels]
    inner = tiles[1:] + [1]
    return next(l for l, t in enumerate(inner) if t == 1)


def _maps(umap: isl.UnionMap) -> list[isl.Map]:
    found: list[isl.Map] = []
    umap.foreach_map(found.append)
    return found


def _bind_dim(m: isl.Map, out_dim: int, in_dim: int) -> isl.Map:
    """``m`` with output dimension ``out_dim`` replaced by input dimension ``in_dim``."""
    m = m.project_out(isl.dim_type.out, out_dim, 1).insert_dims(isl.dim_type.out, out_dim, 1)
    c = isl.Constraint.equality_alloc(isl.LocalSpace.from_space(m.get_space()))
    c = c.set_coefficient_val(isl.dim_type.out, out_dim, 1).set_coefficient_val(isl.dim_type.in_, in_dim, -1)
    return m.add_constraint(c)


# --------------------------------------------------------------------------- expressions

_ARITH = {isl.ast_expr_op_type.add: "+", isl.ast_expr_op_type.sub: "-", isl.ast_expr_op_type.mul: "*"}
_DIV = (isl.ast_expr_op_type.fdiv_q, isl.ast_expr_op_type.pdiv_q, isl.ast_expr_op_type.div)
_REM = (isl.ast_expr_op_type.pdiv_r, isl.ast_expr_op_type.zdiv_r)
_CMP = {isl.ast_expr_op_type.eq: "==", isl.ast_expr_op_type.le: "<=", isl.ast_expr_op_type.lt: "<",
        isl.ast_expr_op_type.ge: ">=", isl.ast_expr_op_type.gt: ">"}
_BOOL = {isl.ast_expr_op_type.and_: "and", isl.ast_expr_op_type.and_then: "and",
         isl.ast_expr_op_type.or_: "or", isl.ast_expr_op_type.or_else: "or"}


def to_ir(e: isl.AstExpr, names: MappingT[str, str]) -> ir.Expr:
    """An ISL AST expression as IR (index semantics: ``/`` floors); ids renamed by ``names``."""
    t = e.get_type()
    if t == isl.ast_expr_type.int:
        return ir.Const(int(e.get_val().to_python()))
    if t == isl.ast_expr_type.id:
        n = e.get_id().get_name()
        return ir.Var(names.get(n, n))
    op = e.get_op_type()
    args = [to_ir(a, names) for a in expr_args(e)]
    if op in _ARITH:
        return ir.BinOp(_ARITH[op], args[0], args[1])
    if op == isl.ast_expr_op_type.minus:
        return ir.Neg(args[0])
    if op in _DIV:
        return ir.Call("floor", (ir.BinOp("/", args[0], args[1]),))
    if op in _REM:  # zdiv_r is only compared with 0, where it agrees with the non-negative remainder
        return ir.BinOp("%", args[0], args[1])
    if op in (isl.ast_expr_op_type.min, isl.ast_expr_op_type.max):
        return ir.Call("min" if op == isl.ast_expr_op_type.min else "max", tuple(args))
    if op in _CMP:
        return ir.Compare(_CMP[op], args[0], args[1])
    if op in _BOOL:
        return ir.BoolOp(_BOOL[op], tuple(args))
    if op in (isl.ast_expr_op_type.cond, isl.ast_expr_op_type.select):
        return ir.Select(args[0], args[1], args[2])
    raise AnalysisError(f"unexpected ISL AST operation {op}")


def linear(e: ir.Expr) -> tuple[dict, int] | None:
    """``e`` as ``({atom: coefficient}, constant)``; atoms are Var names or opaque sub-expressions."""
    match e:
        case ir.Const(value=v) if isinstance(v, int):
            return {}, v
        case ir.Var(name=n):
            return {n: 1}, 0
        case ir.Neg(operand=a):
            la = linear(a)
            return None if la is None else ({k: -c for k, c in la[0].items()}, -la[1])
        case ir.BinOp(op="+" | "-", lhs=a, rhs=b):
            la, lb = linear(a), linear(b)
            if la is None or lb is None:
                return None
            sign = 1 if e.op == "+" else -1
            terms = dict(la[0])
            for k, c in lb[0].items():
                terms[k] = terms.get(k, 0) + sign * c
            return {k: c for k, c in terms.items() if c}, la[1] + sign * lb[1]
        case ir.BinOp(op="*", lhs=a, rhs=b):
            la, lb = linear(a), linear(b)
            if la is None or lb is None:
                return None
            if not la[0]:
                la, lb = lb, la
            if lb[0]:
                return {_key(e): 1}, 0
            return {k: c * lb[1] for k, c in la[0].items() if c * lb[1]}, la[1] * lb[1]
        case ir.Call() | ir.BinOp():
            return {_key(simplify_inside(e)): 1}, 0
    return None


def _key(e: ir.Expr) -> tuple[str, ir.Expr]:
    return ("expr", e)


def simplify_inside(e: ir.Expr) -> ir.Expr:
    """Simplify the arguments of a floor/min/max/% node."""
    match e:
        case ir.Call(func=f, args=args):
            return ir.Call(f, tuple(simplify(a) for a in args))
        case ir.BinOp(op=op, lhs=a, rhs=b):
            return ir.BinOp(op, simplify(a), simplify(b))
    return e


def from_linear(terms: dict, const: int) -> ir.Expr:
    """Rebuild an expression: terms in insertion order, then the constant."""
    # floor(a / c) + k  ->  floor((a + k*c) / c)
    if len(terms) == 1 and const:
        (k, c), = terms.items()
        if c == 1 and isinstance(k, tuple):
            inner = k[1]
            if isinstance(inner, ir.Call) and inner.func == "floor" and isinstance(inner.args[0], ir.BinOp) \
                    and inner.args[0].op == "/" and isinstance(inner.args[0].rhs, ir.Const):
                d = inner.args[0].rhs.value
                num = simplify(ir.BinOp("+", inner.args[0].lhs, ir.Const(const * d)))
                return ir.Call("floor", (ir.BinOp("/", num, ir.Const(d)),))
    out: ir.Expr | None = None
    for k, c in terms.items():
        atom = ir.Var(k) if isinstance(k, str) else k[1]
        mag = abs(c)
        term = atom if mag == 1 else ir.BinOp("*", ir.Const(mag), atom)
        if out is None:
            out = term if c > 0 else ir.Neg(term)
        else:
            out = ir.BinOp("+" if c > 0 else "-", out, term)
    if out is None:
        return ir.Const(const)
    if const:
        out = ir.BinOp("+" if const > 0 else "-", out, ir.Const(abs(const)))
    return out


def simplify(e: ir.Expr) -> ir.Expr:
    """Collect like terms and fold constants of an integer expression (conditions pass through)."""
    match e:
        case ir.Compare(op=op, lhs=a, rhs=b):
            return ir.Compare(op, simplify(a), simplify(b))
        case ir.BoolOp(op=op, operands=args):
            return ir.BoolOp(op, tuple(simplify(a) for a in args))
        case ir.Call(func="min" | "max", args=args):
            return ir.Call(e.func, tuple(simplify(a) for a in args))
    lin = linear(e)
    return e if lin is None else from_linear(*lin)


def plus(e: ir.Expr, k: int) -> ir.Expr:
    return simplify(ir.BinOp("+", e, ir.Const(k)))


def for_bounds(node: isl.AstNode, names: MappingT[str, str]) -> tuple[tuple[ir.Expr, ...], tuple[ir.Expr, ...], int]:
    """``(lower parts (max), upper parts (min, exclusive), step)`` of an AST ``for``."""
    it = node.for_get_iterator().get_id().get_name()
    init = simplify(to_ir(node.for_get_init(), names))
    inc = to_ir(node.for_get_inc(), names)
    if not isinstance(inc, ir.Const) or int(inc.value) <= 0:
        raise AnalysisError(f"ISL produced a loop with a non-constant step ({inc})")
    lower = init.args if isinstance(init, ir.Call) and init.func == "max" else (init,)
    # the iterator gets a name no kernel or AST name can take, so the condition's own side is known
    upper = _upper(to_ir(node.for_get_cond(), {**names, it: _SELF}), _SELF)
    return tuple(lower), tuple(upper), int(inc.value)


_SELF = "\0self"


def _upper(cond: ir.Expr, it: str) -> list[ir.Expr]:
    match cond:
        case ir.BoolOp(op="and", operands=args):
            return [u for a in args for u in _upper(a, it)]
        case ir.Compare(op=op, lhs=ir.Var(name=n), rhs=b) if n == it and op in ("<", "<="):
            parts = b.args if isinstance(b, ir.Call) and b.func == "min" else (b,)
            return [plus(p, 1) if op == "<=" else simplify(p) for p in parts]
        case ir.Compare(op=op, lhs=a, rhs=ir.Var(name=n)) if n == it and op in (">", ">="):
            return _upper(ir.Compare({">": "<", ">=": "<="}[op], ir.Var(n), a), it)
    raise AnalysisError(f"cannot read an upper bound from the ISL loop condition {cond}")


def rename(e: ir.Expr, names: MappingT[str, str]) -> ir.Expr:
    """``e`` with Var names replaced through ``names``."""
    return substitute(e, {k: ir.Var(v) for k, v in names.items()})


def substitute(e: ir.Expr, env: MappingT[str, ir.Expr]) -> ir.Expr:
    """``e`` with variables replaced by expressions."""
    match e:
        case ir.Var(name=n):
            return env.get(n, e)
        case ir.Ref(tensor=t, indices=idx):
            return ir.Ref(t, tuple(substitute(x, env) for x in idx), e.loc)
        case ir.BinOp(op=op, lhs=a, rhs=b):
            return ir.BinOp(op, substitute(a, env), substitute(b, env), e.loc)
        case ir.Compare(op=op, lhs=a, rhs=b):
            return ir.Compare(op, substitute(a, env), substitute(b, env), e.loc)
        case ir.Neg(operand=a):
            return ir.Neg(substitute(a, env), e.loc)
        case ir.Not(operand=a):
            return ir.Not(substitute(a, env), e.loc)
        case ir.Call(func=f, args=args):
            return ir.Call(f, tuple(substitute(x, env) for x in args), e.loc)
        case ir.BoolOp(op=op, operands=args):
            return ir.BoolOp(op, tuple(substitute(x, env) for x in args), e.loc)
        case ir.Select(cond=c, if_true=a, if_false=b):
            return ir.Select(substitute(c, env), substitute(a, env), substitute(b, env), e.loc)
    return e


# --------------------------------------------------------------------------- loops and names


def direct_loop(node: isl.AstNode, model: KernelModel) -> str | None:
    """The original iterator every statement under the AST ``for`` takes as exactly its iterator."""
    it = node.for_get_iterator().get_id().get_name()
    found: set[str] = set()
    for n in walk(node.for_get_body()):
        if n.get_type() != isl.ast_node_type.user:
            continue
        name, args = user_statement(n)
        loops = model.statement(name).loops
        hits = [x for x, a in zip(loops, args)
                if a.get_type() == isl.ast_expr_type.id and a.get_id().get_name() == it]
        if len(hits) != 1:
            return None
        found.add(hits[0])
    return found.pop() if len(found) == 1 else None


def kernel_names(kernel: ir.Kernel) -> set[str]:
    """Every name a kernel uses: itself, parameters, tensors, iterators and labels."""
    out = {kernel.name, *kernel.param_names, *(d.name for d in kernel.decls)}
    for ctx in kernel.statements():
        out.update(ctx.iterators)
        out.add(ctx.name)
    out.update(lp.var for lp in kernel_loops(kernel))
    return out


class Names:
    """Fresh names that avoid a set of taken names (and each other)."""

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = set(taken)

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            name = f"{base}_{k}"
            k += 1
        self.taken.add(name)
        return name


def tile_base(info: LoopInfo) -> str:
    """A readable base name for a tile loop: ``i0`` walks loop ``i`` at level 0."""
    if info.loop and info.level >= 0:
        return f"{info.loop}{info.level}"
    if info.loop:
        return f"{info.loop}t"
    return f"t{info.dim}"


__all__ = ["point_schedule", "to_ir", "simplify", "for_bounds", "direct_loop", "Names", "statements_under"]
