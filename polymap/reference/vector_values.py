"""Vectorised values for :mod:`polymap.reference.vector`: one NumPy array per expression.

Every expression is evaluated for all statement instances of a loop at once,
with exactly the operations the scalar closures of
:mod:`polymap.reference.values` apply to each instance: the same static
types, the same dtype per operation (a float32 array rounds each operation
like a float32 scalar), the same tie rules for ``max``/``min``. Whatever
cannot be reproduced exactly raises :class:`Fallback` (the caller then runs
the loop statement by statement)::

    A[i] * 2 + 0.5   (A: f32)   ->   load(A, flats[0]) * float32(2) + float32(0.5)

Integers: subscripts and bounds are int64 arrays with exact bounds on
their values (below :data:`LIMIT`: no int64 overflow, so they equal Python's
exact integers); iterators on right-hand sides (the weak type ``int``) must stay
below 2**31 in magnitude. Transcendental functions (``exp log pow``) are
applied element by element to NumPy scalars, because a library's vector
loop may round differently from its scalar one; ``sqrt`` and the arithmetic
operators are correctly rounded in every implementation.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Sequence, Union

import numpy as np

from polymap import ir
from polymap.reference.index import COMPARE
from polymap.reference.values import CONVERT, INTEGER, common, pow_type, unary_float_type, value_op

LIMIT = 2 ** 62
#: Magnitudes below which an integer converts exactly.
_EXACT = {"f32": 2 ** 24, "f64": 2 ** 53, "float": 2 ** 53, "i64": 2 ** 63 - 1, "i32": 2 ** 31 - 1}


class Fallback(Exception):
    """The vector path cannot reproduce the sequential result exactly: run the loop scalar."""


VEnv = dict  # name -> (value, lo, hi): a Python int or an int64 array, lo <= value <= hi
#: A value of the vector path: a Python number, a NumPy scalar or an array of them.
Value = Union[int, float, np.generic, np.ndarray]
#: An integer value with the bounds ``lo <= value <= hi`` it is known to keep.
Bounded = tuple[Value, int, int]

# --------------------------------------------------------------------------- integers


def compile_vindex(expr: ir.Expr) -> Callable[[VEnv], tuple]:
    """Vectorised :func:`polymap.reference.index.compile_index`: ``venv -> (value, lo, hi)``.

    ``lo``/``hi`` are exact Python bounds of every element (interval
    arithmetic): they rule out int64 overflow and spare most bounds checks.
    """
    match expr:
        case ir.Const(value=v):
            c = (int(v), int(v), int(v))
            return lambda venv: c
        case ir.Var(name=n):
            return lambda venv: venv[n]
        case ir.Neg(operand=a):
            fa = compile_vindex(a)
            return lambda venv: _neg(fa(venv))
        case ir.BinOp(op=op, lhs=a, rhs=b) if op in "+-*/%":
            fa, fb, f = compile_vindex(a), compile_vindex(b), _INDEX_OPS[op]
            return lambda venv: f(fa(venv), fb(venv))
        case ir.Call(func="floor", args=(a,)):
            return compile_vindex(a)
        case ir.Call(func="min" | "max" as name, args=args):
            return compile_vextreme(args, name)
    raise Fallback(f"not an integer index expression: {expr!r}")


def compile_vextreme(exprs: tuple[ir.Expr, ...], name: str) -> Callable[[VEnv], tuple]:
    """Max (loop lower bounds, ``max``) or min of integer expressions."""
    fns = tuple(compile_vindex(e) for e in exprs)
    if len(fns) == 1:
        return fns[0]
    pick, py = (np.maximum, max) if name == "max" else (np.minimum, min)

    def extreme(venv: VEnv) -> tuple:
        vals = [f(venv) for f in fns]
        if all(isinstance(v, int) for v, _, _ in vals):
            value = py(v for v, _, _ in vals)
        else:
            value = vals[0][0]
            for v, _, _ in vals[1:]:
                value = pick(value, v)
        return value, py(lo for _, lo, _ in vals), py(hi for _, _, hi in vals)
    return extreme


def _checked(value: Value, lo: int, hi: int) -> tuple:
    if lo < -LIMIT or hi > LIMIT:
        raise Fallback("integer expression may leave int64")
    return value, lo, hi


def _neg(a: Bounded) -> Bounded:
    return -a[0], -a[2], -a[1]


def _add(a: Bounded, b: Bounded) -> Bounded:
    return _checked(a[0] + b[0], a[1] + b[1], a[2] + b[2])


def _sub(a: Bounded, b: Bounded) -> Bounded:
    return _checked(a[0] - b[0], a[1] - b[2], a[2] - b[1])


def _mul(a: Bounded, b: Bounded) -> Bounded:
    corners = (a[1] * b[1], a[1] * b[2], a[2] * b[1], a[2] * b[2])
    return _checked(a[0] * b[0], min(corners), max(corners))


def _nonzero(b: Bounded) -> None:
    if b[1] <= 0 <= b[2] and np.any(np.asarray(b[0]) == 0):
        raise Fallback("division by zero")


def _floordiv(a: Bounded, b: Bounded) -> Bounded:
    _nonzero(b)
    if isinstance(b[0], int):  # floor division by a constant is monotone
        lo, hi = sorted((a[1] // b[0], a[2] // b[0]))
    else:  # |floor(a / b)| <= |a| for integers with b != 0
        lo, hi = -max(-a[1], a[2]), max(-a[1], a[2])
    return a[0] // b[0], lo, hi


def _mod(a: Bounded, b: Bounded) -> Bounded:  # Python's remainder has the divisor's sign and is smaller than it
    _nonzero(b)
    if isinstance(b[0], int) and b[0] > 0:
        lo, hi = (a[1], a[2]) if 0 <= a[1] and a[2] < b[0] else (0, b[0] - 1)
    else:
        m = max(-b[1], b[2])
        lo, hi = -m, m
    return a[0] % b[0], lo, hi


_INDEX_OPS = {"+": _add, "-": _sub, "*": _mul, "/": _floordiv, "%": _mod}


def compile_vcondition(expr: ir.Expr) -> Callable[[VEnv], object]:
    """Vectorised :func:`polymap.reference.index.compile_condition`: a bool or a bool array."""
    match expr:
        case ir.Compare(op=op, lhs=a, rhs=b):
            fa, fb, cmp = compile_vindex(a), compile_vindex(b), COMPARE[op]
            return lambda venv: cmp(fa(venv)[0], fb(venv)[0])
        case ir.BoolOp(op="and" | "or" as op, operands=args):
            fns, f = tuple(compile_vcondition(a) for a in args), (
                np.logical_and if op == "and" else np.logical_or)

            def combine(venv: VEnv) -> Value:
                acc = fns[0](venv)
                for g in fns[1:]:
                    acc = f(acc, g(venv))
                return acc
            return combine
        case ir.Not(operand=a):
            fa = compile_vcondition(a)
            return lambda venv: np.logical_not(fa(venv))
    raise Fallback(f"not an affine condition: {expr!r}")


# --------------------------------------------------------------------------- right-hand sides


@dataclass(frozen=True)
class VTyped:
    """A vectorised expression ``(venv, loads) -> value`` and its static type."""

    fn: Callable[[VEnv, list], object]
    type: str


def compile_vvalue(expr: ir.Expr, dtypes: dict[str, str], refs: list[ir.Ref]) -> VTyped:
    """Vectorised :func:`polymap.reference.values.compile_value`.

    Every tensor reference met is appended to ``refs``; at run time
    ``loads[k]`` holds the loaded array of ``refs[k]``.
    """
    match expr:
        case ir.Const(value=v) if isinstance(v, int):
            c = int(v)
            return VTyped(lambda venv, loads: c, "int")
        case ir.Const(value=v):
            f = np.float64(v)
            return VTyped(lambda venv, loads: f, "float")
        case ir.Var(name=n):
            return VTyped(lambda venv, loads: venv[n][0], "int")
        case ir.Ref(tensor=name):
            k = len(refs)
            refs.append(expr)
            return VTyped(lambda venv, loads: loads[k], dtypes[name])
        case ir.Neg(operand=a):
            ta = compile_vvalue(a, dtypes, refs)
            fa, weak = ta.fn, ta.type == "int"
            return VTyped(lambda venv, loads: -_small(fa(venv, loads), weak), ta.type)
        case ir.BinOp(op=op, lhs=a, rhs=b):
            return varith(op, compile_vvalue(a, dtypes, refs), compile_vvalue(b, dtypes, refs))
        case ir.Compare(op=op, lhs=a, rhs=b):
            ta, tb = compile_vvalue(a, dtypes, refs), compile_vvalue(b, dtypes, refs)
            t = common(ta.type, tb.type)
            fa, fb, cmp = vcast_fn(ta, t), vcast_fn(tb, t), COMPARE[op]
            return VTyped(lambda venv, loads: _as_int(cmp(fa(venv, loads), fb(venv, loads))), "int")
        case ir.BoolOp(op=op, operands=args):
            fns = tuple(compile_vvalue(x, dtypes, refs).fn for x in args)
            f = np.logical_and if op == "and" else np.logical_or

            def boolop(venv: VEnv, loads: Sequence[Value]) -> Value:
                acc = _truth(fns[0](venv, loads))
                for g in fns[1:]:
                    acc = f(acc, _truth(g(venv, loads)))
                return _as_int(acc)
            return VTyped(boolop, "int")
        case ir.Not(operand=a):
            fa = compile_vvalue(a, dtypes, refs).fn
            return VTyped(lambda venv, loads: _as_int(np.logical_not(_truth(fa(venv, loads)))), "int")
        case ir.Select(cond=c, if_true=a, if_false=b):
            fc = compile_vvalue(c, dtypes, refs).fn
            ta, tb = compile_vvalue(a, dtypes, refs), compile_vvalue(b, dtypes, refs)
            t = common(ta.type, tb.type)
            fa, fb = vcast_fn(ta, t), vcast_fn(tb, t)
            return VTyped(lambda venv, loads: _where(_truth(fc(venv, loads)), fa(venv, loads),
                                                     fb(venv, loads), t), t)
        case ir.Call(func=func, args=args):
            return _vcall(func, tuple(compile_vvalue(x, dtypes, refs) for x in args))
    raise Fallback(f"cannot vectorise {type(expr).__name__}")


def varith(op: str, a: VTyped, b: VTyped) -> VTyped:
    """``a OP b`` in the common type, like :func:`polymap.reference.values.arith`."""
    t = common(a.type, b.type)
    fa, fb, f = vcast_fn(a, t), vcast_fn(b, t), vop(op, t)
    return VTyped(lambda venv, loads: f(fa(venv, loads), fb(venv, loads)), t)


def vop(op: str, t: str) -> Callable[[object, object], object]:
    """``x OP y`` on arrays (or scalars) of type ``t``, element by element like the scalar op."""
    scalar = value_op(op, t, ir.NOWHERE)  # both operands scalars: the very same code
    weak = t == "int"
    match op:
        case "+" | "-" | "*":
            f = {"+": operator.add, "-": operator.sub, "*": operator.mul}[op]
        case "/" if t in INTEGER:
            f = _c_div
        case "/":
            f = operator.truediv
        case "%" if t in INTEGER:
            f = lambda x, y: x - _c_div(x, y) * y  # noqa: E731
        case "%":
            f = np.fmod
        case "max":
            f = lambda x, y: _where(y > x, y, x, t)  # noqa: E731
        case "min":
            f = lambda x, y: _where(y < x, y, x, t)  # noqa: E731
        case _:
            raise Fallback(f"unknown operator {op!r}")

    def apply(x: Value, y: Value) -> Value:
        if not isinstance(x, np.ndarray) and not isinstance(y, np.ndarray):
            if op in ("/", "%") and t in INTEGER and y == 0:
                # the scalar path's error only if it is evaluated there: a select evaluates both of its
                # branches here, and select(i == 0, 2, 2 / i) never divides by zero in the program
                raise Fallback("integer division by zero")
            return scalar(x, y)
        if weak:
            _small(x, True)
            _small(y, True)
        return f(x, y)
    return apply


def _c_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C's truncating division on integer arrays (a zero divisor is the scalar path's error)."""
    if np.any(y == 0):
        raise Fallback("integer division by zero")
    q = np.abs(x) // np.abs(y)
    return np.where((x < 0) == (y < 0), q, -q)


