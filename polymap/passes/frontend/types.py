"""The language's typing rule, stated once: the type of every right-hand-side expression.

``dsl.md`` gives values C's usual arithmetic conversions, with *weak* operands:
iterators, parameters and integer literals are ``int`` and float literals are
``float``; a weak operand adopts the type of a tensor operand (``A[i] * 2``
stays ``f32``, ``A[i] * 0.5`` too) and two weak ones stay weak. The
reference execution (:mod:`polymap.reference`) computes in these types and the
code generators print them; all of them read the rules here.

:func:`typed` computes the types of a whole expression once, as a tree that
printers only read::

    A[i] * 0.5 + i     (A: f32)
      -> TypedExpr("+", f32, args=(TypedExpr("*", f32, args=(A[i]: f32, 0.5: float), to=(f32, f32)),
                                   i: int),
                   to=(f32, f32))

``to`` is the type each operand is converted to before the operation.
``min``/``max`` with several arguments fold left pairwise (``max(a, b, c)`` is
``max(max(a, b), c)``, each step in its own common type), as the reference does.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Mapping

from polymap import ir
from polymap.errors import SemanticError

#: Tensor types by C's conversion rank.
RANK = {"i32": 0, "i64": 1, "f32": 2, "f64": 3}
#: The weak types: iterators, parameters and integer literals; float literals.
WEAK = ("int", "float")
INTEGER = ("int", "i32", "i64")

#: Arity of each right-hand-side function: (least, most), most None = unbounded. ``select`` is
#: its own node (:class:`polymap.ir.Select`), with a condition and two values.
ARITY = {"sqrt": (1, 1), "exp": (1, 1), "log": (1, 1), "abs": (1, 1), "floor": (1, 1),
         "pow": (2, 2), "min": (2, None), "max": (2, None)}
#: The binary operators of values (``max``/``min`` are also the operators of ``max=``/``min=``).
BINARY = ("+", "-", "*", "/", "%", "max", "min")
#: ``t OP= v`` is ``t = t OP v``.
COMBINE = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "max=": "max", "min=": "min"}


def common_type(a: str, b: str) -> str:
    """The type of ``a OP b``: the higher rank of two tensor types; a weak operand adopts
    the other (an ``int`` adopts any; a ``float`` next to an integer tensor makes ``f64``);
    two weak ones stay weak (``float`` if either is)."""
    if a in RANK and b in RANK:
        return a if RANK[a] >= RANK[b] else b
    if a in RANK or b in RANK:
        strong, weak = (a, b) if a in RANK else (b, a)
        return strong if strong in ("f32", "f64") or weak == "int" else "f64"
    return "float" if "float" in (a, b) else "int"


def unary_float_type(t: str) -> str:
    """``sqrt exp log``: f32 stays f32 (``sqrtf``); anything else is double, weak stays weak."""
    return {"f32": "f32", "f64": "f64", "int": "float", "float": "float"}.get(t, "f64")


def pow_type(a: str, b: str) -> str:
    """C's ``pow`` takes and returns doubles unless an operand is a float32 tensor value."""
    t = common_type(a, b)
    if t in INTEGER:
        return "float" if t == "int" else "f64"
    return t


def check_arity(func: str, n: int, loc: ir.Loc | None = None) -> None:
    """A :class:`SemanticError` at ``loc`` unless ``func`` takes ``n`` arguments."""
    if func not in ARITY:
        known = ", ".join(sorted(ARITY)) + " and select"
        raise SemanticError(f"unknown function '{func}' (the functions are {known})", loc)
    lo, hi = ARITY[func]
    if n < lo or (hi is not None and n > hi):
        want = f"{lo}" if lo == hi else f"at least {lo}"
        raise SemanticError(f"{func} takes {want} argument{'s' if lo != 1 else ''}, not {n}", loc)


@dataclass(frozen=True)
class Printed:
    """An expression printed in some target language, with its type (what printers pass around)."""

    text: str
    type: str


@dataclass(frozen=True)
class TypedExpr:
    """An expression with its type and the types its operands are converted to.

    ``op`` names the operation: ``const``, ``var``, ``ref`` (leaves: ``expr`` is the
    node), ``neg``, a :data:`BINARY` operator, ``compare`` (``expr.op`` is the
    comparison), ``and``, ``or``, ``not``, ``select``, or a function of :data:`ARITY`
    other than ``min``/``max`` (which become the binary ``min``/``max``).
    """

    op: str
    expr: ir.Expr
    type: str
    args: tuple["TypedExpr", ...] = ()
    to: tuple[str, ...] = ()
    """The type ``args[k]`` is converted to before the operation (its own type: no conversion)."""


