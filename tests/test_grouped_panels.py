"""B's panels grouped at L2 (register_mapping's ``nb``): counts against the simulator and hand counts,
the code against NumPy, the copies in the source's memory order.

The hand counts: gemm M, N, K = 9, 13, 7 on 2 cores, register tile 2 x 4, KC 3, MC 4, groups of 8
columns. Rows are cut into blocks of 4 (two per core: 4 + 4, then 1 + idle), so L2 sees 3 row blocks;
for each, every KC step fills the whole KC x N of B once (groups of 8 + 5 columns, no overlap): B's
L2 fills are 3 x 7 x 13 = 273. The last level walks k outside j, so A's 4 x 3 block stays for both
groups of a KC step: A's L2 fills are M x K = 63 (walking j outside k would fill it once per group).
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
AVX2 = VectorUnit("avx2", 32, 16, True)
ARCH = Architecture("t", (Level("DRAM"), Level("LLC", None, 32 * 2 ** 20, 1), Level("L2", None, 2 ** 20, 2),
                          Level("L1", None, 32 * 1024, 2), Level("RF", None, 2048, 2)), Compute(32), AVX2)


#: the grouped form itself (the streamed form, which gemm's A[i, k] would take, is test_streamed_blocks')
GROUPED = Blocking(2, 4, 3, 4, 16, 8, stream=False)


def _grouped(params: dict, blocking: Blocking):
    kernel = parse(GEMM, "g.loop").kernels[0]
    model = build_model(kernel)
    mp = register_mapping(model, 0, ARCH, params, blocking=blocking)
    assert mp is not None and dependence_violation(model, mp) is None
    return kernel, model, mp


def test_grouped_counts_equal_the_simulator_and_hand_counts():
    params = {"M": 9, "N": 13, "K": 7}
    kernel, model, mp = _grouped(params, GROUPED)
    tiles = {lm.level: dict(zip(mp.loops, lm.tile)) for lm in mp.levels}
    assert tiles["L2"]["j"] == 8 and "B" in mp.levels[2].keep and "C" not in mp.levels[2].keep
    counts = isl_count_mapping(model, mp, ARCH, params=params)
    assert count_mapping(model, mp, ARCH, params=params) == counts
    got = counts_as_dict(counts)
    assert got == simulate(kernel, mp, params)
    l2 = got["levels"][2]["tensors"]
    assert l2["B"]["fills"] == 3 * 7 * 13
    assert l2["A"]["fills"] == 9 * 7


@pytest.mark.parametrize("params", [{"M": 9, "N": 13, "K": 7}, {"M": 29, "N": 45, "K": 37}, {"M": 1, "N": 1, "K": 1}])
def test_grouped_code_matches_numpy(params):
    kernel, model, mp = _grouped(params, GROUPED)
    src = emit_c(kernel, model, mp)
    if params["N"] > 8:  # one group of two panels: the buffer at L2 is KC x 8
        assert "polymap_pk_B_k_j[24]" in src
    fn = load_kernel(src, kernel)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((params["M"], params["K"]))
    b = rng.standard_normal((params["K"], params["N"]))
    c = np.full((params["M"], params["N"]), np.nan)
    fn({"A": a, "B": b, "C": c}, params)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)


def test_group_copy_reads_rows_of_b_whole():
    """The copy's loops run k, then the panel, then its lanes (B's memory order), not panel by panel."""
    params = {"M": 29, "N": 45, "K": 37}
    kernel, model, mp = _grouped(params, GROUPED)
    src = emit_c(kernel, model, mp)
    copy = src[src.index("polymap_pk_B_k_j[24]"):]
    loops = [line.split("<")[1].split(";")[0].strip() for line in copy.splitlines()[2:5]]
    assert loops == ["3", "2", "4"]  # k (KC 3), the group's panels (2), a panel's columns (4)
