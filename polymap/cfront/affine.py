"""Affine bounds collected into ``a*x + ... + c`` form, so that C's ``i <= n - 1`` prints as ``n``.

``n - 1 + 1`` -> ``n``; ``2 * (i + 1) - i`` -> ``i + 2``; anything not affine
(a ``floor``, a product of two names) is returned unchanged.
"""
from __future__ import annotations

from polymap import ir


def affine(e: ir.Expr) -> ir.Expr:
    """``n - 1 + 1`` -> ``n``: an affine bound collected into ``a*x + ... + c`` (others unchanged)."""
    terms = _terms(e)
    if terms is None:
        return e
    out: ir.Expr | None = None
    for name, c in terms.items():
        if name is None or c == 0:
            continue
        t: ir.Expr = ir.Var(name, e.loc) if abs(c) == 1 else ir.BinOp("*", ir.Const(abs(c)), ir.Var(name, e.loc), e.loc)
        out = (t if c > 0 else ir.Neg(t, e.loc)) if out is None else ir.BinOp("+" if c > 0 else "-", out, t, e.loc)
    c = terms.get(None, 0)
    if out is None:
        return ir.Const(c, e.loc)
    return out if c == 0 else ir.BinOp("+" if c > 0 else "-", out, ir.Const(abs(c)), e.loc)


def _terms(e: ir.Expr) -> dict[str | None, int] | None:
    match e:
        case ir.Const(value=int(v)):
            return {None: v}
        case ir.Var(name=n):
            return {n: 1}
        case ir.Neg(operand=a):
            t = _terms(a)
            return None if t is None else {k: -v for k, v in t.items()}
        case ir.BinOp(op="+" | "-", lhs=a, rhs=b):
            ta, tb = _terms(a), _terms(b)
            if ta is None or tb is None:
                return None
            sign = 1 if e.op == "+" else -1
            out = dict(ta)
            for k, v in tb.items():
                out[k] = out.get(k, 0) + sign * v
            return out
        case ir.BinOp(op="*", lhs=a, rhs=b):
            ta, tb = _terms(a), _terms(b)
            if ta is None or tb is None:
                return None
            for x, y in ((ta, tb), (tb, ta)):
                if set(x) == {None}:
                    return {k: v * x[None] for k, v in y.items()}
    return None
