"""The model's register tiles follow the loops the code prints, one trip or more (issue 11).

A tile loop the mapping asks for is printed whatever the sizes (they are parameters of the code), so
at the sizes given it may take one trip: conv2d at Q = 14 under a register tile of 14 along ``q``
prints ``q_L1 <= (Q - 1) / 14``. Such a loop between the reduction loops and the box ends the
register tile's pass there (``c { q_L1 { r { s { box } } } }``: the accumulators are loaded and
stored every ``(c, q_L1)``, a pass of 9 steps, not 288), and one between the box and all of its
reductions leaves no register tile at all (plain loops). The model read only loops of more than one
trip, so it counted all of these as the 288-step tile: the sixteen candidates of bench_fidelity's
conv2d 14 x 14 pool tied while they measured 0.12-0.49 ms.

Checked against the generated C (independent of the model): whether it has a register tile, and the
product of the extents of the loops printed between the accumulators' loads and their first update
(the steps of one pass), for hand-written and hypothesis-drawn mappings; and the batch form against
the one-by-one form with the declared tiles.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from polymap.codegen.c.emitter import emit_c
from polymap.driver import parse
from polymap.machine.presets import load_architecture
from polymap.mapping.files import mapping_from_dict
from polymap.mapping.model import LevelMapping, Mapping, loop_extents
from polymap.passes.counting.execution import (
    _statements, _step_box, _walk, batch_execution, batch_printed, chains, effective_tiles, execution,
    printed_loop)
from polymap.poly import build_model
from polymap.driver import param_values

CONV = """
kernel conv2d(N = 1, C = 8, K = 16, P = 7, Q = 7, R = 3, S = 3) {
  in    I[N, C, 2*P + R - 1, 2*Q + S - 1]
  in    W[K, C, R, S]
  inout O[N, K, P, Q]
  for n in 0..N, k in 0..K, p in 0..P, q in 0..Q, c in 0..C, r in 0..R, s in 0..S {
    O[n, k, p, q] += I[n, c, 2*p + r, 2*q + s] * W[k, c, r, s]
  }
}
"""
KERNEL = parse(CONV, "conv2d.loop").kernels[0]
MODEL = build_model(KERNEL)
VALUES = param_values(KERNEL, {})
EXT = loop_extents(KERNEL, 0, VALUES)
HOST = load_architecture("host")
NAMES = [lv.name for lv in HOST.levels]
#: the register tile of bench_fidelity's pool: 7 rows of q (the whole Q) by 16 of k
RF = {"n": 1, "p": 1, "c": 1, "r": 1, "s": 1, "q": 7, "k": 16}


def _mapping(l1_order: str, l1: dict | None = None, rf: dict | None = None):
    return mapping_from_dict({"kernel": "conv2d", "levels": [
        {"level": NAMES[0], "order": list("npkqcrs")},
        {"level": NAMES[1], "order": list("npkqcrs")},
        {"level": NAMES[2], "order": list("npkqcrs"), "tile": {"p": 1}},
        {"level": NAMES[3], "order": list(l1_order), "tile": {"p": 1, **(l1 or {})}},
        {"level": NAMES[4], "order": list("npcrsqk"), "tile": rf or RF}]}, kernel=KERNEL, arch=HOST)


def _c_pass(src: str) -> int | None:
    """The steps of one pass of the C's register tile: the product of the extents of the loops printed
    between the first accumulator's load and its first update (None: no register tile)."""
    lines = src.splitlines()
    first = next((n for n, line in enumerate(lines) if "polymap_acc_0_0 = " in line and line.lstrip().startswith(
        ("float", "double", "polymap_f"))), None)
    if first is None:
        return None
    update = next(n for n in range(first + 1, len(lines))
                  if lines[n].lstrip().startswith(("polymap_acc_0_0 +=", "polymap_acc_0_0 = polymap_fma")))
    steps = 1
    for line in lines[first:update]:
        m = re.match(r"\s*for \(long (\w+) = 0; \1 (<|<=) (.+?); \1 \+= 1\)", line)
        if m is None:
            continue
        bound = m.group(3)
        if m.group(2) == "<" and bound.strip("() ") in VALUES:  # a whole loop: `c < C`
            steps *= VALUES[bound.strip("() ")]
        else:  # a tile's points: `c <= polymap_min(3, ...)`, the tiles here divide the extents
            lead = re.match(r"polymap_min\((\d+),", bound)
            assert lead is not None, line
            steps *= int(lead.group(1)) + 1
    return steps


