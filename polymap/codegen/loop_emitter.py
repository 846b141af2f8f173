"""The mapped kernel printed in the ``.loop`` language (``polymap transform``).

The loops are ISL's AST of the point schedule (:func:`.ast_ir.point_schedule`
of :func:`.ast_build.kernel_schedule`): tile loops get fresh names (``i0``
walks the level-0 tiles of ``i``), loops that walk an original iterator
exactly keep its name, and every other iterator of a statement is replaced
by the AST's expression for it. Declarations, parameters and labels stay::

    for i in 0..M, j in 0..N { init: ..; for k in 0..K { acc: .. } }
      -- GLB tile {i: 32, j: 32, k: 16}, order (k, i, j) -->
    for i0 in 0..floor((M + 31) / 32) {
      for j0 in 0..floor((N + 31) / 32) {
        for i in 32*i0..min(32*i0 + 32, M) { for j in .. { init: C[i, j] = 0 } }
        for k0 in 0..floor((K + 15) / 16) {
          for k in 16*k0..min(16*k0 + 16, K) { for i in .. { for j in .. { acc: .. } } } } } }

An iterator the right-hand side uses as a value (outside subscripts), or
whose expression needs ``min``/``max``, is bound by a one-iteration loop
``for x in e..e + 1`` instead, so that the statement's arithmetic is
unchanged.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Union

from polymap import ir, pretty
from polymap.islcheck import isl
from polymap.poly import KernelModel, build_model
from polymap.codegen.ast_build import (
    KernelSchedule,
    build_ast,
    children,
    isl_param_names,
    iterator_dim,
    kernel_schedule,
    statements_under,
    user_statement,
)
from polymap.codegen.ast_ir import (
    Names,
    direct_loop,
    for_bounds,
    kernel_names,
    plus,
    point_schedule,
    simplify,
    substitute,
    tile_base,
    to_ir,
)
from polymap.mapping.model import Mapping

#: What the emitters take as ``mapping``: None (the original order), one mapping, or
#: mappings of different nests (None entries skipped).
MappingsArg = Union[Mapping, Sequence[Optional[Mapping]], None]


def as_mappings(mapping: MappingsArg) -> tuple[Mapping, ...]:
    """None / one mapping / a sequence of mappings -> a tuple of mappings."""
    if mapping is None:
        return ()
    if isinstance(mapping, (list, tuple)):
        return tuple(m for m in mapping if m is not None)
    return (mapping,)


def transformed_kernel(kernel: ir.Kernel, model: KernelModel | None = None, mapping: MappingsArg = None) -> ir.Kernel:
    """The kernel with its body replaced by the mapped loop nest (IR; see the module doc)."""
    model = model if model is not None else build_model(kernel)
    mappings = as_mappings(mapping)
    ks = point_schedule(kernel_schedule(model, mappings), mappings)
    root = build_ast(model, ks.union)
    printer = _Printer(kernel, model, ks)
    body = printer.nodes(root, dict(isl_param_names(model)), frozenset())
    return dataclasses.replace(kernel, body=tuple(body))


def emit_loop(kernel: ir.Kernel, model: KernelModel | None = None, mapping: MappingsArg = None) -> str:
    """``.loop`` source of the mapped kernel; it parses again and computes the same results."""
    return pretty.kernel(transformed_kernel(kernel, model, mapping))


class _Printer:
    def __init__(self, kernel: ir.Kernel, model: KernelModel, ks: KernelSchedule) -> None:
        self.kernel = kernel
        self.model = model
        self.ks = ks
        self.names = Names(kernel_names(kernel))
        self.labels: set[str] = set()

    def nodes(self, n: isl.AstNode, names: dict, bound: frozenset) -> list[ir.Node]:
        t = n.get_type()
        if t == isl.ast_node_type.block:
            return [x for c in children(n) for x in self.nodes(c, names, bound)]
        if t == isl.ast_node_type.mark:
            return self.nodes(n.mark_get_node(), names, bound)
        if t == isl.ast_node_type.for_:
            return [self.loop(n, names, bound)]
        if t == isl.ast_node_type.if_:
            cond = simplify(to_ir(n.if_get_cond(), names))
            then = tuple(self.nodes(n.if_get_then_node(), names, bound))
            orelse = tuple(self.nodes(n.if_get_else_node(), names, bound)) if n.if_has_else_node() else ()
            return [ir.If(cond, then, orelse)]
        if t == isl.ast_node_type.user:
            return [self.statement(n, names, bound)]
        return []

    def loop(self, n: isl.AstNode, names: dict, bound: frozenset) -> ir.Loop:
        it = n.for_get_iterator().get_id().get_name()
        direct = direct_loop(n, self.model)
        if direct is not None and direct not in bound:
            var = direct
        else:
            var = self.names.fresh(self._base(n, it))
        lower, upper, step = for_bounds(n, names)
        body = self.nodes(n.for_get_body(), {**names, it: var}, bound | {var})
        return ir.Loop(var, lower, upper, step, tuple(body))

    def _base(self, n: isl.AstNode, it: str) -> str:
        dim = iterator_dim(it)
        stmts = statements_under(n)
        if dim is None or not stmts:
            return "t"
        d = self.ks.dims_of(self.ks.rank_of(stmts[0]))[dim]
        return tile_base(d) if d.loop else f"t{dim}"

    def statement(self, n: isl.AstNode, names: dict, bound: frozenset) -> ir.Node:
        name, args = user_statement(n)
        sm = self.model.statement(name)
        stmt = sm.stmt
        as_values = value_vars(stmt.value)
        env: dict[str, ir.Expr] = {}
        helpers: list[tuple[str, ir.Expr]] = []
        for x, a in zip(sm.loops, args):
            e = simplify(to_ir(a, names))
            if e == ir.Var(x):
                continue
            if x in as_values or _has_minmax(e) or x in bound:
                helpers.append((x, e))
            else:
                env[x] = e
        label = stmt.label if stmt.label not in self.labels else self.names.fresh(stmt.label)
        self.labels.add(label)
        target = substitute(stmt.target, env)
        value = substitute(stmt.value, env)
        node: ir.Node = ir.Assign(label, target, stmt.op, value, explicit_label=True)
        for x, e in reversed(helpers):
            node = ir.Loop(x, (e,), (plus(e, 1),), 1, (node,))
        return node


def value_vars(e: ir.Expr) -> set[str]:
    """Names used as values: Var nodes outside tensor subscripts."""
    match e:
        case ir.Var(name=n):
            return {n}
        case ir.Ref():
            return set()
        case ir.BinOp(lhs=a, rhs=b) | ir.Compare(lhs=a, rhs=b):
            return value_vars(a) | value_vars(b)
        case ir.Neg(operand=a) | ir.Not(operand=a):
            return value_vars(a)
        case ir.Call(args=args) | ir.BoolOp(operands=args):
            return set().union(*(value_vars(x) for x in args))
        case ir.Select(cond=c, if_true=a, if_false=b):
            return value_vars(c) | value_vars(a) | value_vars(b)
    return set()


def _has_minmax(e: ir.Expr) -> bool:
    return any(isinstance(x, (ir.Select,)) or (isinstance(x, ir.Call) and x.func in ("min", "max"))
               for x in ir.subexpressions(e))
