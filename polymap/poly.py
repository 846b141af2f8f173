"""The only bridge from the IR to ISL: the polyhedral model of a kernel.

For every statement: its iteration domain, its read and write access
relations (one per reference, domain constraints included) and its place in
the original schedule, a map into one time space shared by the kernel's
statements. Everything stays symbolic in the parameters, under the kernel's
context (parameters ``>= 1`` plus ``where``).

``for i in 0..N { for j in 0..i { S: A[i, j] = B[j] } }`` becomes::

    domain   [N] -> { S[i, j] : 0 <= i < N and 0 <= j < i }
    schedule [N] -> { S[i, j] -> [0, i, 0, j, 0] }
    write    [N] -> { S[i, j] -> A[i, j] : 0 <= i < N and 0 <= j < i }
    read     [N] -> { S[i, j] -> B[j] : 0 <= i < N and 0 <= j < i }

The schedule is the classic 2d+1 form: loop values interleaved with the
textual rank of each item within its loop body, padded with zeros to the
deepest nest. Expressions become ISL text (``floor(e/c)``, ``e mod c``,
``min``/``max``) and ISL parses them; the semantic checks have already made
sure they are quasi-affine.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterable, Iterator, Mapping, TypeVar, Union

from polymap import ir
from polymap.errors import AnalysisError, Diagnostic
from polymap.evaluate import eval_int
from polymap.islcheck import isl

# ISL reserves these words; a name that collides gets a suffix inside ISL text only.
_ISL_WORDS = {"min", "max", "floor", "ceil", "mod", "exists", "and", "or", "not", "implies",
              "true", "false", "infty", "NaN", "floord", "domain", "range", "rat"}


def isl_name(name: str) -> str:
    """The identifier used for ``name`` inside ISL text."""
    return f"{name}_" if name in _ISL_WORDS else name


# --------------------------------------------------------------------------- expressions


def aff_text(e: ir.Expr) -> str:
    """ISL text of a quasi-affine expression (``floor(i / 2) + 1`` -> ``(floor((i)/2) + 1)``).

    A part without names is written as its value: ISL multiplies only by a
    bare literal (``-3 * H`` parses, ``(-3) * H`` and ``(2 + 1) * H`` are
    syntax errors), and the language allows any constant factor (``-0*H``).
    """
    folded = _constant_value(e)
    if folded is not None:
        return str(folded)
    match e:
        case ir.Const(value=v):
            return str(int(v))
        case ir.Var(name=n):
            return isl_name(n)
        case ir.Neg(operand=a):
            return f"(-{aff_text(a)})"
        case ir.BinOp(op="+" | "-" | "*", lhs=a, rhs=b):
            return f"({aff_text(a)} {e.op} {aff_text(b)})"
        case ir.BinOp(op="%", lhs=a, rhs=b):
            return f"({aff_text(a)} mod {aff_text(b)})"
        case ir.BinOp(op="/", lhs=a, rhs=b):
            return f"floor(({aff_text(a)})/{aff_text(b)})"
        case ir.Call(func="floor", args=(a,)):
            return aff_text(a)  # the "/" inside already floors
        case ir.Call(func="min" | "max", args=args):
            return _fold(e.func, [aff_text(a) for a in args])
    raise AnalysisError(Diagnostic("not a quasi-affine expression", getattr(e, "loc", None)))


def _constant_value(e: ir.Expr) -> int | None:
    """The value of an integer expression without names (``-0``, ``2 + 1``), else None."""
    parts = list(ir.subexpressions(e))
    if not all(isinstance(x, (ir.Const, ir.Neg, ir.BinOp)) and not (isinstance(x, ir.Const)
               and not isinstance(x.value, int)) for x in parts):
        return None
    if any(isinstance(x, ir.BinOp) and x.op not in ("+", "-", "*") for x in parts):
        return None  # floor division and modulo keep their own ISL forms (positive literal divisors)
    return eval_int(e, {})


def _fold(func: str, parts: list[str]) -> str:
    out = parts[0]
    for p in parts[1:]:
        out = f"{func}({out}, {p})"
    return out


_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def cond_text(e: ir.Expr, *, negate: bool = False) -> str:
    """ISL text of an affine condition; ``negate`` pushes a ``not`` down (De Morgan)."""
    match e:
        case ir.Compare(op=op, lhs=a, rhs=b):
            op = _NEGATE[op] if negate else op
            x, y = aff_text(a), aff_text(b)
            if op == "!=":
                return f"({x} < {y} or {x} > {y})"
            return f"({x} {'=' if op == '==' else op} {y})"
        case ir.BoolOp(op=op, operands=args):
            joiner = {"and": " or ", "or": " and "}[op] if negate else f" {op} "
            return "(" + joiner.join(cond_text(a, negate=negate) for a in args) + ")"
        case ir.Not(operand=a):
            return cond_text(a, negate=not negate)
    raise AnalysisError(Diagnostic("not an affine condition", getattr(e, "loc", None)))


# --------------------------------------------------------------------------- the model


#: Any ISL set or map, union or not (what parameters can be fixed in and points counted of).
IslObject = Union[isl.Set, isl.Map, isl.UnionSet, isl.UnionMap, isl.BasicSet, isl.BasicMap]


@dataclass(frozen=True)
class Access:
    """One reference of one statement: ``relation`` maps its instances to elements."""

    tensor: str
    kind: str  # "read" | "write"
    relation: isl.Map
    ref: ir.Ref
    tag: str  # unique per statement and reference: "acc_r0", "acc_w0"


@dataclass(frozen=True)
class StatementModel:
    """A statement's domain, schedule and accesses."""

    context: ir.StatementContext
    domain: isl.Set
    schedule: isl.Map
    accesses: tuple[Access, ...]

    @property
    def name(self) -> str:
        return self.context.name

    @property
    def loops(self) -> tuple[str, ...]:
        return self.context.iterators

    @property
    def stmt(self) -> ir.Assign:
        return self.context.stmt

    @property
    def reads(self) -> tuple[Access, ...]:
        return tuple(a for a in self.accesses if a.kind == "read")

    @property
    def writes(self) -> tuple[Access, ...]:
        return tuple(a for a in self.accesses if a.kind == "write")


