"""The statements of a ``#pragma scop`` region, lowered onto the kernel IR.

What is inside the language: ``for`` loops whose bounds are affine in outer
iterators and integer arguments (``<``/``<=`` upward with ``++``/``+= c``,
``>=``/``>`` downward with ``--``/``-= c``), ``if``/``else`` on affine
conditions, and assignments (``= += -= *= /=``) to array elements or scalars
whose right-hand sides use ``+ - * / %``, comparisons, ``?:``, the math
functions of the language (``sqrt exp log fabs pow floor fmin fmax`` and
their ``f`` forms) and casts to a floating type. Anything else (pointer
arithmetic, calls in subscripts, ``while``, ``break``, declarations) is
a located error::

    for (i = 0; i < n; i++)             for i in 0..n {
      for (j = 0; j <= i; j++)     ->     for j in 0..i + 1 {
        A[i][j] *= beta;                    S0: A[i, j] *= beta
                                          } }

A downward loop ``for (i = n-1; i >= 0; i--)`` becomes ``for i_r in
0..n`` with ``i`` replaced by ``n - 1 - i_r`` in its body (the language's
loops run upward).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from pycparser import c_ast

from polymap import ir
from polymap.errors import Diagnostic
from polymap.cfront.affine import affine
from polymap.cfront.locate import Sources

#: C math functions -> the language's functions.
FUNCTIONS = {"sqrt": "sqrt", "sqrtf": "sqrt", "exp": "exp", "expf": "exp", "log": "log",
             "logf": "log", "fabs": "abs", "fabsf": "abs", "abs": "abs", "pow": "pow",
             "powf": "pow", "floor": "floor", "floorf": "floor", "fmax": "max", "fmaxf": "max",
             "fmin": "min", "fminf": "min"}
_ARITH = {"+", "-", "*", "/", "%"}
_COMPARE = {"<", "<=", ">", ">=", "==", "!="}
_ASSIGN = {"=", "+=", "-=", "*=", "/="}
_FLOAT_TYPES = {"double", "float"}
_INT_TYPES = {"int", "long", "short", "char", "unsigned", "signed"}


class Unsupported(Exception):
    """Something outside the language, with its diagnostic."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


@dataclass
class Names:
    """What each name of the scop is: iterator, parameter or tensor (with its rank)."""

    params: set[str]
    tensors: dict[str, int]  # name -> number of dimensions (0: scalar)
    iterators: set[str] = field(default_factory=set)


