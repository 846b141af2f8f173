"""C text for expressions: IR right-hand sides (typed as the reference does) and ISL AST expressions.

Right-hand sides are typed once by :func:`polymap.passes.frontend.types.typed`
(the language's rule, which the reference reads too); this printer only reads
those types and makes every conversion an explicit cast, so that the C
compiler computes in exactly the type the reference does::

    C[i, j] += A[i, k] * 0.5      (f32)   ->   C[...] += (A[...] * 0.5f);
    x = i / 2 + B[i]              (f64)   ->   x = ((double)(i / 2) + B[...]);

Subscripts and bounds use ISL's integer semantics (floor division,
non-negative remainder) through the prelude's ``polymap_floord`` and
``polymap_mod``.
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from polymap import ir
from polymap.errors import SemanticError
from polymap.islcheck import isl
from polymap.codegen.ast_build import expr_args, iterator_dim
from polymap.passes.frontend.types import INTEGER, Printed, TypedExpr, TypedPrinter

#: C type of each dtype, and of the weak types ("int": iterators, parameters,
#: integer literals as ``long``; "float": float literals as ``double``).
C_TYPES = {"f32": "float", "f64": "double", "i32": "int32_t", "i64": "int64_t",
           "int": "long", "float": "double"}
#: Suffix of the prelude's helpers per type (``polymap_max_f``...).
_SUFFIX = {"f32": "f", "f64": "d", "i32": "i32", "i64": "i64", "int": "l", "float": "d"}

C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while _Bool _Complex _Imaginary bool true false
int32_t int64_t min max floord free calloc malloc aligned_alloc abs sqrt exp log pow fabs fmod floor NULL
main omp""".split())

PRELUDE = """\
#include <stdint.h>
#include <math.h>
#include <stdlib.h>

#ifndef POLYMAP_PRELUDE
#define POLYMAP_PRELUDE
/* Every helper is prefixed polymap_, so that the file can be included next to other code.
   Loop bounds and subscripts use ISL's integer semantics: floor division and a non-negative remainder. */
static inline long polymap_min(long a, long b) { return a < b ? a : b; }
static inline long polymap_max(long a, long b) { return a > b ? a : b; }
static inline long polymap_floord(long n, long d) { long q = n / d; return (n % d != 0 && ((n < 0) != (d < 0))) ? q - 1 : q; }
static inline long polymap_mod(long n, long d) { long r = n % d; return r < 0 ? r + (d < 0 ? -d : d) : r; }
/* max/min of data as the reference computes them: the second operand wins only when strictly larger/smaller. */
#define POLYMAP_MINMAX(T, S) \\
  static inline T polymap_max_##S(T x, T y) { return y > x ? y : x; } \\
  static inline T polymap_min_##S(T x, T y) { return y < x ? y : x; } \\
  static inline T polymap_abs_##S(T x) { return x < 0 ? -x : x; }
POLYMAP_MINMAX(float, f)
POLYMAP_MINMAX(double, d)
POLYMAP_MINMAX(int32_t, i32)
POLYMAP_MINMAX(int64_t, i64)
POLYMAP_MINMAX(long, l)
#undef POLYMAP_MINMAX
#endif
"""


def c_name(name: str) -> str:
    """A kernel name as a C identifier that cannot clash with C, the prelude or AST iterators."""
    if name in C_KEYWORDS or iterator_dim(name) is not None or name.startswith("polymap_"):
        return f"{name}_"
    return name


def float_literal(value: float, to: str) -> str:
    """``0.5`` as a literal of type ``to`` (``0.5f`` for float when exactly representable)."""
    text = repr(float(value))
    if "inf" in text or "nan" in text:
        text = {"inf": "INFINITY", "-inf": "(-INFINITY)", "nan": "NAN"}[text]
        return f"(({C_TYPES[to]}){text})"
    if "." not in text and "e" not in text:
        text += ".0"
    if to == "f32":
        return f"{text}f" if float(np.float32(value)) == float(value) else f"((float){text})"
    if to in ("f64", "float"):
        return text
    return f"(({C_TYPES[to]}){text})"


