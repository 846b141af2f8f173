"""The NumPy target against the reference execution (an independent interpreter of the IR).

Hand-written mappings use tiles that divide nothing (3, 4 and 5 on sizes
7-11); a golden file pins the module printed for gemm.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from polymap.codegen.numpy.emitter import emit_numpy, run_numpy
from polymap.driver import load_program
from polymap.mapping.model import LevelMapping, Mapping, nest_loops, nest_tensors
from polymap.passes.schedule.tiling import order_mapping
from polymap.poly import build_model
from polymap.reference import execute
from polymap.tensors import random_inputs

EXAMPLES = Path(__file__).parent.parent / "examples"


def kernel_of(name: str):
    return load_program(EXAMPLES / f"{name}.loop").kernels[0]


def two_level(kernel, tile: dict, order: tuple, inner_order: tuple, nest: int = 0) -> Mapping:
    """DRAM walks GLB tiles ``tile`` in ``order``; GLB walks points in ``inner_order``."""
    loops = nest_loops(kernel, nest)
    keep = nest_tensors(kernel, nest)
    full = lambda o: tuple(o) + tuple(x for x in loops if x not in o)  # noqa: E731
    return Mapping(kernel.name, nest, loops, (
        LevelMapping("DRAM", (None,) * len(loops), full(order), (), keep),
        LevelMapping("GLB", tuple(tile.get(x) for x in loops), full(inner_order), (), keep)))


def assert_same(kernel, params, mapping, *, rtol=None):
    if mapping is not None:  # the test's own premise: only legal mappings must compute the same
        from polymap.passes.legality.legality import is_legal_schedule
        from polymap.passes.schedule.tiling import mapped_schedule

        model = build_model(kernel)
        for m in (mapping if isinstance(mapping, tuple) else (mapping,)):
            assert is_legal_schedule(model, mapped_schedule(model, m))
    inputs = random_inputs(kernel, params, seed=3, well_conditioned=True)
    want = execute(kernel, inputs, params)
    got = run_numpy(kernel, inputs, params, mapping)
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype, name
        tol = rtol or (2e-4 if w.dtype == np.float32 else 1e-9)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=name)


CASES = [
    ("gemm", {"M": 9, "N": 7, "K": 11}, lambda k: two_level(k, {"i": 3, "j": 5, "k": 4}, "ijk", "kij")),
    ("gemm", {"M": 9, "N": 7, "K": 11}, lambda k: two_level(k, {"i": 4, "j": 3}, "jik", "ikj")),
    ("gemm", {"M": 8, "N": 10, "K": 7}, None),
    ("conv2d", {"N": 1, "C": 3, "K": 2, "P": 7, "Q": 5, "R": 3, "S": 2},
     lambda k: two_level(k, {"p": 3, "q": 5, "c": 2}, ("n", "k", "p", "q", "c", "r", "s"),
                         ("c", "r", "s", "n", "k", "p", "q"))),
    ("lu", {"N": 9}, None),
    ("jacobi2d", None, None),
    ("seidel2d", {"T": 2, "N": 8}, None),
    ("cholesky", {"N": 9}, None),
    ("softmax", {"M": 5, "N": 7}, None),
    ("2mm", None, None),
    ("gemm_scalar_acc", None, None),
    ("attention", None, None),
    ("trmv", None, None),
    ("upsample2x", None, None),
    ("polybench/atax", {"M": 7, "N": 9}, None),
    ("polybench/bicg", {"M": 7, "N": 9}, None),
    ("polybench/mvt", {"N": 9}, None),
    ("polybench/syrk", {"M": 5, "N": 7}, None),
    ("polybench/trisolv", {"N": 9}, None),
    ("polybench/doitgen", {"NQ": 3, "NR": 4, "NP": 5}, None),
    ("polybench/jacobi-1d", {"TSTEPS": 3, "N": 11}, None),
    ("polybench/covariance", {"M": 5, "N": 7}, None),
    ("polybench/gemver", {"N": 9}, None),
    ("polybench/floyd-warshall", {"N": 7}, None),
]


@pytest.mark.parametrize("name,params,mapping", CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_numpy_matches_reference(name, params, mapping):
    k = kernel_of(name)
    if params is None:
        params = {p.name: min(p.default or 6, 8) for p in k.params}
    assert_same(k, params, mapping(k) if mapping else None)


@pytest.mark.parametrize("order", [("i", "k", "j"), ("k", "j", "i")])
def test_gemm_loop_orders(order):
    k = kernel_of("gemm")
    assert_same(k, {"M": 7, "N": 5, "K": 6}, order_mapping(k, 0, nest_loops(k, 0), order))


def test_gemm_vectorises_into_matmul_and_keeps_float32():
    k = kernel_of("gemm")
    src = emit_numpy(k, build_model(k), two_level(k, {"i": 3, "j": 5, "k": 4}, "ijk", "kij"), reassociate=True)
    assert " @ " in src and "for k in" not in src
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    b = np.arange(8, dtype=np.float32).reshape(4, 2) / 3
    out = run_numpy(k, {"A": a, "B": b}, {"M": 3, "N": 2, "K": 4}, None)
    assert out["C"].dtype == np.float32
    np.testing.assert_allclose(out["C"], a.astype(np.float64) @ b, rtol=1e-6)


def test_reductions_keep_their_order_unless_reassociation_is_allowed():
    # issue 14: gramschmidt's rank-deficient columns turn any reordering of `nrm += A[i,k]^2` into
    # relative errors of order 1; by default every element's updates are folded in their order
    k = kernel_of("polybench/gramschmidt")
    src = emit_numpy(k, build_model(k))
    assert "accumulate" in src and "einsum" not in src and ".sum(" not in src
    assert "einsum" in emit_numpy(k, build_model(k), reassociate=True)
    from polymap.reference import execute

    rng = np.random.default_rng(3)
    a = rng.random((20, 30))
    params = {"M": 20, "N": 30}
    want = execute(k, {"A": a}, params)
    got = run_numpy(k, {"A": a}, params, None)
    for name in ("A", "R", "Q"):
        assert np.array_equal(got[name], want[name]), name  # bit for bit, columns 20.. included


def test_ordered_gemm_matches_the_reference_bit_for_bit():
    # gemm whose product another statement reads (here: divides by) is no pure contraction
    # (polymap.passes.frontend.contraction): by default its products are folded in order
    from polymap.driver import parse

    text = (EXAMPLES / "gemm.loop").read_text().replace("out   C[M, N] : f32", "out   C[M, N] : f32\n  out   D[M, N] : f32")
    text = text.replace("A[i, k] * B[k, j]\n    }", "A[i, k] * B[k, j]\n    }\n    div: D[i, j] = 1 / C[i, j]")
    k = parse(text, "g.loop").kernels[0]
    assert "div:" in text
    mapping = two_level(k, {"i": 3, "j": 5, "k": 4}, "ijk", "kij")
    src = emit_numpy(k, build_model(k), mapping)
    assert " @ " not in src and "accumulate" in src
    assert " @ " in emit_numpy(kernel_of("gemm"), build_model(kernel_of("gemm")), two_level(
        kernel_of("gemm"), {"i": 3, "j": 5, "k": 4}, "ijk", "kij"))  # the pure one: one @ by default

    rng = np.random.default_rng(4)
    a, b = rng.random((7, 9), dtype=np.float32), rng.random((9, 6), dtype=np.float32)
    params = {"M": 7, "N": 6, "K": 9}
    got = run_numpy(k, {"A": a, "B": b}, params, mapping)
    want = execute(k, {"A": a, "B": b}, params)
    assert np.array_equal(got["C"], want["C"]) and np.array_equal(got["D"], want["D"])


def test_dependent_loops_stay_loops():
    # seidel2d reads values updated in the same sweep: no point loop may become an array axis
    src = emit_numpy(kernel_of("seidel2d"))
    assert "vectorised" not in src and "for j in" in src


def test_integer_and_value_semantics():
    from polymap.driver import parse

    k = parse("""kernel ints(N = 7) {
      in a[N] : i32
      out b[N] : i32
      out c[N] : f64
      for i in 0..N { b[i] = (a[i] - 3) / 2 + i % 3; c[i] = i / 2 + a[i] * 0.5 }
    }""").kernels[0]
    assert_same(k, {"N": 7}, None)


def test_golden_gemm_module(golden):
    k = kernel_of("gemm")
    golden.check("gemm_tiled.numpy.py", emit_numpy(k, build_model(k), two_level(k, {"i": 32, "j": 32, "k": 16}, "ijk", "kij")))


@pytest.mark.parametrize("name", ["2mm", "polybench/atax", "polybench/gemver", "conv2d", "seidel2d"])
def test_default_mappings_of_every_nest(name):
    # several nests mapped at once, three levels, spatial loops: what `compile` feeds the emitter
    from polymap.machine.presets import load_architecture
    from polymap.passes.search.default_mapping import choose_mappings

    k = kernel_of(name)
    params = {p.name: min(p.default or 6, 7) for p in k.params}
    mappings = choose_mappings(build_model(k), load_architecture("toy"), params)
    assert_same(k, params, mappings or None)
