"""A register tile over several reduction loops: conv2d's ``c, r, s`` around one box of ``O``.

The first piece of conv2d as an implicit GEMM (docs/design.md, "conv2d as an implicit GEMM"):
with the reduction loops ``c, r, s`` (in their original order) right around the box of ``O[n, k,
p, q]``, the accumulators are loaded once before ``c`` and stored once after ``s``'s last step,
not once per ``(r, s)``. The mapping is written by hand here (``register_mapping`` does not build
it yet). Sizes that no tile divides (edge boxes in ``p`` and ``q``); the code against the
reference execution and NumPy, the mapping's counts against the simulator and by hand.
"""
from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from polymap.codegen.build import load_kernel
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.verify import verify
from polymap.driver import parse
from polymap.machine.arch import Architecture, Compute, Level, VectorUnit
from polymap.mapping.model import LevelMapping, Mapping
from polymap.passes.counting.counting import count_mapping, isl_count_mapping
from polymap.passes.search.default_mapping import dependence_violation
from polymap.poly import build_model
from simulator import counts_as_dict, simulate

os.environ.setdefault("OMP_NUM_THREADS", "2")

CONV = """
kernel conv(N, C, K, P, Q, R, S) {
  in    I[N, C, %(d)sP + R - 1, %(d)sQ + S - 1] : %(t)s
  in    W[K, C, R, S] : %(t)s
  inout O[N, K, P, Q] : %(t)s
  for n in 0..N, k in 0..K, p in 0..P, q in 0..Q, c in 0..C, r in 0..R, s in 0..S {
    O[n, k, p, q] += I[n, c, %(d)sp + r, %(d)sq + s] * W[k, c, r, s]
  }
}
"""
LOOPS = ("n", "k", "p", "q", "c", "r", "s")
ARCH = Architecture("t", (Level("DRAM"), Level("LLC", None, 32 * 2 ** 20, 1), Level("L2", None, 1 << 20, 1),
                          Level("L1", None, 32 * 1024, 1), Level("RF", None, 2048, 1)), Compute(32),
                    VectorUnit("avx2", 32, 16, True))
#: no tile divides these: P 5 and Q 11 against boxes of 2 x 4 (stride 2, scalar) and 3 x 8 (stride 1)
PARAMS = {"N": 2, "C": 3, "K": 2, "P": 5, "Q": 11, "R": 3, "S": 2}


def _tiles(**sizes: int) -> tuple:
    return tuple(sizes.get(x) for x in LOOPS)


def conv_mapping(stride: int, dtype: str, rows: int, cols: int):
    """O's ``rows x cols`` box in registers; the L1 level walks ``c, r, s`` (whole) around it, L2 the
    boxes of ``p, q``, the outer levels ``n, k``: every element's updates in the original order."""
    kernel = parse(CONV % {"d": "" if stride == 1 else f"{stride}*", "t": dtype}, "conv.loop").kernels[0]
    model = build_model(kernel)
    keep = ("I", "W", "O")
    levels = (LevelMapping("DRAM", _tiles(), LOOPS, (), keep),
              LevelMapping("LLC", _tiles(), LOOPS, (), keep),
              LevelMapping("L2", _tiles(n=1, k=1), LOOPS, (), keep),
              LevelMapping("L1", _tiles(n=1, k=1, p=rows, q=cols), LOOPS, (), keep),
              LevelMapping("RF", _tiles(n=1, k=1, p=rows, q=cols, c=1, r=1, s=1),
                           ("n", "k", "c", "r", "s", "p", "q"), (), keep))
    mapping = Mapping(kernel.name, 0, LOOPS, levels)
    assert dependence_violation(model, mapping) is None
    return kernel, model, mapping


def _loops_around_the_updates(src: str) -> int:
    """``for`` lines between the first accumulator's declaration and its first update."""
    lines = src.splitlines()
    first = next(n for n, line in enumerate(lines) if "polymap_acc_0_0 = " in line and line.lstrip().startswith(
        ("float", "double", "polymap_f")))
    update = next(n for n in range(first + 1, len(lines))
                  if lines[n].lstrip().startswith(("polymap_acc_0_0 +=", "polymap_acc_0_0 = polymap_fma")))
    return sum(line.lstrip().startswith("for (") for line in lines[first:update])


@pytest.mark.parametrize("stride,dtype,rows,cols", [(2, "f32", 2, 4), (2, "f64", 4, 4), (1, "f32", 3, 8),
                                                    (1, "f64", 2, 4)])
