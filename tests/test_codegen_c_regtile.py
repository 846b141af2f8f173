"""Register tiles in the C backend: unrolled-and-jammed accumulators vs the reference and NumPy.

Sizes are chosen so that the tiles divide nothing: every run mixes full
register boxes (the fast path) with edge boxes (the generic loops), over
several reduction blocks.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from polymap.machine.presets import load_architecture
from polymap.codegen.build import load_kernel
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.verify import verify
from polymap.passes.search.default_mapping import choose_mappings, dependence_violation
from polymap.driver import load_program, parse
from polymap.poly import build_model
from polymap.passes.search.register_mapping import Blocking, register_mapping

ROOT = Path(__file__).parent.parent
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
      acc: C[i, j] %(op)s 0.5 * A[i, k] * B[k, j] + A[i, k]
    }
  }
}
"""


def gemm_kernel(dtype: str, op: str = "+="):
    return parse(GEMM % {"t": dtype, "op": op}, "g.loop").kernels[0]


def body(src: str) -> str:
    return src.split("\nvoid ", 1)[1]


@pytest.mark.parametrize("dtype,op", [("f32", "+="), ("f64", "+="), ("f32", "-=")])
@pytest.mark.parametrize("blocking", [Blocking(3, 8, 5, 6, 16), Blocking(2, 16, 7, 4, 32), None])
def test_gemm_register_tiles_with_edges_match_numpy(dtype, op, blocking):
    k = gemm_kernel(dtype, op)
    m = build_model(k)
    params = {"M": 29, "N": 45, "K": 37}
    mp = register_mapping(m, 0, HOST, params, blocking=blocking)
    assert mp is not None and dependence_violation(m, mp) is None
    src = emit_c(k, m, mp)
    assert "polymap_acc_" in body(src) and "polymap_f" in body(src)  # vector accumulators
    fn = load_kernel(src, k)
    rng = np.random.default_rng(3)
    nt = np.float32 if dtype == "f32" else np.float64
    a = rng.standard_normal((29, 37)).astype(nt)
    b = rng.standard_normal((37, 45)).astype(nt)
    c = np.full((29, 45), np.nan, dtype=nt)
    fn({"A": a, "B": b, "C": c}, params)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = 0.5 * a64 @ b64 + a64.sum(axis=1, keepdims=True)
    want = want if op == "+=" else -want
    tol = 1e-4 if dtype == "f32" else 1e-11
    np.testing.assert_allclose(c, want, rtol=tol, atol=tol * 10)


def test_register_tiles_off_gives_plain_loops():
    k = gemm_kernel("f32")
    m = build_model(k)
    mp = register_mapping(m, 0, HOST, {"M": 29, "N": 45, "K": 37})
    assert "polymap_acc_" not in emit_c(k, m, mp, register_tiles=False)


def test_scalar_accumulators_when_not_unit_stride():
    # B[j, k] (transposed): j is not unit stride in B, so the box gets scalar accumulators
    text = GEMM.replace("in B[K, N]", "in B[N, K]").replace("B[k, j]", "B[j, k]") % {"t": "f64", "op": "+="}
    k = parse(text, "g.loop").kernels[0]
    m = build_model(k)
    params = {"M": 11, "N": 13, "K": 9}
    mp = register_mapping(m, 0, HOST, params, blocking=Blocking(3, 4, 4, 6, 8))
    src = body(emit_c(k, m, mp, pack=False))
    assert "polymap_acc_0_0" in src and "polymap_f64x" not in src
    # with packing, B's KC x NR panel is laid out [k][j]: the row loads as vectors
    packed = body(emit_c(k, m, mp))
    assert "polymap_pk_B_j_k" in packed and "polymap_f64x" in packed
    assert verify(k, params, targets=("c",), mapping=mp).passed


def test_statement_reading_its_target_is_not_register_tiled():
    text = """
    kernel r(N) {
      inout C[N, N] : f32
      in A[N, N] : f32
      for i in 0..N, j in 0..N, k in 0..N {
        C[i, j] += A[i, k] * C[k, j]
      }
    }
    """
    k = parse(text, "r.loop").kernels[0]
    m = build_model(k)
    mp = register_mapping(m, 0, HOST, {"N": 20}, blocking=Blocking(2, 8, 4, 4, 16))
    if mp is not None and dependence_violation(m, mp) is None:
        assert "polymap_acc_" not in body(emit_c(k, m, mp))


