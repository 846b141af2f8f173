"""A register tile whose target is loaded lane by lane pays for it every pass (issue 11).

conv2d's implicit-GEMM tile runs its vectors along the output channels ``k``, which ``O[n, k, p, q]``
does not walk at unit stride: regtile gathers each accumulator from 16 scalars before a pass and
scatters it after (``lanewise``). Measured on this machine, a pass of 9 steps took 2-2.3 cycles an
element more than one of 288 (``execution.LANEWISE_CYCLES``); the model charged the pass
``PASS_CYCLES`` alone, so the two tied. Here the weights are laid out ``W[c, r, s, k]`` (unit stride
along ``k``: the tile's rule vectorises it without a panel), and checked: the model's lane-by-lane
rule is the C's (the emitted tile builds its accumulators from scalars exactly when the model says
so), the pass factor is the formula with the C's box and steps, and the batch form agrees.
"""
from __future__ import annotations

import numpy as np
import pytest

from polymap.codegen.c.emitter import emit_c
from polymap.driver import param_values, parse
from polymap.machine.presets import load_architecture
from polymap.mapping.files import mapping_from_dict
from polymap.mapping.model import loop_extents
from polymap.passes.counting.execution import (
    LANEWISE_CYCLES, PASS_CYCLES, batch_execution, effective_tiles, execution, loads_lanewise)
from polymap.poly import build_model

CONV = """
kernel conv2d(N = 1, C = 8, K = 32, P = 7, Q = 7, R = 3, S = 3) {
  in    I[N, C, P + R - 1, Q + S - 1]
  in    W[C, R, S, K]
  inout O[N, %s]
  for n in 0..N, k in 0..K, p in 0..P, q in 0..Q, c in 0..C, r in 0..R, s in 0..S {
    O[n, %s] += I[n, c, p + r, q + s] * W[c, r, s, k]
  }
}
"""
#: the output's layouts: NCHW (k strided: lane by lane) and NHWC (k last: whole vectors)
LAYOUTS = {"nkpq": ("K, P, Q", "k, p, q"), "npqk": ("P, Q, K", "p, q, k")}
HOST = load_architecture("host")
NAMES = [lv.name for lv in HOST.levels]


def _case(layout: str, l1_order: str):
    kernel = parse(CONV % LAYOUTS[layout], "conv2d.loop").kernels[0]
    model = build_model(kernel)
    values = param_values(kernel, {})
    mp = mapping_from_dict({"kernel": "conv2d", "levels": [
        {"level": NAMES[0], "order": list("npkqcrs")},
        {"level": NAMES[1], "order": list("npkqcrs")},
        {"level": NAMES[2], "order": list("npkqcrs"), "tile": {"p": 1}},
        {"level": NAMES[3], "order": list(l1_order), "tile": {"p": 1}},
        {"level": NAMES[4], "order": list("npcrsqk"),
         "tile": {"n": 1, "p": 1, "c": 1, "r": 1, "s": 1, "q": 7, "k": 32}}]}, kernel=kernel, arch=HOST)
    return kernel, model, values, mp


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("l1_order, steps", [("npqkcrs", 8 * 9), ("npkcqrs", 9)])
def test_a_pass_costs_its_lanes_as_the_c_loads_them(layout, l1_order, steps):
    kernel, model, values, mp = _case(layout, l1_order)
    ext = loop_extents(kernel, 0, values)
    ex = execution(model, mp, HOST, ext)
    assert ex.vector_loop == "k" and ex.lanes == 16  # the tile's vectors along k (W's unit stride)
    src = emit_c(kernel, model, (mp,), params=values, threads=2)
    avx512 = src[src.index("#if defined(__AVX512F__)"):src.index("#elif defined(__AVX2__)")]
    # the C builds an accumulator from 16 scalars of O exactly when the model's rule says lane by lane
    gathered = "polymap_acc_0_0 = (polymap_f32x16){O[" in avx512
    (stmt,) = [s.stmt for s in model.statements]
    assert loads_lanewise(stmt, "k", 16) == gathered == (layout == "nkpq")
    # the pass factor: 1 + (PASS_CYCLES [+ LANEWISE_CYCLES a box element]) x ops / (vectors a step x
    # steps a pass x the steps' stretch), the box 7 x 32 in 7 x 2 vectors
    cost = PASS_CYCLES + (LANEWISE_CYCLES * 7 * 32 if gathered else 0.0)
    assert ex.passes == pytest.approx(1 + cost * HOST.compute.ops_per_cycle / (7 * 2 * steps * ex.latency))
    eff = np.array([[[e[x] for x in mp.loops] for e in effective_tiles(mp, ext)]], dtype=np.int64)
    units, slowdown = batch_execution(model, mp, HOST, ext, eff)
    assert int(units[0]) == ex.units and slowdown[0] == pytest.approx(ex.slowdown, rel=1e-12)


def test_lane_by_lane_passes_rank_short_passes_behind():
    """The measured order of bench_fidelity's pool: the 9-step pass behind the 72-step one, and a
    gathered output's short passes behind those of an output whose rows are whole vectors."""
    kernel, model, values, short = _case("nkpq", "npkcqrs")
    ext = loop_extents(kernel, 0, values)
    long = _case("nkpq", "npqkcrs")[3]
    a, b = execution(model, short, HOST, ext), execution(model, long, HOST, ext)
    assert a.passes - 1 == pytest.approx(8 * (b.passes - 1))  # the same cost a pass, 8 times the passes
    k2, m2, v2, nhwc = _case("npqk", "npkcqrs")
    c = execution(m2, nhwc, HOST, loop_extents(k2, 0, v2))
    assert a.passes > c.passes > 1