def test_conv_register_tile_spans_c_r_s_and_matches_the_reference(stride, dtype, rows, cols):
    kernel, model, mp = conv_mapping(stride, dtype, rows, cols)
    src = emit_c(kernel, model, mp)
    # the accumulators stay across c, r and s (one loop each), not reloaded for every (r, s)
    assert _loops_around_the_updates(src) == 3
    vector = stride == 1  # I[.., q + s] is unit stride along q; I[.., 2q + s] is not: scalar accumulators
    assert (f"polymap_fma_{dtype}" in src) == vector
    assert verify(kernel, PARAMS, targets=("c",), mapping=mp, model=model).passed
    # and against NumPy, independently of the reference interpreter
    fn = load_kernel(src, kernel)
    nt = np.float32 if dtype == "f32" else np.float64
    p = PARAMS
    rng = np.random.default_rng(5)
    i = rng.standard_normal((p["N"], p["C"], stride * p["P"] + p["R"] - 1, stride * p["Q"] + p["S"] - 1)).astype(nt)
    w = rng.standard_normal((p["K"], p["C"], p["R"], p["S"])).astype(nt)
    o = rng.standard_normal((p["N"], p["K"], p["P"], p["Q"])).astype(nt)
    want = o.astype(np.float64).copy()
    for r in range(p["R"]):
        for s in range(p["S"]):
            window = i[:, :, r:r + stride * p["P"]:stride, s:s + stride * p["Q"]:stride].astype(np.float64)
            want += np.einsum("ncpq,kc->nkpq", window, w[:, :, r, s].astype(np.float64))
    fn({"I": i, "W": w, "O": o}, p)
    tol = 1e-4 if dtype == "f32" else 1e-12
    np.testing.assert_allclose(o, want, rtol=tol, atol=tol * 10)


def test_reduction_loops_outside_the_box_loops_stay_outside_the_tile():
    """With ``c, r`` walked outside the boxes (L2 walks ``c, r, p, q``), the tile is ``s`` alone: the
    loops of ``p, q`` between them move the target."""
    kernel, model, mp = conv_mapping(2, "f32", 2, 4)
    order = ("n", "k", "c", "r", "p", "q", "s")
    l2, l1 = mp.levels[2], mp.levels[3]
    levels = list(mp.levels)
    levels[2] = LevelMapping("L2", _tiles(n=1, k=1, c=1, r=1), order, (), l2.keep)
    levels[3] = LevelMapping("L1", _tiles(n=1, k=1, c=1, r=1, p=2, q=4), order, (), l1.keep)
    mp = Mapping(kernel.name, 0, LOOPS, tuple(levels))
    assert dependence_violation(model, mp) is None
    src = emit_c(kernel, model, mp)
    assert _loops_around_the_updates(src) == 1
    assert verify(kernel, PARAMS, targets=("c",), mapping=mp, model=model).passed


def test_conv_mapping_counts_equal_the_simulator_and_hand_counts():
    params = {"N": 1, "C": 2, "K": 2, "P": 3, "Q": 5, "R": 2, "S": 3}
    kernel, model, mp = conv_mapping(2, "f64", 2, 4)
    counts = isl_count_mapping(model, mp, ARCH, params=params)
    assert count_mapping(model, mp, ARCH, params=params) == counts
    got = counts_as_dict(counts)
    assert got == simulate(kernel, mp, params)
    # every element of O enters the registers once (c, r, s all inside its residency); one element of W
    # per register tile: K x (2 x 2 boxes of p, q: p 3 = 2 + 1, q 5 = 4 + 1) x C x R x S
    rf = got["levels"][4]["tensors"]
    assert rf["O"]["fills"] == 1 * 2 * 3 * 5
    assert rf["W"]["fills"] == 2 * 2 * (2 * 2 * 2 * 3)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("stride,dtype,rows,cols", [(2, "f32", 2, 4), (1, "f64", 2, 4)])
def test_conv_register_tile_under_sanitizers(stride, dtype, rows, cols, tmp_path):
    from tests.test_sanitizers import _driver, sanitized_build

    kernel, model, mp = conv_mapping(stride, dtype, rows, cols)
    (tmp_path / "t.c").write_text(emit_c(kernel, model, mp) + _driver(kernel, PARAMS))
    build = sanitized_build(tmp_path / "t.c", tmp_path / "t", "-march=native")
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert run.returncode == 0, run.stderr[-3000:]
