"""Reference execution: run a kernel's original program straight from the IR.

This is the oracle that generated code is checked against, so it shares
nothing with the code generators (only :mod:`polymap.ir`,
:mod:`polymap.passes.evaluate` and :mod:`polymap.tensors`). Each statement,
loop and condition is compiled once into a Python closure; running the
kernel is then a walk of closures in textual (original) order::

    for i in 0..N { S: A[i] += B[i] * 2 }
      ->  loop(i, 0, N, body=stmt(A, [i], "+=", mul(load(B, [i]), 2)))

Value semantics (chosen to match C, documented here once):

* Loads give NumPy scalars of the tensor's dtype, so float32 arithmetic
  really rounds in float32. Iterators, parameters and integer literals are
  exact Python integers; float literals are doubles.
* Types combine like C's usual arithmetic conversions, computed statically:
  two tensor types give the higher of i32 < i64 < f32 < f64; a literal,
  iterator or parameter adopts the other operand's tensor type (like a
  literal written ``0.5f`` next to a ``float``), except that a float
  literal next to an integer tensor gives f64. Expressions of literals,
  iterators and parameters alone are computed exactly (integers) or in
  double, then converted when stored.
* ``/`` is true division unless both operands are integers; then, as in C,
  it truncates toward zero and ``%`` is C's remainder (sign of the
  dividend). On floats ``%`` is C's ``fmod``. Integer division by zero is an
  error. Float overflow, division by zero and invalid operations give
  inf/nan silently, as in C.
* ``sqrt exp log`` of a float32 stay float32 (``sqrtf``); of anything else
  they are computed in double. ``pow`` of two integers is a double.
  ``floor`` keeps the type. Comparisons, ``and``, ``or``, ``not`` give the
  integers 1/0. Storing converts to the tensor's dtype (floats to integers
  truncate toward zero).
* Subscripts, loop bounds and ``if`` conditions use the integer semantics of
  :mod:`polymap.passes.evaluate` (floor division, non-negative remainder),
  as in ISL. An access outside its tensor is a :class:`SemanticError`.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from . import ir
from .errors import InputError, SemanticError
from .tensors import allocate, numpy_dtype, shape_of, validate_inputs

Env = dict  # parameter and iterator names -> Python ints
Run = Callable[[Env], None]


def execute(kernel: ir.Kernel, arrays: Mapping[str, np.ndarray],
            params: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Run ``kernel`` on copies of ``arrays``; return every ``out`` and ``inout`` tensor.

    ``arrays`` must hold the ``in``/``inout`` tensors with their declared
    shapes and dtypes (other names are ignored); ``out`` and ``local``
    tensors start zero-filled. The given arrays are never modified.
    """
    validate_inputs(kernel, arrays, params, allow_extra=True)
    store = allocate(kernel, params)
    for d in kernel.decls:
        if d.role in ("in", "inout"):
            store[d.name] = np.array(arrays[d.name], dtype=numpy_dtype(d.dtype), copy=True)
    ints = {k: int(v) for k, v in params.items()}  # iterators and parameters are exact ints
    body = _compile_block(kernel.body, _Context(kernel, store, ints))
    env: Env = dict(ints)
    with np.errstate(all="ignore"):
        body(env)
    return {d.name: store[d.name] for d in kernel.decls if d.role in ("out", "inout")}


class _Context:
    """What compiling needs: the arrays, their shapes, and the parameter names."""

    def __init__(self, kernel: ir.Kernel, store: dict[str, np.ndarray], params: dict[str, int]):
        self.kernel = kernel
        self.store = store
        self.params = params
        self.shapes = {d.name: shape_of(d, params) for d in kernel.decls}
        self.dtypes = {d.name: d.dtype for d in kernel.decls}


# --------------------------------------------------------------------------- control flow


def _compile_block(nodes: tuple[ir.Node, ...], ctx: _Context) -> Run:
    runs = tuple(_compile_node(n, ctx) for n in nodes)
    if len(runs) == 1:
        return runs[0]

    def block(env: Env) -> None:
        for r in runs:
            r(env)
    return block


