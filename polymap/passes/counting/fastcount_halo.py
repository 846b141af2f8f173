"""Multicast across a loop of a two-loop subscript: the union of a group of haloed images.

A parent level reads once per element and step for all the spatial
children that take the element in at that step (``mapping.md``). When the
children differ in a loop ``x`` of a subscript ``a*u + w`` (``p`` of
``I[2*p + r]``), their images overlap (the halo), so the parent's reads are
the size of a union, not a sum. Everything here is per subscript; the fast
path (:mod:`polymap.passes.counting.fastcount`) multiplies subscripts.

The group. When ``x`` is spatial at level ``k`` and every level-``k``
interval of ``x`` holds ``n`` whole children of length ``t`` (checked per
mapping by the caller), child ``v`` sees child 0's intervals shifted by
``v t``, in ``r`` and in ``r'`` alike, at every level below ``k`` (they walk
identical tiles in lock step). So with ``A0``, ``B0`` child 0's image in
``r'`` and ``r`` and ``s`` the shifts of the group (``v a t`` for ``u``,
``v t`` for ``w``, both when both loops are spread)::

    parent reads at a step = |U_s (A0 + s) \\ (B0 + s)| = |U_s ((A0 \\ B0) + s)|

and, because each loop lies in one subscript, the union over a product of
per-subscript shifts of a product set factors: with ``UA_d = U_s A0_d + s``
and ``G_d = UA_d \\ U_s ((A0_d \\ B0_d) + s)`` per subscript ``d``, the step's
reads are ``prod |UA_d| - prod |G_d|`` (an element is *not* read when every
child that takes it already held it, dimension by dimension). The same
``size - both`` shape as the per-instance fast path, with ``|UA|`` for the
size and ``|G|`` for what stays.

The two sizes are counted on the integers: sets as Python ``int`` bit masks,
one per distinct parameter row of a batch (tile sizes of two loops: a few
dozen rows at most), spread over the ``n`` shifts by doubling.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

Shift = tuple  # (n, t): n children of length t (arrays of shape (B,)); n = 1 when not spread


def _interval(lo: int, length: int) -> int:
    return ((1 << length) - 1) << lo if length > 0 else 0


def image_mask(a: int, u0: int, lu: int, w0: int, lw: int, off: int) -> int:
    """``{a u + w : u0 <= u < u0 + lu, w0 <= w < w0 + lw}`` shifted by ``off`` (all bits >= 0)."""
    if lu <= 0 or lw <= 0:
        return 0
    base = a * u0 + w0 + off
    if lu == 1 or a <= lw:  # consecutive images touch or overlap: one interval
        return _interval(base, a * (lu - 1) + lw)
    return spread(_interval(base, lw), a, lu)


def spread(mask: int, step: int, n: int) -> int:
    """``U_{v < n} (mask << v step)``, by doubling (``O(log n)`` shifts)."""
    out, block, done, width = 0, mask, 0, 1
    while n:
        if n & 1:
            out |= block << (done * step)
            done += width
        n >>= 1
        if n:
            block |= block << (width * step)
            width *= 2
    return out


def _union_pair(a: int, lui: int, luj: int, du: int, lwi: int, lwj: int, dw: int,
                nu: int, pu: int, nw: int, pw: int) -> tuple[int, int]:
    """``(|UA|, |G|)`` of one subscript at one kind of step (module doc); ``pu``, ``pw`` the shift
    periods of ``u`` and ``w`` (``a t_u`` and ``t_w``)."""
    off = a * max(0, -du) + max(0, -dw)
    new = image_mask(a, du, luj, dw, lwj, off)
    old = image_mask(a, 0, lui, 0, lwi, off)
    ua = spread(spread(new, pu, nu), pw, nw)
    fresh = spread(spread(new & ~old, pu, nu), pw, nw)
    return ua.bit_count(), ua.bit_count() - fresh.bit_count()


def _by_rows(columns: list[np.ndarray], fn: Callable[..., Any], width: int) -> np.ndarray:
    """``fn`` on each distinct row of the stacked ``columns``: ``(width, B)`` results."""
    stacked = np.stack([np.asarray(c, dtype=np.int64) for c in columns], axis=1)
    # one integer per row (mixed radix over each column's range): a 1-D unique is far cheaper
    # than numpy's row-wise unique, which sorts a structured view
    low = stacked.min(axis=0)
    span = stacked.max(axis=0) - low + 1
    if float(np.prod(span.astype(float))) < 2.0 ** 62:
        radix = np.concatenate([[1], np.cumprod(span[:-1])]).astype(np.int64)
        _, first, inverse = np.unique((stacked - low) @ radix, return_index=True, return_inverse=True)
        rows = stacked[first]
    else:
        rows, inverse = np.unique(stacked, axis=0, return_inverse=True)
    values = np.array([fn(*(int(v) for v in row)) for row in rows], dtype=np.int64).reshape(len(rows), width)
    return values[inverse.reshape(-1)].T


def _shift_of(x: int, coefficient: int, shifts: dict, ones: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if x not in shifts:
        return ones, 0 * ones
    n, t = shifts[x]
    return n * ones, coefficient * t * ones


def _joint(cnt: np.ndarray | int, terms: tuple, shifts: dict) -> tuple[np.ndarray, np.ndarray, tuple]:
    """For a joint state of ``a*u + w`` counted ``cnt`` times: the broadcast shape (ones), the positions
    where it occurs, and its spread ``(n_u, step_u, n_w, step_w)`` over the multicast group."""
    (u, a), (w, _) = terms
    ones = np.ones(np.shape(cnt), dtype=np.int64)
    nu, pu = _shift_of(u, a, shifts, ones)
    nw, pw = _shift_of(w, 1, shifts, ones)
    return ones, np.flatnonzero(cnt * ones > 0), (nu, pu, nw, pw)


def union_pair_sums(terms: tuple, pairs: dict, shifts: dict) -> tuple:
    """``(sum |UA|, sum |G|)`` over the joint pair states of one subscript ``a*u + w`` whose loops in
    ``shifts`` are spread over a multicast group (the others' pair states are per instance)."""
    (u, a), (w, _) = terms
    size = both = 0
    for cu, lui, luj, du in pairs[u]:
        for cw, lwi, lwj, dw in pairs[w]:
            cnt = cu * cw
            ones, live, spread = _joint(cnt, terms, shifts)
            if not len(live):
                continue
            cols = [np.broadcast_to(v, ones.shape)[live] for v in (lui, luj, du, lwi, lwj, dw, *spread)]
            values = np.zeros((2,) + ones.shape, dtype=np.int64)
            values[:, live] = _by_rows(cols, lambda *r: _union_pair(a, *r), 2)
            size = size + cnt * values[0]
            both = both + cnt * values[1]
    return size, both


def union_state_sum(terms: tuple, states: dict, shifts: dict) -> np.ndarray | int:
    """``sum |UA|`` over the joint states of one subscript (a first residency: nothing held before)."""
    (u, a), (w, _) = terms
    out = 0
    for cu, lu in states[u]:
        for cw, lw in states[w]:
            cnt = cu * cw
            ones, live, spread = _joint(cnt, terms, shifts)
            if not len(live):
                continue
            cols = [np.broadcast_to(v, ones.shape)[live] for v in (lu, lw, *spread)]
            values = np.zeros(ones.shape, dtype=np.int64)
            values[live] = _by_rows(cols, lambda lu_, lw_, *r: _union_pair(a, 0, lu_, 0, 0, lw_, 0, *r)[0], 1)[0]
            out = out + cnt * values
    return out
