"""One statement over a box of point loops as whole-array NumPy operations.

The NumPy emitter hands this module a *chain*: perfectly nested AST loops
that each walk one original iterator of a statement (the innermost point
loops), with bounds that do not depend on each other. Each loop becomes an
array axis; references become slices (or gathers when a subscript mixes
axes), and the statement one assignment::

    for k in .., i in .., j in ..: acc: C[i, j] += A[i, k] * B[k, j]
      ->  C[lo_i:lo_i + n_i, lo_j:lo_j + n_j] += A[.., ..] @ B[.., ..]
    for j in ..: expo: Y[i, j] = exp(X[i, j] - mx[i])
      ->  Y[i, lo_j:lo_j + n_j] = _np.exp(X[i, lo_j:lo_j + n_j] - mx[i])

:func:`chain_is_legal` says when this is the sequential result: no two
distinct instances of the chain conflict (same element, one writing), except,
for a reduction (``+=`` ...), through the statement's own target, where the
generated code combines partial results (sum, product, max, min). With an
empty chain the same printer gives the plain scalar statement.
"""
from __future__ import annotations

from dataclasses import dataclass

from polymap import ir
from polymap.islcheck import isl
from polymap.codegen.ast_ir import from_linear, linear
from polymap.codegen.numpy.values import NP_TYPES, ValuePrinter, py_index
from polymap.passes.frontend.types import COMBINE, INTEGER, Printed, combine_type
from polymap.poly import StatementModel
from typing import Callable, Iterable

AXIS = "\0axis"  # variable names standing for chain axes inside substituted IR

#: The floating-point reductions whose result depends on the order of the updates, and the
#: ufunc that folds them in order (integer ones are exact in any order, max and min too).
_FOLDS = {t: {"+=": "add", "-=": "subtract", "*=": "multiply", "/=": "true_divide"} for t in ("f32", "f64")}


@dataclass(frozen=True)
class Axis:
    """One chain loop: Python texts of its bounds and the temporaries that hold them."""

    lower: str
    upper: str
    step: int
    k: int

    @property
    def lo(self) -> str:
        return f"_lo{self.k}"

    @property
    def n(self) -> str:
        return f"_n{self.k}"

    @property
    def iv(self) -> str:
        return f"_iv{self.k}"


def axis_var(k: int) -> ir.Var:
    return ir.Var(f"{AXIS}{k}")


def _axis_of(name: str) -> int | None:
    return int(name[len(AXIS):]) if name.startswith(AXIS) else None


# --------------------------------------------------------------------------- legality


def chain_is_legal(sm: StatementModel, smap: isl.Map, first_dim: int) -> bool:
    """No conflict between distinct instances of ``sm`` that agree on time dims ``< first_dim``.

    For a reduction statement the target's own write/read pairs are allowed
    (they are combined); every other pair (other reads against the writes,
    and for ``=`` the writes against each other) must be absent.
    """
    n_out = smap.dim(isl.dim_type.out)
    prefix = smap.project_out(isl.dim_type.out, first_dim, n_out - first_dim)
    same = isl.UnionMap.from_map(prefix.apply_range(prefix.reverse()))
    writes = _union(a.relation for a in sm.writes)
    reads = list(sm.reads)
    if sm.stmt.is_reduction:
        reads = reads[:-1]  # the implicit read of the target is combined with the write
    rd = _union(a.relation for a in reads)
    pairs = writes.apply_range(rd.reverse()).union(rd.apply_range(writes.reverse()))
    if not sm.stmt.is_reduction:
        pairs = pairs.union(writes.apply_range(writes.reverse()))
    pairs = pairs.intersect(same)
    ident = isl.UnionMap.from_map(isl.Map.identity(prefix.apply_range(prefix.reverse()).get_space()))
    return pairs.subtract(ident).is_empty()


def _union(maps: Iterable[isl.Map]) -> isl.UnionMap:
    out = None
    for m in maps:
        u = isl.UnionMap.from_map(m)
        out = u if out is None else out.union(u)
    return out if out is not None else isl.UnionMap("{ }")


# --------------------------------------------------------------------------- references


@dataclass(frozen=True)
class RefShape:
    """A reference as a slice: per subscript either scalar text or (axis, coefficient, rest)."""

    subs: tuple
    simple: bool

    @property
    def axes(self) -> tuple[int, ...]:
        return tuple(s[0] for s in self.subs if isinstance(s, tuple))


