"""Multicast across halo loops (spatial p, r of I[a*p + r]) in the fast path: equal to the ISL path
(mapping.md's definition) on generated haloed nests, to the simulator on some, every order at once
equal to one at a time, and the search's pruning keeps the best with these spatial loops."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from polymap.driver import parse
from polymap.mapping.files import mapping_from_dict
from polymap.passes.counting import fastcount_halo as H
from polymap.passes.counting.cost_model import Objective
from polymap.passes.counting.counting import isl_count_mapping
from polymap.passes.counting.fastcount import Evaluator, Structure, evaluator_for, fast_counts, loop_chains
from polymap.passes.counting.fastcount_nest import NotSupported, analyse_nest
from polymap.passes.counting.fastcount_orders import OrderTerms, multicast_by_order
from polymap.passes.search.mapsearch import SearchOptions, search_nest
from polymap.poly import build_model
from fastcount_cases import arch_of, assert_fast_equals_isl, built, by_combo, keep_and_tiles, sampled_orders
from simulator import counts_as_dict, simulate

_MODELS: dict = {}


def model_of(src: str):
    if src not in _MODELS:
        kernel = parse(src, "<test>").kernels[0]
        _MODELS[src] = (kernel, build_model(kernel))
    return _MODELS[src]


def conv1d(a: int, K: int, P: int, R: int, init: bool) -> tuple[str, tuple[str, ...]]:
    head = f"kernel h(K = {K}, P = {P}, R = {R}) {{ in W[K, R]; in I[{a} * P + R]; out O[K, P]; "
    if init:
        body = (f"for k in 0..K, p in 0..P {{ init: O[k, p] = 0; "
                f"for r in 0..R {{ acc: O[k, p] += W[k, r] * I[{a} * p + r] }} }} }}")
    else:
        body = f"for k in 0..K, p in 0..P, r in 0..R {{ O[k, p] += W[k, r] * I[{a} * p + r] }} }}"
    return head + body, ("k", "p", "r")


def conv2d(a: int, b: int, C: int, P: int, Q: int, R: int, S: int) -> tuple[str, tuple[str, ...]]:
    return (f"kernel g(C = {C}, P = {P}, Q = {Q}, R = {R}, S = {S}) {{ in I[C, {a} * P + R, {b} * Q + S]; "
            f"in W[C, R, S]; inout O[P, Q]; for c in 0..C, p in 0..P, q in 0..Q, r in 0..R, s in 0..S "
            f"{{ O[p, q] += I[c, {a} * p + r, {b} * q + s] * W[c, r, s] }} }}"), ("c", "p", "q", "r", "s")


def transposed(a: int, P: int, R: int) -> tuple[str, tuple[str, ...]]:
    """The halo on the written tensor (a transposed convolution): O[a*p + r] += ..."""
    return (f"kernel t(P = {P}, R = {R}) {{ in W[R]; in I[P]; inout O[{a} * P + R]; "
            f"for p in 0..P, r in 0..R {{ O[{a} * p + r] += W[r] * I[p] }} }}"), ("p", "r")


HALO = {"h": ("p", "r"), "g": ("p", "q", "r", "s"), "t": ("p", "r")}
FANOUT = 16  # enough instances for two spatial halo loops at one level


@st.composite
def nests(draw):
    kind = draw(st.sampled_from(["h", "h", "g", "t"]))
    a = draw(st.integers(1, 3))
    if kind == "h":
        return conv1d(a, draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.booleans()))
    if kind == "g":
        return conv2d(a, draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3)),
                      draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    return transposed(a, draw(st.integers(1, 6)), draw(st.integers(1, 4)))


def _tile(draw, extent: int) -> int:
    """Mostly a divisor (whole children: what the fast path counts), sometimes anything."""
    if draw(st.integers(0, 3)):
        return draw(st.sampled_from([d for d in range(1, extent + 1) if extent % d == 0]))
    return draw(st.integers(1, extent + 1))


@st.composite
def cases(draw):
    src, loops = draw(nests())
    kernel, _ = model_of(src)
    extents = dict(zip(loops, [p.default for p in kernel.params]))  # parameters in loop order
    halo = HALO[kernel.name]
    tensors = [d.name for d in kernel.decls]
    n = draw(st.integers(2, 3))
    levels = []
    for l in range(n):
        lv = {"level": f"L{l}", "order": list(draw(st.permutations(loops)))}
        if l > 0:
            lv["tile"] = {x: _tile(draw, extents[x]) for x in loops if draw(st.booleans())}
            lv["keep"] = [t for t in tensors if draw(st.integers(0, 4)) > 0]
        if draw(st.integers(0, 3)):
            # spatial loops over the halo dimensions mostly: what this file is about
            pool = halo if draw(st.integers(0, 3)) else loops
            lv["spatial"] = sorted(draw(st.sets(st.sampled_from(pool), min_size=1, max_size=2)))
        levels.append(lv)
    return src, n, levels


def build(src: str, n: int, levels):
    return built(*model_of(src), n, levels, fanout=FANOUT)


@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_fast_equals_isl_on_haloed_nests(case):
    assert_fast_equals_isl(build(*case))


def _halo_mappings(seed: int, count: int):
    """Random mappings of generated haloed nests whose counts multicast across a halo loop."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        kind = rng.choice(["h", "g", "t"])
        a = int(rng.integers(1, 4))
        if kind == "h":
            src, loops = conv1d(a, int(rng.integers(1, 3)), int(rng.integers(2, 7)), int(rng.integers(2, 4)),
                                bool(rng.integers(0, 2)))
        elif kind == "g":
            src, loops = conv2d(a, int(rng.integers(1, 3)), 1, int(rng.integers(2, 4)), 2, int(rng.integers(2, 4)), 2)
        else:
            src, loops = transposed(a, int(rng.integers(2, 7)), int(rng.integers(2, 4)))
        kernel, model = model_of(src)
        extents = dict(zip(loops, [p.default for p in kernel.params]))
        n = int(rng.integers(2, 4))
        levels = []
        for l in range(n):
            lv = {"level": f"L{l}", "order": [str(x) for x in rng.permutation(loops)]}
            if l > 0:
                lv["tile"] = {x: int(rng.choice([d for d in range(1, extents[x] + 1) if extents[x] % d == 0]))
                              for x in loops if rng.random() < 0.6}
                lv["keep"] = [t for t in (d.name for d in kernel.decls) if rng.random() < 0.85]
            if l < n - 1:
                lv["spatial"] = [str(x) for x in rng.choice(HALO[kernel.name], size=1)]
            levels.append(lv)
        drawn = build(src, n, levels)
        if drawn is None:
            continue
        kernel, model, arch, mapping = drawn
        params = {p.name: p.default for p in kernel.params}
        try:
            ev = evaluator_for(model, mapping, params)
        except NotSupported:
            continue
        if ev._grouped_spatial:
            out.append((kernel, model, arch, mapping, params))
    return out


