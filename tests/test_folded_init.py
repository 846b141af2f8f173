"""The initialisation folded into the register tile (register_mapping's ``init: {i: i, j: j, k: 0}``).

The mapping places ``init(i, j)`` at the coordinates of ``acc(i, j, 0)`` (it precedes it in the
text, so it runs right before it): checked by the exact legality check, counted (against the
independent simulator: C's first residency in the registers begins with the plain write, so one
fill and one writeback of every element of C fewer than the separate pass), and realised by the
register tile (its accumulators start from the init's value at the first step; C is not read there
and there is no OpenMP region of its own). Results are checked against NumPy with C full of NaN
beforehand, so that an accumulator loaded from C instead of started from the init shows.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from polymap.codegen.build import load_kernel
from polymap.codegen.c.emitter import emit_c
from polymap.driver import parse
from polymap.machine.arch import Architecture, Compute, Level, VectorUnit
from polymap.passes.counting.counting import count_mapping, isl_count_mapping
from polymap.passes.legality.legality import check_mapping
from polymap.passes.search import register_mapping as rm
from polymap.passes.search.register_mapping import Blocking, register_mapping
from polymap.poly import build_model
from simulator import counts_as_dict, simulate

GEMM = """
kernel g(M, N, K) {
  in A[M, K] : f64
  in B[K, N] : f64
  out C[M, N] : f64
  for i in 0..M, j in 0..N {
    init: C[i, j] = %(v)s
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""
AVX2 = VectorUnit("avx2", 32, 16, True)
ARCH = Architecture("t", (Level("DRAM"), Level("LLC", None, 32 * 2 ** 20, 1), Level("L2", None, 2 ** 20, 2),
                          Level("L1", None, 32 * 1024, 2), Level("RF", None, 2048, 2)), Compute(32), AVX2)
BLOCKING = Blocking(2, 4, 3, 4, 16, 8)  # KC 3: several blocks of k at small sizes


def _gemm(value: str = "0"):
    kernel = parse(GEMM % {"v": value}, "g.loop").kernels[0]
    return kernel, build_model(kernel)


def test_the_init_is_placed_at_the_first_update_and_legal():
    kernel, model = _gemm()
    mp = register_mapping(model, 0, ARCH, {"M": 9, "N": 13, "K": 7}, blocking=BLOCKING)
    entry, = mp.schedule
    assert (entry.statement, dict(zip(entry.loops, entry.exprs))) == ("init", {"i": "i", "j": "j", "k": "0"})
    assert check_mapping(model, mp).legal


@pytest.mark.parametrize("params", [{"M": 9, "N": 13, "K": 7}, {"M": 5, "N": 4, "K": 3}, {"M": 1, "N": 1, "K": 1}])
def test_counts_equal_the_simulator_and_lose_the_separate_pass(params):
    kernel, model = _gemm()
    folded = register_mapping(model, 0, ARCH, params, blocking=BLOCKING)
    separate = dataclasses.replace(folded, schedule=())
    got = {}
    for name, mp in (("folded", folded), ("separate", separate)):
        counts = isl_count_mapping(model, mp, ARCH, params=params)
        assert count_mapping(model, mp, ARCH, params=params) == counts
        got[name] = counts_as_dict(counts)
        assert got[name] == simulate(kernel, mp, params)
    mn, blocks = params["M"] * params["N"], -(-params["K"] // BLOCKING.kc)
    rf_f, rf_s = (got[k]["levels"][-1]["tensors"]["C"] for k in ("folded", "separate"))
    if params["N"] > BLOCKING.nr:  # every core has several boxes: no two consecutive stays share one
        # by hand: every box of C is in the registers once per block of k; the first stay begins with
        # the plain write (not filled); every stay ends with a writeback. The separate pass adds a stay
        # of its own (written, sent back) before the first block, which is then filled
        assert (rf_f["fills"], rf_f["writebacks"]) == (mn * (blocks - 1), mn * blocks)
        assert (rf_s["fills"], rf_s["writebacks"]) == (mn * blocks, mn * (blocks + 1))
    assert rf_f["fills"] <= rf_s["fills"] and rf_f["writebacks"] <= rf_s["writebacks"]


def test_no_fold_when_the_exact_check_says_no(monkeypatch):
    kernel, model = _gemm()
    monkeypatch.setattr(rm, "is_legal", lambda model, mapping: False)
    mp = register_mapping(model, 0, ARCH, {"M": 9, "N": 13, "K": 7}, blocking=BLOCKING)
    assert mp is not None and mp.schedule == ()


def test_no_fold_for_an_init_that_reads_the_target():
    kernel = parse(GEMM.replace("init: C[i, j] = %(v)s", "init: C[i, j] = C[i, j] * 2"), "g.loop").kernels[0]
    mp = register_mapping(build_model(kernel), 0, ARCH, {"M": 9, "N": 13, "K": 7}, blocking=BLOCKING)
    assert mp is not None and mp.schedule == ()


@pytest.mark.parametrize("value", ["0", "1.5"])
@pytest.mark.parametrize("sized", [True, False])
def test_folded_code_matches_numpy(value, sized):
    kernel, model = _gemm(value)
    made = {"M": 29, "N": 45, "K": 37}
    mp = register_mapping(model, 0, ARCH, made, blocking=BLOCKING)
    src = emit_c(kernel, model, mp, params=made if sized else None)
    assert "polymap_first" in src  # the accumulators start from the init's value
    if sized:
        assert src.count("#pragma omp parallel") == 1  # no region of its own for C = v
    fn = load_kernel(src, kernel)
    for params in ({"M": 29, "N": 45, "K": 37}, {"M": 7, "N": 9, "K": 1}, {"M": 1, "N": 1, "K": 4},
                   {"M": 3, "N": 5, "K": 2}):  # parameters are >= 1 (the model's context)
        rng = np.random.default_rng(params["M"])
        a = rng.standard_normal((params["M"], params["K"]))
        b = rng.standard_normal((params["K"], params["N"]))
        c = np.full((params["M"], params["N"]), np.nan)
        fn({"A": a, "B": b, "C": c}, params)
        np.testing.assert_allclose(c, float(value) + a @ b, rtol=1e-12, atol=1e-12)


SCALED = """
kernel g(M, N, K) {
  in beta : f64
  in A[M, K] : f64
  in B[K, N] : f64
  inout C[M, N] : f64
  for i in 0..M, j in 0..N {
    scale: C[i, j] *= beta
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""


@pytest.mark.parametrize("sized", [True, False])
def test_a_scaling_init_is_folded_too(sized):
    """2mm's ``D[i, j] *= beta``: the accumulators load C and scale it once at the first step (C's first
    stay begins with a read: filled, as the simulator says), no pass of its own."""
    kernel = parse(SCALED, "g.loop").kernels[0]
    model = build_model(kernel)
    made = {"M": 29, "N": 45, "K": 37}
    mp = register_mapping(model, 0, ARCH, made, blocking=BLOCKING)
    entry, = mp.schedule
    assert entry.statement == "scale" and check_mapping(model, mp).legal
    small = {"M": 9, "N": 13, "K": 7}
    assert counts_as_dict(isl_count_mapping(model, mp, ARCH, params=small)) == simulate(kernel, mp, small)
    src = emit_c(kernel, model, mp, params=made if sized else None)
    assert "polymap_first" in src
    fn = load_kernel(src, kernel)
    for params in ({"M": 29, "N": 45, "K": 37}, {"M": 7, "N": 9, "K": 1}, {"M": 1, "N": 1, "K": 4}):
        rng = np.random.default_rng(params["N"])
        a = rng.standard_normal((params["M"], params["K"]))
        b = rng.standard_normal((params["K"], params["N"]))
        c0 = rng.standard_normal((params["M"], params["N"]))
        c = c0.copy()
        fn({"beta": np.array(0.75), "A": a, "B": b, "C": c}, params)
        np.testing.assert_allclose(c, 0.75 * c0 + a @ b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("params", [{"M": 9, "N": 13, "K": 7}, {"M": 5, "N": 4, "K": 3}])
def test_folded_counts_by_barvinok_equal_the_walk_and_the_simulator(params, monkeypatch):
    """A schedule that only places the init (no skew, no shift) is counted like a plain mapping, by
    barvinok (milliseconds where walking its points took seconds: issue 9); the walk it had before
    gives the same counts and footprints, and both are the simulator's."""
    from polymap.passes.counting import counting, fit, footprint

    kernel, model = _gemm()
    folded = register_mapping(model, 0, ARCH, params, blocking=BLOCKING)
    assert folded.schedule and not footprint.enumerable(model, folded, params)
    by_barvinok = isl_count_mapping(model, folded, ARCH, params=params)
    fits = fit.fit_check(model, folded, ARCH, params)
    with monkeypatch.context() as m:
        walked = lambda *a: True  # noqa: E731 - the rule of before: every schedule mapping walked
        m.setattr(counting, "enumerable", walked)
        m.setattr(fit, "enumerable", walked)
        assert counting.isl_count_mapping(model, folded, ARCH, params=params) == by_barvinok
        assert fit.fit_check(model, folded, ARCH, params) == fits
    assert counts_as_dict(by_barvinok) == simulate(kernel, folded, params)
    # the footprints the fit check saw are the counts' own, and passing them on changes nothing
    assert fits.footprints[1:] == tuple((lv.footprint, lv.footprint_bytes) for lv in by_barvinok.levels[1:])
    assert count_mapping(model, folded, ARCH, params=params, footprints=fits.footprints, res=fits.res) == by_barvinok
