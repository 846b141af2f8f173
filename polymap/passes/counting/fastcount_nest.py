"""Which nests the fast path handles, and their shape in numbers.

The fast counts (:mod:`polymap.passes.counting.fastcount`) are exact for a class of
nests where every count of ``mapping.md`` is a sum of products of per-loop
factors. :func:`analyse_nest` accepts a nest only when all of these hold at
the given parameter values, and raises :class:`NotSupported` otherwise:

- one statement, the *body*, which has every loop of the nest, and at most
  one *initialisation* that lacks exactly one loop ``x`` and stands before
  it in the text (``mapping.md``'s phase rule: it runs before every
  iteration of ``x``, a residency of its own at each level); a tensor both
  statements access has the same subscripts in both (and both write it or
  neither does); a tensor with ``x`` in a subscript has it alone there or as
  the ``w`` of ``a*u + w`` (so an initialisation residency holds none of it);
  a tensor without ``x`` that one statement alone accesses (2mm's scalars
  ``alpha`` in the body, ``beta`` in ``D[i, j] *= beta``) is held by that
  statement's residencies only (:meth:`FastNest.only`);
- box domains ``0 <= x < E_x`` (no triangular bounds, no conditions), the
  initialisation's over the same extents;
- per tensor, every reference has the same subscripts, each subscript is
  ``c`` (a constant), ``a*x + c`` or ``a*u + w + c`` (``a >= 1``, the
  convolution's ``2*p + r``), and no loop appears in two subscripts of one
  tensor (so a tensor's footprint is a product over its subscripts).

``gemm`` with ``C[i, j] += A[i, k] * B[k, j]`` alone is in the class, and
so is the ``init``/``acc`` gemm (``init`` lacks ``k`` only) and both nests of
PolyBench's 2mm; a convolution's bias initialisation (it lacks ``c``, ``r``
and ``s``) is not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping as MappingT

from polymap.islcheck import isl
from polymap.mapping.model import nest_loops, nest_tensors
from polymap.poly import KernelModel, fix_params
from polymap.poly import StatementModel
from polymap.passes.schedule.tiling import PHASE_BEFORE, loop_phase

DTYPE_BYTES = {"f32": 4, "f64": 8, "i32": 4, "i64": 8}
MAX_STRIDE = 64  # a*u + w is summed over residues mod a: keep a small


class NotSupported(Exception):
    """The nest (or mapping) is outside the class the fast path counts exactly."""


@dataclass(frozen=True)
class TensorShape:
    """How one tensor is accessed: per subscript, its ``(loop index, coefficient)`` terms."""

    name: str
    subscripts: tuple[tuple[tuple[int, int], ...], ...]
    reads: int  # read references per instance of the body
    writes: int  # write references per instance of the body
    dtype_bytes: int
    init_reads: int = 0  # read references per instance of the initialisation
    init_writes: int = 0  # write references per instance of the initialisation

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
    init_loop: int | None = None  # the loop the initialisation lacks (None: no initialisation)

    @property
    def body_instances(self) -> int:
        out = 1
        for e in self.extents:
            out *= e
        return out

    @property
    def init_instances(self) -> int:
        return 0 if self.init_loop is None else self.body_instances // self.extents[self.init_loop]

    @property
    def instances(self) -> int:
        """Statement instances of the nest (body and initialisation)."""
        return self.body_instances + self.init_instances

    def read_events(self, t: TensorShape) -> int:
        """Reads of ``t`` by every statement instance (the innermost keeper's reads)."""
        return t.reads * self.body_instances + t.init_reads * self.init_instances

    def write_events(self, t: TensorShape) -> int:
        return t.writes * self.body_instances + t.init_writes * self.init_instances

    def only(self, t: TensorShape) -> str | None:
        """``"body"`` or ``"init"`` for a tensor without the initialisation's loop that one statement
        alone accesses (only that statement's residencies hold it), else None (held wherever its
        subscripts' images are: a tensor both access, or one with the loop in a subscript)."""
        if self.init_loop is None or self.init_loop in t.loops:
            return None
        body, init = bool(t.reads or t.writes), bool(t.init_reads or t.init_writes)
        if body and init:
            return None
        return "body" if body else "init"


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


def _tensor_shape(model: KernelModel, statements: tuple[StatementModel, ...], name: str, loops: tuple[str, ...],
                  values: MappingT[str, int]) -> TensorShape:
    """Per tensor: subscripts over the nest's loops (the same in every reference), reference counts."""
    subs = set()
    for st in statements:
        for a in st.accesses:
            if a.tensor == name:
                sub = _subscripts(fix_params(a.relation, model, values), len(st.loops))
                # the statement's own dims -> the nest's loop indices
                subs.add(tuple((tuple((loops.index(st.loops[x]), c) for x, c in terms), k) for terms, k in sub))
    if len(subs) != 1:
        raise NotSupported(f"{name} is accessed with different subscripts")
    (sub,) = subs
    shaped = tuple(_normalise(tuple(sorted(terms))) for terms, _ in sub)
    used = [x for terms in shaped for x, _ in terms]
    if len(used) != len(set(used)):
        raise NotSupported(f"a loop appears in two subscripts of {name}")
    body, init = statements[0], statements[1] if len(statements) > 1 else None
    dtype = model.kernel.decl(name).dtype

    def refs(st: StatementModel | None, kind: str) -> int:
        return 0 if st is None else sum(a.tensor == name and a.kind == kind for a in st.accesses)

    return TensorShape(name, shaped, refs(body, "read"), refs(body, "write"), DTYPE_BYTES.get(dtype, 4),
                       refs(init, "read"), refs(init, "write"))


def _init_loop(model: KernelModel, nest: int, body: StatementModel, init: StatementModel,
               loops: tuple[str, ...]) -> int:
    """The loop the initialisation lacks, or NotSupported (see the module doc)."""
    missing = [x for x in loops if x not in init.loops]
    if len(missing) != 1:
        raise NotSupported("a statement lacks more than one loop of the nest" if missing
                           else "the nest has several statements with every loop")
    if loop_phase(model.kernel, nest, init.context, missing[0]) != PHASE_BEFORE:
        raise NotSupported(f"statement {init.name} runs after the {missing[0]} loop")
    if body.context.position < init.context.position:
        raise NotSupported(f"statement {init.name} follows the body in the text")
    return loops.index(missing[0])


def _check_init(nest: FastNest) -> None:
    """The conditions on the initialisation's tensors (module doc)."""
    x = nest.init_loop
    for t in nest.tensors:
        if (t.init_reads or t.init_writes) and (t.reads or t.writes):
            if bool(t.writes) != bool(t.init_writes):
                raise NotSupported(f"{t.name} is written by one statement and only read by the other")
        elif x in t.loops and not any(sub[-1][0] == x and sub[-1][1] == 1 for sub in t.subscripts if sub):
            # x alone, or as the w of a*u + w: an image over x of length 0 (the initialisation's
            # residency) is then empty; as the u of a*u + w it would not be. Without x in a
            # subscript, FastNest.only says which statement's residencies hold it.
            raise NotSupported(f"{t.name} has {nest.loops[x]} as the u of a*u + w only")


def analyse_nest(model: KernelModel, nest: int, params: MappingT[str, int]) -> FastNest:
    """The nest's loops, extents and access shapes, or :class:`NotSupported` (see module doc)."""
    statements = model.nest_statements(nest)
    loops = tuple(nest_loops(model.kernel, nest))
    full = [st for st in statements if tuple(st.loops) == loops]
    if len(full) != 1 or len(statements) > 2:
        raise NotSupported("the nest has several statements" if len(statements) > 1
                           else "the statement lacks some loop of the nest")
    body = full[0]
    others = [st for st in statements if st is not body]
    init_loop = _init_loop(model, nest, body, others[0], loops) if others else None
    values = dict(params)
    extents = _box_extents(fix_params(body.domain, model, values), loops)
    if others:
        own = _box_extents(fix_params(others[0].domain, model, values), tuple(others[0].loops))
        if own != tuple(e for k, e in enumerate(extents) if k != init_loop):
            raise NotSupported(f"statement {others[0].name} does not cover the body's extents")
    ordered = (body,) + tuple(others)
    tensors = tuple(_tensor_shape(model, ordered, x, loops, values) for x in nest_tensors(model.kernel, nest))
    out = FastNest(model.kernel.name, nest, loops, extents, tensors, tuple(sorted(values.items())), init_loop)
    if init_loop is not None:
        _check_init(out)
    return out
