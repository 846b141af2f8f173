"""Counts of every order at once (fastcount_orders) equal the fast path one structure at a time,
which tests/test_fastcount.py checks against the ISL path and the simulator."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from polymap.passes.counting.fastcount import Evaluator, Structure, loop_chains
from polymap.passes.counting.fastcount_nest import NotSupported, analyse_nest
from polymap.passes.counting.fastcount_orders import OrderTerms, entries_by_order
from fastcount_cases import by_combo, keep_and_tiles, sampled_orders
from test_fastcount import KERNELS, kernel_model


@st.composite
def cases(draw):
    name = draw(st.sampled_from(sorted(KERNELS)))
    kernel, model = kernel_model(name)
    nest = analyse_nest(model, 0, {p.name: p.default for p in kernel.params})
    m, n = len(nest.loops), draw(st.integers(2, 3))
    spatial = tuple(frozenset(draw(st.sets(st.integers(0, m - 1), max_size=1))) if 0 < k < n else frozenset()
                    for k in range(n))
    keep, tiles = keep_and_tiles(draw, nest, n)
    return nest, spatial, keep, tiles


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_every_order_at_once_equals_one_at_a_time(case):
    nest, spatial, keep, tiles = case
    n = len(spatial)
    try:
        terms = OrderTerms(nest, spatial, keep, tiles)
    except NotSupported:
        return
    perms, picked = sampled_orders(nest, spatial, 12)
    entries = entries_by_order(terms, perms)
    for combo, orders in picked:
        ev = Evaluator(nest, Structure(orders, spatial, keep))
        batch = ev.evaluate(tiles)
        for l in range(1, n):
            want = ev._entries(l, ev.resolve(tiles), _chains(ev, tiles))
            for x, v in want.items():
                assert (by_combo(entries[l][x], perms, len(tiles), combo) == v).all()
        # the fast path's own caveat (fastcount.py): a spatial loop over an edge tile with fewer
        # children, or a multicast across a two-loop subscript, is reported inexact, never miscounted
        assert batch.exact.all() or _uneven_spatial(nest, spatial, ev.resolve(tiles))


def _uneven_spatial(nest, spatial, T) -> bool:
    """Some loop spatial at a level has a tile along its chain that does not divide its parent's,
    or shares a subscript with another loop (a halo)."""
    shared = {x for t in nest.tensors for sub in t.subscripts if len(sub) > 1 for x, _ in sub}
    return any(x in shared or (T[:, j - 1, x] % T[:, j, x]).any()
               for k in range(len(spatial)) for x in spatial[k] for j in range(1, k + 2))


def _chains(ev, tiles):
    return loop_chains(ev.nest, ev.resolve(tiles), ev.s.levels)