def cast(t: Printed, to: str) -> str:
    """``t`` converted to type ``to`` (literals retyped rather than cast)."""
    if t.type == to:
        return t.text
    return f"(({C_TYPES[to]}){t.text})"


class ValuePrinter(TypedPrinter):
    """Prints right-hand sides and references; ``iterators`` maps loop names to C text."""

    def __init__(self, kernel: ir.Kernel, iterators: Mapping[str, str],
                 ref_text: Callable[[ir.Ref], str] | None,
                 hoist: Callable[[str, str], str] | None = None) -> None:
        self.kernel = kernel
        self.iterators = iterators
        self.ref_text = ref_text
        self.dtypes = {d.name: d.dtype for d in kernel.decls}
        # ``hoist(text, type)``: the name of a local computed once before the loops (see node)
        self.hoist = hoist
        self.fixed = invariant_scalars(kernel) if hoist is not None else frozenset()

    # ---- integer (index) expressions: ISL semantics
    def index(self, e: ir.Expr) -> str:
        match e:
            case ir.Const(value=v):
                return str(int(v))
            case ir.Var(name=n):
                return self.iterators.get(n, c_name(n))
            case ir.Neg(operand=a):
                return f"(-{self.index(a)})"
            case ir.BinOp(op="+" | "-" | "*", lhs=a, rhs=b):
                return f"({self.index(a)} {e.op} {self.index(b)})"
            case ir.BinOp(op="/", lhs=a, rhs=b):
                return f"polymap_floord({self.index(a)}, {self.index(b)})"
            case ir.BinOp(op="%", lhs=a, rhs=b):
                return f"polymap_mod({self.index(a)}, {self.index(b)})"
            case ir.Call(func="floor", args=(a,)):
                return self.index(a)
            case ir.Call(func="min" | "max", args=args):
                out = self.index(args[0])
                for x in args[1:]:
                    out = f"polymap_{e.func}({out}, {self.index(x)})"
                return out
        raise SemanticError("not an integer index expression", getattr(e, "loc", None))

    # ---- values: typed once by polymap.passes.frontend.types, printed here
    def leaf(self, t: TypedExpr) -> str:
        match t.expr:
            case ir.Const(value=int() as v):
                return str(v) if v >= 0 else f"({v})"
            case ir.Const(value=v):
                return float_literal(v, "float")
            case ir.Var(name=n):
                return self.iterators.get(n, c_name(n))
        return self.ref_text(t.expr)

    def node(self, t: TypedExpr, xs: list[str]) -> str:
        match t.op:
            case "neg":
                return f"(-{xs[0]})"
            case "compare":
                return f"({xs[0]} {t.expr.op} {xs[1]})"
            case "and" | "or":
                return "(" + (" && " if t.op == "and" else " || ").join(f"({x} != 0)" for x in xs) + ")"
            case "not":
                return f"(!({xs[0]}))"
            case "select":
                return f"(({xs[0]}) ? {xs[1]} : {xs[2]})"
            case "abs" | "floor" | "sqrt" | "exp" | "log" | "pow":
                text = self.function(t.op, xs, t.type)
                # a function of constants and input scalars is the same at every instance: computed
                # once, in the same type with the same conversions (the same value), before the loops.
                # Per instance, correlation's ``data[i, j] /= sqrt(float_n) * stddev[j]`` called sqrt
                # on every element (with errno, GCC neither hoists nor vectorises the call) and ran
                # its 1.7M updates one at a time: 3.6 ms per thread, 12% of the kernel's time
                if self.hoist is not None and t.type not in INTEGER and invariant(t, self.fixed):
                    return self.hoist(text, t.type)
                return text
        return self.operation(t.op, xs[0], xs[1], t.type)

    def operation(self, op: str, x: str, y: str, t: str) -> str:
        """``x OP y`` on two operands already in type ``t``."""
        if op in ("max", "min"):
            return f"polymap_{op}_{_SUFFIX[t]}({x}, {y})"
        if op == "%" and t not in INTEGER:
            return f"{'fmodf' if t == 'f32' else 'fmod'}({x}, {y})"
        return f"({x} {op} {y})"

    @staticmethod
    def function(func: str, xs: list[str], t: str) -> str:
        """A function of the language on operands already in type ``t``."""
        f32 = t == "f32"
        if func == "abs":
            return f"{'fabsf' if f32 else 'fabs'}({xs[0]})" if t not in INTEGER else f"polymap_abs_{_SUFFIX[t]}({xs[0]})"
        if func == "floor":
            return xs[0] if t in INTEGER else f"{'floorf' if f32 else 'floor'}({xs[0]})"
        return f"{func}{'f' if f32 else ''}({', '.join(xs)})"

    def convert(self, t: Printed, to: str) -> str:
        """``t`` in type ``to``; a literal is rewritten in that type instead of cast."""
        if t.type == to:
            return t.text
        if t.type == "float" and to in ("f32", "f64"):
            try:
                return float_literal(float(t.text), to)
            except ValueError:
                pass
        if t.type == "int" and to in ("f32", "f64") and t.text.isdigit():
            return float_literal(float(t.text), to)
        return cast(t, to)


