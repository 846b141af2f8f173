"""The next residency of the same instance, without a parametric ``lexmin`` when possible.

For a set ``P`` of residency points (tuples of tile coordinates and phases),
``next(r)`` is the lexicographically smallest ``r' > r`` in ``P`` with the
same spatial coordinates (the same instance). ``lexmin`` of ``lex_lt`` gives
it for any ``P`` but is the most expensive step of the counts. When every
*fiber* of ``P`` is an interval -- for each non-spatial dimension ``d``, the
values ``P`` allows at ``d`` after a given prefix (and the instance) form a
contiguous range -- the order is an odometer::

    next(r) = (r[<d], r[d] + 1, first values after that)   for the deepest d
                                                          where r[d] is not last

Before/after for gemm at the RF level (init at phase 0, acc at phase 1)::

    P = { [i0, j0, 0, 0] } u { [i0, j0, 1, k0] : 0 <= k0 < 8 }
    next = { [i0, j0, 1, k0] -> [i0, j0, 1, k0 + 1] : k0 < 7 }
         u { [i0, j0, 0, 0] -> [i0, j0, 1, 0] }
         u { [i0, j0, 1, 7] -> [i0, j0 + 1, 0, 0] : j0 < ... } u ...

All sets here are projections of ``P`` (``Q_d``: the dims up to ``d`` and
the spatial ones); the interval property is checked exactly (the ``+1``
successor exists wherever any later value exists) and :func:`successor`
falls back to ``lexmin`` when it fails (strided coordinates, say).
"""
from __future__ import annotations

from polymap.islcheck import isl

_SET, _IN, _OUT = isl.dim_type.set, isl.dim_type.in_, isl.dim_type.out


def successor(points: isl.Set, spatial: tuple[int, ...]) -> isl.Map:
    """``r -> r'``: the next point of ``points`` after ``r`` with the same spatial coordinates."""
    odometer = _odometer(points, spatial)
    return odometer if odometer is not None else _lexmin_successor(points, spatial)


def _lexmin_successor(points: isl.Set, spatial: tuple[int, ...]) -> isl.Map:
    later = points.lex_lt_set(points)
    for j in spatial:
        later = later.equate(_IN, j, _OUT, j)
    return later.lexmin()


def _step(space: isl.Space, d: int, by: int | None, same: list[int]) -> isl.Map:
    """``{ x -> y : y[j] = x[j] for j in same, y[d] = x[d] + by }`` on the set space ``space``.

    ``by=None`` leaves ``y[d]`` free.
    """
    mspace = space.map_from_set()
    ls = isl.LocalSpace.from_space(mspace)
    step = isl.BasicMap.universe(mspace)
    for j in same:
        c = isl.Constraint.equality_alloc(ls).set_coefficient_val(_OUT, j, 1).set_coefficient_val(_IN, j, -1)
        step = step.add_constraint(c)
    if by is not None:
        c = isl.Constraint.equality_alloc(ls)
        c = c.set_coefficient_val(_OUT, d, 1).set_coefficient_val(_IN, d, -1).set_constant_val(-by)
        step = step.add_constraint(c)
    return isl.Map.from_basic_map(step)


def _shift(space: isl.Space, d: int, by: int) -> isl.Map:
    """``{ x -> x + by * e_d }`` on ``space`` (a set space)."""
    return _step(space, d, by, [j for j in range(space.dim(_SET)) if j != d])


def _project(points: isl.Set, d: int, spatial: tuple[int, ...]) -> tuple[isl.Set, list[int]]:
    """``Q_d``: ``points`` without the non-spatial dims after ``d``; and the dims it dropped."""
    n = points.dim(_SET)
    dropped = [j for j in range(d + 1, n) if j not in spatial]
    q = points
    for j in reversed(dropped):
        q = q.project_out(_SET, j, 1)
    return q, dropped


def _lift(s: isl.Set, dropped: list[int]) -> isl.Set:
    """``s`` (a set on ``Q_d``'s dims) as a set on all dims (the dropped ones free)."""
    for j in dropped:
        s = s.insert_dims(_SET, j, 1)
    return s


def _odometer(points: isl.Set, spatial: tuple[int, ...]) -> isl.Map | None:
    """The successor map by odometer increments, or None when some fiber is not an interval."""
    n = points.dim(_SET)
    points = points.coalesce()
    space = points.get_space()
    steps = [d for d in range(n) if d not in spatial]
    # per non-spatial d (lifted to all dims): where r[d] + 1 continues, where r[d] is last, where first
    has_next, last, first = {}, {}, {}
    for d in steps:
        q, dropped = _project(points, d, spatial)
        qspace = q.get_space()
        up = q.intersect(q.apply(_shift(qspace, d, -1)))  # q + e_d in Q_d
        if not _convex(q):
            later = q.intersect(q.apply(_strictly_before(qspace, d)))  # some q + k e_d (k >= 1) in Q_d
            if not up.is_equal(later):
                return None  # a gap: r[d] + 1 is not the next value
        down = q.intersect(q.apply(_shift(qspace, d, 1)))  # q - e_d in Q_d
        has_next[d] = _lift(up, dropped)
        last[d] = _lift(q.subtract(up), dropped)
        first[d] = _lift(q.subtract(down), dropped)
    out = isl.Map.empty(space.map_from_set())
    tail_last = points  # r is the last point with prefix r[<=d]: last at every deeper step
    tail_first = points  # r' is the first point with prefix r'[<=d]
    for d in reversed(steps):
        dom = tail_last.intersect(has_next[d])
        rng = tail_first
        step = _step(space, d, 1, [j for j in range(n) if j < d or j in spatial])
        out = out.union(step.intersect_domain(dom).intersect_range(rng))
        tail_last = tail_last.intersect(last[d])
        tail_first = tail_first.intersect(first[d])
    return out.coalesce()


def _convex(q: isl.Set) -> bool:
    """One polyhedron without existential variables: every fiber is an interval of integers."""
    pieces = q.get_basic_sets()
    return len(pieces) == 1 and pieces[0].dim(isl.dim_type.div) == 0


def _strictly_before(space: isl.Space, d: int) -> isl.Map:
    """``{ x -> x - k e_d : k >= 1 }``: maps a point to those below it along ``d``."""
    m = _step(space, d, None, [j for j in range(space.dim(_SET)) if j != d])
    return m.order_lt(_OUT, d, _IN, d)