def typed(e: ir.Expr, dtypes: Mapping[str, str]) -> TypedExpr:
    """The types of ``e`` and of all its subexpressions; ``dtypes`` gives each tensor's type."""
    match e:
        case ir.Const(value=v):
            return TypedExpr("const", e, "int" if isinstance(v, int) else "float")
        case ir.Var():
            return TypedExpr("var", e, "int")
        case ir.Ref(tensor=name):
            return TypedExpr("ref", e, dtypes[name])
        case ir.Neg(operand=a):
            ta = typed(a, dtypes)
            return TypedExpr("neg", e, ta.type, (ta,), (ta.type,))
        case ir.BinOp(op=op, lhs=a, rhs=b):
            return binary(op, e, typed(a, dtypes), typed(b, dtypes))
        case ir.Compare(lhs=a, rhs=b):
            ta, tb = typed(a, dtypes), typed(b, dtypes)
            t = common_type(ta.type, tb.type)
            return TypedExpr("compare", e, "int", (ta, tb), (t, t))
        case ir.BoolOp(op=op, operands=xs):
            args = tuple(typed(x, dtypes) for x in xs)
            return TypedExpr(op, e, "int", args, tuple(a.type for a in args))
        case ir.Not(operand=a):
            ta = typed(a, dtypes)
            return TypedExpr("not", e, "int", (ta,), (ta.type,))
        case ir.Select(cond=c, if_true=a, if_false=b):
            tc, ta, tb = typed(c, dtypes), typed(a, dtypes), typed(b, dtypes)
            t = common_type(ta.type, tb.type)
            return TypedExpr("select", e, t, (tc, ta, tb), (tc.type, t, t))
        case ir.Call(func=func, args=xs):
            check_arity(func, len(xs), e.loc)
            return _call(func, e, tuple(typed(x, dtypes) for x in xs))
    raise SemanticError(f"{type(e).__name__} is not a right-hand-side expression", getattr(e, "loc", None))


def binary(op: str, e: ir.Expr, a: TypedExpr, b: TypedExpr) -> TypedExpr:
    """``a OP b`` for OP in :data:`BINARY`: both operands in their common type."""
    if op not in BINARY:
        raise SemanticError(f"unknown operator {op!r}", getattr(e, "loc", None))
    t = common_type(a.type, b.type)
    return TypedExpr(op, e, t, (a, b), (t, t))


def _call(func: str, e: ir.Call, args: tuple[TypedExpr, ...]) -> TypedExpr:
    if func in ("min", "max"):
        acc = args[0]
        for b in args[1:]:
            acc = binary(func, e, acc, b)
        return acc
    if func in ("abs", "floor"):
        (a,) = args
        return TypedExpr(func, e, a.type, args, (a.type,))
    if func in ("sqrt", "exp", "log"):
        t = unary_float_type(args[0].type)
        return TypedExpr(func, e, t, args, (t,))
    t = pow_type(args[0].type, args[1].type)
    return TypedExpr("pow", e, t, args, (t, t))


def print_typed(t: TypedExpr, *, leaf: Callable[[TypedExpr], str], node: Callable[[TypedExpr, list[str]], str],
                convert: Callable[[Printed, str], str]) -> Printed:
    """``t`` printed bottom-up by a printer that only reads the types: ``leaf`` prints a
    ``const``/``var``/``ref``; ``node`` prints an operation from its operands' texts, each
    already converted (by ``convert``) to the type the operation takes it in (``t.to``)."""
    if not t.args:
        return Printed(leaf(t), t.type)
    args = [print_typed(a, leaf=leaf, node=node, convert=convert) for a in t.args]
    return Printed(node(t, [convert(a, to) for a, to in zip(args, t.to)]), t.type)


class TypedPrinter(ABC):
    """A printer of right-hand sides in some language that only reads the types of :func:`typed`.

    A subclass says how to print leaves, operations and conversions; ``value``
    and ``arith`` follow. ``dtypes`` gives each tensor's type.
    """

    dtypes: Mapping[str, str]

    @abstractmethod
    def leaf(self, t: TypedExpr) -> str:
        """A ``const``, ``var`` or ``ref``."""

    @abstractmethod
    def node(self, t: TypedExpr, xs: list[str]) -> str:
        """An operation whose operands ``xs`` are already in the types ``t.to``."""

    @abstractmethod
    def convert(self, p: Printed, to: str) -> str:
        """``p`` converted to type ``to``."""

    @abstractmethod
    def operation(self, op: str, x: str, y: str, t: str) -> str:
        """``x OP y`` (OP in :data:`BINARY`) on two operands already in type ``t``."""

    def value(self, e: ir.Expr) -> Printed:
        """``e`` printed, computed in the type the typing rule gives it."""
        return print_typed(typed(e, self.dtypes), leaf=self.leaf, node=self.node, convert=self.convert)

    def arith(self, op: str, a: Printed, b: Printed) -> Printed:
        """``a OP b`` of two printed values, in their common type."""
        t = common_type(a.type, b.type)
        return Printed(self.operation(op, self.convert(a, t), self.convert(b, t), t), t)


def combine_type(target: str, value: str) -> str:
    """The type ``t OP= v`` computes in (``t = t OP v``): the common type of the target's dtype
    and the value's; the result is stored back in the target's dtype."""
    return common_type(target, value)
