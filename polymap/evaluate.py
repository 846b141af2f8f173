"""Integer evaluation of index expressions, bounds and conditions.

Used wherever concrete numbers are needed outside ISL: parameter ``where``
checks, the reference execution's loop bounds and subscripts, and the
brute-force simulators of the tests. Division is floor division and ``%``
is the non-negative remainder for a positive divisor, as in ISL.
"""
from __future__ import annotations

from typing import Iterator, Mapping

from polymap import ir


def eval_int(expr: ir.Expr, env: Mapping[str, int]) -> int:
    """The integer value of a quasi-affine expression (``floor(e / c)``, ``e % c``, min/max)."""
    match expr:
        case ir.Const(value=v):
            return int(v)
        case ir.Var(name=n):
            return env[n]
        case ir.Neg(operand=a):
            return -eval_int(a, env)
        case ir.BinOp(op="+", lhs=a, rhs=b):
            return eval_int(a, env) + eval_int(b, env)
        case ir.BinOp(op="-", lhs=a, rhs=b):
            return eval_int(a, env) - eval_int(b, env)
        case ir.BinOp(op="*", lhs=a, rhs=b):
            return eval_int(a, env) * eval_int(b, env)
        case ir.BinOp(op="/", lhs=a, rhs=b):
            return eval_int(a, env) // eval_int(b, env)
        case ir.BinOp(op="%", lhs=a, rhs=b):
            return eval_int(a, env) % eval_int(b, env)
        case ir.Call(func="floor", args=(a,)):
            return eval_int(a, env)
        case ir.Call(func="min", args=args):
            return min(eval_int(a, env) for a in args)
        case ir.Call(func="max", args=args):
            return max(eval_int(a, env) for a in args)
    raise ValueError(f"not an integer expression: {expr!r}")


def eval_int_condition(expr: ir.Expr, env: Mapping[str, int]) -> bool:
    """The truth of an affine condition (comparisons with and/or/not)."""
    match expr:
        case ir.Compare(op=op, lhs=a, rhs=b):
            x, y = eval_int(a, env), eval_int(b, env)
            return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y, "==": x == y, "!=": x != y}[op]
        case ir.BoolOp(op="and", operands=args):
            return all(eval_int_condition(a, env) for a in args)
        case ir.BoolOp(op="or", operands=args):
            return any(eval_int_condition(a, env) for a in args)
        case ir.Not(operand=a):
            return not eval_int_condition(a, env)
    raise ValueError(f"not a condition: {expr!r}")


def loop_range(loop: ir.Loop, env: Mapping[str, int]) -> range:
    """The values a loop's iterator takes, given the enclosing iterators and parameters."""
    lo = max(eval_int(e, env) for e in loop.lower)
    hi = min(eval_int(e, env) for e in loop.upper)
    return range(lo, hi, loop.step)


def iterate_statement_instances(kernel: ir.Kernel, params: Mapping[str, int]
                               ) -> Iterator[tuple[ir.StatementContext, dict[str, int]]]:
    """Yield ``(StatementContext, env)`` for every statement instance in original order.

    ``env`` maps parameters and enclosing iterators to values. This is the
    original schedule, enumerated; simulators and the reference execution
    build on it.
    """
    contexts = {id(c.stmt): c for c in kernel.statements()}

    def run(nodes: tuple[ir.Node, ...], env: dict[str, int]) -> Iterator[tuple[ir.StatementContext, dict[str, int]]]:
        for node in nodes:
            if isinstance(node, ir.Assign):
                yield contexts[id(node)], env
            elif isinstance(node, ir.Loop):
                for v in loop_range(node, env):
                    yield from run(node.body, {**env, node.var: v})
            else:
                branch = node.then if eval_int_condition(node.cond, env) else node.orelse
                yield from run(branch, env)

    yield from run(kernel.body, dict(params))
