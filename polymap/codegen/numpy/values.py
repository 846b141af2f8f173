"""Python/NumPy text for expressions: integer index expressions and typed right-hand sides.

Right-hand sides are typed once by :func:`polymap.passes.frontend.types.typed`
(the language's rule, which the reference reads too); this printer only reads
those types and makes every conversion an explicit NumPy scalar-type call, so
that float32 stays float32 whether the operands are scalars or whole arrays::

    C[i, j] += A[i, k] * 0.5     (f32)  ->  A[..] * _np.float32(0.5)
    x = i / 2 + B[i]             (f64)  ->  _np.float64(_cdiv(i, 2)) + B[..]

Index expressions use ISL's integer semantics, which are Python's ``//``
and ``%`` for positive divisors.
"""
from __future__ import annotations

from typing import Callable, Mapping

from polymap import ir
from polymap.errors import SemanticError
from polymap.passes.frontend.types import INTEGER, Printed, TypedExpr, TypedPrinter

NP_TYPES = {"f32": "_np.float32", "f64": "_np.float64", "i32": "_np.int32", "i64": "_np.int64",
            "float": "_np.float64", "int": "_np.int64"}

#: Helpers every generated module defines (C's integer division, the reference's max/min).
PRELUDE = '''\
import numpy as _np

_min, _max, _range = min, max, range


def _cdiv(x, y):
    """C integer division (truncation toward zero)."""
    q = _np.floor_divide(_np.abs(x), _np.abs(y))
    return _np.where((_np.asarray(x) < 0) == (_np.asarray(y) < 0), q, -q)


def _crem(x, y):
    """C remainder (sign of the dividend)."""
    return x - _cdiv(x, y) * y


def _pmax(x, y):
    """The reference's max: the second operand wins only when strictly larger."""
    return _np.where(y > x, y, x)


def _pmin(x, y):
    return _np.where(y < x, y, x)
'''


def py_index(e: ir.Expr, var: Callable[[str], str]) -> str:
    """Python text of an integer (quasi-affine) expression; ``var`` names variables."""
    match e:
        case ir.Const(value=v):
            return str(int(v)) if int(v) >= 0 else f"({int(v)})"
        case ir.Var(name=n):
            return var(n)
        case ir.Neg(operand=a):
            return f"(-{py_index(a, var)})"
        case ir.BinOp(op="+" | "-" | "*", lhs=a, rhs=b):
            return f"({py_index(a, var)} {e.op} {py_index(b, var)})"
        case ir.BinOp(op="/", lhs=a, rhs=b):
            return f"({py_index(a, var)} // {py_index(b, var)})"
        case ir.BinOp(op="%", lhs=a, rhs=b):
            return f"({py_index(a, var)} % {py_index(b, var)})"
        case ir.Call(func="floor", args=(a,)):
            return py_index(a, var)
        case ir.Call(func="min" | "max", args=args):
            return f"_{e.func}({', '.join(py_index(a, var) for a in args)})"
    raise SemanticError("not an integer index expression", getattr(e, "loc", None))


def py_condition(e: ir.Expr, var: Callable[[str], str]) -> str:
    """Python text of an affine condition (``if`` nodes of the AST)."""
    match e:
        case ir.Compare(op=op, lhs=a, rhs=b):
            return f"({py_index(a, var)} {op} {py_index(b, var)})"
        case ir.BoolOp(op=op, operands=args):
            return "(" + f" {op} ".join(py_condition(a, var) for a in args) + ")"
        case ir.Not(operand=a):
            return f"(not {py_condition(a, var)})"
    raise SemanticError("not an affine condition", getattr(e, "loc", None))


class ValuePrinter(TypedPrinter):
    """Right-hand sides typed by :func:`polymap.passes.frontend.types.typed`; ``ref`` prints a
    tensor reference, ``var`` an integer variable."""

    def __init__(self, dtypes: Mapping[str, str], ref: Callable[[ir.Ref], str], var: Callable[[str], str]) -> None:
        self.dtypes = dtypes
        self.ref = ref
        self.var = var

    def convert(self, t: Printed, to: str) -> str:
        if t.type == to or (t.type in INTEGER and to == "int"):
            return t.text
        return f"{NP_TYPES[to]}({t.text})"

    def leaf(self, t: TypedExpr) -> str:
        match t.expr:
            case ir.Const(value=int() as v):
                return str(v) if v >= 0 else f"({v})"
            case ir.Const(value=v):
                v = float(v)
                return f"({v!r})" if v == v and abs(v) != float("inf") else f"float({str(v)!r})"
            case ir.Var(name=n):
                return self.var(n)
        return self.ref(t.expr)

    def node(self, t: TypedExpr, xs: list[str]) -> str:
        match t.op:
            case "neg":
                return f"(-{xs[0]})"
            case "compare":
                return f"_np.int64({xs[0]} {t.expr.op} {xs[1]})"
            case "and" | "or":
                f = "_np.logical_and" if t.op == "and" else "_np.logical_or"
                out = f"({xs[0]} != 0)"
                for x in xs[1:]:
                    out = f"{f}({out}, {x} != 0)"
                return f"_np.int64({out})"
            case "not":
                return f"_np.int64({xs[0]} == 0)"
            case "select":
                return f"_np.where({xs[0]} != 0, {xs[1]}, {xs[2]})"
            case "floor" if t.type in INTEGER:
                return xs[0]
            case "abs" | "floor" | "sqrt" | "exp" | "log":
                return f"_np.{t.op}({xs[0]})"
            case "pow":
                return f"_np.power({xs[0]}, {xs[1]})"
        return self.operation(t.op, xs[0], xs[1], t.type)

    @staticmethod
    def operation(op: str, x: str, y: str, t: str) -> str:
        """``x OP y`` on two operands already in type ``t``."""
        if op in ("max", "min"):
            return f"_p{op}({x}, {y})"
        if op == "/" and t in INTEGER:
            return f"_cdiv({x}, {y})"
        if op == "%":
            return f"_crem({x}, {y})" if t in INTEGER else f"_np.fmod({x}, {y})"
        return f"({x} {op} {y})"