@dataclass(frozen=True)
class KernelModel:
    """The polyhedral model of one kernel."""

    kernel: ir.Kernel
    params: tuple[str, ...]
    context: isl.Set
    statements: tuple[StatementModel, ...]
    time_dims: int
    cache: dict = field(default_factory=dict, init=False, compare=False, repr=False)
    """Analyses computed once per model (memory-based dependences, dataflow, legality of a
    mapping, fast-count evaluators), keyed by the question: see :func:`cached`."""

    def statement(self, name: str) -> StatementModel:
        return next(s for s in self.statements if s.name == name)

    def nest_statements(self, nest: int) -> tuple[StatementModel, ...]:
        """The statements inside top-level loop ``nest``."""
        return tuple(s for s in self.statements if s.context.nest == nest)

    @cached_property
    def domains(self) -> isl.UnionSet:
        return _union_set([s.domain for s in self.statements], self.context)

    @cached_property
    def schedule(self) -> isl.UnionMap:
        return _union_map([s.schedule for s in self.statements], self.context)

    @cached_property
    def reads(self) -> isl.UnionMap:
        return _union_map([a.relation for s in self.statements for a in s.reads], self.context)

    @cached_property
    def writes(self) -> isl.UnionMap:
        return _union_map([a.relation for s in self.statements for a in s.writes], self.context)


def _union_set(sets: Iterable[isl.Set], context: isl.Set) -> isl.UnionSet:
    out = isl.UnionSet.empty(context.get_space())
    for s in sets:
        out = out.union(isl.UnionSet.from_set(s))
    return out


def _union_map(maps: Iterable[isl.Map], context: isl.Set) -> isl.UnionMap:
    out = isl.UnionMap.empty(context.get_space())
    for m in maps:
        out = out.union(isl.UnionMap.from_map(m))
    return out


def _params_prefix(kernel: ir.Kernel) -> str:
    return f"[{', '.join(isl_name(p) for p in kernel.param_names)}]"


def context_of(kernel: ir.Kernel) -> isl.Set:
    """``[M, N] -> { : M >= 1 and N >= 1 and <where> }``."""
    conds = [f"{isl_name(p)} >= 1" for p in kernel.param_names]
    conds += [cond_text(w) for w in kernel.where]
    body = " and ".join(conds) if conds else "true"
    return isl.Set(f"{_params_prefix(kernel)} -> {{ : {body} }}")


def _loop_constraints(loop: ir.Loop) -> list[str]:
    v = isl_name(loop.var)
    out = [f"{v} >= {aff_text(lo)}" for lo in loop.lower]
    out += [f"{v} < {aff_text(hi)}" for hi in loop.upper]
    if loop.step != 1:
        start = _fold("max", [aff_text(lo) for lo in loop.lower])
        out.append(f"({v} - {start}) mod {loop.step} = 0")
    return out


def _domain_text(kernel: ir.Kernel, ctx: ir.StatementContext) -> tuple[str, str]:
    """(tuple text ``S[i, j]``, constraint text) of a statement's domain."""
    tup = f"{ctx.name}[{', '.join(isl_name(v) for v in ctx.iterators)}]"
    conds = [c for lp in ctx.loops for c in _loop_constraints(lp)]
    conds += [cond_text(iff.cond, negate=not branch) for iff, branch in ctx.conditions]
    return tup, " and ".join(conds) if conds else "true"


