"""Footprints: the most elements (and bytes) one instance of a level holds at once.

``mapping.md``: the sum over the tensors a level keeps of ``|D(r)|``,
maximised over residencies ``r``. Per tensor, barvinok counts ``D(r)`` as a
piecewise quasi-polynomial in ``r``; ISL bounds the sum (evaluating every
residency when the bound is not provably tight)::

    held(A) = { [i0, k0] -> A[i, k] : 32 i0 <= i < 32 i0 + 32, ... }   ->   |D| = 512   ->   max 512

Always a number, even for ``--symbolic`` counts (the parameters are fixed first).

A skewed or wavefront tiling's ``held`` relations carry many integer
divisions, on which barvinok can take minutes even at tiny sizes (heat-3d at
N = 7: 186 s for eight footprints). At the sizes where :func:`enumerable`
holds, the same maximum comes from walking the ``(residency, element)``
pairs instead (``by_points``)::

    held(A) pairs  (r0, e0) (r0, e1) (r1, e1) ...  ->  per residency  {r0: 2, r1: 1}  ->  max 2
"""
from __future__ import annotations

from collections import Counter
from typing import Mapping as MappingT

from polymap.islcheck import isl
from polymap.mapping.model import Mapping
from polymap.mapping.schedule import mapping_statements, moves_statements
from polymap.poly import KernelModel, count, fix_params, param_set, points, to_int
from polymap.passes.counting.residency import LevelResidency, without_params

#: Statement instances up to which a schedule mapping's counts enumerate points (a few seconds of
#: ISL scanning); beyond, barvinok counts them.
ENUMERATION_LIMIT = 2_000_000


def enumerable(model: KernelModel, mapping: Mapping, params: MappingT[str, int]) -> bool:
    """A schedule, fused or wavefront mapping at sizes small enough to count by enumeration.

    What the walk costs is the ``(residency, element)`` pairs it visits, not the instances: at the
    innermost level every instance is a residency holding the elements it accesses, so the pairs
    are about instances x accesses, and they are held to :data:`ENUMERATION_LIMIT`. jacobi-2d's
    wavefronts at T = 8, N = 256 (1.03M instances, 6 accesses each: 6.2M pairs a level) walked for
    minutes per candidate where barvinok takes 25 s; heat-3d and seidel-2d at the small sizes where
    barvinok takes minutes stay walked.

    A mapping whose schedule only places statements on loops they lack (register tiles' folded
    ``init: {i: i, j: j, k: 0}``, :func:`~polymap.mapping.schedule.moves_statements` false) is plain
    here: its relations have no divisions beyond the tiles', and barvinok counts them in
    milliseconds where the walk took seconds (2mm's register tiles at 64: an RF footprint in 0.002 s
    against 1.5 s, issue 9)."""
    if not moves_statements(model, mapping):
        return False
    pairs = sum(to_int(count(st.domain), params) * max(1, len(st.accesses))
                for st in mapping_statements(model, mapping))
    return pairs <= ENUMERATION_LIMIT

DTYPE_BYTES = {"f32": 4, "f64": 8, "i32": 4, "i64": 8}


def _max_value(pw: isl.PwQPolynomial | isl.UnionPwQPolynomial, model: KernelModel, params: MappingT[str, int]) -> int:
    """Exact maximum of a piecewise quasi-polynomial over its domain at ``params``."""
    if pw.dim(isl.dim_type.param):
        pw = pw.intersect_params(param_set(model, params))
    if pw.is_zero():
        return 0
    fold, tight = pw.bound(isl.fold.max)
    if tight:
        return max(to_int(fold, params), 0)
    best = 0  # ISL's bound is not provably tight: evaluate every residency point
    for dom, qp in pw.get_pieces():
        vals: list[int] = []
        dom.foreach_point(lambda pt: vals.append(int(qp.eval(pt).to_python())))
        best = max([best] + vals)
    return best


def level_footprint(model: KernelModel, lr: LevelResidency, params: MappingT[str, int], *,
                    by_points: bool = False) -> tuple[int, int]:
    """``(elements, bytes)`` held at once by one instance of the level, at its fullest.

    ``by_points``: walk the pairs instead of counting them with barvinok (the same numbers; for the
    sizes where :func:`enumerable` holds).
    """
    if by_points:
        return _footprint_by_points(model, lr, params)
    elems = nbytes = None
    sizes = {DTYPE_BYTES.get(model.kernel.decl(t.tensor).dtype, 4) for t in lr.tensors}
    for t in lr.tensors:
        # a number, even for --symbolic: count without parameters (much cheaper)
        held = without_params(fix_params(t.held, model, params)) if t.held.dim(isl.dim_type.param) else t.held
        c = held.card()
        elems = c if elems is None else elems.add(c)
        if len(sizes) > 1:
            scaled = c.scale_val(isl.Val(DTYPE_BYTES.get(model.kernel.decl(t.tensor).dtype, 4)))
            nbytes = scaled if nbytes is None else nbytes.add(scaled)
    if elems is None:
        return 0, 0
    most = _max_value(elems, model, params)
    if len(sizes) == 1:
        return most, most * sizes.pop()  # one dtype: bytes are a multiple of elements
    return most, _max_value(nbytes, model, params)


def _footprint_by_points(model: KernelModel, lr: LevelResidency, params: MappingT[str, int]) -> tuple[int, int]:
    """:func:`level_footprint` by walking each tensor's ``(residency, element)`` pairs."""
    elems: Counter = Counter()
    nbytes: Counter = Counter()
    for t in lr.tensors:
        with_params = bool(t.held.dim(isl.dim_type.param))
        held = without_params(fix_params(t.held, model, params)) if with_params else t.held
        size = DTYPE_BYTES.get(model.kernel.decl(t.tensor).dtype, 4)
        depth = held.dim(isl.dim_type.in_)
        per = Counter(p[:depth] for p in (points(held) if with_params else t.held_points))
        for r, n in per.items():
            elems[r] += n
            nbytes[r] += n * size
    return max(elems.values(), default=0), max(nbytes.values(), default=0)
