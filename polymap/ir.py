"""The kernel IR: frozen, typed dataclasses, one source location on every node.

The parser (:mod:`polymap.grammar`) builds it; every later stage reads it and
none mutates it. Children are tuples so that nodes hash and compare by value.
Expressions are one small algebra used everywhere (subscripts, bounds,
conditions and right-hand sides); which of them must be (quasi-)affine is the
business of :mod:`polymap.passes.frontend.semantics` and :mod:`polymap.poly`.

Sketch of ``for i in 0..N { S: A[i] += B[i] * 2 }``::

    Loop(var="i", lower=(Const(0),), upper=(Var("N"),), step=1,
         body=(Assign(label="S", target=Ref("A", (Var("i"),)), op="+=",
                      value=BinOp("*", Ref("B", (Var("i"),)), Const(2))),))
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Union

# --------------------------------------------------------------------------- locations


@dataclass(frozen=True)
class SourceFile:
    """The text a program was read from; errors quote its lines."""

    name: str
    text: str = field(repr=False)

    def line(self, number: int) -> str:
        """The 1-based line ``number`` without its newline ('' when out of range)."""
        lines = self.text.splitlines()
        return lines[number - 1] if 1 <= number <= len(lines) else ""


@dataclass(frozen=True)
class Loc:
    """A span in a source file: 1-based line and column, end exclusive."""

    line: int
    col: int
    end_line: int
    end_col: int
    source: SourceFile | None = field(default=None, compare=False, repr=False, hash=False)

    @property
    def filename(self) -> str:
        return self.source.name if self.source is not None else "<input>"

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.col}"


#: Location for nodes made by passes rather than read from a file.
NOWHERE = Loc(0, 0, 0, 0)

# --------------------------------------------------------------------------- expressions

DTYPES = ("f32", "f64", "i32", "i64")
ROLES = ("in", "out", "inout", "local")
#: Assignment operators; for ``OP=`` the statement is a reduction in ``OP``.
ASSIGN_OPS = ("=", "+=", "-=", "*=", "/=", "max=", "min=")
#: Functions allowed on right-hand sides (``floor`` also in quasi-affine index expressions).
FUNCTIONS = ("sqrt", "exp", "log", "abs", "pow", "min", "max", "floor")
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")
ARITH_OPS = ("+", "-", "*", "/", "%")


@dataclass(frozen=True)
class Const:
    """An integer or floating literal."""

    value: int | float
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Var:
    """A loop iterator or a kernel parameter used as an integer value."""

    name: str
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Ref:
    """A tensor reference ``NAME[S1, ...]``; a scalar has no subscripts."""

    tensor: str
    indices: tuple["Expr", ...] = ()
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class BinOp:
    """``lhs OP rhs`` with OP in :data:`ARITH_OPS`."""

    op: str
    lhs: "Expr"
    rhs: "Expr"
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Neg:
    """Unary minus."""

    operand: "Expr"
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Call:
    """``func(args...)`` with func in :data:`FUNCTIONS` (``floor(e / c)`` included)."""

    func: str
    args: tuple["Expr", ...]
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Compare:
    """``lhs OP rhs`` with OP in :data:`COMPARE_OPS`; a boolean."""

    op: str
    lhs: "Expr"
    rhs: "Expr"
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class BoolOp:
    """``a and b and ...`` or ``a or b or ...``."""

    op: str  # "and" | "or"
    operands: tuple["Expr", ...]
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Not:
    """``not e``."""

    operand: "Expr"
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Select:
    """``select(cond, a, b)``: ``a`` where ``cond`` holds, else ``b``."""

    cond: "Expr"
    if_true: "Expr"
    if_false: "Expr"
    loc: Loc = NOWHERE


Expr = Union[Const, Var, Ref, BinOp, Neg, Call, Compare, BoolOp, Not, Select]

# --------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Assign:
    """``[label:] target op value``. ``label`` is always set (``S0``, ``S1``... when unlabelled)."""

    label: str
    target: Ref
    op: str
    value: Expr
    loc: Loc = NOWHERE
    explicit_label: bool = True

    @property
    def is_reduction(self) -> bool:
        """True for ``+= -= *= /= max= min=``: the statement accumulates into its target."""
        return self.op != "="

    @property
    def reduction_op(self) -> str | None:
        """``'+'``, ``'*'``, ``'max'`` or ``'min'`` for reductions (``-=``/``/=`` reduce in ``+``/``*``)."""
        return {"=": None, "+=": "+", "-=": "+", "*=": "*", "/=": "*", "max=": "max", "min=": "min"}[
            self.op
        ]


@dataclass(frozen=True)
class Loop:
    """``for var in max(lower..)..min(upper..) step step { body }`` (half-open)."""

    var: str
    lower: tuple[Expr, ...]  # the loop starts at the max of these
    upper: tuple[Expr, ...]  # and stops before the min of these
    step: int
    body: tuple["Node", ...]
    loc: Loc = NOWHERE
    #: Where the ``step`` expression was written (semantics reports a bad step there).
    step_loc: Loc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class If:
    """``if cond { then } else { orelse }``."""

    cond: Expr
    then: tuple["Node", ...]
    orelse: tuple["Node", ...] = ()
    loc: Loc = NOWHERE


Node = Union[Assign, Loop, If]

# --------------------------------------------------------------------------- kernels


@dataclass(frozen=True)
class Param:
    """A symbolic size, ``>= 1``, with an optional default."""

    name: str
    default: int | None = None
    loc: Loc = NOWHERE


@dataclass(frozen=True)
class Decl:
    """A tensor declaration; ``shape == ()`` declares a scalar."""

    name: str
    role: str  # one of ROLES
    shape: tuple[Expr, ...]
    dtype: str = "f32"
    loc: Loc = NOWHERE

    @property
    def is_scalar(self) -> bool:
        return not self.shape


@dataclass(frozen=True)
class Argument:
    """One argument of the C function a kernel was read from (:mod:`polymap.cfront`)."""

    name: str  # a tensor or a parameter of the kernel
    c_type: str  # its C type as written: "int", "double", ...
    by_value: bool  # an integer or scalar passed by value (arrays are pointers)


@dataclass(frozen=True)
class Kernel:
    """One ``kernel NAME(params) where ... { decls body }``."""

    name: str
    params: tuple[Param, ...]
    where: tuple[Expr, ...]  # affine conditions over parameters, all must hold
    decls: tuple[Decl, ...]
    body: tuple[Node, ...]
    loc: Loc = NOWHERE
    #: The original C function's arguments, in order, when the kernel was read
    #: from C and every tensor and parameter is one of them (None otherwise):
    #: the C backend then writes its function with this signature.
    signature: tuple[Argument, ...] | None = None
    cache: dict = field(default_factory=dict, init=False, compare=False, repr=False)
    """What later stages compute once per kernel (loop extents...), keyed by what they ask;
    ``dataclasses.replace`` gives the new kernel an empty one."""

    def decl(self, name: str) -> Decl | None:
        """The declaration of tensor ``name``, or None."""
        return next((d for d in self.decls if d.name == name), None)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def statements(self) -> tuple["StatementContext", ...]:
        """Every assignment with its enclosing loops and conditions, in textual order."""
        return tuple(walk_statements(self))

    def nests(self) -> tuple[Loop, ...]:
        """The top-level loops, in textual order (``nest: k`` in a mapping names ``nests()[k]``)."""
        return tuple(n for n in self.body if isinstance(n, Loop))


@dataclass(frozen=True)
class Program:
    """Everything read from one file."""

    kernels: tuple[Kernel, ...]
    source: SourceFile
    cache: dict = field(default_factory=dict, init=False, compare=False, repr=False)
    """What later stages attach to the program (the front end's warnings), keyed by name."""

    def kernel(self, name: str) -> Kernel | None:
        return next((k for k in self.kernels if k.name == name), None)


# --------------------------------------------------------------------------- walking


@dataclass(frozen=True)
class StatementContext:
    """An assignment seen from outside: what encloses it and where it stands.

    ``position`` is the index path from the kernel body down to the statement
    (``(0, 1, 0)``: first top-level node, its second child, its first child);
    comparing positions lexicographically gives textual order.
    ``conditions`` holds ``(If, branch)`` pairs, branch True for ``then``.
    ``nest`` is the index in :meth:`Kernel.nests` of the top-level loop that
    contains it, or None for a statement outside every loop.
    """

    stmt: Assign
    loops: tuple[Loop, ...]
    conditions: tuple[tuple[If, bool], ...]
    position: tuple[int, ...]
    nest: int | None

    @property
    def name(self) -> str:
        return self.stmt.label

    @property
    def iterators(self) -> tuple[str, ...]:
        return tuple(lp.var for lp in self.loops)


def walk_statements(kernel: Kernel) -> Iterator[StatementContext]:
    """Yield a :class:`StatementContext` for every assignment, in textual order."""
    nest_of_top: dict[int, int] = {}
    for k, node in enumerate(kernel.body):
        if isinstance(node, Loop):
            nest_of_top[k] = len(nest_of_top)

    def walk(nodes: tuple[Node, ...], loops: tuple[Loop, ...], conds: tuple[tuple[If, bool], ...],
             pos: tuple[int, ...], nest: int) -> Iterator[StatementContext]:
        for k, node in enumerate(nodes):
            here = pos + (k,)
            if not pos:
                nest = nest_of_top.get(k)
            if isinstance(node, Assign):
                yield StatementContext(node, loops, conds, here, nest)
            elif isinstance(node, Loop):
                yield from walk(node.body, loops + (node,), conds, here, nest)
            elif isinstance(node, If):
                yield from walk(node.then, loops, conds + ((node, True),), here + (0,), nest)
                yield from walk(node.orelse, loops, conds + ((node, False),), here + (1,), nest)

    yield from walk(kernel.body, (), (), (), None)


def variables(expr: Expr) -> set[str]:
    """The names of the variables ``expr`` reads (loop iterators and parameters alike)."""
    return {x.name for x in subexpressions(expr) if isinstance(x, Var)}


def subexpressions(expr: Expr) -> Iterator[Expr]:
    """``expr`` and every expression inside it, pre-order."""
    yield expr
    match expr:
        case Ref(indices=idx):
            for e in idx:
                yield from subexpressions(e)
        case BinOp(lhs=a, rhs=b) | Compare(lhs=a, rhs=b):
            yield from subexpressions(a)
            yield from subexpressions(b)
        case Neg(operand=a) | Not(operand=a):
            yield from subexpressions(a)
        case Call(args=args) | BoolOp(operands=args):
            for e in args:
                yield from subexpressions(e)
        case Select(cond=c, if_true=a, if_false=b):
            yield from subexpressions(c)
            yield from subexpressions(a)
            yield from subexpressions(b)


def reads_of(stmt: Assign) -> tuple[Ref, ...]:
    """The references an instance of ``stmt`` reads, right-hand side first.

    A compound assignment (``+=`` ...) also reads its target, last.
    """
    refs = tuple(e for e in subexpressions(stmt.value) if isinstance(e, Ref))
    return refs + ((stmt.target,) if stmt.is_reduction else ())