@pytest.mark.parametrize("name,params", [
    ("gemm", {"NI": 29, "NJ": 37, "NK": 23}),        # f64, alpha, a scale statement in the nest
    ("syrk", {"M": 21, "N": 31}),                     # triangular: boxes cut by the diagonal
    ("2mm", {"NI": 14, "NJ": 19, "NK": 17, "NL": 21}),
    ("doitgen", {"NQ": 7, "NR": 9, "NP": 19}),
])
def test_polybench_default_mapping_verifies(name, params):
    k = load_program(ROOT / "examples" / "polybench" / f"{name}.loop").kernels[0]
    m = build_model(k)
    params = {p.name: params.get(p.name, p.default) for p in k.params}
    mappings = choose_mappings(m, HOST, params)
    assert verify(k, params, targets=("c",), mapping=mappings, model=m).passed


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_register_tiles_under_address_sanitizer(tmp_path):
    k = gemm_kernel("f32")
    m = build_model(k)
    params = {"M": 13, "N": 21, "K": 11}
    mp = register_mapping(m, 0, HOST, params, blocking=Blocking(3, 8, 4, 6, 16))
    _runs_clean_under_sanitizers(k, params, emit_c(k, m, mp), tmp_path)


@pytest.mark.parametrize("name", ["syrk", "syr2k", "gemm"])
def test_triangular_and_packed_register_tiles(name, tmp_path):
    # small blocks so that every level splits: packed panels (A[j, k] laid out [k][j]), masked
    # diagonal boxes whose rows end at different columns, edge boxes; checked against the reference
    # and under AddressSanitizer/UBSan
    k = load_program(ROOT / "examples" / "polybench" / f"{name}.loop").kernels[0]
    m = build_model(k)
    params = {p.name: {"M": 37, "N": 45}.get(p.name, 29) for p in k.params}
    mp = register_mapping(m, 0, HOST, params, blocking=Blocking(6, 16, 8, 12, 32))
    assert mp is not None and dependence_violation(m, mp) is None
    src = emit_c(k, m, mp)
    assert "polymap_acc_" in src and "polymap_pk_" in src and "polymap_mload_" in src
    assert verify(k, params, targets=("c",), mapping=mp, model=m).passed
    _runs_clean_under_sanitizers(k, params, src, tmp_path)


def _runs_clean_under_sanitizers(k, params, src: str, tmp_path: Path) -> None:
    """``src`` with a driver that calls it on ``params``, built and run under AddressSanitizer/UBSan."""
    from tests.test_sanitizers import _driver, sanitized_build

    (tmp_path / "t.c").write_text(src + _driver(k, params))
    build = sanitized_build(tmp_path / "t.c", tmp_path / "t", "-march=native")
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert run.returncode == 0, run.stderr[-3000:]


def _eval_index(text: str, values: dict[str, int]) -> int:
    """The buffer subscript C text of packing.packed_index, evaluated (non-negative operands: C's / is //)."""
    return eval(text.replace(" / ", " // "), {"__builtins__": {}}, values)  # noqa: S307 - our own generated text