def _compile_node(node: ir.Node, ctx: _Context) -> Run:
    match node:
        case ir.Assign():
            return _compile_assign(node, ctx)
        case ir.Loop():
            return _compile_loop(node, ctx)
        case ir.If():
            return _compile_if(node, ctx)
    raise TypeError(f"not a statement: {node!r}")


def _compile_loop(loop: ir.Loop, ctx: _Context) -> Run:
    lower = _compile_extreme(loop.lower, max)
    upper = _compile_extreme(loop.upper, min)
    body, var, step = _compile_block(loop.body, ctx), loop.var, loop.step

    def run(env: Env) -> None:
        for v in range(lower(env), upper(env), step):
            env[var] = v
            body(env)
    return run


def _compile_if(node: ir.If, ctx: _Context) -> Run:
    cond = compile_condition(node.cond)
    then = _compile_block(node.then, ctx) if node.then else (lambda env: None)
    orelse = _compile_block(node.orelse, ctx) if node.orelse else (lambda env: None)

    def run(env: Env) -> None:
        (then if cond(env) else orelse)(env)
    return run


def _compile_extreme(exprs: tuple[ir.Expr, ...], pick) -> Callable[[Env], int]:
    fns = tuple(compile_index(e) for e in exprs)
    if len(fns) == 1:
        return fns[0]
    return lambda env: pick(f(env) for f in fns)


# --------------------------------------------------------------------------- statements

_COMBINE = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "max=": "max", "min=": "min"}


def _compile_assign(stmt: ir.Assign, ctx: _Context) -> Run:
    target, dtype = stmt.target, ctx.dtypes[stmt.target.tensor]
    arr = ctx.store[target.tensor]
    index = compile_subscripts(target, ctx)
    value = _compile_value(stmt.value, ctx)
    if stmt.op == "=":
        fv = value.fn

        def assign(env: Env) -> None:
            try:
                arr[index(env)] = fv(env)
            except (ValueError, OverflowError) as exc:  # nan or out of range into an integer
                _unstorable(stmt, dtype, env, ctx, exc)
        return assign
    # C's `t OP= v` is `t = t OP v` with the usual conversions, then stored; the
    # subscripts are evaluated once, and the target is read after the right-hand side.
    t = _common(dtype, value.type)
    op, fv = _value_op(_COMBINE[stmt.op], t, stmt.loc), _cast(value, t)
    if t != dtype:
        conv = _CONVERT[t]

        def update_converted(env: Env) -> None:
            idx = index(env)
            v = fv(env)
            try:
                arr[idx] = op(conv(arr[idx]), v)
            except (ValueError, OverflowError) as exc:
                _unstorable(stmt, dtype, env, ctx, exc)
        return update_converted

    def update(env: Env) -> None:
        idx = index(env)
        v = fv(env)
        try:
            arr[idx] = op(arr[idx], v)
        except (ValueError, OverflowError) as exc:
            _unstorable(stmt, dtype, env, ctx, exc)
    return update


def _unstorable(stmt: ir.Assign, dtype: str, env: Env, ctx: _Context, exc: Exception):
    where = ", ".join(f"{k}={v}" for k, v in env.items() if k not in ctx.params)
    raise InputError(f"statement {stmt.label}{' at ' + where if where else ''}: the value cannot "
                     f"be stored in {dtype} tensor '{stmt.target.tensor}' ({exc})", _loc(stmt))


def compile_subscripts(ref: ir.Ref, ctx: _Context) -> Callable[[Env], tuple[int, ...]]:
    """A closure giving the index tuple of ``ref``, checked against the tensor's shape.

    NumPy would silently wrap a negative index, so every access is checked.
    """
    shape = ctx.shapes[ref.tensor]
    fns = tuple(compile_index(e) for e in ref.indices)
    if len(fns) != len(shape):
        raise SemanticError(f"tensor '{ref.tensor}' has {len(shape)} dimensions but is indexed "
                            f"with {len(fns)} subscripts", _loc(ref))

    def fail(idx: tuple[int, ...], env: Env):
        where = ", ".join(f"{k}={v}" for k, v in env.items() if k not in ctx.params)
        raise SemanticError(
            f"'{ref.tensor}' is accessed at {list(idx)}{' when ' + where if where else ''}, "
            f"outside its shape {list(shape)}", _loc(ref))

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