def _vcall(func: str, args: tuple[VTyped, ...]) -> VTyped:
    if func in ("min", "max") and args:
        acc = args[0]
        for b in args[1:]:
            acc = varith(func, acc, b)
        return acc
    if func in ("abs", "floor", "sqrt", "exp", "log") and len(args) == 1:
        (a,) = args
        fa, weak = a.fn, a.type == "int"
        if func == "abs":
            return VTyped(lambda venv, loads: np.abs(_small(fa(venv, loads), weak)), a.type)
        if func == "floor":
            return a if a.type in INTEGER else VTyped(lambda venv, loads: np.floor(fa(venv, loads)),
                                                      a.type)
        t = unary_float_type(a.type)
        fa = vcast_fn(a, t)
        if func == "sqrt":  # correctly rounded everywhere
            return VTyped(lambda venv, loads: np.sqrt(fa(venv, loads)), t)
        ufunc = np.exp if func == "exp" else np.log
        return VTyped(lambda venv, loads: _each(ufunc, t, fa(venv, loads)), t)
    if func == "pow" and len(args) == 2:
        t = pow_type(args[0].type, args[1].type)
        fa, fb = vcast_fn(args[0], t), vcast_fn(args[1], t)
        return VTyped(lambda venv, loads: _each(np.power, t, fa(venv, loads), fb(venv, loads)), t)
    raise Fallback(f"'{func}' with {len(args)} argument(s)")


