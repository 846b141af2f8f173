"""Exact counts (polymap.passes.counting.counting) against the brute-force simulator and hand counts."""
from __future__ import annotations

import pytest

from polymap.machine.arch import architecture_from_dict
from polymap.driver import parse
from polymap.mapping.files import load_mapping, mapping_from_dict
from polymap.mapping.model import Mapping
from polymap.passes.counting.counting import count_mapping, isl_count_mapping
from polymap.passes.counting.fit import FitProblem, capacity_problems
from polymap.poly import build_model, to_int
from simulator import counts_as_dict, simulate

GEMM = """
kernel gemm(M = 6, N = 5, K = 4) {
  in A[M, K]
  in B[K, N]
  out C[M, N]
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K { acc: C[i, j] += A[i, k] * B[k, j] }
  }
}
"""

TRIANGULAR = """
kernel trmv(N = 7) {
  in L[N, N]
  in x[N]
  inout y[N]
  for i in 0..N, j in 0..i + 1 { S: y[i] += L[i, j] * x[j] }
}
"""

DILATED = """
kernel dconv(P = 7, R = 3) {
  in W[R]
  in I[2 * P + 2 * R]
  out O[P]
  for p in 0..P {
    z: O[p] = 0
    for r in 0..R { m: O[p] += W[r] * I[2 * p + 2 * r] }
  }
}
"""

COPY = """
kernel copy2(N = 6, M = 4) {
  in A[N, M]
  local T[N, M]
  out B[N, M]
  for i in 0..N {
    for j in 0..M { t: T[i, j] = A[i, j] * 2 }
    for j in 0..M { u: B[i, j] = T[i, j] + T[i, 0] }
  }
}
"""


def arch_of(n: int, *, fanout: int = 16):
    # every level below L1 multiplies the instances by `fanout`
    levels = [{"name": "L0"}] + [{"name": f"L{k}", "instances": fanout ** (k - 1)} for k in range(1, n)]
    return architecture_from_dict({"levels": levels, "compute": {"instances": fanout ** (n - 1)}},
                                  source_name="<test>")


def setup(src: str, levels: list[dict]):
    kernel = parse(src, "<test>").kernels[0]
    arch = arch_of(len(levels))
    for k, lv in enumerate(levels):
        lv["level"] = f"L{k}"
    mapping = mapping_from_dict({"levels": levels}, kernel=kernel, arch=arch)
    return kernel, build_model(kernel), mapping, arch


def agree(src: str, levels: list[dict], params: dict | None = None, *, symbolic: bool = False):
    kernel, model, mapping, arch = setup(src, levels)
    values = params or {p.name: p.default for p in kernel.params}
    counts = count_mapping(model, mapping, arch, params=values, symbolic=symbolic)
    expected = simulate(kernel, mapping, values)
    assert counts_as_dict(counts) == expected
    # the ISL path on its own too (count_mapping takes the fast path where it applies)
    assert counts_as_dict(isl_count_mapping(model, mapping, arch, params=values, symbolic=symbolic)) == expected
    return counts


def test_gemm_three_levels_with_init_and_multicast():
    c = agree(GEMM, [{"order": ["i", "j", "k"]},
                     {"tile": {"i": 4, "j": 3, "k": 2}, "order": ["k", "i", "j"]},
                     {"tile": {"i": 1, "j": 3, "k": 1}, "order": ["j"], "spatial": ["j"]}])
    # hand counts: DRAM reads every element of A and B exactly once per GLB tile walk it needs
    assert c.instances == 6 * 5 * 4 + 6 * 5


def test_whole_problem_in_one_buffer_reads_each_element_once():
    c = agree(GEMM, [{"order": ["i", "j", "k"]}, {"order": ["i", "j", "k"]}])
    dram = c.levels[0]
    assert (dram.tensor("A").reads, dram.tensor("B").reads) == (6 * 4, 4 * 5)
    # C is first written by init (a plain '='): never filled, written back once
    assert (dram.tensor("C").reads, dram.tensor("C").updates) == (0, 6 * 5)
    buf = c.levels[1]
    assert buf.tensor("A").reads == 6 * 5 * 4
    assert buf.tensor("C").updates == 6 * 5 * 4 + 6 * 5
    assert buf.footprint == 6 * 4 + 4 * 5 + 6 * 5


def test_inner_k_tile_refetches_a_for_every_j():
    # GLB holds one (i, j, k-tile) block: A[i, k-tile] is refetched for every j
    c = agree(GEMM, [{"order": ["i", "j", "k"]}, {"tile": {"i": 1, "j": 1, "k": 2}, "order": ["k"]}])
    assert c.levels[0].tensor("A").reads == 6 * 5 * 4
    # B's (k-tile, j) block changes every residency: all of B for every i
    assert c.levels[0].tensor("B").reads == 6 * 4 * 5