def analyse_ref(ref: ir.Ref, var: Callable[[str], str]) -> RefShape:
    subs, seen = [], set()
    for e in ref.indices:
        lin = linear(e)
        if lin is None:
            return RefShape((), False)
        terms, const = lin
        axes = [(k, c) for k, c in terms.items() if isinstance(k, str) and _axis_of(k) is not None]
        opaque = [k for k in terms if isinstance(k, tuple)]
        if any(_axis_of(v) is not None for k in opaque for v in ir.variables(k[1])):
            return RefShape((), False)
        if len(axes) > 1 or (axes and (axes[0][1] <= 0 or _axis_of(axes[0][0]) in seen)):
            return RefShape((), False)
        rest = {k: c for k, c in terms.items() if not (isinstance(k, str) and _axis_of(k) is not None)}
        rest_text = py_index(from_linear(rest, const), var)
        if axes:
            k = _axis_of(axes[0][0])
            seen.add(k)
            subs.append((k, axes[0][1], rest_text))
        else:
            subs.append(rest_text)
    return RefShape(tuple(subs), True)


class StatementPrinter:
    """Prints one (substituted) statement over ``axes``; see the module doc."""

    def __init__(self, dtypes: dict[str, str], names: dict[str, str], axes: tuple[Axis, ...], *,
                 reassociate: bool = False) -> None:
        self.reassociate = reassociate  # may a floating-point reduction add in another order?
        self.dtypes = dtypes
        self.names = names  # tensor name -> Python name
        self.axes = axes
        self.values = ValuePrinter(dtypes, self.read, self.var)

    def var(self, name: str) -> str:
        k = _axis_of(name)
        return self.axes[k].iv if k is not None else name

    def raw(self, ref: ir.Ref, shape: RefShape) -> str:
        """The slice text (its axes in subscript order)."""
        name = self.names[ref.tensor]
        if not ref.indices:
            return f"{name}[()]"
        parts = []
        for s in shape.subs:
            if not isinstance(s, tuple):
                parts.append(s)
                continue
            k, a, rest = s
            ax = self.axes[k]
            scaled = f"{a}*{ax.lo}" if a != 1 else ax.lo
            start = scaled if rest == "0" else f"{rest} + {scaled}"
            stride = a * ax.step
            if stride == 1:
                parts.append(f"{start}:{start} + {ax.n}")
            else:
                parts.append(f"{start}:{start} + {stride}*({ax.n} - 1) + 1:{stride}")
        return f"{name}[{', '.join(parts)}]"

    def read(self, ref: ir.Ref) -> str:
        """The reference as an array broadcast over the chain axes (chain order)."""
        shape = analyse_ref(ref, self.var)
        if not shape.simple:
            name = self.names[ref.tensor]
            return f"{name}[{', '.join(py_index(e, self.var) for e in ref.indices)}]"
        text = self.raw(ref, shape)
        present = list(shape.axes)
        if present != sorted(present):
            perm = sorted(range(len(present)), key=lambda p: present[p])
            text = f"_np.transpose({text}, {tuple(perm)})"
        if present and len(present) < len(self.axes):
            text += "[" + ", ".join(":" if k in present else "None" for k in range(len(self.axes))) + "]"
        return text

    # ---- the statement
    def statement(self, stmt: ir.Assign) -> list[str] | None:
        target = stmt.target
        tshape = analyse_ref(target, self.var)
        if not tshape.simple:
            return None if self.axes else [self.scalar_statement(stmt)]
        kept = tshape.axes
        dtype = self.dtypes[target.tensor]
        lhs = self.raw(target, tshape)
        full = f"({', '.join(a.n for a in self.axes)},)"
        if stmt.op == "=":
            if len(kept) != len(self.axes):
                return None
            value = self.values.value(stmt.value).text
            if list(kept) != sorted(kept):
                value = f"_np.transpose(_np.broadcast_to({value}, {full}), {tuple(kept)})"
            return [f"{lhs} = {value}"]
        red = tuple(k for k in range(len(self.axes)) if k not in kept)
        op = stmt.reduction_op
        if stmt.op == "/=" and dtype in INTEGER and red:
            return None  # truncating division does not combine into one quotient
        if red and not self.reassociate and dtype in _FOLDS and stmt.op in _FOLDS[dtype]:
            return self.ordered_fold(stmt, lhs, kept, red, full, dtype)
        fast = self.contraction(stmt, tshape) if op == "+" and red else None
        if fast is not None:
            return [f"{lhs} {stmt.op} {fast}"]
        v = self.values.value(stmt.value)
        t = combine_type(dtype, v.type)
        value = self.values.convert(v, t)
        if self.axes:
            if red:
                value = f"_np.broadcast_to({value}, {full})"
                how = {"+": "sum", "*": "prod", "max": "max", "min": "min"}[op]
                extra = f", dtype={NP_TYPES[t]}" if how in ("sum", "prod") else ""
                value = f"{value}.{how}(axis={red}{extra})"
            order = sorted(kept)
            if list(kept) != order:
                value = value if red else f"_np.broadcast_to({value}, {full})"
                value = f"_np.transpose({value}, {tuple(order.index(k) for k in kept)})"
        if t == dtype and stmt.op in ("+=", "-=", "*=") or (stmt.op == "/=" and t == dtype and t not in INTEGER):
            return [f"{lhs} {stmt.op} {value}"]  # in place: the right-hand side is computed first
        cur = self.values.convert(Printed(lhs, dtype), t)
        combined = {"+=": f"{cur} + {value}", "-=": f"{cur} - {value}", "*=": f"{cur} * {value}",
                    "/=": f"{self.values.arith('/', Printed(cur, t), Printed(value, t)).text}",
                    "max=": f"_pmax({cur}, {value})", "min=": f"_pmin({cur}, {value})"}[stmt.op]
        return [f"{lhs} = {combined}"]

    def ordered_fold(self, stmt: ir.Assign, lhs: str, kept: tuple[int, ...], red: tuple[int, ...], full: str,
                     dtype: str) -> list[str] | None:
        """A floating-point reduction folded in the original order of each element's updates.

        The terms over the chain's axes (kept axes first, in the target's
        order; the reduction axes last, flattened in loop order, which is the
        original order of their instances) are prepended with the current
        value and folded by ``ufunc.accumulate``, a sequential recurrence by
        definition::

            for i: nrm += A[i, k] * A[i, k]
              ->  nrm[()] = _np.add.accumulate(_np.concatenate((_np.asarray(nrm[()])[..., None],
                                (A[.., k] * A[.., k]).reshape((-1,))), axis=-1), axis=-1)[..., -1]
        """
        v = self.values.value(stmt.value)
        if combine_type(dtype, v.type) != dtype:
            return None  # a conversion at every step: left to the loops
        terms = f"_np.asarray({self.values.convert(v, dtype)}, dtype={NP_TYPES[dtype]})"
        terms = f"_np.transpose(_np.broadcast_to({terms}, {full}), {tuple(kept) + red})"
        shape = "(" + "".join(f"{self.axes[k].n}, " for k in kept) + "-1)"
        start = f"_np.asarray({lhs}, dtype={NP_TYPES[dtype]})[..., None]"
        fold = (f"_np.{_FOLDS[dtype][stmt.op]}.accumulate(_np.concatenate(({start}, {terms}.reshape({shape})), "
                f"axis=-1), axis=-1)[..., -1]")
        return [f"{lhs} = {fold}"]

    def scalar_statement(self, stmt: ir.Assign) -> str:
        """A statement whose target needs gathered subscripts: only without axes."""
        name = self.names[stmt.target.tensor]
        lhs = f"{name}[{', '.join(py_index(e, self.var) for e in stmt.target.indices)}]"
        v = self.values.value(stmt.value)
        if stmt.op == "=":
            return f"{lhs} = {v.text}"
        dtype = self.dtypes[stmt.target.tensor]
        t = combine_type(dtype, v.type)
        cur, val = Printed(self.values.convert(Printed(lhs, dtype), t), t), Printed(self.values.convert(v, t), t)
        return f"{lhs} = {self.values.arith(COMBINE[stmt.op], cur, val).text}"

    def contraction(self, stmt: ir.Assign, tshape: RefShape) -> str | None:
        """``einsum`` (or ``@``) text when the value is a product of same-typed sliced references."""
        if not self.axes:
            return None
        factors = _factors(stmt.value)
        dtype = self.dtypes[stmt.target.tensor]
        if not factors or any(not isinstance(f, ir.Ref) or self.dtypes[f.tensor] != dtype for f in factors):
            return None
        if dtype in INTEGER:
            return None
        shapes = [analyse_ref(f, self.var) for f in factors]
        if not all(s.simple for s in shapes):
            return None
        used = {k for s in shapes for k in s.axes}
        if used != set(range(len(self.axes))):
            return None
        letters = "abcdefghijklmnopqrstuvwxyz"
        specs = ["".join(letters[k] for k in s.axes) for s in shapes]
        out = "".join(letters[k] for k in tshape.axes)
        ops = [self.raw(f, s) for f, s in zip(factors, shapes)]
        if len(ops) == 2 and _is_matmul(specs, out):
            return f"({ops[0]} @ {ops[1]})"
        return f"_np.einsum('{','.join(specs)}->{out}', {', '.join(ops)}, optimize=True)"


def _is_matmul(specs: list[str], out: str) -> bool:
    a, b = specs
    if len(a) == 2 and len(b) == 2:
        return a[1] == b[0] and out == a[0] + b[1] and len({a[0], a[1], b[1]}) == 3
    if len(a) == 2 and len(b) == 1:
        return a[1] == b and out == a[0] and a[0] != b
    if len(a) == 1 and len(b) == 2:
        return b[0] == a and out == b[1] and b[1] != a
    return False


def _factors(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.BinOp) and e.op == "*":
        return _factors(e.lhs) + _factors(e.rhs)
    return [e]