# --------------------------------------------------------------------------- values (C typing)

#: Tensor types by C's conversion rank; "int" and "float" are the weak types of
#: iterators/parameters/integer literals (Python int) and float literals (double).
_RANK = {"i32": 0, "i64": 1, "f32": 2, "f64": 3}
_INTEGER = ("int", "i32", "i64")
_CONVERT = {"float": np.float64, "f32": np.float32, "f64": np.float64, "i32": np.int32,
            "i64": np.int64}


@dataclass(frozen=True)
class _Typed:
    """A compiled expression and its static type."""

    fn: Callable[[Env], object]
    type: str


def _common(a: str, b: str) -> str:
    """The type C's usual arithmetic conversions give (weak operands adopt the strong one)."""
    if a in _RANK and b in _RANK:
        return a if _RANK[a] >= _RANK[b] else b
    if a in _RANK or b in _RANK:
        strong, weak = (a, b) if a in _RANK else (b, a)
        return strong if strong in ("f32", "f64") or weak == "int" else "f64"
    return "float" if "float" in (a, b) else "int"


def _cast(t: _Typed, to: str) -> Callable[[Env], object]:
    if t.type == to:
        return t.fn
    conv, f = _CONVERT[to], t.fn
    return lambda env: conv(f(env))


def _compile_value(expr: ir.Expr, ctx: _Context) -> _Typed:
    """Compile a right-hand side into a closure with its static type."""
    match expr:
        case ir.Const(value=v):
            c = int(v) if isinstance(v, int) else np.float64(v)
            return _Typed(lambda env: c, "int" if isinstance(v, int) else "float")
        case ir.Var(name=n):
            return _Typed(lambda env: env[n], "int")
        case ir.Ref(tensor=name):
            arr, index = ctx.store[name], compile_subscripts(expr, ctx)
            return _Typed(lambda env: arr[index(env)], ctx.dtypes[name])
        case ir.Neg(operand=a):
            ta = _compile_value(a, ctx)
            fa = ta.fn
            return _Typed(lambda env: -fa(env), ta.type)
        case ir.BinOp(op=op, lhs=a, rhs=b):
            return _arith(op, _compile_value(a, ctx), _compile_value(b, ctx), expr.loc)
        case ir.Compare(op=op, lhs=a, rhs=b):
            ta, tb = _compile_value(a, ctx), _compile_value(b, ctx)
            t = _common(ta.type, tb.type)
            fa, fb, cmp = _cast(ta, t), _cast(tb, t), _COMPARE[op]
            return _Typed(lambda env: 1 if cmp(fa(env), fb(env)) else 0, "int")
        case ir.BoolOp(op=op, operands=args):
            fns, pick = tuple(_compile_value(x, ctx).fn for x in args), all if op == "and" else any
            return _Typed(lambda env: 1 if pick(f(env) for f in fns) else 0, "int")
        case ir.Not(operand=a):
            fa = _compile_value(a, ctx).fn
            return _Typed(lambda env: 0 if fa(env) else 1, "int")
        case ir.Select(cond=c, if_true=a, if_false=b):
            fc = _compile_value(c, ctx).fn
            ta, tb = _compile_value(a, ctx), _compile_value(b, ctx)
            t = _common(ta.type, tb.type)
            fa, fb = _cast(ta, t), _cast(tb, t)
            return _Typed(lambda env: fa(env) if fc(env) else fb(env), t)
        case ir.Call(func=func, args=args):
            return _call(func, tuple(_compile_value(x, ctx) for x in args), expr)
    raise SemanticError(f"cannot evaluate {type(expr).__name__} on a right-hand side", _loc(expr))


