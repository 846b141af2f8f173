"""What the fast path's tests share: a small architecture, building a drawn mapping, the drawn
tiles of a nest's levels, and the orders one "every order at once" check samples.

The fast path's test files (test_fastcount*.py) compare it with the ISL path, the simulator and
itself one structure at a time; each draws its own nests, and uses these to turn a draw into a case.
"""
from __future__ import annotations

from itertools import product

import numpy as np
from hypothesis import strategies as st

from polymap.errors import PolymapError
from polymap.machine.arch import architecture_from_dict
from polymap.mapping.files import mapping_from_dict
from polymap.passes.counting.counting import isl_count_mapping
from polymap.passes.counting.fastcount import fast_counts
from polymap.passes.counting.fastcount_orders import all_orders
from polymap.passes.search.mapspace import chains


def arch_of(n: int, fanout: int = 4):
    """``n`` levels, each ``fanout`` times as many instances as the one above, and as many units."""
    levels = [{"name": "L0"}] + [{"name": f"L{k}", "instances": fanout ** (k - 1)} for k in range(1, n)]
    return architecture_from_dict({"levels": levels, "compute": {"instances": fanout ** (n - 1)}},
                                  source_name="<test>")


def built(kernel, model, n: int, levels: list, *, fanout: int = 4):
    """(kernel, model, arch, mapping) of a drawn mapping, or None when the draw is not a valid
    mapping (a fan-out over the instances, a loop spatial twice): not a case."""
    arch = arch_of(n, fanout)
    try:
        mapping = mapping_from_dict({"levels": levels}, kernel=kernel, arch=arch)
    except PolymapError:
        return None
    return kernel, model, arch, mapping


def fast_of(case):
    """(kernel, mapping, params, the fast path's counts) of a built case at its default sizes, or
    None for no case or a refusal (the mapping goes to the ISL path: nothing to compare)."""
    if case is None:
        return None
    kernel, model, arch, mapping = case
    params = {p.name: p.default for p in kernel.params}
    fast = fast_counts(model, mapping, arch, params=params)
    return None if fast is None else (kernel, mapping, params, fast)


def assert_fast_equals_isl(case) -> None:
    """The fast path's counts equal the ISL path's where it answers."""
    got = fast_of(case)
    if got is not None:
        kernel, mapping, params, fast = got
        _, model, arch, _ = case
        assert fast == isl_count_mapping(model, mapping, arch, params=params)


def keep_and_tiles(draw, nest, n: int) -> tuple[tuple[frozenset, ...], np.ndarray]:
    """Drawn tensors kept per level (all at the backing store) and 1-4 rows of tile chains (the
    whole extents first, then one drawn chain per loop)."""
    keep = tuple(frozenset(t.name for t in nest.tensors if k == 0 or draw(st.integers(0, 3)))
                 for k in range(n))
    per_loop = [chains(e, n - 1) for e in nest.extents]
    m = len(nest.loops)
    rows = [[list(nest.extents)] + [[int(per_loop[x][draw(st.integers(0, len(per_loop[x]) - 1))][k])
                                     for x in range(m)] for k in range(n - 1)]
            for _ in range(draw(st.integers(1, 4)))]
    return keep, np.array(rows, dtype=np.int64)


def sampled_orders(nest, spatial: tuple[frozenset, ...], k: int):
    """The per-level permutations of the moving loops, and ``k`` sampled (combination, orders)
    pairs of them (seeded by their number, so a case always samples the same ones)."""
    m = len(nest.loops)
    moving = tuple(tuple(x for x in range(m) if x not in spatial[l]) for l in range(len(spatial) - 1))
    perms = tuple(all_orders(p) for p in moving)
    combos = list(product(*[range(len(p)) for p in perms]))
    rng = np.random.default_rng(len(combos))
    picked = []
    for c in rng.choice(len(combos), size=min(k, len(combos)), replace=False):
        combo = combos[c]
        orders = tuple(tuple(sorted(spatial[l])) + perms[l][i] for l, i in enumerate(combo)) + (tuple(range(m)),)
        picked.append((combo, orders))
    return perms, picked


def by_combo(values: np.ndarray, perms, n_rows: int, combo) -> np.ndarray:
    """One combination's row of a value computed for every order at once."""
    return np.broadcast_to(values, tuple(len(p) for p in perms) + (n_rows,))[combo]