@dataclass
class Lowerer:
    """Lowers one scop's statements; ``statements`` counts them for ``S0, S1, ...``."""

    sources: Sources
    names: Names
    statements: int = 0

    def fail(self, message: str, node: c_ast.Node) -> Unsupported:
        return Unsupported(self.sources.error(message, node))

    # ------------------------------------------------------------------ statements
    def block(self, items: list[c_ast.Node], env: dict[str, ir.Expr]) -> tuple[ir.Node, ...]:
        out: list[ir.Node] = []
        for item in items:
            out.extend(self.statement(item, env))
        return tuple(out)

    def statement(self, node: c_ast.Node, env: dict[str, ir.Expr], label: str | None = None) -> tuple[ir.Node, ...]:
        match node:
            case c_ast.Compound():
                return self.block(node.block_items or [], env)
            case c_ast.EmptyStatement() | c_ast.Pragma():
                return ()
            case c_ast.Label():
                return self.statement(node.stmt, env, label=node.name)
            case c_ast.For():
                return (self.for_loop(node, env),)
            case c_ast.If():
                cond = self.condition(node.cond, env)
                then = self.statement(node.iftrue, env)
                orelse = self.statement(node.iffalse, env) if node.iffalse is not None else ()
                return (ir.If(cond, then, orelse, self.sources.loc(node)),)
            case c_ast.Assignment():
                return (self.assignment(node, env, label),)
            case c_ast.While() | c_ast.DoWhile():
                raise self.fail("a 'while' loop is outside the language: only 'for' loops with affine "
                                "bounds can be modelled", node)
            case c_ast.Decl() | c_ast.DeclList():
                raise self.fail("a declaration inside the scop is outside the language: declare "
                                "the variable before '#pragma scop'", node)
            case c_ast.UnaryOp(op="p++" | "++" | "p--" | "--"):
                raise self.fail("an increment outside a 'for' header is outside the language: "
                                "write it as an assignment", node)
            case c_ast.FuncCall():
                raise self.fail("a function call as a statement is outside the language", node)
        kind = type(node).__name__.lower()
        raise self.fail(f"a '{kind}' statement is outside the language", node)

    def assignment(self, node: c_ast.Assignment, env: dict[str, ir.Expr], label: str | None) -> ir.Assign:
        if node.op not in _ASSIGN:
            raise self.fail(f"the assignment '{node.op}' is outside the language (= += -= *= /=)", node)
        if isinstance(node.rvalue, c_ast.Assignment):
            raise self.fail("a chained assignment is outside the language: write one assignment "
                            "per statement", node.rvalue)
        target = self.value(node.lvalue, env)
        if not isinstance(target, ir.Ref):
            raise self.fail("the left-hand side must be an array element or a scalar variable", node.lvalue)
        value = self.value(node.rvalue, env)
        name = label if label is not None else f"S{self.statements}"
        self.statements += 1
        return ir.Assign(name, target, node.op, value, self.sources.loc(node), explicit_label=label is not None)

    # ------------------------------------------------------------------ loops
    def for_loop(self, node: c_ast.For, env: dict[str, ir.Expr]) -> ir.Loop:
        var, start = self._init(node)
        if node.cond is None or node.next is None:
            raise self.fail("a 'for' loop needs a condition and an increment", node)
        step = self._step(node.next, var)
        inner = {k: v for k, v in env.items() if k != var}
        start_e = affine(self.index(start, inner))
        bounds = tuple(affine(b) for b in self._bounds(node.cond, var, inner, upward=step > 0))
        loc = self.sources.loc(node)
        if step > 0:
            body = self.statement(node.stmt, inner)
            return ir.Loop(var, (start_e,), bounds, step, body, loc)
        # downward: var = start - |step| * r for r in 0 .. floor((start - low) / |step|) + 1
        lows = bounds
        r = self._fresh(f"{var}_r")
        self.names.iterators.add(r)
        down = -step
        shifted = ir.BinOp("*", ir.Const(down), ir.Var(r)) if down != 1 else ir.Var(r)
        inner[var] = affine(ir.BinOp("-", start_e, shifted))
        trips = []
        for low in lows:
            span = ir.BinOp("-", start_e, low)
            span = ir.Call("floor", (ir.BinOp("/", span, ir.Const(down)),)) if down != 1 else span
            trips.append(affine(ir.BinOp("+", span, ir.Const(1))))
        body = self.statement(node.stmt, inner)
        return ir.Loop(r, (ir.Const(0),), tuple(trips), 1, body, loc)

    def _fresh(self, name: str) -> str:
        taken = self.names.params | set(self.names.tensors) | self.names.iterators
        while name in taken:
            name += "_"
        return name

    def _init(self, node: c_ast.For) -> tuple[str, c_ast.Node]:
        init = node.init
        if isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and init.decls[0].init is not None:
            return init.decls[0].name, init.decls[0].init
        if (isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID)):
            return init.lvalue.name, init.rvalue
        raise self.fail("a 'for' loop must start with 'i = LOWER' (one iterator)", init or node)

    def _step(self, nxt: c_ast.Node, var: str) -> int:
        match nxt:
            case c_ast.UnaryOp(op="p++" | "++", expr=c_ast.ID(name=n)) if n == var:
                return 1
            case c_ast.UnaryOp(op="p--" | "--", expr=c_ast.ID(name=n)) if n == var:
                return -1
            case c_ast.Assignment(op="+=" | "-=", lvalue=c_ast.ID(name=n), rvalue=c_ast.Constant(type="int")) \
                    if n == var and _int(nxt.rvalue.value) > 0:
                return _int(nxt.rvalue.value) * (1 if nxt.op == "+=" else -1)
        raise self.fail(f"the increment of '{var}' must be {var}++, {var}--, {var} += C or "
                        f"{var} -= C with a positive constant C", nxt)

    def _bounds(self, cond: c_ast.Node, var: str, env: dict[str, ir.Expr], *, upward: bool) -> tuple[ir.Expr, ...]:
        """Upward: the exclusive upper bounds; downward: the inclusive lower bounds."""
        if isinstance(cond, c_ast.BinaryOp) and cond.op == "&&":
            return self._bounds(cond.left, var, env, upward=upward) + self._bounds(cond.right, var, env, upward=upward)
        if not isinstance(cond, c_ast.BinaryOp) or cond.op not in ("<", "<=", ">", ">="):
            raise self.fail(f"the condition of a 'for' loop must compare '{var}' with an affine bound", cond)
        op, left, right = cond.op, cond.left, cond.right
        if isinstance(right, c_ast.ID) and right.name == var and not _mentions(left, var):
            op, left, right = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op], right, left
        if not (isinstance(left, c_ast.ID) and left.name == var) or _mentions(right, var):
            raise self.fail(f"the condition of a 'for' loop must compare '{var}' with a bound "
                            f"that does not use '{var}'", cond)
        bound = self.index(right, env)
        if upward and op in ("<", "<="):
            return (bound if op == "<" else ir.BinOp("+", bound, ir.Const(1)),)
        if not upward and op in (">", ">="):
            return (bound if op == ">=" else ir.BinOp("+", bound, ir.Const(1)),)
        direction = "up (++)" if upward else "down (--)"
        raise self.fail(f"this loop counts {direction} but its condition bounds '{var}' on the other side", cond)

    # ------------------------------------------------------------------ expressions
    def condition(self, node: c_ast.Node, env: dict[str, ir.Expr]) -> ir.Expr:
        return self.value(node, env)

    def index(self, node: c_ast.Node, env: dict[str, ir.Expr]) -> ir.Expr:
        """A subscript or a bound: no calls, no tensors (semantics checks affinity)."""
        for sub in _walk(node):
            if isinstance(sub, c_ast.FuncCall):
                raise self.fail("a function call in a subscript or a bound is outside the language", sub)
        return self.value(node, env)

    def value(self, node: c_ast.Node, env: dict[str, ir.Expr]) -> ir.Expr:
        loc = self.sources.loc(node)
        match node:
            case c_ast.Constant():
                return ir.Const(_constant(node, self), loc)
            case c_ast.ID(name=n):
                if n in env:
                    return env[n]
                if n in self.names.iterators or n in self.names.params:
                    return ir.Var(n, loc)
                if self.names.tensors.get(n) == 0:
                    return ir.Ref(n, (), loc)
                if n in self.names.tensors:
                    raise self.fail(f"the array '{n}' used as a value (pointer arithmetic) is outside "
                                    f"the language: index every dimension", node)
                raise self.fail(f"'{n}' is not an argument, a variable of the function or a loop iterator", node)
            case c_ast.ArrayRef():
                return self._array_ref(node, env)
            case c_ast.UnaryOp(op="-"):
                return ir.Neg(self.value(node.expr, env), loc)
            case c_ast.UnaryOp(op="+"):
                return self.value(node.expr, env)
            case c_ast.UnaryOp(op="!"):
                return ir.Not(self.value(node.expr, env), loc)
            case c_ast.UnaryOp(op="*" | "&"):
                raise self.fail("pointer dereference and address-of are outside the language "
                                "(pointer arithmetic): use array subscripts", node)
            case c_ast.BinaryOp(op=op) if op in _ARITH:
                return ir.BinOp(op, self.value(node.left, env), self.value(node.right, env), loc)
            case c_ast.BinaryOp(op=op) if op in _COMPARE:
                return ir.Compare(op, self.value(node.left, env), self.value(node.right, env), loc)
            case c_ast.BinaryOp(op="&&" | "||"):
                op = "and" if node.op == "&&" else "or"
                return ir.BoolOp(op, (self.value(node.left, env), self.value(node.right, env)), loc)
            case c_ast.TernaryOp():
                return ir.Select(self.value(node.cond, env), self.value(node.iftrue, env),
                                 self.value(node.iffalse, env), loc)
            case c_ast.FuncCall():
                return self._call(node, env)
            case c_ast.Cast():
                return self._cast(node, env)
        raise self.fail(f"this expression ({type(node).__name__}) is outside the language", node)

    def _array_ref(self, node: c_ast.ArrayRef, env: dict[str, ir.Expr]) -> ir.Ref:
        subs: list[c_ast.Node] = []
        base: c_ast.Node = node
        while isinstance(base, c_ast.ArrayRef):
            subs.append(base.subscript)
            base = base.name
        if not isinstance(base, c_ast.ID) or base.name not in self.names.tensors:
            raise self.fail("only arrays of the function can be subscripted (no pointer arithmetic)", base)
        indices = tuple(self.index(s, env) for s in reversed(subs))
        return ir.Ref(base.name, indices, self.sources.loc(node))

    def _call(self, node: c_ast.FuncCall, env: dict[str, ir.Expr]) -> ir.Expr:
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        if name not in FUNCTIONS:
            raise self.fail(f"a call to '{name or '?'}' is outside the language (math functions only: "
                            f"{', '.join(sorted(set(FUNCTIONS)))})", node)
        args = tuple(self.value(a, env) for a in (node.args.exprs if node.args else []))
        return ir.Call(FUNCTIONS[name], args, self.sources.loc(node))

    def _cast(self, node: c_ast.Cast, env: dict[str, ir.Expr]) -> ir.Expr:
        inner = self.value(node.expr, env)
        names = set(getattr(getattr(node.to_type.type, "type", None), "names", []) or [])
        if names & _FLOAT_TYPES:
            # the language converts integers where they meet a floating value: 1.0 * e is (double) e
            return ir.BinOp("*", ir.Const(1.0), inner, self.sources.loc(node))
        if names and names <= _INT_TYPES and not any(isinstance(e, ir.Ref) for e in ir.subexpressions(inner)):
            return inner
        raise self.fail("this cast is outside the language (casts to double or float, or of "
                        "integer expressions to an integer type, only)", node)


def _walk(node: c_ast.Node) -> Iterator[c_ast.Node]:
    yield node
    for _, child in node.children():
        yield from _walk(child)


def _mentions(node: c_ast.Node, name: str) -> bool:
    return any(isinstance(n, c_ast.ID) and n.name == name for n in _walk(node))


def _int(text: str) -> int:
    t = text.rstrip("uUlL")
    return int(t, 0) if not (len(t) > 1 and t[0] == "0" and t[1:].isdigit()) else int(t, 8)


def _constant(node: c_ast.Constant, lowerer: Lowerer) -> int | float:
    if node.type in ("int", "long int", "unsigned int", "long long int", "unsigned long int"):
        return _int(node.value)
    if node.type in ("double", "float", "long double"):
        return float(node.value.rstrip("fFlL"))
    raise lowerer.fail(f"a {node.type} constant is outside the language", node)
