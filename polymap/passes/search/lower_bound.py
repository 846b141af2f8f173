"""Data-movement lower bounds per level: no mapping of the nest moves less across that level.

Before -> after (single-statement gemm, a level of ``S`` elements, one instance)::

    FastNest (A[i,k], B[k,j], C[i,j] +=)  ->  Bound(traffic >= 2 MNK / sqrt(S) - 2 S + MN, "hbl")

The bounded quantity is what crosses the level's upper boundary, summed over
its instances: ``fills + writebacks`` of every tensor it keeps (for a level
that keeps everything: the parent's ``reads + updates``). The derivation is
in ``docs/design.md`` ("Search: lower bounds"); in short, for a *projective*
nest (every subscript one loop or a constant):

1. Hölder-Brascamp-Lieb (Loomis-Whitney for gemm): a set ``V`` of statement
   instances touching ``u_X`` elements of each tensor has
   ``|V| <= prod u_X^(s_X)`` for any ``s >= 0`` with ``sum_{X uses x} s_X >= 1``
   for every loop ``x``; the smallest ``sigma = sum s_X`` is a small LP;
2. with ``sum u_X <= U``, weighted AM-GM gives ``|V| <= c U^sigma``,
   ``c = prod (s_X / sigma)^(s_X)``;
3. Hong-Kung segments: cut one instance's run after every ``T`` elements
   entering it; a segment only computes on what was held at its start
   (``<= S``) or entered in it (``<= T``), so ``W_i <= (E_i / T + 1) c (S + T)^sigma``;
   ``T = S / (sigma - 1)`` maximises the bound: ``E >= T W / (c (S + T)^sigma) - I T``
   over ``I`` instances; for gemm (``sigma = 3/2``, ``c = 3^-1.5``) that is
   ``2 W / sqrt(S) - 2 I S``;
4. every element accessed enters at least once, and the traffic counts
   entries plus the writebacks of tensors that are only ever updated
   (``+=``: each entry is a fill, and each written element leaves once):
   ``traffic >= max(E_hbl, sum |X|) + sum_{updated X} |X|``.

Haloed nests (``a*u + w``, the convolution's ``2*p + r``) get the same steps
over *slices*: fixing the window loops ``F`` (every ``w``) leaves a projective
nest per slice, and Hölder over the slices costs a factor ``rho_X`` per tensor,
the most slices one element of ``X`` can lie in (``ceil(E_w / a)`` per halo
subscript): :func:`hbl_form`, proven in ``docs/design.md``. Where no such form
exists only the compulsory term of step 4 is given (``"compulsory"``, with the
reason in ``Bound.note``). Nests outside the fast path get none.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from math import prod

import numpy as np

from polymap.machine.arch import Architecture, Level
from polymap.passes.counting.counting import Counts
from polymap.passes.counting.fastcount_forms import image_size
from polymap.passes.counting.fastcount_nest import FastNest, TensorShape


@dataclass(frozen=True)
class Bound:
    """A lower bound on the traffic across one level's upper boundary."""

    level: str
    capacity: int  # elements per instance
    instances: int
    traffic: float
    kind: str  # "hbl" (steps 1-4) or "compulsory" (step 4 only)
    sigma: float | None = None
    note: str = ""  # which form applied, or why HBL does not


@dataclass(frozen=True)
class HblForm:
    """Step 1 for a nest: ``|V| <= factor * prod_X u_X^(s_X)`` for every finite set ``V`` of instances."""

    s: tuple[float, ...]  # per tensor of the nest
    factor: float  # prod over tensors that use a window loop of rho_X^(s_X); 1 for a projective nest
    fixed: tuple[int, ...]  # the window loops F, fixed per slice (empty for a projective nest)


def _window_loops(nest: FastNest) -> tuple[int, ...]:
    """``F``: the ``w`` of every two-loop subscript ``a*u + w`` (extent > 1); fixing them leaves
    every subscript one loop or a constant."""
    return tuple(sorted({w for t in nest.tensors for sub in t.subscripts if len(sub) == 2
                         for w, _ in sub[1:] if nest.extents[w] > 1}))


