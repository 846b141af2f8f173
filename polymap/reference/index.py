"""Integer side of the reference execution: subscripts, loop bounds, ``if`` conditions.

Closures over an environment of exact Python integers (iterators and
parameters), with the semantics of :mod:`polymap.evaluate` (floor
division, non-negative remainder, as in ISL)::

    A[2*p + r, q]  ->  index(env) == (2*env["p"] + env["r"], env["q"]), bounds-checked
"""
from __future__ import annotations

import operator
from typing import Callable, NoReturn

import numpy as np

from polymap import ir
from polymap.errors import SemanticError
from polymap.tensors import shape_of

Env = dict  # parameter and iterator names -> Python ints


class Context:
    """What compiling needs: the arrays, their shapes and dtypes, and the parameters."""

    def __init__(self, kernel: ir.Kernel, store: dict[str, np.ndarray], params: dict[str, int],
                 *, vectorize: bool = False) -> None:
        self.kernel = kernel
        self.vectorize = vectorize
        self.store = store
        self.params = params
        self.shapes = {d.name: shape_of(d, params) for d in kernel.decls}
        self.dtypes = {d.name: d.dtype for d in kernel.decls}


def compile_extreme(exprs: tuple[ir.Expr, ...], pick: Callable[..., int]) -> Callable[[Env], int]:
    """The max (``pick=max``) or min of integer expressions: loop bounds, ``min(...)``."""
    fns = tuple(compile_index(e) for e in exprs)
    if len(fns) == 1:
        return fns[0]
    return lambda env: pick(f(env) for f in fns)


def compile_subscripts(ref: ir.Ref, ctx: Context) -> Callable[[Env], tuple[int, ...]]:
    """A closure giving the index tuple of ``ref``, checked against the tensor's shape.

    NumPy would silently wrap a negative index, so every access is checked.
    """
    shape = ctx.shapes[ref.tensor]
    fns = tuple(compile_index(e) for e in ref.indices)
    check_rank(ref, shape)

    def fail(idx: tuple[int, ...], env: Env) -> NoReturn:
        raise out_of_bounds(ref, idx, shape, env, ctx)

    if len(fns) == 1:  # the common cases, without the generic loop
        (f0,), (n0,) = fns, shape

        def index1(env: Env) -> tuple[int, ...]:
            i = f0(env)
            return (i,) if 0 <= i < n0 else fail((i,), env)
        return index1
    if len(fns) == 2 and all(isinstance(e, ir.Var) for e in ref.indices):
        # `A[i, j]`: one C-level lookup of both iterators.
        get, (n0, n1) = operator.itemgetter(*(e.name for e in ref.indices)), shape

        def index_vars2(env: Env) -> tuple[int, ...]:
            i, j = idx = get(env)
            return idx if 0 <= i < n0 and 0 <= j < n1 else fail(idx, env)
        return index_vars2
    if len(fns) == 2:
        (f0, f1), (n0, n1) = fns, shape

        def index2(env: Env) -> tuple[int, ...]:
            i, j = f0(env), f1(env)
            return (i, j) if 0 <= i < n0 and 0 <= j < n1 else fail((i, j), env)
        return index2

    def index(env: Env) -> tuple[int, ...]:
        idx = tuple(f(env) for f in fns)
        if all(0 <= v < n for v, n in zip(idx, shape)):
            return idx
        return fail(idx, env)
    return index


def check_rank(ref: ir.Ref, shape: tuple[int, ...]) -> None:
    """A reference must give one subscript per dimension of its tensor."""
    if len(ref.indices) != len(shape):
        raise SemanticError(f"tensor '{ref.tensor}' has {len(shape)} dimensions but is indexed "
                            f"with {len(ref.indices)} subscripts", loc(ref))


def out_of_bounds(ref: ir.Ref, idx: tuple[int, ...], shape: tuple[int, ...], env: Env, ctx: Context) -> SemanticError:
    where = ", ".join(f"{k}={v}" for k, v in env.items() if k not in ctx.params)
    return SemanticError(
        f"'{ref.tensor}' is accessed at {list(idx)}{' when ' + where if where else ''}, "
        f"outside its shape {list(shape)}", loc(ref))


def compile_index(expr: ir.Expr) -> Callable[[Env], int]:
    """A closure with the integer value :func:`polymap.evaluate.eval_int` gives."""
    match expr:
        case ir.Const(value=v):
            c = int(v)
            return lambda env: c
        case ir.Var(name=n):
            return lambda env: env[n]
        case ir.Neg(operand=a):
            fa = compile_index(a)
            return lambda env: -fa(env)
        case ir.BinOp(op=op, lhs=a, rhs=b):
            fa, fb = compile_index(a), compile_index(b)
            match op:
                case "+":
                    return lambda env: fa(env) + fb(env)
                case "-":
                    return lambda env: fa(env) - fb(env)
                case "*":
                    return lambda env: fa(env) * fb(env)
                case "/":
                    return lambda env: fa(env) // fb(env)
                case "%":
                    return lambda env: fa(env) % fb(env)
        case ir.Call(func="floor", args=(a,)):
            return compile_index(a)
        case ir.Call(func="min" | "max" as f, args=args):
            return compile_extreme(args, min if f == "min" else max)
    raise SemanticError(f"not an integer index expression: {expr!r}", loc(expr))


COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
           "==": operator.eq, "!=": operator.ne}


def compile_condition(expr: ir.Expr) -> Callable[[Env], bool]:
    """A closure with the truth :func:`polymap.evaluate.eval_int_condition` gives."""
    match expr:
        case ir.Compare(op=op, lhs=a, rhs=b):
            fa, fb, cmp = compile_index(a), compile_index(b), COMPARE[op]
            return lambda env: cmp(fa(env), fb(env))
        case ir.BoolOp(op="and", operands=args):
            fns = tuple(compile_condition(a) for a in args)
            return lambda env: all(f(env) for f in fns)
        case ir.BoolOp(op="or", operands=args):
            fns = tuple(compile_condition(a) for a in args)
            return lambda env: any(f(env) for f in fns)
        case ir.Not(operand=a):
            fa = compile_condition(a)
            return lambda env: not fa(env)
    raise SemanticError(f"not an affine condition: {expr!r}", loc(expr))


def loc(node: object) -> ir.Loc | None:
    """Diagnostics point nowhere rather than at line 0 for IR built by hand."""
    return loc_of(getattr(node, "loc", None))


def loc_of(where: ir.Loc | None) -> ir.Loc | None:
    return where if where is not None and where.line > 0 else None
