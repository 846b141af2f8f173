"""Python/NumPy text for expressions: integer index expressions and typed right-hand sides.

Right-hand sides follow the value semantics of :mod:`polymap.reference`
(C's conversions with weak iterators and literals), made explicit with
NumPy scalar-type calls so that float32 stays float32 whether the operands
are scalars or whole arrays::

    C[i, j] += A[i, k] * 0.5     (f32)  ->  A[..] * _np.float32(0.5)
    x = i / 2 + B[i]             (f64)  ->  _np.float64(_cdiv(i, 2)) + B[..]

Index expressions use ISL's integer semantics, which are Python's ``//``
and ``%`` for positive divisors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from polymap import ir
from polymap.errors import SemanticError

NP_TYPES = {"f32": "_np.float32", "f64": "_np.float64", "i32": "_np.int32", "i64": "_np.int64",
            "float": "_np.float64", "int": "_np.int64"}
_RANK = {"i32": 0, "i64": 1, "f32": 2, "f64": 3}
INTEGER = ("int", "i32", "i64")

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


def common_type(a: str, b: str) -> str:
    """The reference's type of ``a OP b`` (weak operands adopt the strong one)."""
    if a in _RANK and b in _RANK:
        return a if _RANK[a] >= _RANK[b] else b
    if a in _RANK or b in _RANK:
        strong, weak = (a, b) if a in _RANK else (b, a)
        return strong if strong in ("f32", "f64") or weak == "int" else "f64"
    return "float" if "float" in (a, b) else "int"


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


@dataclass(frozen=True)
class Typed:
    """Python text and its reference type."""

    text: str
    type: str


class ValuePrinter:
    """Typed right-hand sides; ``ref`` prints a tensor reference, ``var`` an integer variable."""

    def __init__(self, dtypes: dict[str, str], ref: Callable[[ir.Ref], str], var: Callable[[str], str]):
        self.dtypes = dtypes
        self.ref = ref
        self.var = var

    def convert(self, t: Typed, to: str) -> str:
        if t.type == to or (t.type in INTEGER and to == "int"):
            return t.text
        return f"{NP_TYPES[to]}({t.text})"

    def value(self, e: ir.Expr) -> Typed:
        match e:
            case ir.Const(value=v) if isinstance(v, int):
                return Typed(str(v) if v >= 0 else f"({v})", "int")
            case ir.Const(value=v):
                return Typed(f"({float(v)!r})" if float(v) == float(v) and abs(float(v)) != float("inf")
                             else f"float({str(float(v))!r})", "float")
            case ir.Var(name=n):
                return Typed(self.var(n), "int")
            case ir.Ref(tensor=name):
                return Typed(self.ref(e), self.dtypes[name])
            case ir.Neg(operand=a):
                ta = self.value(a)
                return Typed(f"(-{ta.text})", ta.type)
            case ir.BinOp(op=op, lhs=a, rhs=b):
                return self.arith(op, self.value(a), self.value(b))
            case ir.Compare(op=op, lhs=a, rhs=b):
                ta, tb = self.value(a), self.value(b)
                t = common_type(ta.type, tb.type)
                return Typed(f"_np.int64({self.convert(ta, t)} {op} {self.convert(tb, t)})", "int")
            case ir.BoolOp(op=op, operands=args):
                f = "_np.logical_and" if op == "and" else "_np.logical_or"
                out = f"({self.value(args[0]).text} != 0)"
                for x in args[1:]:
                    out = f"{f}({out}, {self.value(x).text} != 0)"
                return Typed(f"_np.int64({out})", "int")
            case ir.Not(operand=a):
                return Typed(f"_np.int64({self.value(a).text} == 0)", "int")
            case ir.Select(cond=c, if_true=a, if_false=b):
                tc, ta, tb = self.value(c), self.value(a), self.value(b)
                t = common_type(ta.type, tb.type)
                return Typed(f"_np.where({tc.text} != 0, {self.convert(ta, t)}, {self.convert(tb, t)})", t)
            case ir.Call(func=func, args=args):
                return self.call(func, tuple(self.value(x) for x in args), e)
        raise SemanticError(f"cannot print {type(e).__name__} as NumPy", getattr(e, "loc", None))

    def arith(self, op: str, a: Typed, b: Typed) -> Typed:
        t = common_type(a.type, b.type)
        x, y = self.convert(a, t), self.convert(b, t)
        if op in ("max", "min"):
            return Typed(f"_p{op}({x}, {y})", t)
        if op == "/" and t in INTEGER:
            return Typed(f"_cdiv({x}, {y})", t)
        if op == "%":
            return Typed(f"_crem({x}, {y})" if t in INTEGER else f"_np.fmod({x}, {y})", t)
        return Typed(f"({x} {op} {y})", t)

    def call(self, func: str, args: tuple[Typed, ...], e: ir.Call) -> Typed:
        if func in ("min", "max"):
            acc = args[0]
            for b in args[1:]:
                acc = self.arith(func, acc, b)
            return acc
        if func == "abs" and len(args) == 1:
            return Typed(f"_np.abs({args[0].text})", args[0].type)
        if func == "floor" and len(args) == 1:
            a = args[0]
            return a if a.type in INTEGER else Typed(f"_np.floor({a.text})", a.type)
        if func in ("sqrt", "exp", "log") and len(args) == 1:
            a = args[0]
            t = {"f32": "f32", "f64": "f64", "int": "float", "float": "float"}.get(a.type, "f64")
            return Typed(f"_np.{func}({self.convert(a, t)})", t)
        if func == "pow" and len(args) == 2:
            a, b = args
            t = common_type(a.type, b.type)
            if t in INTEGER:
                t = "float" if t == "int" else "f64"
            return Typed(f"_np.power({self.convert(a, t)}, {self.convert(b, t)})", t)
        raise SemanticError(f"'{func}' cannot take {len(args)} argument(s)", e.loc)