def test_halo_multicast_is_taken_and_exact():
    """The fast path takes halo multicast (no longer sends it to the ISL path) and equals the ISL path
    on every such mapping, and the step-by-step simulation on some."""
    taken = 0
    for i, (kernel, model, arch, mapping, params) in enumerate(_halo_mappings(3, 30)):
        fast = fast_counts(model, mapping, arch, params=params)
        if fast is None:
            continue
        taken += 1
        assert fast == isl_count_mapping(model, mapping, arch, params=params)
        if i < 6:
            assert counts_as_dict(fast) == simulate(kernel, mapping, params)
    assert taken >= 20  # only an edge child (whole children are required) is refused


def test_multicast_changes_the_reads():
    """Spatial p over I[p + r]: the parent reads each element once per step for the whole group,
    fewer than the children's fills (the halos overlap), and exactly what the ISL path counts."""
    src, _ = conv1d(1, 1, 4, 3, False)
    kernel, model = model_of(src)
    arch = arch_of(2, FANOUT)
    mapping = mapping_from_dict({"levels": [
        {"level": "L0", "order": ["k", "p", "r"], "spatial": ["p"]},
        {"level": "L1", "tile": {"p": 1}, "order": ["k", "p", "r"]}]}, kernel=kernel, arch=arch)
    fast = fast_counts(model, mapping, arch)
    assert fast is not None and fast == isl_count_mapping(model, mapping, arch)
    fills = fast.level("L1").tensor("I").fills
    reads = fast.level("L0").tensor("I").reads
    # four children each take their window of 3 (12 fills); the union is I[0..6): 6 reads
    assert (fills, reads) == (12, 6)