def test_triangular_non_dividing_tiles():
    agree(TRIANGULAR, [{"order": ["i", "j"]}, {"tile": {"i": 3, "j": 2}, "order": ["j", "i"]},
                       {"tile": {"i": 2, "j": 1}, "order": ["i", "j"]}])


def test_dilated_halo_and_bypass():
    agree(DILATED, [{"order": ["p", "r"]}, {"tile": {"p": 3, "r": 2}, "order": ["r", "p"], "keep": ["I", "O"]},
                    {"tile": {"p": 1, "r": 2}, "order": ["r", "p"], "keep": ["W"]}])


def test_plain_writes_are_not_filled():
    c = agree(COPY, [{"order": ["i", "j"]}, {"tile": {"i": 2, "j": 4}, "order": ["i", "j"]}])
    glb = c.levels[1]
    assert glb.tensor("T").fills == 0 and glb.tensor("B").fills == 0
    assert glb.tensor("B").writebacks == 6 * 4
    assert glb.tensor("A").fills == 6 * 4


def test_spatial_fanout_multicasts_shared_elements():
    # j spatial at L1: the 3 RF instances read the same A[i, k] at the same step
    c = agree(GEMM, [{"order": ["i", "j", "k"]}, {"tile": {"i": 2, "j": 3, "k": 4}, "order": ["i", "k", "j"],
                                                   "spatial": ["j"]},
                     {"tile": {"i": 1, "j": 1, "k": 1}, "order": ["i", "j", "k"]}])
    l1 = c.levels[1]
    assert l1.tensor("A").reads < c.levels[2].tensor("A").fills


def test_symbolic_formulas_evaluate_to_the_numbers():
    c = agree(TRIANGULAR, [{"order": ["j", "i"]}, {"tile": {"i": 2, "j": 3}, "order": ["i", "j"]}], symbolic=True)
    import islpy as isl

    for lv in c.levels:
        for t in lv.tensors:
            for name, text in t.formulas:
                assert to_int(isl.PwQPolynomial(text), {"N": 7}) == getattr(t, name)


def test_capacity_violation_names_level_and_footprint():
    kernel, model, mapping, _ = setup(GEMM, [{"order": ["i", "j", "k"]}, {"order": ["i", "j", "k"]}])
    arch = architecture_from_dict({"levels": [{"name": "L0"}, {"name": "L1", "capacity": 10}]},
                                  source_name="<t>")
    v = capacity_problems(model, mapping, arch, {"M": 6, "N": 5, "K": 4})
    assert v == (FitProblem("capacity", "L1", 1, 10, 74, "elements"),)
    arch = architecture_from_dict({"levels": [{"name": "L0"}, {"name": "L1", "capacity": "256B"}]},
                                  source_name="<t>")
    v = capacity_problems(model, mapping, arch, {"M": 6, "N": 5, "K": 4})
    assert v == (FitProblem("capacity", "L1", 1, 256, 296, "bytes"),)



def test_capacity_problems_from_the_counts_are_the_same():
    """``capacity_problems_of`` (a cache hit checks the counts it makes anyway) gives what
    ``capacity_problems`` gives, overflowing or not, in elements and in bytes, on both counting paths."""
    from polymap.passes.counting.fit import capacity_problems_of
    kernel, model, mapping, _ = setup(GEMM, [{"order": ["i", "j", "k"]}, {"tile": {"i": 2, "j": 3, "k": 4},
                                                                       "order": ["i", "k", "j"]}])
    values = {"M": 6, "N": 5, "K": 4}
    for capacity in (10, 40, 1000, "64B", "256B", "4KiB"):
        arch = architecture_from_dict({"levels": [{"name": "L0"}, {"name": "L1", "capacity": capacity}]},
                                      source_name="<t>")
        expected = capacity_problems(model, mapping, arch, values)
        for counts in (count_mapping(model, mapping, arch, params=values),
                       isl_count_mapping(model, mapping, arch, params=values)):
            assert capacity_problems_of(counts, arch) == expected


@pytest.mark.parametrize("params", [{"M": 3, "N": 2, "K": 5}, {"M": 1, "N": 1, "K": 1}])
def test_other_sizes(params):
    agree(GEMM, [{"order": ["k", "i", "j"]}, {"tile": {"i": 2, "j": 2, "k": 3}, "order": ["j", "k", "i"]}], params)