def _multiplicity(nest: FastNest, t: TensorShape, fixed: tuple[int, ...]) -> int:
    """``rho_X``: at most this many slices (values of the loops in ``fixed``) touch one element of ``t``.

    Per window loop ``g``: 1 if a subscript of ``t`` is ``g`` alone (the slice fixes that coordinate);
    ``ceil(E_g / a)`` if a subscript is ``a*u + g`` (``g = h - a*u`` takes one residue class mod
    ``a`` in ``[0, E_g)``, and ``u`` follows from ``g`` if it is fixed too); ``E_g`` if ``t`` ignores ``g``.
    """
    out = 1
    for g in fixed:
        factor = nest.extents[g]
        for sub in t.subscripts:
            if len(sub) == 1 and sub[0][0] == g:
                factor = 1
            elif len(sub) == 2 and sub[1][0] == g:
                factor = -(-nest.extents[g] // sub[0][1])
            elif len(sub) == 2 and sub[0][0] == g and sub[1][0] in fixed:
                factor = 1  # the pair (u, w) is counted at w
        out *= factor
    return out


def hbl_form(nest: FastNest) -> HblForm | None:
    """The ``s`` of step 1 minimising ``sum s`` (vertex enumeration of a tiny LP), or None.

    Constraints: ``s >= 0``; per loop ``x`` of extent > 1 outside ``F``, ``sum_{X uses x} s_X >= 1``
    (HBL on one slice, a projective nest); and if ``F`` is not empty, ``sum s_X >= 1`` over the
    tensors that use a loop of ``F`` (Hölder over the slices).
    """
    fixed = _window_loops(nest)
    loops = [x for x in range(len(nest.loops)) if nest.extents[x] > 1 and x not in fixed]
    n = len(nest.tensors)
    rows = [[1.0 if x in t.loops else 0.0 for t in nest.tensors] for x in loops]
    if fixed:
        rows.append([1.0 if t.loops & set(fixed) else 0.0 for t in nest.tensors])
    A = np.array(rows + list(np.eye(n)))
    b = np.array([1.0] * (len(A) - n) + [0.0] * n)
    rho = [_multiplicity(nest, t, fixed) if t.loops & set(fixed) else 1 for t in nest.tensors]
    best, best_key = None, None
    for pick in combinations(range(len(A)), n):
        M = A[list(pick)]
        if abs(np.linalg.det(M)) < 1e-12:
            continue
        s = np.linalg.solve(M, b[list(pick)])
        if not (A @ s >= b - 1e-9).all():
            continue
        s = np.maximum(s, 0.0)
        key = (round(float(s.sum()), 9), float(sum(v * np.log(r) for v, r in zip(s, rho))))
        if best_key is None or key < best_key:
            best, best_key = s, key
    if best is None:
        return None
    s = tuple(float(v) for v in best)
    return HblForm(s, float(prod(r ** v for r, v in zip(rho, s))), fixed)


def hbl_exponents(nest: FastNest) -> tuple[float, ...] | None:
    """The exponents of :func:`hbl_form` for a projective nest; None if the nest has a halo."""
    if _window_loops(nest):
        return None
    form = hbl_form(nest)
    return None if form is None else form.s


def _elements(nest: FastNest, t: TensorShape) -> int:
    lengths = {x: nest.extents[x] for x in range(len(nest.loops))}
    return int(prod(image_size(sub, lengths) for sub in t.subscripts))


def hbl_entries(work: float, capacity: int, instances: int, s: tuple[float, ...], factor: float = 1.0) -> float:
    """Step 3: elements that must enter ``instances`` copies of a level of ``capacity`` to run ``work``
    (``factor``: the slices' Hölder factor of :class:`HblForm`)."""
    sigma = sum(s)
    if sigma <= 1:
        return 0.0
    c = factor * prod((v / sigma) ** v for v in s if v > 0)
    T = capacity / (sigma - 1)
    return max(0.0, T * work / (c * (capacity + T) ** sigma) - instances * T)


def level_bounds(nest: FastNest, arch: Architecture) -> list[Bound]:
    """One bound per level below the backing store that has a capacity."""
    form = hbl_form(nest)
    accessed = sum(_elements(nest, t) for t in nest.tensors)
    # only-updated tensors (+=, never plainly written, so every entry is a fill and each element
    # leaves written once more); an initialisation's plain write breaks the first half
    updated = sum(_elements(nest, t) for t in nest.tensors if t.writes and t.reads and not t.init_writes)
    if form is None:
        note = "HBL does not apply: no exponents cover every loop (the LP of step 1 is infeasible)"
    elif sum(form.s) <= 1:
        note = (f"HBL gives nothing beyond the compulsory traffic: sigma = {sum(form.s):g} <= 1 "
                f"(each element is used a bounded number of times)")
    elif form.fixed:
        note = (f"HBL over slices of fixed {', '.join(nest.loops[x] for x in form.fixed)} "
                f"(halo), Hölder factor {form.factor:.4g}")
    else:
        note = "HBL (projective nest)"
    out = []
    for lv in arch.levels[1:]:
        cap = _capacity_elements(nest, lv)
        if cap is None:
            continue
        entries = 0.0 if form is None else hbl_entries(nest.body_instances, cap, lv.instances, form.s, form.factor)
        kind = "hbl" if form is not None and sum(form.s) > 1 else "compulsory"
        out.append(Bound(lv.name, cap, lv.instances, max(entries, accessed) + updated, kind,
                         None if form is None else sum(form.s),
                         note + ("" if entries > accessed or kind == "compulsory"
                                 else "; at this capacity the compulsory traffic is larger")))
    return out


def _capacity_elements(nest: FastNest, level: Level) -> int | None:
    """Elements one instance can hold (bytes over the narrowest dtype: an upper bound, so the bound stays valid)."""
    if level.capacity_elements is not None:
        return level.capacity_elements
    if level.capacity_bytes is not None:
        return level.capacity_bytes // min(t.dtype_bytes for t in nest.tensors)
    return None


def level_traffic(counts: Counts, level_index: int) -> int:
    """``fills + writebacks`` of every tensor kept at the level, over its instances (the bounded quantity)."""
    lv = counts.levels[level_index]
    return sum((t.fills or 0) + (t.writebacks or 0) for t in lv.tensors)
