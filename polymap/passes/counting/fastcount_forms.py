"""Closed forms of the per-loop tile intervals, vectorised over a batch of tile sizes.

The fast path (:mod:`polymap.passes.counting.fastcount`) splits the counts of
``mapping.md`` into per-loop factors. Everything here works on NumPy int64
arrays of shape ``(B,)``, one entry per mapping of a batch.

For one loop, the tiles of a level are intervals made by splitting the loop
``[0, E)`` into tiles of ``T1``, each of those into tiles of ``T2``, ...
(aligned at the start of their parent, so edge tiles are partial). A *state*
is a class of such intervals with the same length: ``(count, L)``. A *pair
state* ``(count, LI, LJ, d)`` describes a residency change ``r -> r'``: the
loop's interval ``I`` in ``r`` (length ``LI``, at 0) and ``J`` in ``r'``
(length ``LJ``, starting at ``d``)::

    split_all([(1, 10)], 4)       -> [(2, 4), (1, 2)]          tiles 0-3, 4-7, 8-9
    pair_step([(1, 10)], 4)       -> [(1, 4, 4, 4), (1, 4, 2, 4)]   0-3 -> 4-7, 4-7 -> 8-9
    pair_temporal(pair(10), 4)    -> [(1, 2, 4, -8)]           last tile 8-9 -> first 0-3

Partial states (length 0 when a split leaves no remainder) carry count 0,
so every list has a fixed shape for the whole batch.
"""
from __future__ import annotations

import numpy as np

State = tuple  # (count, L)
Pair = tuple  # (count, LI, LJ, d)


