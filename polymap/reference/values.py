"""Values of the reference execution: C's typing rules and the scalar right-hand sides.

The typing rules are the language's, stated once in
:mod:`polymap.passes.frontend.types` (the code generators read them too);
the evaluation is the reference's own, used by both the statement-by-statement
closures below and the vectorised evaluation of
:mod:`polymap.reference.vector_values`::

    A[i] * 2 + 0.5   (A: f32)   ->   Typed(fn, "f32"): both literals become float32
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable

import numpy as np

from polymap import ir
from polymap.errors import InputError, SemanticError
from polymap.passes.frontend.types import COMBINE, INTEGER, common_type as common, pow_type, unary_float_type
from polymap.reference.index import COMPARE, Context, Env, compile_subscripts, loc, loc_of

CONVERT = {"float": np.float64, "f32": np.float32, "f64": np.float64, "i32": np.int32,
           "i64": np.int64}


@dataclass(frozen=True)
class Typed:
    """A compiled expression and its static type."""

    fn: Callable[[Env], object]
    type: str


def cast(t: Typed, to: str) -> Callable[[Env], object]:
    if t.type == to:
        return t.fn
    conv, f = CONVERT[to], t.fn
    return lambda env: conv(f(env))


def compile_value(expr: ir.Expr, ctx: Context) -> Typed:
    """Compile a right-hand side into a closure with its static type."""
    match expr:
        case ir.Const(value=v):
            c = int(v) if isinstance(v, int) else np.float64(v)
            return Typed(lambda env: c, "int" if isinstance(v, int) else "float")
        case ir.Var(name=n):
            return Typed(lambda env: env[n], "int")
        case ir.Ref(tensor=name):
            arr, index = ctx.store[name], compile_subscripts(expr, ctx)
            return Typed(lambda env: arr[index(env)], ctx.dtypes[name])
        case ir.Neg(operand=a):
            ta = compile_value(a, ctx)
            fa = ta.fn
            return Typed(lambda env: -fa(env), ta.type)
        case ir.BinOp(op=op, lhs=a, rhs=b):
            return arith(op, compile_value(a, ctx), compile_value(b, ctx), expr.loc)
        case ir.Compare(op=op, lhs=a, rhs=b):
            ta, tb = compile_value(a, ctx), compile_value(b, ctx)
            t = common(ta.type, tb.type)
            fa, fb, cmp = cast(ta, t), cast(tb, t), COMPARE[op]
            return Typed(lambda env: 1 if cmp(fa(env), fb(env)) else 0, "int")
        case ir.BoolOp(op=op, operands=args):
            fns, pick = tuple(compile_value(x, ctx).fn for x in args), all if op == "and" else any
            return Typed(lambda env: 1 if pick(f(env) for f in fns) else 0, "int")
        case ir.Not(operand=a):
            fa = compile_value(a, ctx).fn
            return Typed(lambda env: 0 if fa(env) else 1, "int")
        case ir.Select(cond=c, if_true=a, if_false=b):
            fc = compile_value(c, ctx).fn
            ta, tb = compile_value(a, ctx), compile_value(b, ctx)
            t = common(ta.type, tb.type)
            fa, fb = cast(ta, t), cast(tb, t)
            return Typed(lambda env: fa(env) if fc(env) else fb(env), t)
        case ir.Call(func=func, args=args):
            return _call(func, tuple(compile_value(x, ctx) for x in args), expr)
    raise SemanticError(f"cannot evaluate {type(expr).__name__} on a right-hand side", loc(expr))


def arith(op: str, a: Typed, b: Typed, where: ir.Loc) -> Typed:
    """``a OP b`` for OP in ``+ - * / % max min``, in the common type."""
    t = common(a.type, b.type)
    fa, fb, f = cast(a, t), cast(b, t), value_op(op, t, where)
    return Typed(lambda env: f(fa(env), fb(env)), t)


def value_op(op: str, t: str, where: ir.Loc) -> Callable[[object, object], object]:
    """The function computing ``x OP y`` on two values already of type ``t``."""
    integer = t in INTEGER
    match op:
        case "+" | "-" | "*":
            return {"+": operator.add, "-": operator.sub, "*": operator.mul}[op]
        case "/" if integer:
            return lambda x, y: c_div(x, y, where)
        case "/":
            return operator.truediv
        case "%" if integer:
            return lambda x, y: x - c_div(x, y, where) * y  # C: the sign of the dividend
        case "%":
            return np.fmod
        case "max":
            return lambda x, y: y if y > x else x
        case "min":
            return lambda x, y: y if y < x else x
    raise SemanticError(f"unknown operator {op!r}", loc_of(where))


def _call(func: str, args: tuple[Typed, ...], expr: ir.Call) -> Typed:
    if func in ("min", "max") and args:
        acc = args[0]
        for b in args[1:]:
            acc = arith(func, acc, b, expr.loc)
        return acc
    if func in ("sqrt", "exp", "log", "abs", "floor") and len(args) == 1:
        (a,) = args
        fa = a.fn
        if func == "abs":
            return Typed(lambda env: abs(fa(env)), a.type)
        if func == "floor":
            return a if a.type in INTEGER else Typed(lambda env: np.floor(fa(env)), a.type)
        t = unary_float_type(a.type)
        fa, ufunc = cast(a, t), {"sqrt": np.sqrt, "exp": np.exp, "log": np.log}[func]
        return Typed(lambda env: ufunc(fa(env)), t)
    if func == "pow" and len(args) == 2:
        t = pow_type(args[0].type, args[1].type)
        fa, fb = cast(args[0], t), cast(args[1], t)
        return Typed(lambda env: np.power(fa(env), fb(env)), t)
    raise SemanticError(f"'{func}' cannot take {len(args)} argument(s)", loc(expr))


def c_div(x: int | np.integer, y: int | np.integer, where: ir.Loc | None) -> int | np.integer:
    """C integer division: truncation toward zero."""
    if y == 0:
        raise InputError("integer division by zero in the reference execution", loc_of(where))
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q