def _arith(op: str, a: _Typed, b: _Typed, loc: ir.Loc) -> _Typed:
    """``a OP b`` for OP in ``+ - * / % max min``, in the common type."""
    t = _common(a.type, b.type)
    fa, fb, f = _cast(a, t), _cast(b, t), _value_op(op, t, loc)
    return _Typed(lambda env: f(fa(env), fb(env)), t)


def _value_op(op: str, t: str, loc: ir.Loc) -> Callable[[object, object], object]:
    """The function computing ``x OP y`` on two values already of type ``t``."""
    integer = t in _INTEGER
    match op:
        case "+" | "-" | "*":
            return {"+": operator.add, "-": operator.sub, "*": operator.mul}[op]
        case "/" if integer:
            return lambda x, y: _c_div(x, y, loc)
        case "/":
            return operator.truediv
        case "%" if integer:
            return lambda x, y: _c_rem(x, y, loc)
        case "%":
            return np.fmod
        case "max":
            return _max
        case "min":
            return _min
    raise SemanticError(f"unknown operator {op!r}", _loc_of(loc))


def _call(func: str, args: tuple[_Typed, ...], expr: ir.Call) -> _Typed:
    if func in ("min", "max") and args:
        acc = args[0]
        for b in args[1:]:
            acc = _arith(func, acc, b, expr.loc)
        return acc
    if func in ("sqrt", "exp", "log", "abs", "floor") and len(args) == 1:
        (a,) = args
        fa = a.fn
        if func == "abs":
            return _Typed(lambda env: abs(fa(env)), a.type)
        if func == "floor":
            return a if a.type in _INTEGER else _Typed(lambda env: np.floor(fa(env)), a.type)
        # f32 stays f32 (sqrtf); anything else is computed in double, weak stays weak.
        t = {"f32": "f32", "f64": "f64", "int": "float", "float": "float"}.get(a.type, "f64")
        fa, ufunc = _cast(a, t), {"sqrt": np.sqrt, "exp": np.exp, "log": np.log}[func]
        return _Typed(lambda env: ufunc(fa(env)), t)
    if func == "pow" and len(args) == 2:
        t = _common(args[0].type, args[1].type)
        if t in _INTEGER:  # C's pow takes and returns doubles
            t = "float" if t == "int" else "f64"
        fa, fb = _cast(args[0], t), _cast(args[1], t)
        return _Typed(lambda env: np.power(fa(env), fb(env)), t)
    raise SemanticError(f"'{func}' cannot take {len(args)} argument(s)", _loc(expr))


def _c_div(x, y, loc):
    """C integer division: truncation toward zero."""
    if y == 0:
        raise InputError("integer division by zero in the reference execution", _loc_of(loc))
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def _c_rem(x, y, loc):
    """C remainder: ``x - (x / y) * y``, with the sign of the dividend."""
    return x - _c_div(x, y, loc) * y


def _max(x, y):
    return y if y > x else x


def _min(x, y):
    return y if y < x else x


# --------------------------------------------------------------------------- integer expressions


def compile_index(expr: ir.Expr) -> Callable[[Env], int]:
    """A closure with the integer value :func:`polymap.passes.evaluate.eval_int` gives."""
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
            return _compile_extreme(args, min if f == "min" else max)
    raise SemanticError(f"not an integer index expression: {expr!r}", _loc(expr))


_COMPARE = {"<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y,
            ">=": lambda x, y: x >= y, "==": lambda x, y: x == y, "!=": lambda x, y: x != y}


def compile_condition(expr: ir.Expr) -> Callable[[Env], bool]:
    """A closure with the truth :func:`polymap.passes.evaluate.eval_int_condition` gives."""
    match expr:
        case ir.Compare(op=op, lhs=a, rhs=b):
            fa, fb, cmp = compile_index(a), compile_index(b), _COMPARE[op]
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
    raise SemanticError(f"not an affine condition: {expr!r}", _loc(expr))


def _loc(node) -> ir.Loc | None:
    return _loc_of(getattr(node, "loc", None))


def _loc_of(loc: ir.Loc | None) -> ir.Loc | None:
    """Diagnostics point nowhere rather than at line 0 for IR built by hand."""
    return loc if loc is not None and loc.line > 0 else None
