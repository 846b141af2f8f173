"""Pure contractions: the reductions the NumPy target may fold in any order by default.

The rule (``docs/design.md``, "Rounding: the original order by default"): generated
code keeps the original order of every element's updates unless the user passes
``--reassociate``. One exception, for the NumPy target only: a *pure contraction*,
an update ``T[...] += a * b * ...`` (or ``-=``) of a product of references and
constants whose result reaches the kernel's outputs only as itself, may be one
``@``/``einsum``::

    gemm:        C[i, j] += A[i, k] * B[k, j]      C is an output no statement reads: pure
    gramschmidt: nrm += A[i, k] * A[i, k]           nrm is read by sqrt, then divides: in order
    2mm:         tmp[i, j] += alpha * A * B         tmp is read by the second product: in order

Why this is safe: such a sum's forward error in any order is at most
``gamma_n sum |a_k b_k|`` (``gamma_n = n u / (1 - n u)``), and nothing downstream
amplifies it (no division, root or comparison sees it: it *is* the output).
Verification's tolerance is scaled to the dtype and the reduction length
(``cli.md``); on its inputs (positive values, so ``sum |a_k b_k|`` is the
result itself) ``n u`` is below ``64 eps sqrt(n + 1)`` for every ``n < 4096 x 64^2``.
A reduction whose value feeds another statement keeps the original order:
that statement may divide by it or compare it (gramschmidt's and durbin's round-off
turned into relative errors of order 1, which is why the rule exists).

"Reaches the outputs only as itself": the target is an ``out`` or ``inout``
tensor, and every other statement that touches it is a plain write or a scaling
``T[...] op= e`` (``op`` one of ``= += -= *=``) whose ``e`` does not read the
target (gemm's ``C[i, j] = 0`` and PolyBench's ``C[i, j] *= beta``: linear, and
exact or one rounding per element, in the original order either way); no
statement reads the target on its right-hand side.
"""
from __future__ import annotations

from polymap import ir

#: the update operators a pure contraction may have
FOLDED = ("+=", "-=")
#: what other statements may do to a pure contraction's target (without reading it on the right)
SCALINGS = ("=", "+=", "-=", "*=")


def is_product(e: ir.Expr) -> bool:
    """A product of references and constants (``alpha * A[i, k] * B[k, j]``)."""
    match e:
        case ir.BinOp(op="*", lhs=a, rhs=b):
            return is_product(a) and is_product(b)
        case ir.Ref() | ir.Const():
            return True
    return False


def _reads(e: ir.Expr, tensor: str) -> bool:
    return any(isinstance(r, ir.Ref) and r.tensor == tensor for r in ir.subexpressions(e))


def folds_in_any_order(kernel: ir.Kernel, stmt: ir.Assign, reassociate: bool) -> bool:
    """May the NumPy target fold ``stmt``'s reduction as one ``@``/``einsum`` (another order of
    additions)? With ``reassociate`` (``compile --reassociate``) every product update may; without
    it, a pure contraction."""
    if reassociate:
        return stmt.op in FOLDED and is_product(stmt.value)
    return pure_contraction(kernel, stmt)


def pure_contraction(kernel: ir.Kernel, stmt: ir.Assign) -> bool:
    """Is ``stmt`` a pure contraction of ``kernel`` (module docstring)?"""
    if stmt.op not in FOLDED or not is_product(stmt.value) or _reads(stmt.value, stmt.target.tensor):
        return False
    decl = kernel.decl(stmt.target.tensor)
    if decl is None or decl.role not in ("out", "inout"):
        return False
    for ctx in kernel.statements():
        other = ctx.stmt
        if other.label == stmt.label:
            continue
        if _reads(other.value, stmt.target.tensor) or any(_reads(i, stmt.target.tensor) for i in other.target.indices):
            return False
        if other.target.tensor == stmt.target.tensor and other.op not in SCALINGS:
            return False
    return True
