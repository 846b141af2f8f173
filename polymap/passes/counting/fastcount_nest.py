"""Which nests the fast path handles, and their shape in numbers.

The fast counts (:mod:`polymap.passes.counting.fastcount`) are exact for a class of
nests where every count of ``mapping.md`` is a sum of products of per-loop
factors. :func:`analyse_nest` accepts a nest only when all of these hold at
the given parameter values, and raises :class:`NotSupported` otherwise:

- one statement, which has every loop of the nest;
- a box domain ``0 <= x < E_x`` (no triangular bounds, no conditions);
- per tensor, every reference has the same subscripts, each subscript is
  ``c`` (a constant), ``a*x + c`` or ``a*u + w + c`` (``a >= 1``, the
  convolution's ``2*p + r``), and no loop appears in two subscripts of one
  tensor (so a tensor's footprint is a product over its subscripts).

``gemm`` with ``C[i, j] += A[i, k] * B[k, j]`` alone is in the class; the
``init``/``acc`` gemm is not (``init`` lacks ``k``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping as MappingT

from polymap.islcheck import isl
from polymap.mapping.model import nest_loops, nest_tensors
from polymap.poly import KernelModel, fix_params
from polymap.poly import StatementModel

DTYPE_BYTES = {"f32": 4, "f64": 8, "i32": 4, "i64": 8}
MAX_STRIDE = 64  # a*u + w is summed over residues mod a: keep a small


class NotSupported(Exception):
    """The nest (or mapping) is outside the class the fast path counts exactly."""


@dataclass(frozen=True)
class TensorShape:
    """How one tensor is accessed: per subscript, its ``(loop index, coefficient)`` terms."""

    name: str
    subscripts: tuple[tuple[tuple[int, int], ...], ...]
    reads: int  # read references per statement instance
    writes: int  # write references per statement instance
    dtype_bytes: int

    @property
    def loops(self) -> frozenset[int]:
        """Indices of the loops the tensor's elements depend on."""
        return frozenset(x for sub in self.subscripts for x, _ in sub)

    @property
    def strided_loops(self) -> frozenset[int]:
        """Loops in a two-term subscript (their tiles' images overlap: no disjoint multicast)."""
        return frozenset(x for sub in self.subscripts if len(sub) == 2 for x, _ in sub)


@dataclass(frozen=True)
class FastNest:
    """A nest in the fast path's class, at fixed parameter values."""

    kernel: str
    nest: int
    loops: tuple[str, ...]
    extents: tuple[int, ...]
    tensors: tuple[TensorShape, ...]
    params: tuple[tuple[str, int], ...]

    @property
    def instances(self) -> int:
        out = 1
        for e in self.extents:
            out *= e
        return out


def _box_extents(domain: isl.Set, loops: tuple[str, ...]) -> tuple[int, ...]:
    if domain.is_empty():
        raise NotSupported("the nest runs no instance at these sizes")
    plain = domain.project_out(isl.dim_type.param, 0, domain.dim(isl.dim_type.param))
    box = isl.Set.universe(plain.get_space())
    extents = []
    for k in range(len(loops)):
        lo = domain.dim_min_val(k).to_python()
        hi = domain.dim_max_val(k).to_python()
        if lo != 0:
            raise NotSupported(f"loop {loops[k]} does not start at 0")
        extents.append(hi + 1)
        box = box.lower_bound_val(isl.dim_type.set, k, isl.Val(0)).upper_bound_val(isl.dim_type.set, k, isl.Val(hi))
    if not plain.is_equal(box):
        raise NotSupported("the domain is not a box")
    return tuple(extents)


def _aff_terms(aff: isl.Aff, nloops: int) -> tuple[tuple[tuple[int, int], ...], int]:
    if aff.dim(isl.dim_type.div) != 0:
        raise NotSupported("a subscript has a floor or modulo")
    if any(aff.get_coefficient_val(isl.dim_type.param, k).to_python() != 0
           for k in range(aff.dim(isl.dim_type.param))):
        raise NotSupported("a subscript depends on a parameter")
    terms = tuple((k, aff.get_coefficient_val(isl.dim_type.in_, k).to_python()) for k in range(nloops))
    return tuple((k, c) for k, c in terms if c != 0), aff.get_constant_val().to_python()


def _subscripts(relation: isl.Map, nloops: int) -> tuple:
    """Per output dimension ``(terms, constant)`` of a single-valued affine access."""
    pma = relation.as_pw_multi_aff()
    out = []
    for d in range(relation.dim(isl.dim_type.out)):
        pieces = pma.get_pw_aff(d).get_pieces()
        if len(pieces) != 1:
            raise NotSupported("a subscript is piecewise")
        out.append(_aff_terms(pieces[0][1], nloops))
    return tuple(out)


def _normalise(terms: tuple) -> tuple:
    """Terms in the order :mod:`fastcount_forms` expects, or NotSupported."""
    if len(terms) <= 1:
        return terms
    if len(terms) > 2:
        raise NotSupported("a subscript sums more than two loops")
    (u, a), (w, b) = terms
    if b != 1:
        (u, a), (w, b) = (w, b), (u, a)
    if b != 1 or a < 1 or a > MAX_STRIDE:
        raise NotSupported("a two-loop subscript is not a*u + w with 1 <= a")
    return ((u, a), (w, 1))


def _tensor_shape(model: KernelModel, st: StatementModel, name: str, loops: tuple[str, ...], values: MappingT[str, int]) -> TensorShape:
    accs = [a for a in st.accesses if a.tensor == name]
    subs = {_subscripts(fix_params(a.relation, model, values), len(loops)) for a in accs}
    if len(subs) != 1:
        raise NotSupported(f"{name} is accessed with different subscripts")
    (sub,) = subs
    shaped = tuple(_normalise(terms) for terms, _ in sub)
    used = [x for terms in shaped for x, _ in terms]
    if len(used) != len(set(used)):
        raise NotSupported(f"a loop appears in two subscripts of {name}")
    dtype = model.kernel.decl(name).dtype
    return TensorShape(name, shaped, sum(a.kind == "read" for a in accs),
                       sum(a.kind == "write" for a in accs), DTYPE_BYTES.get(dtype, 4))


def analyse_nest(model: KernelModel, nest: int, params: MappingT[str, int]) -> FastNest:
    """The nest's loops, extents and access shapes, or :class:`NotSupported` (see module doc)."""
    statements = model.nest_statements(nest)
    if len(statements) != 1:
        raise NotSupported("the nest has several statements")
    (st,) = statements
    loops = nest_loops(model.kernel, nest)
    if tuple(st.loops) != tuple(loops):
        raise NotSupported("the statement lacks some loop of the nest")
    values = dict(params)
    extents = _box_extents(fix_params(st.domain, model, values), loops)
    tensors = tuple(_tensor_shape(model, st, x, loops, values) for x in nest_tensors(model.kernel, nest))
    return FastNest(model.kernel.name, nest, tuple(loops), extents, tensors, tuple(sorted(values.items())))
