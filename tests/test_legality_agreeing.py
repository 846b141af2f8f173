"""Legality ordered without the dimensions of the loops every conflicting pair agrees on
(``legality.order_maps``) gives the answers of the whole mapped schedule and of brute force.

conv2d's only conflicts are the updates of one ``O[n, k, p, q]``: the dimensions of ``n, k, p, q``
are equal for every pair legality orders, so its orders are checked on those of ``c, r, s`` alone.
Each answer here is compared with the former route (``compact_maps``, every loop's dimensions) step
by step, and with brute force (``tests/bruteforce.py``) where the sizes are small.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace as NS

from hypothesis import HealthCheck, event, given, settings

from bruteforce import brute_legal
from polymap.driver import parse
from polymap.islcheck import isl
from polymap.machine.presets import load_architecture
from polymap.passes.legality import legality as L
from polymap.passes.legality.reaching_writers import keeps_writers
from polymap.passes.schedule.schedule_order import keeps_conflicts
from polymap.passes.schedule.tiling import mapped_schedule
from polymap.passes.search.choice import kernel_to_map
from polymap.passes.search.isl_schedule import isl_mappings
from polymap.passes.search.space import SearchSpace
from polymap.poly import build_model
from test_legality_shared import cases as spatial_cases

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _steps(model, mapping) -> tuple[tuple[bool, bool], tuple[bool, bool]]:
    """``((keeps_conflicts, keeps_writers) on the whole schedule, the same on order_maps)``."""
    mapped = mapped_schedule(model, mapping)
    stmts = mapped.statements
    out = []
    for maps in (L.compact_maps(mapped), L.order_maps(model, mapped)):
        out.append((keeps_conflicts(model, stmts, maps), keeps_writers(model, stmts, maps)))
    return out[0], out[1]


def _agrees_with_whole_and_brute(kernel, mapping, params) -> bool:
    model = build_model(kernel)
    whole, ordered = _steps(model, mapping)
    assert ordered == whole  # each step, not only the verdict
    legal = L.is_legal_schedule(model, mapped_schedule(model, mapping))
    assert legal == whole[1] == brute_legal(kernel, mapping, params)[0]
    return legal


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(spatial_cases())
def test_random_nests_same_answers(case):
    kernel, mapping = case
    model = build_model(kernel)
    agree = L.agreeing_loops(model, mapped_schedule(model, mapping))
    event(f"loops that agree: {len(agree)}")
    _agrees_with_whole_and_brute(kernel, mapping, {})


CONV = (EXAMPLES / "conv2d.loop").read_text()
SMALL_CONV = {"N": 1, "C": 3, "K": 2, "P": 2, "Q": 2, "R": 2, "S": 2}
CONV_LOOPS = ("n", "k", "p", "q", "c", "r", "s")


def _conv_mapping(order: tuple[str, ...], inner: tuple[str, ...], tile: tuple[int | None, ...]):
    levels = (NS(level="L0", tile=(None,) * 7, order=order, spatial=(), keep=()),
              NS(level="L1", tile=tile, order=inner, spatial=(), keep=()))
    return NS(kernel="conv2d", nest=0, loops=CONV_LOOPS, levels=levels)


def test_conv2d_agreeing_loops_are_the_output_loops():
    kernel = parse(CONV, "conv2d.loop").kernels[0]
    model = build_model(kernel)
    mapped = mapped_schedule(model, _conv_mapping(CONV_LOOPS, CONV_LOOPS, (None, 1, 2, None, 2, None, 1)))
    assert L.agreeing_loops(model, mapped) == frozenset({"n", "k", "p", "q"})
    whole = L._whole_dims(mapped)
    left = [d for d, td in enumerate(mapped.dims) if d not in whole and td.loop not in ("n", "k", "p", "q")]
    assert 1 < len(left) < len(mapped.dims) - len(whole)
    assert all(m.dim(isl.dim_type.out) == len(left) for m in L.order_maps(model, mapped).values())


def test_conv2d_orders_and_tiles_against_brute_force():
    """Each loop moved innermost (the search's orders of seven loops), tiled by 2 in pieces that
    split the reduction or not, at sizes small enough to enumerate: legal and illegal ones both."""
    kernel = parse(CONV, "conv2d.loop", check=False).kernels[0]
    seen = set()
    orders = [CONV_LOOPS] + [tuple(y for y in CONV_LOOPS if y != x) + (x,) for x in CONV_LOOPS]
    for order in orders:
        for tile in ((None,) * 7, (None, 1, 2, None, 2, None, 1), (None, None, None, None, None, 1, None)):
            seen.add(_agrees_with_whole_and_brute(kernel, _conv_mapping(order, order, tile), SMALL_CONV))
    assert seen == {True, False}


def test_conv2d_search_orders_at_the_default_sizes():
    """The orders compile's search checks (square tiles at every level of ``host``): the same verdicts."""
    kernel = parse(CONV, "conv2d.loop").kernels[0]
    model = build_model(kernel)
    arch = load_architecture("host")
    params = {p.name: p.default for p in kernel.params}
    space = SearchSpace.build(model, 0, arch, params, enough=0)
    seen = set()
    for order in (CONV_LOOPS, CONV_LOOPS[1:] + CONV_LOOPS[:1], CONV_LOOPS[:4] + ("r", "s", "c")):
        mapping = space.mapping(order, space.sides)  # square tiles split the reduction: illegal
        # the same with c, r, s whole at every level: the reduction's order is kept in the original order
        whole_reduction = dataclasses.replace(mapping, levels=tuple(
            dataclasses.replace(lm, tile=tuple(None if x in "crs" else t for x, t in zip(CONV_LOOPS, lm.tile)))
            for lm in mapping.levels))
        for m in (mapping, whole_reduction):
            whole, ordered = _steps(model, m)
            assert ordered == whole
            seen.add(whole[1])
    assert seen == {True, False}


TIME_LOOP = """
kernel sweep(T = 4, N = 5) {
  in B[T, N]
  inout A[N]
  for t in 0..T, i in 0..N {
    A[i] = A[i] + B[t, i]
  }
}"""


def test_wavefront_dimension_goes_only_when_both_loops_agree():
    """``i`` agrees (the conflicts are one ``A[i]`` over ``t``), ``t`` does not: the diagonal ``t + i``
    stays whichever loop it stands at, the plain ``i`` dimension goes."""
    kernel = parse(TIME_LOOP, "sweep.loop").kernels[0]
    model = build_model(kernel)
    for wave in (("t", "i"), ("i", "t")):
        for order in (("t", "i"), ("i", "t")):
            levels = (NS(level="L0", tile=(None, None), order=order, spatial=(), keep=(), wavefront=wave),
                      NS(level="L1", tile=(2, 2), order=("t", "i"), spatial=(), keep=(), wavefront=()))
            mapping = NS(kernel="sweep", nest=0, loops=("t", "i"), levels=levels)
            mapped = mapped_schedule(model, mapping)
            assert L.agreeing_loops(model, mapped) == frozenset({"i"})
            (m,) = L.order_maps(model, mapped).values()
            # i's offset in the tile goes; at level 0, i's own dimension goes unless it holds the diagonal
            assert m.dim(isl.dim_type.out) == len(mapped.dims) - (2 if wave == ("t", "i") else 1), (wave, order)
            _agrees_with_whole_and_brute(kernel, mapping, {"T": 4, "N": 5})


def test_isl_candidates_of_jacobi_1d():
    """Skewed, fused, wavefront mappings (schedule entries: coordinates that are expressions)."""
    program = parse((EXAMPLES / "polybench" / "jacobi-1d.loop").read_text(), "jacobi-1d.loop")
    kernel, _ = kernel_to_map(program.kernels[0])  # its two loops named i renamed apart, as compile maps it
    model = build_model(kernel)
    found = isl_mappings(model, 0, load_architecture("host"), None, to_count=False)
    assert found
    for _, mapping in found:
        whole, ordered = _steps(model, mapping)
        assert ordered == whole
        small = {"TSTEPS": 3, "N": 7}
        assert L.is_legal_schedule(model, mapped_schedule(model, mapping)) == brute_legal(kernel, mapping, small)[0]