@pytest.mark.parametrize("b_at", ["L2", "L1", "both"])
def test_packed_reads_find_what_the_copy_wrote(b_at):
    # The copy fills digit (d0, d1, ...) of a panel with the element at origin + sum(d * divisor) per
    # loop; a read computes the subscript back from the element's coordinates (packed_index without the
    # enclosing loops' iterators, as when ISL prints no loop for a level). Both must agree for every
    # element. With B kept at L2 (tile j = 16) and not at L1 (tile j = 8), the L1 level is one tile of
    # j: its modulus (8) belongs to the registers' digit; without it (the bug fixed in c9fd508) the
    # second 8 columns of the panel read the next row of k. Kept at both, B is packed at L2 (the
    # outermost of consecutive keeping levels): L1's panel is a contiguous part of it.
    from itertools import product

    from polymap.codegen.c.packing import origin_name, packed_index, plan_packs

    k = gemm_kernel("f64")
    m = build_model(k)
    mp = register_mapping(m, 0, HOST, {"M": 29, "N": 45, "K": 37}, blocking=Blocking(3, 8, 5, 6, 16))
    n = len(mp.levels)
    levels = list(mp.levels)
    for lv, name in ((n - 3, "L2"), (n - 2, "L1")):
        keep = tuple(x for x in levels[lv].keep if x != "B") + (("B",) if b_at in (name, "both") else ())
        levels[lv] = dataclasses.replace(levels[lv], keep=keep)
    mp = dataclasses.replace(mp, levels=tuple(levels))
    narrow_l1 = b_at != "L1"
    packs = plan_packs(m, mp)
    b = packs[("B", ("k", "j"))]
    assert b.level == (n - 3 if narrow_l1 else n - 2)
    assert any(d.count * d.divisor > 8 for d in b.dims if d.loop == "j") == narrow_l1  # two panels of j
    for pack in packs.values():
        origins = {x: 100 * (p + 1) for p, x in enumerate(pack.loops)}  # any origin: the tile's first element
        seen = set()
        for digits in product(*(range(d.count) for d in pack.dims)):
            values = {x: origins[x] + sum(v * d.divisor for v, d in zip(digits, pack.dims) if d.loop == x)
                      for x in pack.loops}
            written = sum(v * d.stride for v, d in zip(digits, pack.dims))
            env = {**values, **{origin_name(pack, x): origins[x] for x in pack.loops}}
            assert _eval_index(packed_index(pack, values={x: x for x in pack.loops}), env) == written
            seen.add(written)
        assert seen == set(range(pack.size))


UPPER_TRIANGLE = """
kernel t(M, N) {
  in    A[N, M] : f64
  out   C[M, M] : f64
  out   T[M, M] : f64
  for i in 0..M, j in i..M {
    init: C[i, j] = 0.0
    for k in 0..N {
      acc: C[i, j] += A[k, i] * A[k, j]
    }
    copy: T[j, i] = C[i, j]
  }
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_register_tiles_whose_rows_start_on_the_diagonal(tmp_path):
    # covariance's triangle: row i starts at column j = i, so a box cut by the diagonal has rows starting
    # at different columns (the vector accumulators with per-row masks from both sides), every other box
    # the unmasked ones; sizes that no block divides. Against the reference execution, and under
    # AddressSanitizer/UBSan
    k = parse(UPPER_TRIANGLE, "t.loop").kernels[0]
    m = build_model(k)
    params = {"M": 45, "N": 29}
    mp = register_mapping(m, 0, HOST, params, blocking=Blocking(6, 16, 8, 12, 32))
    assert mp is not None and dependence_violation(m, mp) is None
    src = emit_c(k, m, mp)
    assert "polymap_acc_" in src and "polymap_fma_f64" in src and "= polymap_maskr_f64x8(polymap_s_j_" in src
    assert verify(k, params, targets=("c",), mapping=mp, model=m).passed
    _runs_clean_under_sanitizers(k, params, src, tmp_path)


SHIFTED_TRMM = """
kernel s(M, N) {
  in    A[M, M] : f64
  inout B[M, N] : f64
  for i in 0..M, j in 0..N {
    for k in i+1..M {
      acc: B[i, j] += A[k, i] * B[k - %d, j]
    }
  }
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("text", [None, SHIFTED_TRMM % 0, SHIFTED_TRMM % 1])
def test_register_tiles_whose_rows_end_with_the_reduction_loop(text, tmp_path):
    # trmm: row i takes k > i, so a box is full only at the steps of k past its rows; those steps run in
    # the vector accumulators, the others in the generic loops. The target's own tensor is read
    # (B[k, j]): a step runs in registers only when that read misses the box's rows (with B[k - 1, j]
    # the first full step reads the box's last row, which is then left to the generic loops). Against the
    # reference execution, and under AddressSanitizer/UBSan
    k = (load_program(ROOT / "examples" / "polybench" / "trmm.loop") if text is None else parse(text, "s.loop")).kernels[0]
    m = build_model(k)
    params = {p.name: {"M": 45, "N": 37}.get(p.name, p.default) for p in k.params}
    mp = register_mapping(m, 0, HOST, params, blocking=Blocking(6, 16, 8, 12, 32))
    assert mp is not None
    if dependence_violation(m, mp) is not None:
        return  # no register tiles for this variant (nothing to check)
    src = emit_c(k, m, mp)
    assert "polymap_fma_f64" in src
    assert verify(k, params, targets=("c",), mapping=mp, model=m).passed
    _runs_clean_under_sanitizers(k, params, src, tmp_path)