def test_spread_and_image_by_hand():
    """The bit-mask helpers against Python sets."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        a, u0, lu, w0, lw = (int(rng.integers(1, 4)), int(rng.integers(-5, 5)), int(rng.integers(0, 5)),
                             int(rng.integers(-5, 5)), int(rng.integers(0, 5)))
        off = 40
        want = {a * u + w + off for u in range(u0, u0 + lu) for w in range(w0, w0 + lw)}
        mask = H.image_mask(a, u0, lu, w0, lw, off)
        assert {k for k in range(mask.bit_length()) if mask >> k & 1} == want
        step, n = int(rng.integers(1, 9)), int(rng.integers(1, 7))
        spread = H.spread(mask, step, n)
        assert {k for k in range(spread.bit_length()) if spread >> k & 1} == {e + v * step for e in want
                                                                               for v in range(n)}


# --------------------------------------------------------------------------- every order at once


@st.composite
def order_cases(draw):
    src, loops = draw(nests())
    kernel, model = model_of(src)
    try:
        nest = analyse_nest(model, 0, {p.name: p.default for p in kernel.params})
    except NotSupported:  # an initialisation over a loop of extent 1 (its subscript folds to 0)
        assume(False)
    n = draw(st.integers(2, 3))
    halo = [nest.loops.index(x) for x in HALO[kernel.name]]
    spatial = tuple(frozenset(draw(st.sets(st.sampled_from(halo), min_size=1, max_size=2))) if k < n - 1
                    else frozenset() for k in range(n))
    keep, tiles = keep_and_tiles(draw, nest, n)
    return nest, spatial, keep, tiles


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(order_cases())
def test_multicast_of_every_order_equals_one_at_a_time(case):
    nest, spatial, keep, tiles = case
    n = len(spatial)
    try:
        terms = OrderTerms(nest, spatial, keep, tiles)
    except NotSupported:
        return
    perms, picked = sampled_orders(nest, spatial, 8)
    multicast = multicast_by_order(terms, perms)
    for combo, orders in picked:
        ev = Evaluator(nest, Structure(orders, spatial, keep))
        T = ev.resolve(tiles)
        want = ev._multicast_entries(T, loop_chains(nest, T, n))
        assert set(want) == set(multicast)
        for span, per in want.items():
            for x, v in per.items():
                assert (by_combo(multicast[span][x], perms, len(tiles), combo) == v).all()


# --------------------------------------------------------------------------- the search


def test_search_spreads_a_halo_loop_and_keeps_the_best():
    """A convolution whose only parallelism is its output row p (one channel, one filter): the search
    now offers spatial p, the fastest mapping uses it, and it equals a brute force over every
    mapping (tests/test_mapsearch.py's, which now includes spatial halo loops)."""
    from test_mapsearch import TWO_LEVELS, brute_force

    src, _ = conv1d(2, 1, 4, 3, False)
    kernel, model = model_of(src)
    params = {p.name: p.default for p in kernel.params}
    nest = analyse_nest(model, 0, params)
    best, total = brute_force(model, nest, TWO_LEVELS, "cycles")
    found = search_nest(model, 0, TWO_LEVELS, params, options=SearchOptions(objective=Objective.CYCLES, top=3,
                                                                      max_evaluations=None, bypass=False))
    assert not any("not searched" in note for note in found.notes)
    assert found.exhaustive and found.evaluated < total
    assert found.best is not None and found.best.confirmed
    assert found.best.objective == pytest.approx(best)
    assert any(lm.spatial for lm in found.best.mapping.levels)
