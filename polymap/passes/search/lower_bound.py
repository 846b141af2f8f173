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

Haloed nests (``2*p + r``) are not projective: only the compulsory term of
step 4 is given (``"compulsory"``). Nests outside the fast path get none.
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


def hbl_exponents(nest: FastNest) -> tuple[float, ...] | None:
    """The ``s`` of step 1 minimising ``sum s`` (vertex enumeration of a tiny LP); None if not projective."""
    if any(len(sub) > 1 for t in nest.tensors for sub in t.subscripts):
        return None
    loops = [x for x in range(len(nest.loops)) if nest.extents[x] > 1]
    n = len(nest.tensors)
    # rows: sum_{X uses x} s_X >= 1 per loop, then s_X >= 0
    A = np.array([[1.0 if x in t.loops else 0.0 for t in nest.tensors] for x in loops] + list(np.eye(n)))
    b = np.array([1.0] * len(loops) + [0.0] * n)
    best = None
    for rows in combinations(range(len(A)), n):
        M = A[list(rows)]
        if abs(np.linalg.det(M)) < 1e-12:
            continue
        s = np.linalg.solve(M, b[list(rows)])
        if (A @ s >= b - 1e-9).all() and (best is None or s.sum() < best.sum() - 1e-12):
            best = s
    return None if best is None else tuple(float(max(v, 0.0)) for v in best)


def _elements(nest: FastNest, t: TensorShape) -> int:
    lengths = {x: nest.extents[x] for x in range(len(nest.loops))}
    return int(prod(image_size(sub, lengths) for sub in t.subscripts))


def hbl_entries(work: float, capacity: int, instances: int, s: tuple[float, ...]) -> float:
    """Step 3: elements that must enter ``instances`` copies of a level of ``capacity`` to run ``work``."""
    sigma = sum(s)
    if sigma <= 1:
        return 0.0
    c = prod((v / sigma) ** v for v in s if v > 0)
    T = capacity / (sigma - 1)
    return max(0.0, T * work / (c * (capacity + T) ** sigma) - instances * T)


def level_bounds(nest: FastNest, arch: Architecture) -> list[Bound]:
    """One bound per level below the backing store that has a capacity."""
    s = hbl_exponents(nest)
    accessed = sum(_elements(nest, t) for t in nest.tensors)
    updated = sum(_elements(nest, t) for t in nest.tensors if t.writes and t.reads)
    out = []
    for lv in arch.levels[1:]:
        cap = _capacity_elements(nest, lv)
        if cap is None:
            continue
        entries = 0.0 if s is None else hbl_entries(nest.instances, cap, lv.instances, s)
        out.append(Bound(lv.name, cap, lv.instances, max(entries, accessed) + updated,
                         "compulsory" if s is None else "hbl", None if s is None else sum(s)))
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
