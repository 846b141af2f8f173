"""The sizes for which a C kernel's accesses stay inside its arrays, as a ``where`` clause.

PolyBench declares ``double A[20][20]`` and runs its loops to the argument
``n``: the program is right only for ``n <= 20``. The language needs that
precondition stated (else the bounds check reports ``A[i]`` reading ``A[20]``
when ``n = 21``), so it is computed exactly: the parameter values of the
context for which no access leaves its array, when that set is one
conjunction of affine constraints::

    { [n] : exists i: 0 <= i < n and i >= 20 }  ->  complement  ->  where n <= 20
"""
from __future__ import annotations

import dataclasses

from polymap import ir
from polymap.islcheck import isl
from polymap.poly import aff_text, build_model, isl_name


def in_bounds_where(kernel: ir.Kernel) -> ir.Kernel:
    """``kernel`` with the ``where`` clause that keeps its accesses in bounds (unchanged when none is needed)."""
    model = build_model(kernel)
    params = ", ".join(isl_name(p) for p in model.params)
    bad = isl.Set(f"[{params}] -> {{ : 1 = 0 }}")
    for stmt in model.statements:
        for acc in stmt.reads + stmt.writes:
            decl = kernel.decl(acc.tensor)
            if decl is None or decl.is_scalar:
                continue
            for d, extent in enumerate(decl.shape):
                coords = ", ".join(f"e{k}" for k in range(len(decl.shape)))
                out = isl.Set(f"[{params}] -> {{ {isl_name(acc.tensor)}[{coords}] : "
                              f"e{d} < 0 or e{d} >= {aff_text(extent)} }}")
                bad = bad.union(acc.relation.intersect_range(out).params())
    bad = bad.intersect(model.context).coalesce()
    if bad.is_empty():
        return kernel
    good = model.context.subtract(bad).coalesce()
    pieces = good.get_basic_sets()
    if len(pieces) != 1 or pieces[0].dim(isl.dim_type.div) > 0:
        return kernel  # not one conjunction: the bounds check reports the access instead
    implied = model.context
    by_isl = {isl_name(p): p for p in model.params}
    conditions = []
    for c in pieces[0].get_constraints():
        single = isl.BasicSet.universe(good.get_space()).add_constraint(c)
        if implied.is_subset(single):
            continue
        conditions.append(_compare(c, by_isl, kernel.loc))
    return dataclasses.replace(kernel, where=tuple(conditions)) if conditions else kernel


def _compare(c: isl.Constraint, by_isl: dict[str, str], loc: ir.Loc) -> ir.Expr:
    """``-n + 20 >= 0`` -> ``n <= 20``: negative terms on the left, the rest on the right."""
    space = c.get_space()
    left: list[ir.Expr] = []
    right: list[ir.Expr] = []
    for k in range(space.dim(isl.dim_type.param)):
        v = int(c.get_coefficient_val(isl.dim_type.param, k).to_python())
        if v:
            name = by_isl.get(space.get_dim_name(isl.dim_type.param, k), space.get_dim_name(isl.dim_type.param, k))
            term: ir.Expr = ir.Var(name, loc) if abs(v) == 1 else ir.BinOp("*", ir.Const(abs(v)), ir.Var(name, loc), loc)
            (left if v < 0 else right).append(term)
    const = int(c.get_constant_val().to_python())
    if const > 0:
        right.append(ir.Const(const, loc))
    elif const < 0:
        left.append(ir.Const(-const, loc))
    op = "==" if c.is_equality() else "<="
    return ir.Compare(op, _sum(left, loc), _sum(right, loc), loc)


def _sum(terms: list[ir.Expr], loc: ir.Loc) -> ir.Expr:
    if not terms:
        return ir.Const(0, loc)
    out = terms[0]
    for t in terms[1:]:
        out = ir.BinOp("+", out, t, loc)
    return out