def _model_pass(mp) -> int | None:
    code = _walk(mp, effective_tiles(mp, EXT), printed=True)
    found = chains(_statements(MODEL, mp), code, len(mp.levels) - 1)
    if found is None or not found[1] or found[0] <= 1:
        return None
    (ctx,) = _statements(MODEL, mp)
    return _step_box(ctx, code)[2]


@pytest.mark.parametrize("l1_order, l1, want", [
    ("npqkcrs", None, 8 * 9),          # q_L1, k_L1 outside c, r, s: the tile over all three
    ("npkcqrs", None, 9),              # c outside q_L1 (one trip): the tile over r, s only
    ("npkcrsq", None, None),           # q_L1 inside every reduction: plain loops, no register tile
    ("npqkcrs", {"c": 4}, 4 * 9),      # c tiled at L1: a pass over a tile of c
    ("npkqcrs", {"c": 8}, 8 * 9),      # c's tile the whole C: its L1 loop of one trip ends nothing
])
def test_the_pass_is_the_codes(l1_order, l1, want):
    mp = _mapping(l1_order, l1)
    src = emit_c(KERNEL, MODEL, (mp,), params=VALUES, threads=2)
    assert _c_pass(src) == want
    assert _model_pass(mp) == want


@settings(max_examples=25, deadline=None)
@given(st.permutations("nkpqcrs"), st.sampled_from([None, 2, 4, 8]), st.sampled_from([None, 7, 3]))
def test_drawn_passes_are_the_codes(order, c_tile, q_tile):
    """Any L1 order, tiles of c and q at L1 that divide, one trip or several: the model's register tile
    and its pass are the C's."""
    l1 = {x: t for x, t in (("c", c_tile), ("q", q_tile)) if t is not None}
    rf = dict(RF, q=q_tile or 7)
    mp = _mapping("".join(order), l1, rf)
    src = emit_c(KERNEL, MODEL, (mp,), params=VALUES, threads=2)
    assert _model_pass(mp) == _c_pass(src)


def test_printed_loops_of_the_pool():
    """Which loops of one trip the code prints (the mapping's tiles, not the sizes)."""
    mp = _mapping("npkcqrs")
    l1, rf = 3, 4
    assert printed_loop(mp, l1, "q") and printed_loop(mp, l1, "k")  # tiles 7 and 16 of whole loops
    assert not printed_loop(mp, l1, "p")  # p's tile is 1 at L1 already: its loop is L2's or above
    assert printed_loop(mp, rf, "q") and not printed_loop(mp, rf, "c")  # the box's loops, not c's point
    assert not printed_loop(mp, 2, "q")  # L1 does not tile q: no L2 loop over it


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 2, 3, 7, 8, 16]), min_size=35, max_size=35))
def test_batch_printed_is_printed_loop(raw):
    tiles = np.array(raw, dtype=np.int64).reshape(1, 5, 7)
    loops = ("n", "k", "p", "q", "c", "r", "s")
    tiles[0, 0] = 0
    # LevelMapping directly, as a search builds them: any tile, an inner one may exceed its parent's
    keep = ("I", "W", "O")
    mp = Mapping("conv2d", 0, loops, tuple(
        LevelMapping(NAMES[k], tuple(int(t) if t > 0 else None for t in tiles[0, k]), loops, (), keep)
        for k in range(5)))
    got = batch_printed(tiles, np.array([EXT[x] for x in loops], dtype=np.int64))
    for k in range(5):
        for j, x in enumerate(loops):
            assert got[0, k, j] == printed_loop(mp, k, x), (k, x)


@pytest.mark.parametrize("l1_order, l1", [("npqkcrs", None), ("npkcqrs", None), ("npkcrsq", None),
                                          ("npqkcrs", {"c": 4}), ("npkqcrs", {"c": 8})])
def test_batch_equals_one_by_one_with_declared_tiles(l1_order, l1):
    mp = _mapping(l1_order, l1)
    one = execution(MODEL, mp, HOST, EXT)
    eff = np.array([[[e[x] for x in mp.loops] for e in effective_tiles(mp, EXT)]], dtype=np.int64)
    declared = np.array([[[0 if t is None else t for t in lm.tile] for lm in mp.levels]], dtype=np.int64)
    for given_tiles in (None, declared):
        units, slowdown = batch_execution(MODEL, mp, HOST, EXT, eff, given_tiles)
        assert int(units[0]) == one.units
        assert slowdown[0] == pytest.approx(one.slowdown, rel=1e-12)
