"""BLIS's shared panel of B: packed once per KC x NC panel above the cores' split, split between threads.

The register mapping of a rectangular contraction whose rows run in
parallel keeps B's KC x NC panel at the level that carries the spatial
loop; the packing rule packs it there once for all cores (one buffer, the
copy shared out with ``omp for``) instead of once per core and row block.
These tests check where the packs go (the rule), then the numbers: the
code is generated for one size and run with 2 threads at sizes that walk
several panels in every direction, with edges everywhere, so that a race
between a copy and the reads of the previous panel, or a wrong digit of
the panel's layout, shows up as a wrong element against NumPy.
"""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from polymap.codegen.build import load_kernel
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.c.packing import plan_packs
from polymap.driver import parse
from polymap.machine.presets import load_architecture
from polymap.passes.search.choice import fit_keeps
from polymap.passes.search.register_mapping import Blocking, register_mapping
from polymap.poly import build_model

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
os.environ.setdefault("OMP_NUM_THREADS", "2")
HOST = load_architecture("host")

GEMM = """
kernel g(M, N, K) {
  in A[M, K] : %(t)s
  in B[K, N] : %(t)s
  out C[M, N] : %(t)s
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""

SYRK = """
kernel s(N, K) {
  in A[N, K] : f64
  inout C[N, N] : f64
  for i in 0..N {
    for k in 0..K {
      for j in 0..i + 1 {
        acc: C[i, j] += A[i, k] * A[j, k]
      }
    }
  }
}
"""


def _gemm(dtype: str = "f32"):
    kernel = parse(GEMM % {"t": dtype}, "g.loop").kernels[0]
    return kernel, build_model(kernel)


def test_b_panel_is_packed_once_above_the_split():
    kernel, model = _gemm()
    params = {"M": 1024, "N": 1024, "K": 1024}
    mp = fit_keeps(model, register_mapping(model, 0, HOST, params), HOST, params)
    split = next(k for k, lm in enumerate(mp.levels) if lm.spatial)
    assert mp.levels[split].spatial == ("i",)
    packs = {p.tensor: p for p in plan_packs(model, mp).values()}
    assert set(packs) == {"A", "B"}
    # B no spatial loop indexes: packed at the split's level though L1 keeps it too, shared
    assert "B" in mp.levels[-2].keep and packs["B"].level == split and packs["B"].shared
    # A is packed where the mapping keeps it last; shared exactly when that is at or above the split
    assert packs["A"].shared == (packs["A"].level <= split)
    src = emit_c(kernel, model, (mp,), params=params)
    body = src.split("\nvoid ", 1)[1]
    assert body.count("aligned_alloc(64") == sum(p.shared for p in packs.values())
    assert "#pragma omp for schedule(static) nowait" in body or not packs["A"].shared


def test_triangle_keeps_row_blocks_and_private_panels():
    """syrk's rows are not cut one chunk per core (the triangle would load the cores unequally)."""
    kernel = parse(SYRK, "s.loop").kernels[0]
    model = build_model(kernel)
    params = {"N": 2000, "K": 2600}
    mp = register_mapping(model, 0, HOST, params)
    assert mp is not None
    split = next(k for k, lm in enumerate(mp.levels) if lm.spatial)
    assert not any(p.shared for p in plan_packs(model, mp).values())
    assert mp.levels[split].tile[mp.loops.index("j")] is None  # no constant panel of columns


# generated for the first size, run at all of them: several i, j and k panels, edges in each
RUNS = [
    (Blocking(3, 8, 5, 6, 16), (29, 45, 37), [(29, 45, 37), (61, 50, 11), (1, 1, 1), (7, 17, 6), (95, 33, 41)]),
    (Blocking(2, 16, 7, 4, 32), (40, 70, 30), [(40, 70, 30), (83, 100, 15), (3, 2, 1)]),
    (None, (300, 200, 500), [(300, 200, 500), (257, 257, 257), (601, 150, 77)]),
]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("blocking,made_for,sizes", RUNS)
def test_shared_panels_match_numpy_with_two_threads(dtype, blocking, made_for, sizes):
    kernel, model = _gemm(dtype)
    params = dict(zip("MNK", made_for))
    mp = fit_keeps(model, register_mapping(model, 0, HOST, params, blocking=blocking), HOST, params)
    assert any(p.shared and p.tensor == "B" for p in plan_packs(model, mp).values())
    fn = load_kernel(emit_c(kernel, model, (mp,), params=params), kernel)
    nt = np.float32 if dtype == "f32" else np.float64
    for m_, n_, k_ in sizes:
        rng = np.random.default_rng(m_ + 3 * n_ + 7 * k_)
        a = rng.standard_normal((m_, k_)).astype(nt)
        b = rng.standard_normal((k_, n_)).astype(nt)
        c = np.full((m_, n_), np.nan, dtype=nt)
        fn({"A": a, "B": b, "C": c}, {"M": m_, "N": n_, "K": k_})
        want = a.astype(np.float64) @ b.astype(np.float64)
        tol = (1e-4 if dtype == "f32" else 1e-12) * max(1.0, np.sqrt(k_))
        np.testing.assert_allclose(c, want, rtol=tol, atol=tol, err_msg=f"M, N, K = {m_}, {n_}, {k_}")