def _betas(kernel: ir.Kernel) -> dict[int, tuple[int, ...]]:
    """For each statement (by id), its textual rank within every enclosing loop body.

    Items of a loop body are its statements and loops, counted in textual
    order, looking through ``if`` (which opens no loop).
    """
    out: dict[int, tuple[int, ...]] = {}

    def items(nodes: Iterable[ir.Node]) -> Iterator[ir.Node]:
        for n in nodes:
            if isinstance(n, ir.If):
                yield from items(n.then)
                yield from items(n.orelse)
            else:
                yield n

    def walk(nodes: Iterable[ir.Node], prefix: tuple[int, ...]) -> None:
        for rank, n in enumerate(items(nodes)):
            if isinstance(n, ir.Assign):
                out[id(n)] = prefix + (rank,)
            else:
                walk(n.body, prefix + (rank,))

    walk(kernel.body, ())
    return out


def textual_rank(kernel: ir.Kernel, stmt: ir.Assign) -> tuple[int, ...]:
    """The statement's rank within every enclosing loop body (the constants of its original schedule).

    Read from the text, so that it exists also for a statement that runs no
    instance (``for i in N..0``), whose schedule map is empty.
    """
    return _betas(kernel)[id(stmt)]


def build_model(kernel: ir.Kernel) -> KernelModel:
    """The polyhedral model of a (semantically checked) kernel."""
    contexts = kernel.statements()
    depth = max((len(c.loops) for c in contexts), default=0)
    betas = _betas(kernel)
    context = context_of(kernel)
    prefix = _params_prefix(kernel)
    statements = []
    for ctx in contexts:
        tup, cond = _domain_text(kernel, ctx)
        try:
            domain = isl.Set(f"{prefix} -> {{ {tup} : {cond} }}").intersect_params(context)
        except isl.Error as exc:
            raise AnalysisError(Diagnostic(f"ISL cannot model this statement's domain: {exc}", ctx.stmt.loc)) from None
        beta = betas[id(ctx.stmt)]
        time = []
        for k in range(depth + 1):
            time.append(str(beta[k]) if k < len(beta) else "0")
            if k < depth:
                time.append(isl_name(ctx.iterators[k]) if k < len(ctx.iterators) else "0")
        schedule = isl.Map(f"{prefix} -> {{ {tup} -> [{', '.join(time)}] }}").intersect_domain(domain)
        accesses = []
        for kind, refs in (("read", ir.reads_of(ctx.stmt)), ("write", (ctx.stmt.target,))):
            for k, ref in enumerate(refs):
                idx = ", ".join(aff_text(x) for x in ref.indices)
                try:
                    rel = isl.Map(f"{prefix} -> {{ {tup} -> {ref.tensor}[{idx}] }}")
                except isl.Error as exc:
                    raise AnalysisError(Diagnostic(f"ISL cannot model this access: {exc}", ref.loc)) from None
                accesses.append(Access(ref.tensor, kind, rel.intersect_domain(domain), ref,
                                       f"{ctx.name}_{kind[0]}{k}"))
        statements.append(StatementModel(ctx, domain, schedule, tuple(accesses)))
    return KernelModel(kernel, kernel.param_names, context, tuple(statements), 2 * depth + 1)


# --------------------------------------------------------------------------- numbers


def kernel_model(kernel: ir.Kernel) -> KernelModel:
    """:func:`build_model` of ``kernel`` once per kernel object (kept in ``kernel.cache``), for the
    questions asked without a model at hand: verification's reduction lengths asked the loop extents of
    every nest at every size vector, and each built the model again (3mm: 48 models, 0.7 s of CPU)."""
    return cached(kernel, ("model",), lambda: build_model(kernel))


def param_set(model_or_kernel: KernelModel | ir.Kernel, values: Mapping[str, int]) -> isl.Set:
    """The parameter set fixing every parameter to ``values`` (``[N] -> { : N = 8 }``)."""
    kernel = model_or_kernel.kernel if isinstance(model_or_kernel, KernelModel) else model_or_kernel
    numbers = tuple(int(values[p]) for p in kernel.param_names)
    # parsed once per kernel and sizes (ISL objects are values: sharing one is safe): fix_params asks it
    # hundreds of times in one compile (3mm: 205 parses, a quarter of a second)
    return cached(kernel, ("param_set", numbers), lambda: _param_set(kernel, numbers))


def _param_set(kernel: ir.Kernel, numbers: tuple[int, ...]) -> isl.Set:
    conds = " and ".join(f"{isl_name(p)} = {v}" for p, v in zip(kernel.param_names, numbers)) or "true"
    return isl.Set(f"{_params_prefix(kernel)} -> {{ : {conds} }}")


