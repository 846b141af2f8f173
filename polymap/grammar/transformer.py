"""Parse tree -> :mod:`polymap.ir`, with a source location on every node.

The transformer works bottom-up, so two things wait for the whole kernel
(:func:`finish_kernel`): a bare name is a tensor (``Ref(name, ())``) only if
the kernel declares it, and unlabelled statements are numbered ``S0, S1...``
by their textual position among all statements of the kernel.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from lark import Token, Transformer, v_args

from polymap import ir
from polymap.errors import Diagnostic, LoopSyntaxError
from lark.tree import Meta


@dataclasses.dataclass(frozen=True)
class _Range:
    """One ``I in LO..HI [step C]`` of a ``for``; becomes one Loop."""

    var: str
    lower: tuple[ir.Expr, ...]
    upper: tuple[ir.Expr, ...]
    step: int
    step_loc: ir.Loc
    loc: ir.Loc


@dataclasses.dataclass(frozen=True)
class _Where:
    conditions: tuple[ir.Expr, ...]


def _operands(expr: ir.Expr, op: str) -> tuple[ir.Expr, ...]:
    """``a and (b and c)`` -> ``(a, b, c)``: flatten one boolean operator."""
    if isinstance(expr, ir.BoolOp) and expr.op == op:
        return expr.operands
    return (expr,)


def _const_int(expr: ir.Expr) -> int | None:
    """The value of an integer literal, possibly negated; None otherwise."""
    if isinstance(expr, ir.Const) and isinstance(expr.value, int):
        return expr.value
    if isinstance(expr, ir.Neg):
        inner = _const_int(expr.operand)
        return None if inner is None else -inner
    return None


@v_args(meta=True)
class LoopTransformer(Transformer):
    """Builds ir nodes; ``source`` is shared by every :class:`ir.Loc`."""

    def __init__(self, source: ir.SourceFile) -> None:
        super().__init__()
        self.source = source

    def loc(self, meta: Meta) -> ir.Loc:
        if getattr(meta, "empty", True):
            return ir.Loc(0, 0, 0, 0, self.source)
        return ir.Loc(meta.line, meta.column, meta.end_line, meta.end_column, self.source)

    def tok_loc(self, tok: Token) -> ir.Loc:
        return ir.Loc(tok.line, tok.column, tok.end_line, tok.end_column, self.source)

    def span(self, first: ir.Loc, last: ir.Loc) -> ir.Loc:
        return ir.Loc(first.line, first.col, last.end_line, last.end_col, self.source)

    # ------------------------------------------------------------------ kernels

    def start(self, meta: Meta, kernels: list[ir.Kernel]) -> ir.Program:
        return ir.Program(tuple(kernels), self.source)

    def kernel(self, meta: Meta, children: list) -> ir.Kernel:
        name, *rest = [c for c in children if c is not None]
        params = tuple(c for c in rest if isinstance(c, ir.Param))
        where = next((c.conditions for c in rest if isinstance(c, _Where)), ())
        decls, body = rest[-1]
        k = ir.Kernel(str(name), params, where, decls, body, self.loc(meta))
        return finish_kernel(k)

    def param(self, meta: Meta, children: list) -> ir.Param:
        name, _eq, default = children
        return ir.Param(str(name), default, self.loc(meta))

    def signed_int(self, meta: Meta, children: list) -> int:
        *sign, digits = children
        return -int(digits) if sign else int(digits)

    def where(self, meta: Meta, children: list) -> _Where:
        return _Where(_operands(children[0], "and"))

    def kernel_block(self, meta: Meta, items: list) -> tuple[tuple[ir.Decl, ...], tuple[ir.Node, ...]]:
        items = [i for i in items if i is not None]
        decls: list[ir.Decl] = []
        body: list[ir.Node] = []
        for item in items:
            if not isinstance(item, ir.Decl):
                body.append(item)
            elif body:
                raise LoopSyntaxError(Diagnostic(
                    f"the declaration of '{item.name}' comes after a statement; "
                    "declarations must come before the kernel's body", item.loc))
            else:
                decls.append(item)
        return tuple(decls), tuple(body)

    def role(self, meta: Meta, children: list) -> str:
        return str(children[0])

    def decl(self, meta: Meta, children: list) -> ir.Decl:
        role, name, *rest = [c for c in children if c is not None]
        dtype = "f32"
        if rest and isinstance(rest[-1], Token):
            dtype = str(rest.pop())
        return ir.Decl(str(name), role, tuple(rest), dtype, self.loc(meta))

    # ------------------------------------------------------------------ statements

    def block(self, meta: Meta, stmts: list[ir.Node]) -> tuple[ir.Node, ...]:
        return tuple(s for s in stmts if s is not None)

    def assign(self, meta: Meta, children: list) -> ir.Assign:
        label, target, op, value = children
        return ir.Assign(str(label) if label is not None else "", target, str(op), value,
                         self.loc(meta), explicit_label=label is not None)

    def target(self, meta: Meta, children: list) -> ir.Ref:
        name, *idx = [c for c in children if c is not None]
        return ir.Ref(str(name), tuple(idx), self.loc(meta))

    def range(self, meta: Meta, children: list) -> _Range:
        var, lo, _dots, hi, step = children
        lower = lo.args if isinstance(lo, ir.Call) and lo.func == "max" else (lo,)
        upper = hi.args if isinstance(hi, ir.Call) and hi.func == "min" else (hi,)
        if step is None:
            return _Range(str(var), lower, upper, 1, ir.NOWHERE, self.loc(meta))
        value = _const_int(step)
        # A non-constant step is stored as 0: semantics reports it at step_loc.
        return _Range(str(var), lower, upper, value if value is not None else 0, step.loc, self.loc(meta))

    def step(self, meta: Meta, children: list) -> ir.Expr:
        return children[0]

    def for_stmt(self, meta: Meta, children: list) -> ir.Loop:
        *ranges, body = children
        end = self.loc(meta)
        for r in reversed(ranges):
            loc = self.span(r.loc, end)
            body = (ir.Loop(r.var, r.lower, r.upper, r.step, body, loc, step_loc=r.step_loc),)
        return body[0]

    def if_stmt(self, meta: Meta, children: list) -> ir.If:
        cond, then, orelse = children
        return ir.If(cond, then, orelse if orelse is not None else (), self.loc(meta))

    def else_if(self, meta: Meta, children: list) -> tuple[ir.If]:
        return (children[0],)

    # ------------------------------------------------------------------ expressions

    def or_(self, meta: Meta, children: list) -> ir.BoolOp:
        a, b = children
        return ir.BoolOp("or", _operands(a, "or") + (b,), self.loc(meta))

    def and_(self, meta: Meta, children: list) -> ir.BoolOp:
        a, b = children
        return ir.BoolOp("and", _operands(a, "and") + (b,), self.loc(meta))

    def not_(self, meta: Meta, children: list) -> ir.Not:
        return ir.Not(children[0], self.loc(meta))

    def compare(self, meta: Meta, children: list) -> ir.Compare:
        a, op, b = children
        return ir.Compare(str(op), a, b, self.loc(meta))

    def binop(self, meta: Meta, children: list) -> ir.BinOp:
        a, op, b = children
        return ir.BinOp(str(op), a, b, self.loc(meta))

    def neg(self, meta: Meta, children: list) -> ir.Neg:
        return ir.Neg(children[1], self.loc(meta))

    def pos(self, meta: Meta, children: list) -> ir.Expr:
        return children[1]

    def int(self, meta: Meta, children: list) -> ir.Const:
        return ir.Const(int(children[0]), self.loc(meta))

    def float(self, meta: Meta, children: list) -> ir.Const:
        return ir.Const(float(children[0]), self.loc(meta))

    def name(self, meta: Meta, children: list) -> ir.Var:
        return ir.Var(str(children[0]), self.loc(meta))

    def ref(self, meta: Meta, children: list) -> ir.Ref:
        name, *idx = children
        return ir.Ref(str(name), tuple(idx), self.loc(meta))

    def call(self, meta: Meta, children: list) -> ir.Call | ir.Select:
        name, *args = [c for c in children if c is not None]
        args = tuple(args)
        if str(name) == "select" and len(args) == 3:
            return ir.Select(*args, loc=self.loc(meta))
        # Unknown functions and wrong arities stay a Call: semantics reports them.
        return ir.Call(str(name), args, self.loc(meta))


# --------------------------------------------------------------------------- whole-kernel fix-ups


def map_expr(expr: ir.Expr, f: Callable[[ir.Expr], ir.Expr]) -> ir.Expr:
    """Rebuild ``expr`` bottom-up, applying ``f`` to every node after its children."""
    rec = lambda e: map_expr(e, f)  # noqa: E731
    match expr:
        case ir.Ref(indices=idx):
            expr = dataclasses.replace(expr, indices=tuple(map(rec, idx)))
        case ir.BinOp(lhs=a, rhs=b) | ir.Compare(lhs=a, rhs=b):
            expr = dataclasses.replace(expr, lhs=rec(a), rhs=rec(b))
        case ir.Neg(operand=a) | ir.Not(operand=a):
            expr = dataclasses.replace(expr, operand=rec(a))
        case ir.Call(args=args):
            expr = dataclasses.replace(expr, args=tuple(map(rec, args)))
        case ir.BoolOp(operands=args):
            expr = dataclasses.replace(expr, operands=tuple(map(rec, args)))
        case ir.Select(cond=c, if_true=a, if_false=b):
            expr = dataclasses.replace(expr, cond=rec(c), if_true=rec(a), if_false=rec(b))
    return f(expr)


def finish_kernel(kernel: ir.Kernel) -> ir.Kernel:
    """Resolve bare tensor names to ``Ref(name, ())`` and number unlabelled statements."""
    tensors = {d.name for d in kernel.decls}

    def resolve(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Var) and e.name in tensors:
            return ir.Ref(e.name, (), e.loc)
        return e

    fix = lambda e: map_expr(e, resolve)  # noqa: E731
    counter = iter(range(1 << 30))

    def stmt(node: ir.Node) -> ir.Node:
        if isinstance(node, ir.Assign):
            k = next(counter)
            label = node.label if node.explicit_label else f"S{k}"
            return dataclasses.replace(node, label=label, target=fix(node.target), value=fix(node.value))
        if isinstance(node, ir.Loop):
            return dataclasses.replace(node, lower=tuple(map(fix, node.lower)),
                                       upper=tuple(map(fix, node.upper)),
                                       body=tuple(map(stmt, node.body)))
        return dataclasses.replace(node, cond=fix(node.cond), then=tuple(map(stmt, node.then)),
                                   orelse=tuple(map(stmt, node.orelse)))

    return dataclasses.replace(
        kernel,
        where=tuple(map(fix, kernel.where)),
        decls=tuple(dataclasses.replace(d, shape=tuple(map(fix, d.shape))) for d in kernel.decls),
        body=tuple(map(stmt, kernel.body)),
    )
