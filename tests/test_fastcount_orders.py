"""Counts of every order at once (fastcount_orders) equal the fast path one structure at a time,
which tests/test_fastcount.py checks against the ISL path and the simulator."""
from __future__ import annotations

from itertools import product

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from polymap.passes.counting.fastcount import Evaluator, Structure, loop_chains
from polymap.passes.counting.fastcount_nest import NotSupported, analyse_nest
from polymap.passes.counting.fastcount_orders import OrderTerms, all_orders, entries_by_order
from polymap.passes.search.mapspace import chains
from test_fastcount import KERNELS, kernel_model


@st.composite
def cases(draw):
    name = draw(st.sampled_from(sorted(KERNELS)))
    kernel, model = kernel_model(name)
    nest = analyse_nest(model, 0, {p.name: p.default for p in kernel.params})
    m, n = len(nest.loops), draw(st.integers(2, 3))
    spatial = tuple(frozenset(draw(st.sets(st.integers(0, m - 1), max_size=1))) if 0 < k < n else frozenset()
                    for k in range(n))
    keep = tuple(frozenset(t.name for t in nest.tensors if k == 0 or draw(st.integers(0, 3)))
                 for k in range(n))
    per_loop = [chains(e, n - 1) for e in nest.extents]
    rows = [[list(nest.extents)] + [[int(per_loop[x][draw(st.integers(0, len(per_loop[x]) - 1))][k])
                                     for x in range(m)] for k in range(n - 1)]
            for _ in range(draw(st.integers(1, 4)))]
    return nest, spatial, keep, np.array(rows, dtype=np.int64)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_every_order_at_once_equals_one_at_a_time(case):
    nest, spatial, keep, tiles = case
    n, m = len(spatial), len(nest.loops)
    moving = tuple(tuple(x for x in range(m) if x not in spatial[k]) for k in range(n - 1))
    try:
        terms = OrderTerms(nest, spatial, keep, tiles)
    except NotSupported:
        return
    perms = tuple(all_orders(p) for p in moving)
    entries = entries_by_order(terms, perms)
    combos = list(product(*[range(len(p)) for p in perms]))
    rng = np.random.default_rng(len(combos))
    for c in rng.choice(len(combos), size=min(12, len(combos)), replace=False):
        combo = combos[c]
        orders = tuple(tuple(sorted(spatial[k])) + perms[k][i] for k, i in enumerate(combo)) + (tuple(range(m)),)
        ev = Evaluator(nest, Structure(orders, spatial, keep))
        batch = ev.evaluate(tiles)
        for l in range(1, n):
            want = ev._entries(l, ev.resolve(tiles), _chains(ev, tiles))
            for x, v in want.items():
                full = np.broadcast_to(entries[l][x], tuple(len(p) for p in perms) + (len(tiles),))
                assert (full[combo] == v).all()
        assert batch.exact.all()


def _chains(ev, tiles):
    return loop_chains(ev.nest, ev.resolve(tiles), ev.s.levels)