def ceil_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return -(-a // b)


def split_all(states: list[State], t: np.ndarray) -> list[State]:
    """Every child tile of extent ``t`` of every interval (full tiles and the remainder)."""
    out = []
    for cnt, length in states:
        out.append((cnt * (length // t), np.broadcast_to(t, np.shape(length)).copy()))
        rem = length % t
        # an interval of length 0 with a count is an initialisation's own "tile" (see init_pair):
        # it has one child, itself; the other length-0 states have count 0 either way
        out.append((cnt * ((rem > 0) | (length == 0)), rem))
    return out


def split_first(states: list[State], t: np.ndarray) -> list[State]:
    """The first child tile of every interval."""
    return [(cnt, np.minimum(t, length)) for cnt, length in states]


def as_pairs(states: list[State]) -> list[Pair]:
    """Intervals that are the same in ``r`` and ``r'``."""
    return [(cnt, length, length, np.zeros_like(length)) for cnt, length in states]


def pair_temporal(pairs: list[Pair], t: np.ndarray) -> list[Pair]:
    """A temporal loop after the changing one: ``r`` sits in its last child, ``r'`` in its first."""
    out = []
    for cnt, li, lj, d in pairs:
        skip = np.maximum(ceil_div(li, t) - 1, 0) * t  # an initialisation's interval (length 0) stays
        out.append((cnt, li - skip, np.minimum(t, lj), d - skip))
    return out


def pair_spatial(pairs: list[Pair], t: np.ndarray) -> list[Pair]:
    """A spatial loop after the changing one: ``r`` and ``r'`` take the same child (the instance).

    Needs ``I`` and ``J`` to have the same number of children (checked by the caller).
    """
    out = []
    for cnt, li, lj, d in pairs:
        n = ceil_div(li, t)
        out.append((cnt * np.maximum(n - 1, 0), np.broadcast_to(t, np.shape(li)).copy(),
                    np.broadcast_to(t, np.shape(li)).copy(), d))
        out.append((cnt, li - (n - 1) * t, lj - (n - 1) * t, d))
    return out


def pair_first(pairs: list[Pair], t: np.ndarray) -> list[Pair]:
    """A spatial loop seen by its multicast group: ``r`` and ``r'`` in child 0, the group's
    representative (the other children are its shifts, :mod:`fastcount_halo`)."""
    return [(cnt, np.minimum(t, li), np.minimum(t, lj), d) for cnt, li, lj, d in pairs]


def pair_step(states: list[State], t: np.ndarray) -> list[Pair]:
    """The changing loop: ``r`` in child ``v``, ``r'`` in child ``v + 1`` (``v`` not the last)."""
    out = []
    for cnt, length in states:
        n = ceil_div(length, t)
        full = np.broadcast_to(t, np.shape(length)).copy()
        out.append((cnt * np.maximum(n - 2, 0), full, full, full))
        out.append((cnt * (n >= 2), full, length - (n - 1) * t, full))
    return out


def init_pair(whole: np.ndarray, t: np.ndarray) -> Pair:
    """The step from an initialisation's residency into the first tile of the loop it lacks.

    The initialisation runs before every iteration of that loop (``mapping.md``), so at the
    outermost level the loop's children are ``[init, tile 0, tile 1, ...]``; the init "tile" has
    length 0 (it covers no iteration of the loop: tensors indexed by the loop hold nothing there)
    and one child, itself, at every inner level.
    """
    return (np.ones_like(whole), np.zeros_like(whole), np.minimum(t, whole), np.zeros_like(whole))


def restart_at_init(pairs: list[Pair], t: np.ndarray) -> list[Pair]:
    """:func:`pair_temporal` at the outermost level for the loop an initialisation lacks: ``r'``
    restarts at that loop's first child, the initialisation's (length 0)."""
    return [(c, li, 0 * lj, d) for c, li, lj, d in pair_temporal(pairs, t)]


def into_init(pairs: list[Pair]) -> list[Pair]:
    """The pairs whose ``r'`` is an initialisation's residency (length 0; other length-0 states count 0)."""
    return [(c * (lj == 0), li, lj, d) for c, li, lj, d in pairs]


def total(states: list[State]) -> np.ndarray:
    """How many intervals (or pairs) the states describe."""
    return sum(s[0] for s in states)


def _holds(length: np.ndarray, only: str) -> np.ndarray:
    """Whether a residency with this interval of an initialisation's loop holds a tensor that only the
    body (``"body"``: a real interval, length > 0) or only the initialisation (``"init"``: its own
    interval, length 0) accesses; the other length-0 states count 0 either way."""
    return length > 0 if only == "body" else length == 0


def total_holding(states: list[State], only: str | None) -> np.ndarray:
    """:func:`total` of the intervals whose residencies hold the tensor (``only``: see :func:`_holds`)."""
    if only is None:
        return total(states)
    return sum(c * _holds(length, only) for c, length in states)


def pair_totals_holding(pairs: list[Pair], only: str | None) -> tuple:
    """``(pairs whose r' holds the tensor, pairs whose r and r' both hold it)``: the factors of
    ``sum |D(r')|`` and ``sum |D(r) & D(r')|`` of a loop in no subscript of the tensor."""
    if only is None:
        n = total(pairs)
        return n, n
    size = sum(c * _holds(lj, only) for c, li, lj, d in pairs)
    both = sum(c * (_holds(li, only) & _holds(lj, only)) for c, li, lj, d in pairs)
    return size, both


# --------------------------------------------------------------------------- images of subscripts


def image_size(terms: tuple, lengths: dict) -> np.ndarray | int:
    """Distinct values of one subscript over a box with the given per-loop lengths.

    ``terms`` is ``()`` (a constant), ``((x, a),)`` or ``((u, a), (w, 1))`` for ``a*u + w``:
    ``|{a u + w}| = (Lu - 1) min(a, Lw) + Lw``.
    """
    if not terms:
        return 1
    if len(terms) == 1:
        return lengths[terms[0][0]]
    (u, a), (w, _) = terms
    lu, lw = lengths[u], lengths[w]
    return (lu - 1) * np.minimum(a, lw) + lw


def _overlap(li: np.ndarray, lj: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``|[0, LI) & [d, d + LJ)|``."""
    return np.maximum(np.minimum(li, d + lj) - np.maximum(0, d), 0)


def _count_residue(lo: np.ndarray, hi: np.ndarray, rho: int, a: int) -> np.ndarray:
    """``#{x in [lo, hi) : x = rho (mod a)}`` (0 when the range is empty)."""
    return np.maximum((hi - 1 - rho) // a - (lo - 1 - rho) // a, 0)


def strided_overlap(a: int, lui: np.ndarray, lwi: np.ndarray, luj: np.ndarray, lwj: np.ndarray, delta: np.ndarray
                   ) -> np.ndarray:
    """``|S(LuI, LwI) & (delta + S(LuJ, LwJ))|`` with ``S(Lu, Lw) = {a u + w : u < Lu, w < Lw}``.

    ``x`` is in ``S(Lu, Lw)`` iff ``0 <= x < a (Lu - 1) + Lw`` and ``x mod a < Lw``,
    so the count is a sum over the residues modulo ``a``.
    """
    hi_i = a * (lui - 1) + lwi
    lo = np.maximum(0, delta)
    hi = np.minimum(hi_i, delta + a * (luj - 1) + lwj)
    out = 0
    for rho in range(a):
        ok = (rho < lwi) & (np.mod(rho - delta, a) < lwj)
        out = out + ok * _count_residue(lo, hi, rho, a)
    return out


def group_pair_sums(terms: tuple, pairs: dict) -> tuple:
    """``(sum |D_d(r')|, sum |D_d(r) & D_d(r')|)`` over the joint pair states of one subscript."""
    if not terms:
        return 1, 1
    if len(terms) == 1:
        x = terms[0][0]
        size = sum(c * lj for c, li, lj, d in pairs[x])
        both = sum(c * _overlap(li, lj, d) for c, li, lj, d in pairs[x])
        return size, both
    (u, a), (w, _) = terms
    size = both = 0
    for cu, lui, luj, du in pairs[u]:
        for cw, lwi, lwj, dw in pairs[w]:
            cnt = cu * cw
            size = size + cnt * ((luj - 1) * np.minimum(a, lwj) + lwj)
            both = both + cnt * strided_overlap(a, lui, lwi, luj, lwj, a * du + dw)
    return size, both


def group_state_sum(terms: tuple, states: dict) -> np.ndarray | int:
    """``sum |D_d(r)|`` over the joint states of one subscript."""
    if not terms:
        return 1
    if len(terms) == 1:
        return sum(c * length for c, length in states[terms[0][0]])
    (u, a), (w, _) = terms
    out = 0
    for cu, lu in states[u]:
        for cw, lw in states[w]:
            out = out + cu * cw * ((lu - 1) * np.minimum(a, lw) + lw)
    return out