def fix_params(obj: IslObject, model_or_kernel: KernelModel | ir.Kernel, values: Mapping[str, int]) -> IslObject:
    """``obj`` (any ISL set or map, union or not) with the parameters fixed to ``values``."""
    return obj.intersect_params(param_set(model_or_kernel, values))


def count(obj: IslObject) -> "isl.PwQPolynomial | isl.UnionPwQPolynomial":
    """The number of points (pairs, for a map) of ``obj``, as ISL's piecewise quasi-polynomial."""
    if isinstance(obj, (isl.Map, isl.UnionMap)):
        obj = obj.wrap()
    return obj.card()


def points(obj: IslObject) -> list[tuple[int, ...]]:
    """The points of a parameter-free set (the pairs of a map, flattened: domain then range), as tuples.

    The walk behind every "by points" count: the same numbers as :func:`count` at sizes small
    enough to enumerate, without barvinok.
    """
    s = obj.wrap() if isinstance(obj, (isl.Map, isl.UnionMap)) else obj
    sets: list[isl.Set] = []
    if isinstance(s, isl.UnionSet):
        s.foreach_set(sets.append)
    else:
        sets.append(s)
    out: list[tuple[int, ...]] = []
    kind = isl.dim_type.set
    for one in sets:
        # dimensions with one value in the whole set are not read per point: a time vector is
        # mostly padding and constant phases (heat-3d's 27 dimensions, 7 of them varying), and
        # reading a coordinate is most of a point's cost (issue 9). Projecting out a dimension fixed
        # to a constant leaves the other dimensions' points, in the same order.
        n = one.dim(kind)
        fixed: dict[int, int] = {}
        for k in range(n):
            v = one.plain_get_val_if_fixed(kind, k)
            if not v.is_nan():
                fixed[k] = int(v.to_python())
        free = [k for k in range(n) if k not in fixed]
        walked = one
        for k in sorted(fixed, reverse=True):
            walked = walked.project_out(kind, k, 1)
        dims = range(len(free))
        got: list[tuple[int, ...]] = []

        def add(p: isl.Point) -> None:
            # get_coordinate_val and get_num_si, the dimensions counted once per set: a fifth less
            # than a MultiVal per point (issue 9; islpy's callback itself is most of what is left);
            # exact, the coordinates being integers far below 2^63 at the sizes enumerated
            at = p.get_coordinate_val
            got.append(tuple([at(kind, k).get_num_si() for k in dims]))
        walked.foreach_point(add)
        if not fixed:
            out.extend(got)
            continue
        template = [fixed.get(k, 0) for k in range(n)]
        for g in got:
            full = template[:]
            for k, v in zip(free, g):
                full[k] = v
            out.append(tuple(full))
    return out


def to_int(qp: isl.PwQPolynomial | isl.UnionPwQPolynomial, values: Mapping[str, int] | None = None) -> int:
    """Evaluate a (union) piecewise quasi-polynomial count at parameter ``values``.

    Iterates the pieces (extracting by space can silently give 0) and sums
    them; a point outside every piece counts 0.
    """
    if isinstance(qp, isl.UnionPwQPolynomial):
        parts: list = []
        qp.foreach_pw_qpolynomial(parts.append)
        return sum(to_int(pw, values) for pw in parts)
    space = qp.get_domain_space()
    point = isl.Point.zero(space)
    for k in range(space.dim(isl.dim_type.param)):
        name = space.get_dim_name(isl.dim_type.param, k)
        key = name[:-1] if name.endswith("_") and name[:-1] in _ISL_WORDS else name
        if values is None or key not in values:
            raise AnalysisError(f"a number is needed for parameter '{key}'")
        point = point.set_coordinate_val(isl.dim_type.param, k, int(values[key]))
    val = qp.eval(point)
    if val.is_nan():
        return 0
    if not val.is_int():
        raise AnalysisError(f"a count evaluated to the fraction {val}")
    return int(val.to_python())


T = TypeVar("T")


def cached(owner: KernelModel | ir.Kernel, key: tuple, compute: Callable[[], T]) -> T:
    """``compute()`` once per ``owner`` and ``key``, kept in ``owner.cache`` (it lives and dies
    with the model or kernel: no global table, nothing keyed by ``id``)."""
    if key not in owner.cache:
        owner.cache[key] = compute()
    return owner.cache[key]


def nest_instances(model: KernelModel, nest: int, params: Mapping[str, int]) -> int:
    """The statement instances of top-level loop ``nest`` at ``params`` (barvinok's count, once per model,
    nest and sizes): what choice's compute bound and isl_schedule's work budget both ask."""
    values = tuple(sorted((p, int(params[p])) for p in model.params))
    return cached(model, ("nest_instances", nest, values),
                  lambda: sum(to_int(count(s.domain), dict(values)) for s in model.nest_statements(nest)))