def _each(ufunc: np.ufunc, t: str, *xs: Value) -> Value:
    """``ufunc`` applied to NumPy scalars one instance at a time, as the scalar path does."""
    if not any(isinstance(x, np.ndarray) for x in xs):
        return ufunc(*xs)
    cols = np.broadcast_arrays(*xs)
    return np.array([ufunc(*vals) for vals in zip(*cols)], dtype=CONVERT[t])


# --------------------------------------------------------------------------- conversions


def vcast_fn(a: VTyped, to: str) -> Callable:
    if a.type == to:
        return a.fn
    f, frm = a.fn, a.type
    return lambda venv, loads: vcast(f(venv, loads), frm, to)


def vcast(x: Value, frm: str, to: str) -> Value:
    """``CONVERT[to](x)`` element by element; integers only where the conversion is exact."""
    if frm == to:
        return x
    conv = CONVERT[to]
    if not isinstance(x, np.ndarray):
        return conv(x)  # the scalar path's own conversion
    if frm in INTEGER:
        _within(x, _EXACT[to])
    return x.astype(conv)


def store_values(x: Value, frm: str, dtype: str, n: int) -> np.ndarray:
    """What ``arr[idx] = x`` stores into a ``dtype`` tensor, or :class:`Fallback` if unsure."""
    want = np.dtype(CONVERT[dtype])
    if not isinstance(x, np.ndarray):
        holder = np.zeros(1, want)
        holder[0] = x  # NumPy's own conversion, as the scalar store does; may raise
        return np.full(n, holder[0], want)
    if frm in INTEGER:
        _within(x, _EXACT[dtype])
    elif dtype in INTEGER:  # floats truncate toward zero when finite and in range
        limit = float(_EXACT[dtype])
        if not np.all(np.abs(x) < limit):
            raise Fallback("float value not storable exactly in an integer tensor")
    if frm != "int" and x.dtype != np.dtype(CONVERT[frm]):
        raise Fallback(f"internal: {frm} value computed as {x.dtype}")
    return np.broadcast_to(x.astype(want, copy=False), (n,))


def _within(x: np.ndarray, limit: int) -> None:
    if x.size and (x.max() > limit or x.min() < -limit):
        raise Fallback("integer value out of the exactly convertible range")


def _small(x: Value, weak: bool) -> Value:
    """Weak integers (Python ints in the scalar path) stay far from int64 overflow."""
    if weak and isinstance(x, np.ndarray):
        _within(x, 2 ** 31 - 1)
    elif weak and abs(x) >= 2 ** 31:
        raise Fallback("large integer")
    return x


def _truth(x: Value) -> Value:
    return x != 0


def _as_int(b: Value) -> Value:
    return b.astype(np.int64) if isinstance(b, np.ndarray) else (1 if b else 0)


def _where(cond: Value, a: Value, b: Value, t: str) -> Value:
    if not isinstance(cond, np.ndarray) and not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
        return a if cond else b
    out = np.where(cond, a, b)
    return out if t == "int" or out.dtype == np.dtype(CONVERT[t]) else out.astype(CONVERT[t])
