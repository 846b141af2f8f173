"""Give every loop of a nest its own iterator name.

A mapping names loops by iterator (``mapping.md``), so sibling loops that
share a name are one loop of the mapping: any order or tiling fuses them.
That is often illegal (jacobi-2d's two sweeps, softmax's three row passes),
and then no mapping of the nest as written is legal. Renaming the later
loops keeps them apart, so ``compile`` can tile and parallelise each sweep
while the original program (and its results) stay the same.

Before/after for jacobi-2d::

    for t in 0..T {                     for t in 0..T {
      for i in 1..N-1, j in 1..N-1 {      for i in 1..N-1, j in 1..N-1 {
        s1: B[i, j] = ... A[i, j] ...       s1: B[i, j] = ... A[i, j] ...
      }                                   }
      for i in 1..N-1, j in 1..N-1 {      for i_2 in 1..N-1, j_2 in 1..N-1 {
        s2: A[i, j] = ... B[i, j] ...       s2: A[i_2, j_2] = ... B[i_2, j_2] ...
      }                                   }
    }                                   }
"""
from __future__ import annotations

import dataclasses
from typing import Iterator

from polymap import ir


def repeated_loop_names(kernel: ir.Kernel) -> dict[int, tuple[str, ...]]:
    """For each nest index, the iterator names used by more than one loop of that nest."""
    out: dict[int, tuple[str, ...]] = {}
    for n, nest in enumerate(kernel.nests()):
        names = [lp.var for lp in _loops(nest)]
        repeated = tuple(dict.fromkeys(x for x in names if names.count(x) > 1))
        if repeated:
            out[n] = repeated
    return out


def distinct_loop_names(kernel: ir.Kernel) -> ir.Kernel:
    """``kernel`` with every loop of every nest under its own name (``i``, ``i_2``, ...).

    The first loop of a name (in textual order) keeps it; later ones get the
    first free ``NAME_k``. Nothing else changes, so the result computes
    exactly what ``kernel`` computes. A kernel without repeated names is
    returned as it is.
    """
    if not repeated_loop_names(kernel):
        return kernel
    taken = set(kernel.param_names) | {d.name for d in kernel.decls}
    taken |= {lp.var for nest in kernel.nests() for lp in _loops(nest)}
    body = []
    for node in kernel.body:
        if isinstance(node, ir.Loop):
            seen: set[str] = set()
            node = _rename_loop(node, {}, seen, taken)
        body.append(node)
    return dataclasses.replace(kernel, body=tuple(body))


def _loops(node: ir.Node) -> Iterator[ir.Loop]:
    if isinstance(node, ir.Loop):
        yield node
        for child in node.body:
            yield from _loops(child)
    elif isinstance(node, ir.If):
        for child in node.then + node.orelse:
            yield from _loops(child)


def _fresh(name: str, taken: set[str]) -> str:
    k = 2
    while f"{name}_{k}" in taken:
        k += 1
    taken.add(f"{name}_{k}")
    return f"{name}_{k}"


def _rename_loop(loop: ir.Loop, env: dict[str, str], seen: set[str], taken: set[str]) -> ir.Loop:
    new = loop.var if loop.var not in seen else _fresh(loop.var, taken)
    seen.add(loop.var)
    inner = {**env, loop.var: new}
    return dataclasses.replace(
        loop, var=new,
        lower=tuple(_expr(e, env) for e in loop.lower),
        upper=tuple(_expr(e, env) for e in loop.upper),
        body=tuple(_node(c, inner, seen, taken) for c in loop.body))


def _node(node: ir.Node, env: dict[str, str], seen: set[str], taken: set[str]) -> ir.Node:
    if isinstance(node, ir.Loop):
        return _rename_loop(node, env, seen, taken)
    if isinstance(node, ir.If):
        return dataclasses.replace(node, cond=_expr(node.cond, env),
                                   then=tuple(_node(c, env, seen, taken) for c in node.then),
                                   orelse=tuple(_node(c, env, seen, taken) for c in node.orelse))
    return dataclasses.replace(node, target=_expr(node.target, env), value=_expr(node.value, env))


def _expr(e: ir.Expr, env: dict[str, str]) -> ir.Expr:
    """``e`` with iterator names substituted per ``env`` (every node rebuilt only where needed)."""
    match e:
        case ir.Var(name=n) if n in env and env[n] != n:
            return dataclasses.replace(e, name=env[n])
        case ir.Const() | ir.Var():
            return e
        case ir.Ref(indices=idx):
            return dataclasses.replace(e, indices=tuple(_expr(x, env) for x in idx))
        case ir.BinOp() | ir.Compare():
            return dataclasses.replace(e, lhs=_expr(e.lhs, env), rhs=_expr(e.rhs, env))
        case ir.Neg() | ir.Not():
            return dataclasses.replace(e, operand=_expr(e.operand, env))
        case ir.Call():
            return dataclasses.replace(e, args=tuple(_expr(a, env) for a in e.args))
        case ir.BoolOp():
            return dataclasses.replace(e, operands=tuple(_expr(a, env) for a in e.operands))
        case ir.Select():
            return dataclasses.replace(e, cond=_expr(e.cond, env), if_true=_expr(e.if_true, env),
                                       if_false=_expr(e.if_false, env))
    raise TypeError(f"not an expression: {e!r}")
