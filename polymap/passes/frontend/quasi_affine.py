"""Is an index expression quasi-affine? Which term is not, in the user's words?

``dsl.md`` allows, in subscripts, loop bounds, conditions, extents and the
``where`` clause: integer literals, names in scope, ``+ -``, products with a
constant, ``floor(e / c)`` and ``e % c`` with a positive integer constant
``c``, and ``min``/``max``. Everything else is reported at the offending
term, e.g. ``'i * j' is a product of iterators``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from polymap import ir
from polymap.errors import Diagnostic


@dataclass(frozen=True)
class Scope:
    """Names visible at a point of a kernel, by kind."""

    params: frozenset[str]
    tensors: frozenset[str]
    iterators: tuple[str, ...] = ()

    def kind(self, name: str) -> str | None:
        if name in self.iterators:
            return "iterator"
        if name in self.params:
            return "parameter"
        if name in self.tensors:
            return "tensor"
        return None


def text(expr: ir.Expr | ir.Loc) -> str:
    """What the user wrote for ``expr`` (its source span), or a rendering of it."""
    loc = expr if isinstance(expr, ir.Loc) else expr.loc
    if loc.source is not None and loc.line > 0 and loc.line == loc.end_line:
        return loc.source.line(loc.line)[loc.col - 1:loc.end_col - 1]
    if isinstance(expr, ir.Loc):
        return "?"
    return render(expr)


def render(expr: ir.Expr) -> str:
    """A plain rendering of ``expr`` (used when no source text is at hand)."""
    match expr:
        case ir.Const(value=v):
            return repr(v)
        case ir.Var(name=n):
            return n
        case ir.Ref(tensor=t, indices=()):
            return t
        case ir.Ref(tensor=t, indices=idx):
            return f"{t}[{', '.join(map(render, idx))}]"
        case ir.BinOp(op=op, lhs=a, rhs=b) | ir.Compare(op=op, lhs=a, rhs=b):
            return f"({render(a)} {op} {render(b)})"
        case ir.Neg(operand=a):
            return f"-{render(a)}"
        case ir.Not(operand=a):
            return f"not {render(a)}"
        case ir.Call(func=f, args=args):
            return f"{f}({', '.join(map(render, args))})"
        case ir.BoolOp(op=op, operands=args):
            return f" {op} ".join(map(render, args))
        case ir.Select(cond=c, if_true=a, if_false=b):
            return f"select({render(c)}, {render(a)}, {render(b)})"
    return "?"


def _a(noun: str) -> str:
    """``'extent'`` -> ``'an extent'``."""
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def names_in(expr: ir.Expr) -> Iterator[str]:
    """Every Var name in ``expr`` (not tensor names)."""
    return (e.name for e in ir.subexpressions(expr) if isinstance(e, ir.Var))


def positive_int_const(expr: ir.Expr) -> bool:
    return isinstance(expr, ir.Const) and isinstance(expr.value, int) and expr.value > 0


def _is_constant(expr: ir.Expr) -> bool:
    return all(isinstance(e, (ir.Const, ir.BinOp, ir.Neg)) for e in ir.subexpressions(expr))


def index_problems(expr: ir.Expr, scope: Scope, where: str) -> list[Diagnostic]:
    """Diagnostics for a quasi-affine index expression ``expr`` used as ``where``.

    ``where`` names the context in messages: "subscript", "loop bound",
    "condition", "extent", "where clause".
    """
    out: list[Diagnostic] = []
    _index(expr, scope, where, out)
    return out


def _index(e: ir.Expr, scope: Scope, where: str, out: list[Diagnostic]) -> None:
    match e:
        case ir.Const(value=v) if isinstance(v, float):
            out.append(Diagnostic(f"the float literal '{text(e)}' cannot appear in {_a(where)}; "
                                  "index expressions are integers", e.loc))
        case ir.Const():
            pass
        case ir.Var(name=n):
            if scope.kind(n) is None:
                out.append(Diagnostic(f"undefined name '{n}'", e.loc))
        case ir.Ref():
            out.append(_data_dependent(e, scope, where))
        case ir.Neg(operand=a):
            _index(a, scope, where, out)
        case ir.BinOp(op="+" | "-", lhs=a, rhs=b):
            _index(a, scope, where, out)
            _index(b, scope, where, out)
        case ir.BinOp(op="*", lhs=a, rhs=b):
            _product(e, a, b, scope, where, out)
        case ir.BinOp(op="%", lhs=a, rhs=b):
            _index(a, scope, where, out)
            if not positive_int_const(b):
                out.append(Diagnostic(f"'{text(e)}' in {_a(where)}: '%' needs a positive integer "
                                      f"constant on its right, not '{text(b)}'", e.loc))
        case ir.BinOp(op="/", lhs=a, rhs=b):
            out.append(Diagnostic(f"'{text(e)}' in {_a(where)} is a division; "
                                  f"write floor({text(e)}) for integer division", e.loc))
        case ir.Call(func="floor", args=(ir.BinOp(op="/", lhs=a, rhs=b),)):
            _index(a, scope, where, out)
            if not positive_int_const(b):
                out.append(Diagnostic(f"'{text(e)}' in {_a(where)}: floor(e / c) needs a positive "
                                      f"integer constant c, not '{text(b)}'", e.loc))
        case ir.Call(func="floor"):
            out.append(Diagnostic(f"'{text(e)}' in {_a(where)}: floor must be written "
                                  "floor(e / c) with a positive integer constant c", e.loc))
        case ir.Call(func="min" | "max", args=args) if len(args) >= 2:
            for a in args:
                _index(a, scope, where, out)
        case ir.Call(func=f):
            out.append(Diagnostic(f"'{text(e)}' cannot appear in {_a(where)}: only floor, min "
                                  f"and max are allowed in index expressions, not '{f}'", e.loc))
        case _:
            out.append(Diagnostic(f"'{text(e)}' is not an integer expression and cannot "
                                  f"appear in {_a(where)}", e.loc))


def _data_dependent(ref: ir.Ref, scope: Scope, where: str) -> Diagnostic:
    if scope.kind(ref.tensor) is None:
        return Diagnostic(f"undefined name '{ref.tensor}'", ref.loc)
    if where == "subscript":
        return Diagnostic(f"'{text(ref)}' is a data-dependent subscript: subscripts must be "
                          "affine in iterators and parameters", ref.loc)
    if where in ("loop bound", "condition"):
        return Diagnostic(f"'{text(ref)}' in {_a(where)} is data-dependent control flow: "
                          f"a {where} cannot read tensors", ref.loc)
    return Diagnostic(f"'{text(ref)}' reads a tensor; {_a(where)} must be affine in parameters", ref.loc)


def _product(e: ir.BinOp, a: ir.Expr, b: ir.Expr, scope: Scope, where: str,
             out: list[Diagnostic]) -> None:
    _index(a, scope, where, out)
    _index(b, scope, where, out)
    if _is_constant(a) or _is_constant(b):
        return
    kinds = {scope.kind(n) for n in (*names_in(a), *names_in(b))}
    if None in kinds or any(isinstance(x, ir.Ref) for x in ir.subexpressions(e)):
        return  # already reported (undefined name or tensor read)
    if kinds == {"iterator"}:
        what = "a product of iterators"
    elif kinds == {"parameter"}:
        what = "a product of parameters"
    elif kinds == {"iterator", "parameter"}:
        what = "a product of a parameter and an iterator"
    else:
        what = "a product of two non-constant terms"
    out.append(Diagnostic(f"'{text(e)}' in {_a(where)} is {what}, which is not affine; "
                          "multiply only by integer constants", e.loc))


def condition_problems(cond: ir.Expr, scope: Scope, where: str = "condition") -> list[Diagnostic]:
    """Diagnostics for an affine condition: comparisons joined by and/or/not."""
    out: list[Diagnostic] = []
    match cond:
        case ir.Compare(lhs=a, rhs=b):
            out += index_problems(a, scope, where)
            out += index_problems(b, scope, where)
        case ir.BoolOp(operands=args):
            for a in args:
                out += condition_problems(a, scope, where)
        case ir.Not(operand=a):
            out += condition_problems(a, scope, where)
        case ir.Ref():
            out.append(_data_dependent(cond, scope, where))
        case _:
            out.append(Diagnostic(f"'{text(cond)}' is not a comparison; {_a(where)} is made of "
                                  "comparisons (< <= > >= == !=) joined by and, or, not", cond.loc))
    return out
