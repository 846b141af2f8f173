"""Generated C against the reference execution (an independent interpreter of the IR).

Hand-written mappings include tiles that divide nothing (7 and 5 on size 19)
and spatial loops; a golden file pins the C printed for gemm.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from polymap.codegen.ast_build import ast_loops_info, build_ast, kernel_schedule
from polymap.codegen.build import load_kernel
from polymap.codegen.c.emitter import c_signature, emit_c
from polymap.codegen.verify import verify
from polymap.driver import load_program, parse
from polymap.mapping.model import LevelMapping, Mapping, nest_loops, nest_tensors
from polymap.poly import build_model

EXAMPLES = Path(__file__).parent.parent / "examples"
os.environ.setdefault("OMP_NUM_THREADS", "2")


def kernel_of(name: str):
    return load_program(EXAMPLES / f"{name}.loop").kernels[0]


def two_level(kernel, tile: dict, order: tuple, inner_order: tuple, spatial=(), inner_spatial=(), nest=0):
    """A DRAM/GLB mapping: DRAM walks GLB tiles ``tile`` in ``order``; GLB walks points in ``inner_order``."""
    loops = nest_loops(kernel, nest)
    keep = nest_tensors(kernel, nest)
    return Mapping(kernel.name, nest, loops, (
        LevelMapping("DRAM", (None,) * len(loops), order, tuple(spatial), keep),
        LevelMapping("GLB", tuple(tile.get(x) for x in loops), inner_order, tuple(inner_spatial), keep)))


def test_signature_follows_cli_md():
    k = kernel_of("gemm")
    assert c_signature(k) == ("void gemm(float *restrict A, float *restrict B, float *restrict C, "
                              "long M, long N, long K)")


def test_gemm_matches_numpy_matmul_with_ragged_tiles():
    k = kernel_of("gemm")
    m = build_model(k)
    mp = two_level(k, {"i": 7, "j": 5, "k": 3}, ("i", "j", "k"), ("i", "k", "j"), spatial=("i",))
    fn = load_kernel(emit_c(k, m, mp), k)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((19, 13)).astype(np.float32)
    b = rng.standard_normal((13, 17)).astype(np.float32)
    c = np.full((19, 17), np.nan, dtype=np.float32)
    fn({"A": a, "B": b, "C": c}, {"M": 19, "N": 17, "K": 13})
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tile,order,inner", [
    ({"i": 7, "j": 5, "k": 5}, ("i", "j", "k"), ("k", "i", "j")),
    ({"i": 5, "j": 7}, ("j", "i", "k"), ("i", "j", "k")),
    ({}, ("i", "j", "k"), ("i", "j", "k")),
])
def test_gemm_mappings_verify(tile, order, inner):
    k = kernel_of("gemm")
    mp = two_level(k, tile, order, inner, spatial=(order[0],))
    r = verify(k, {"M": 19, "N": 19, "K": 19}, targets=("c",), mapping=mp)
    assert r.passed


def test_conv2d_tiled_spatial():
    k = kernel_of("conv2d")
    mp = two_level(k, {"k": 5, "p": 7, "c": 3}, ("k", "p", "n", "q", "c", "r", "s"),
                   ("n", "c", "r", "s", "k", "p", "q"), spatial=("k",))
    params = {"N": 1, "C": 4, "K": 6, "P": 9, "Q": 5, "R": 3, "S": 3}
    assert verify(k, params, targets=("c",), mapping=mp).passed


@pytest.mark.parametrize("name,params", [
    ("lu", {"N": 19}), ("cholesky", {"N": 19}), ("jacobi2d", None), ("seidel2d", {"T": 3, "N": 19}),
])
def test_original_order_verifies(name, params):
    k = kernel_of(name)
    params = params or {p.name: min(p.default, 19) for p in k.params}
    assert verify(k, params, targets=("c",), mapping=None).passed


def test_illegal_lu_tiling_is_detected_and_really_wrong():
    # tiling i at the outer level runs the scale of a later row tile after updates that need it
    k = kernel_of("lu")
    mp = two_level(k, {"i": 7, "j": 5}, ("k", "i", "j"), ("k", "i", "j"))
    from polymap.passes.search.default_mapping import dependence_violation
    from polymap.errors import VerificationFailure

    assert dependence_violation(build_model(k), mp) is not None
    with pytest.raises(VerificationFailure):
        verify(k, {"N": 19}, targets=("c",), mapping=mp)


def test_parallel_pragmas_only_on_conflict_free_loops():
    k = kernel_of("gemm")
    m = build_model(k)
    mp = two_level(k, {"i": 8, "j": 8, "k": 8}, ("i", "j", "k"), ("i", "k", "j"), spatial=("k",))
    src = emit_c(k, m, mp)
    # k carries the reduction: spatial but not parallelised
    assert "spatial loop k carries a dependence" in src
    ks = kernel_schedule(m, (mp,))
    infos = ast_loops_info(ks, build_ast(m, ks.union))
    assert {i.loop for i in infos if not i.parallel} == {"k"}


def test_types_and_functions_match_reference():
    text = """
    kernel mix(N = 7) {
      in A[N] : f32
      in B[N] : i32
      out X[N] : f64
      out Y[N] : i32
      out Z[N] : f32
      local t : f32
      for i in 0..N {
        t = sqrt(A[i]) + 0.1
        X[i] = t / 3 + B[i] / 2 + i / 2 + select(A[i] > 1, abs(A[i] - 2), max(A[i], 0.75))
        Y[i] = B[i] * 3 % 4 - 7 / 2
        Z[i] = pow(A[i], 2) + exp(A[i]) - log(A[i]) + floor(A[i] * 3)
        Z[i] max= 2.5
      }
    }
    """
    k = parse(text, "mix.loop").kernels[0]
    r = verify(k, {"N": 7}, targets=("c",))
    assert r.passed, r.summary()


def test_golden_gemm(golden):
    k = kernel_of("gemm")
    mp = two_level(k, {"i": 32, "j": 32, "k": 16}, ("i", "j", "k"), ("k", "i", "j"), spatial=("i",))
    golden.check("gemm_tiled.c", emit_c(k, build_model(k), mp))


def test_the_build_cache_ignores_the_leading_comment_only():
    """A build is keyed by the code without compile's header (the sizes it was made for, the command):
    the same code compiled for other sizes reuses the library; any other difference is another build."""
    from polymap.codegen.build import build_key_text
    body = "int f(int n) { return n; /* kept */ }\n"
    a = "/* Generated by polymap.\n * Sizes: M=512 */\n" + body
    b = "/* Generated by polymap.\n * Sizes: M=400 */\n" + body
    assert build_key_text(a) == build_key_text(b) == "\n" + body
    assert build_key_text(body) == body
    assert build_key_text(a) != build_key_text(a.replace("return n;", "return -n;"))
    assert build_key_text("/* never closed\nint g;") == "/* never closed\nint g;"
