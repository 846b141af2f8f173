"""The streamed form of the register mapping (register_mapping.stream_blocks): B's KC x NB block kept,
and packed, at L2 for all of a core's rows; A's register tile of rows kept at L1 and read in place.

The hand counts: gemm M, N, K = 9, 13, 7 on 2 cores, register tile 2 x 4, KC 3, and an L2 of 768
bytes, so that B's block is a quarter of it: 768 / 4 / (3 x 8 bytes) = 8 columns. Each core's share of
rows is 6 (ceil(9 / 2) in whole tiles: rows 0-5 and 6-8); for each share every KC step fills the whole
KC x N of B once at L2 (blocks of 8 + 5 columns): B's L2 fills are 2 x 7 x 13 = 182. L1 keeps A's
2 x KC rows for the NB / NR panels of one block, so A's L1 fills are M x K per block of B's columns:
9 x 7 x 2 = 126.
"""
from __future__ import annotations

import numpy as np
import pytest

from polymap.codegen.build import load_kernel
from polymap.codegen.c.emitter import emit_c
from polymap.driver import parse
from polymap.machine.arch import Architecture, Compute, Level, VectorUnit
from polymap.passes.counting.counting import count_mapping, isl_count_mapping
from polymap.passes.search.default_mapping import dependence_violation
from polymap.passes.search.register_mapping import Blocking, register_mapping
from polymap.poly import build_model
from simulator import counts_as_dict, simulate

GEMM = """
kernel g(M, N, K) {
  in A[%(a)s] : %(t)s
  in B[K, N] : %(t)s
  out C[M, N] : %(t)s
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[%(ai)s] * B[k, j]
    }
  }
}
"""
AVX2 = VectorUnit("avx2", 32, 16, True)
#: L2 of 768 bytes: B's block (a quarter of it) is 8 columns of KC 3 f64 (24 bytes each)
ARCH = Architecture("t", (Level("DRAM"), Level("LLC", None, 32 * 2 ** 20, 1), Level("L2", None, 768, 2),
                          Level("L1", None, 32 * 1024, 2), Level("RF", None, 2048, 2)), Compute(32), AVX2)
BLOCKING = Blocking(2, 4, 3, 4, 16, 8)


def _mapping(params: dict, dtype: str = "f64", transposed: bool = False):
    text = GEMM % {"t": dtype, "a": "K, M" if transposed else "M, K", "ai": "k, i" if transposed else "i, k"}
    kernel = parse(text, "g.loop").kernels[0]
    model = build_model(kernel)
    mp = register_mapping(model, 0, ARCH, params, blocking=BLOCKING)
    assert mp is not None and dependence_violation(model, mp) is None
    return kernel, model, mp


def test_streamed_mapping_keeps_b_at_l2_and_a_at_l1():
    _, _, mp = _mapping({"M": 9, "N": 13, "K": 7})
    tiles = {lm.level: dict(zip(mp.loops, lm.tile)) for lm in mp.levels}
    assert tiles["L2"] == {"i": 6, "j": 8, "k": 3} and mp.levels[2].keep == ("B",)
    assert tiles["L1"] == {"i": 2, "j": 8, "k": 3} and mp.levels[3].keep == ("A",)
    assert mp.levels[1].spatial == ("i",) and mp.levels[1].order[:3] == ("i", "k", "j")


def test_streamed_counts_equal_the_simulator_and_hand_counts():
    params = {"M": 9, "N": 13, "K": 7}
    kernel, model, mp = _mapping(params)
    counts = isl_count_mapping(model, mp, ARCH, params=params)
    assert count_mapping(model, mp, ARCH, params=params) == counts
    got = counts_as_dict(counts)
    assert got == simulate(kernel, mp, params)
    assert got["levels"][2]["tensors"]["B"]["fills"] == 2 * 7 * 13
    assert got["levels"][3]["tensors"]["A"]["fills"] == 9 * 7 * 2


@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize("size", [(1, 1, 1), (7, 7, 7), (17, 17, 17), (9, 13, 7), (29, 45, 37), (257, 257, 257)])
def test_streamed_code_matches_numpy(dtype: str, size: tuple[int, int, int]):
    """Every size here is cut by the tiles (rows 2, columns 4 and 8, KC 3) and by the cores' shares."""
    m, n, k = size
    params = {"M": m, "N": n, "K": k}
    kernel, model, mp = _mapping(params, dtype)
    src = emit_c(kernel, model, mp)
    assert "polymap_pk_A" not in src  # A's rows are read in place
    blocked = mp.levels[2].tile[mp.loops.index("j")] is not None  # NB < N: a constant box at L2
    assert ("polymap_pk_B_k_j" in src) == blocked  # then B's block is packed there
    fn = load_kernel(src, kernel)
    nt = np.float64 if dtype == "f64" else np.float32
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(nt)
    b = rng.standard_normal((k, n)).astype(nt)
    c = np.full((m, n), np.nan, dtype=nt)
    fn({"A": a, "B": b, "C": c}, params)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-12 if dtype == "f64" else 1e-4
    np.testing.assert_allclose(c, want, rtol=tol, atol=tol * max(1, k))


def test_a_read_across_its_rows_keeps_the_grouped_form():
    """A[k, i]: the tile's rows of A are not contiguous runs, so A's block is packed at L2 as before."""
    params = {"M": 29, "N": 45, "K": 37}
    kernel, model, mp = _mapping(params, transposed=True)
    assert mp.levels[2].keep == ("A", "B") and dict(zip(mp.loops, mp.levels[2].tile))["i"] == 4  # MC rows
    src = emit_c(kernel, model, mp)
    assert "polymap_pk_A_k_i" in src
    fn = load_kernel(src, kernel)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((params["K"], params["M"]))
    b = rng.standard_normal((params["K"], params["N"]))
    c = np.full((params["M"], params["N"]), np.nan)
    fn({"A": a, "B": b, "C": c}, params)
    np.testing.assert_allclose(c, a.T @ b, rtol=1e-12, atol=1e-12)


def test_a_tensor_read_both_ways_keeps_the_grouped_form():
    """C[i, j] += A[i, k] * A[j, k]: A is broadcast and read along j too, so it must stay kept (and
    packed) at L2 as a whole: the streamed form, which keeps only the row-read tensors at L2, is not taken."""
    text = """
kernel g(N, K) {
  in A[N, K] : f64
  out C[N, N] : f64
  for i in 0..N, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * A[j, k]
    }
  }
}
"""
    params = {"N": 29, "K": 37}
    kernel = parse(text, "g.loop").kernels[0]
    model = build_model(kernel)
    mp = register_mapping(model, 0, ARCH, params, blocking=BLOCKING)
    assert mp is not None and dependence_violation(model, mp) is None
    assert "A" in mp.levels[2].keep and dict(zip(mp.loops, mp.levels[2].tile))["i"] == 4  # MC rows: grouped
    fn = load_kernel(emit_c(kernel, model, mp), kernel)
    a = np.random.default_rng(4).standard_normal((params["N"], params["K"]))
    c = np.full((params["N"], params["N"]), np.nan)
    fn({"A": a, "C": c}, params)
    np.testing.assert_allclose(c, a @ a.T, rtol=1e-12, atol=1e-12)