def invariant_scalars(kernel: ir.Kernel) -> frozenset[str]:
    """The kernel's scalar arguments that no statement writes: the same value at every instance."""
    written = {s.stmt.target.tensor for s in kernel.statements()}
    return frozenset(d.name for d in kernel.decls
                     if d.is_scalar and d.role != "local" and d.name not in written)


def invariant(t: TypedExpr, fixed: frozenset[str]) -> bool:
    """Is ``t`` made of constants and the scalars ``fixed`` only (no iterator, parameter or array),
    with no integer operation (a division computed before the loops could trap where the program
    never evaluates it)?"""
    if t.args:
        return t.type not in INTEGER and all(invariant(a, fixed) for a in t.args)
    match t.expr:
        case ir.Const():
            return True
        case ir.Ref(tensor=name, indices=()):
            return name in fixed
    return False


# --------------------------------------------------------------------------- ISL AST expressions

_BINARY = {
    isl.ast_expr_op_type.add: "+", isl.ast_expr_op_type.sub: "-", isl.ast_expr_op_type.mul: "*",
    isl.ast_expr_op_type.div: "/", isl.ast_expr_op_type.pdiv_q: "/",
    isl.ast_expr_op_type.pdiv_r: "%", isl.ast_expr_op_type.zdiv_r: "%",
    isl.ast_expr_op_type.and_: "&&", isl.ast_expr_op_type.and_then: "&&",
    isl.ast_expr_op_type.or_: "||", isl.ast_expr_op_type.or_else: "||",
    isl.ast_expr_op_type.eq: "==", isl.ast_expr_op_type.le: "<=", isl.ast_expr_op_type.lt: "<",
    isl.ast_expr_op_type.ge: ">=", isl.ast_expr_op_type.gt: ">",
}


def ast_expr(e: isl.AstExpr, names: Mapping[str, str], *, top: bool = True) -> str:
    """C text of an ISL AST expression; ``names`` renames ids (parameters) to C names."""
    t = e.get_type()
    if t == isl.ast_expr_type.int:
        v = int(e.get_val().to_python())
        return str(v) if v >= 0 or top else f"({v})"
    if t == isl.ast_expr_type.id:
        n = e.get_id().get_name()
        return names.get(n, n)
    op = e.get_op_type()
    args = [ast_expr(a, names, top=False) for a in expr_args(e)]
    if op in _BINARY:
        text = f"{args[0]} {_BINARY[op]} {args[1]}"
        return text if top else f"({text})"
    if op == isl.ast_expr_op_type.minus:
        return f"-{args[0]}" if top else f"(-{args[0]})"
    if op in (isl.ast_expr_op_type.max, isl.ast_expr_op_type.min):
        f = "polymap_max" if op == isl.ast_expr_op_type.max else "polymap_min"
        out = args[0]
        for a in args[1:]:
            out = f"{f}({out}, {a})"
        return out
    if op == isl.ast_expr_op_type.fdiv_q:
        return f"polymap_floord({args[0]}, {args[1]})"
    if op in (isl.ast_expr_op_type.cond, isl.ast_expr_op_type.select):
        text = f"{args[0]} ? {args[1]} : {args[2]}"
        return text if top else f"({text})"
    raise SemanticError(f"unexpected ISL AST operation {op}")
