"""Reference execution: run a kernel's original program straight from the IR.

This is the oracle that generated code is checked against, so it shares
nothing with the code generators (only :mod:`polymap.ir`,
:mod:`polymap.evaluate` and :mod:`polymap.tensors`). Each statement,
loop and condition is compiled once into a Python closure; running the
kernel is then a walk of closures in textual (original) order::

    for i in 0..N { S: A[i] += B[i] * 2 }
      ->  loop(i, 0, N, body=stmt(A, [i], "+=", mul(load(B, [i]), 2)))

Loops are first offered to :mod:`polymap.reference.vector`, which runs a
whole loop at once on NumPy arrays when, on the concrete indices of this
run, that gives exactly the sequential result (else the closures run).
``execute(..., vectorize=False)`` forces the statement-by-statement path.

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
  :mod:`polymap.evaluate` (floor division, non-negative remainder),
  as in ISL. An access outside its tensor is a :class:`SemanticError`.
"""
from __future__ import annotations

from typing import Callable, Mapping, NoReturn

import numpy as np

from polymap import ir
from polymap.errors import InputError
from polymap.reference.index import (
    Context,
    Env,
    compile_condition,
    compile_extreme,
    compile_index,
    compile_subscripts,
    loc,
)
from polymap.reference.values import COMBINE, CONVERT, cast, common, compile_value, value_op
from polymap.tensors import allocate, numpy_dtype, validate_inputs
from polymap.reference.vector import Region

Run = Callable[[Env], None]


def execute(kernel: ir.Kernel, arrays: Mapping[str, np.ndarray],
            params: Mapping[str, int], *, vectorize: bool = True) -> dict[str, np.ndarray]:
    """Run ``kernel`` on copies of ``arrays``; return every ``out`` and ``inout`` tensor.

    ``arrays`` must hold the ``in``/``inout`` tensors with their declared
    shapes and dtypes (other names are ignored); ``out`` and ``local``
    tensors start zero-filled. The given arrays are never modified. With
    ``vectorize=False`` every statement instance runs one by one (the
    results are the same bit for bit; only the time differs).
    """
    validate_inputs(kernel, arrays, params, allow_extra=True)
    store = allocate(kernel, params)
    for d in kernel.decls:
        if d.role in ("in", "inout"):
            # the store is row-major whatever the caller's layout (a Fortran-ordered array, a
            # strided view): the vectorised regions address it through flat views
            store[d.name] = np.array(arrays[d.name], dtype=numpy_dtype(d.dtype), copy=True, order="C")
    ints = {k: int(v) for k, v in params.items()}  # iterators and parameters are exact ints
    ctx = Context(kernel, store, ints, vectorize=vectorize)
    body = _compile_block(kernel.body, ctx)
    env: Env = dict(ints)
    with np.errstate(all="ignore"):
        body(env)
    return {d.name: store[d.name] for d in kernel.decls if d.role in ("out", "inout")}


# --------------------------------------------------------------------------- control flow


def _compile_block(nodes: tuple[ir.Node, ...], ctx: Context) -> Run:
    runs = tuple(_compile_node(n, ctx) for n in nodes)
    if len(runs) == 1:
        return runs[0]

    def block(env: Env) -> None:
        for r in runs:
            r(env)
    return block


def _compile_node(node: ir.Node, ctx: Context) -> Run:
    match node:
        case ir.Assign():
            return _compile_assign(node, ctx)
        case ir.Loop():
            return _compile_loop(node, ctx)
        case ir.If():
            return _compile_if(node, ctx)
    raise TypeError(f"not a statement: {node!r}")


def _compile_loop(loop: ir.Loop, ctx: Context) -> Run:
    lower = compile_extreme(loop.lower, max)
    upper = compile_extreme(loop.upper, min)
    body, var, step = _compile_block(loop.body, ctx), loop.var, loop.step

    def run(env: Env) -> None:
        for v in range(lower(env), upper(env), step):
            env[var] = v
            body(env)
    if not ctx.vectorize:
        return run
    region = Region(loop, ctx)

    def run_vector(env: Env) -> None:
        if not region.run(env):
            run(env)
    return run_vector


def _compile_if(node: ir.If, ctx: Context) -> Run:
    cond = compile_condition(node.cond)
    then = _compile_block(node.then, ctx) if node.then else (lambda env: None)
    orelse = _compile_block(node.orelse, ctx) if node.orelse else (lambda env: None)

    def run(env: Env) -> None:
        (then if cond(env) else orelse)(env)
    return run


# --------------------------------------------------------------------------- statements


def _compile_assign(stmt: ir.Assign, ctx: Context) -> Run:
    target, dtype = stmt.target, ctx.dtypes[stmt.target.tensor]
    arr = ctx.store[target.tensor]
    index = compile_subscripts(target, ctx)
    value = compile_value(stmt.value, ctx)
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
    t = common(dtype, value.type)
    op, fv = value_op(COMBINE[stmt.op], t, stmt.loc), cast(value, t)
    if t != dtype:
        conv = CONVERT[t]

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


def _unstorable(stmt: ir.Assign, dtype: str, env: Env, ctx: Context, exc: Exception) -> NoReturn:
    where = ", ".join(f"{k}={v}" for k, v in env.items() if k not in ctx.params)
    raise InputError(f"statement {stmt.label}{' at ' + where if where else ''}: the value cannot "
                     f"be stored in {dtype} tensor '{stmt.target.tensor}' ({exc})", loc(stmt))
