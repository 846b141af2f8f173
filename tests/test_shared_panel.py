"""B's panel shared by the cores: the register mapping's last level keeps B's KC x NC panel, packed once
per tile by the team (register_mapping, codegen/c/packing.py ``_shared_packs``).

With rows spread over the cores, every core reads all of B's panel. Before, each core packed it again for
each of its row blocks (6 copies of B per KC step at f32 2048 on 2 cores); now the last level's tile is
one group of row blocks x a constant KC x NC panel, the panel is kept there, and the code packs it there
once for the team (one buffer, the copy split by ``omp for``, whose barrier precedes the reads). Checked:
the counts against the independent simulator, the last level's fills of B by hand (one per element per
group of row blocks), where the packs go, and the results against NumPy with several groups, edge
tiles and 1 or 2 threads.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from polymap.codegen.build import load_kernel
from polymap.codegen.c import packing
from polymap.codegen.c.emitter import emit_c
from polymap.driver import parse
from polymap.machine.arch import Architecture, Compute, Level, VectorUnit
from polymap.passes.counting.counting import count_mapping, isl_count_mapping
from polymap.passes.legality.legality import check_mapping
from polymap.passes.search.register_mapping import Blocking, register_mapping
from polymap.poly import build_model
from simulator import counts_as_dict, simulate

GEMM = """
kernel g(M, N, K) {
  in A[M, K] : f64
  in B[K, N] : f64
  out C[M, N] : f64
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
  for i in 0..N, j in 0..i + 1 {
    for k in 0..K {
      acc: C[i, j] += A[i, k] * A[j, k]
    }
  }
}
"""
AVX2 = VectorUnit("avx2", 32, 16, True)
ARCH = Architecture("t", (Level("DRAM"), Level("LLC", None, 32 * 2 ** 20, 1), Level("L2", None, 2 ** 20, 2),
                          Level("L1", None, 32 * 1024, 2), Level("RF", None, 2048, 2)), Compute(32), AVX2)
BLOCKING = Blocking(2, 4, 3, 4, 16, 8)  # MR 2, NR 4, KC 3, MC 4, NC 16, B's groups of 8 columns


def _model(text: str = GEMM):
    kernel = parse(text, "g.loop").kernels[0]
    return kernel, build_model(kernel)


def _tiles(mp, level: int) -> dict:
    return dict(zip(mp.loops, mp.levels[level].tile))


def test_the_last_level_keeps_a_constant_panel_of_b_and_the_team_packs_it():
    kernel, model = _model()
    mp = register_mapping(model, 0, ARCH, {"M": 9, "N": 13, "K": 7}, blocking=BLOCKING)
    assert check_mapping(model, mp).legal
    llc = mp.levels[1]
    assert llc.spatial == ("i",) and "B" in llc.keep
    # all rows (one block of at most 1.5 MC = 6 rows per core) x B's 3 x 16 panel (NC 16 covers N = 13,
    # constant all the same: a fixed buffer)
    assert _tiles(mp, 1) == {"i": None, "j": 16, "k": 3}
    # 17 rows: groups of two blocks of 6 (one per core) walked by the backing store
    assert _tiles(register_mapping(model, 0, ARCH, {"M": 17, "N": 13, "K": 7}, blocking=BLOCKING), 1)["i"] == 12
    packs = packing.plan_packs(model, mp)
    b, a = packs[("B", ("k", "j"))], packs[("A", ("i", "k"))]
    assert (b.level, b.shared, b.size) == (1, True, 3 * 16)
    assert (a.level, a.shared) == (2, False)  # A's block: each core its own rows


@pytest.mark.parametrize("params", [{"M": 9, "N": 13, "K": 7}, {"M": 17, "N": 5, "K": 4}, {"M": 1, "N": 1, "K": 1}])
def test_counts_equal_the_simulator_and_fill_b_once_per_group(params):
    kernel, model = _model()
    mp = register_mapping(model, 0, ARCH, params, blocking=BLOCKING)
    counts = isl_count_mapping(model, mp, ARCH, params=params)
    assert count_mapping(model, mp, ARCH, params=params) == counts
    got = counts_as_dict(counts)
    assert got == simulate(kernel, mp, params)
    # by hand: the last level holds one group's KC x NC panel of B; the groups walk k inside, so the
    # panel changes at every step of k and every group refills all of B, once
    rows = _tiles(mp, 1)["i"] or params["M"]
    groups = -(-params["M"] // rows)
    assert got["levels"][1]["tensors"]["B"]["fills"] == groups * params["K"] * params["N"]


def test_a_triangle_keeps_its_row_blocks():
    """syrk's rows read a triangle of columns: no constant panel shared by the cores (code as before)."""
    kernel, model = _model(SYRK)
    mp = register_mapping(model, 0, ARCH, {"N": 19, "K": 7}, blocking=BLOCKING)
    assert mp is not None
    assert not any(p.shared for p in packing.plan_packs(model, mp).values())


@pytest.mark.parametrize("threads", ["1", "2"])
def test_shared_panel_code_matches_numpy(threads, monkeypatch):
    kernel, model = _model()
    made = {"M": 29, "N": 45, "K": 37}
    mp = register_mapping(model, 0, ARCH, made, blocking=BLOCKING)
    # without sizes nothing is pruned: the spatial loop is shared out (at these sizes it is not worth
    # a barrier; see test_a_panel_inside_a_thread_share_is_its_own)
    src = emit_c(kernel, model, mp)
    assert src.count("aligned_alloc(64") == 1 and "free(polymap_pk_B_k_j);" in src
    region = src[src.index("#pragma omp parallel\n"):]
    # the team splits the copy, then the row blocks (the copy's barrier orders it before the reads)
    copy, blocks = region.index("#pragma omp for schedule(static)\n"), region.index("i_LLC = 0")
    assert copy < region.index("polymap_pk_B_k_j[") < blocks
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    fn = load_kernel(src, kernel)
    for params in ({"M": 29, "N": 45, "K": 37}, {"M": 7, "N": 9, "K": 1}, {"M": 1, "N": 1, "K": 4},
                   {"M": 30, "N": 17, "K": 8}, {"M": 40, "N": 70, "K": 11}):
        rng = np.random.default_rng(params["M"])
        a = rng.standard_normal((params["M"], params["K"]))
        b = rng.standard_normal((params["K"], params["N"]))
        c = np.full((params["M"], params["N"]), np.nan)
        fn({"A": a, "B": b, "C": c}, params)
        np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)


def test_a_panel_inside_a_thread_share_is_its_own():
    """Where the threads split a loop above the panel (at 45 rows the groups' loop, the row blocks not
    being worth a barrier), each thread runs its copy alone: a buffer of its own, as an unshared pack."""
    kernel, model = _model()
    made = {"M": 45, "N": 45, "K": 37}
    src = emit_c(kernel, model, register_mapping(model, 0, ARCH, made, blocking=BLOCKING), params=made)
    assert "#pragma omp parallel for" in src and "aligned_alloc" not in src
    assert "double polymap_pk_B_k_j[48]" in src
