"""conv2d as an implicit GEMM, steps 2 and 3: compile's own pick is a register tile over ``c, r, s``.

docs/design.md, "conv2d as an implicit GEMM". For ``O[n, k, p, q] += I[n, c, d*p + r, d*q + s] *
W[..]``, ``register_mapping`` builds the register tile with the reductions ``c, r, s`` inside its box
in their original order (``r, s`` whole above the registers): legal, where the candidate that walked
``r, s`` outside ``c`` was refused (step 2). With stride 1 the box is ``p, q`` in vectors along
``q``; with stride 2 (``I`` not unit stride along ``q``) the vectors run along the output channels
``k`` and the rows along ``q`` (step 3): ``W[k, c, r, s]`` packed with ``k`` last, ``W[c, r, s, k]``
read in place, ``O`` loaded and stored lane by lane. The pick is compile's (``choose``, as
``polymap compile``), for the example and variants (stride 1 and 2, ``K`` 16 and 19, ``P, Q`` that
no box divides, f32 and f64, both weight layouts); its code against the reference execution and
NumPy, built for AVX-512 and for AVX2 (both tile shapes) under AddressSanitizer and UBSan; its
counts against the simulator. The other examples' picks are unchanged (compared with
``compile --json`` before and after: the branch's report).
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from polymap import ir
from polymap.codegen.build import load_kernel
from polymap.codegen.c.packing import plan_packs
from polymap.codegen.c.emitter import emit_c
from polymap.codegen.c.expr import C_TYPES
from polymap.codegen.verify import verify
from polymap.driver import load_program, parse
from polymap.machine.arch import VectorUnit
from polymap.machine.hostinfo import CPUINFO, cpu_flags
from polymap.machine.presets import load_architecture
from polymap.passes.counting.counting import count_mapping, isl_count_mapping
from polymap.passes.counting.execution import execution, packable, vectorises
from polymap.passes.legality.legality import is_legal
from polymap.passes.search.choice import choose
from polymap.passes.search.register_mapping import find_roles
from polymap.mapping.model import loop_extents
from polymap.poly import build_model
from simulator import counts_as_dict, simulate
from test_conv_regtile import _loops_around_the_updates  # one reading of the printed tile

ROOT = Path(__file__).resolve().parent.parent
HOST = load_architecture("host")
FLAGS = cpu_flags(CPUINFO.read_text()) if CPUINFO.exists() else frozenset()
SHAPES = {"avx512": VectorUnit("avx512", 64, 32, True), "avx2": VectorUnit("avx2", 32, 16, True)}
BUILDS = {"avx512": (("-mavx512f", "-mfma"), "avx512f"), "avx2": (("-mavx2", "-mfma", "-mno-avx512f"), "avx2")}

CONV = """
kernel conv(N = 1, C = 16, K = %(K)d, P = %(P)d, Q = %(Q)d, R = 3, S = 3) {
  in    I[N, C, %(d)sP + R - 1, %(d)sQ + S - 1] : %(t)s
  in    W[%(wd)s] : %(t)s
  inout O[N, K, P, Q] : %(t)s
  for n in 0..N, k in 0..K, p in 0..P, q in 0..Q, c in 0..C, r in 0..R, s in 0..S {
    O[n, k, p, q] += I[n, c, %(d)sp + r, %(d)sq + s] * W[%(wr)s]
  }
}
"""
#: the weights' layouts: as conv2d.loop (``W[k, c, r, s]``), and with the output channels last (``W[c, r,
#: s, k]``, as TensorFlow's HWIO keeps them): the layout whose rows the register tile reads along ``k``
LAYOUTS = {"kcrs": ("K, C, R, S", "k, c, r, s"), "crsk": ("C, R, S, K", "c, r, s, k")}
#: (stride, dtype, K, P, Q): the example's stride 2 and a stride-1 layer; K 19 (no whole number of
#: lanes), P 13 and Q 11 (no box of 4 or 6 rows, 4 or 16 columns divides them)
VARIANTS = [(2, "f32", 16, 14, 14), (2, "f64", 19, 13, 11), (1, "f32", 19, 13, 11), (1, "f64", 16, 14, 14)]
#: sizes the code runs at besides the pick's own: every box cut, two batches, one channel
RUN_SIZES = [{"N": 2, "C": 3, "K": 5, "P": 5, "Q": 7, "R": 3, "S": 2}, {"N": 1, "C": 1, "K": 1, "P": 1, "Q": 1, "R": 1, "S": 1}]


def _arch(shape: str | None):
    return HOST if shape is None else dataclasses.replace(HOST, vector=SHAPES[shape])


def _kernel(stride: int, dtype: str, k: int, p: int, q: int, layout: str = "kcrs"):
    wd, wr = LAYOUTS[layout]
    return parse(CONV % {"d": "" if stride == 1 else f"{stride}*", "t": dtype, "K": k, "P": p, "Q": q,
                         "wd": wd, "wr": wr}, "conv.loop").kernels[0]


def _defaults(kernel) -> dict[str, int]:
    return {x.name: x.default for x in kernel.params}


def _pick(kernel, shape: str | None = None):
    """compile's choice for ``kernel`` at its default sizes: (the kernel it is for, model, mapping, source)."""
    choice = choose(kernel, _arch(shape), _defaults(kernel))
    (nest,) = choice.nests
    return choice.kernel, choice.model, nest.chosen.mapping, nest.chosen.source


def _numpy_conv(i, w, o, stride: int, p: dict) -> np.ndarray:
    """``O + sum over c, r, s`` in float64, by windows and einsum (independent of the interpreter)."""
    want = o.astype(np.float64).copy()
    for r in range(p["R"]):
        for s in range(p["S"]):
            window = i[:, :, r:r + stride * p["P"]:stride, s:s + stride * p["Q"]:stride].astype(np.float64)
            want += np.einsum("ncpq,kc->nkpq", window, w[:, :, r, s].astype(np.float64))
    return want


def _inputs(stride: int, dtype: str, p: dict, seed: int):
    """I, W (``[k, c, r, s]``, the reference's layout), O."""
    nt = np.float32 if dtype == "f32" else np.float64
    rng = np.random.default_rng(seed)
    i = rng.standard_normal((p["N"], p["C"], stride * p["P"] + p["R"] - 1, stride * p["Q"] + p["S"] - 1)).astype(nt)
    w = rng.standard_normal((p["K"], p["C"], p["R"], p["S"])).astype(nt)
    o = rng.standard_normal((p["N"], p["K"], p["P"], p["Q"])).astype(nt)
    return i, w, o


def _laid_out(w: np.ndarray, layout: str) -> np.ndarray:
    """The weights ``[k, c, r, s]`` in ``layout``'s order, contiguous."""
    return np.ascontiguousarray(w if layout == "kcrs" else w.transpose(1, 2, 3, 0))


def test_the_example_picks_the_register_tile_over_c_r_s():
    kernel = load_program(ROOT / "examples" / "conv2d.loop").kernels[0]
    kernel, model, mp, source = _pick(kernel)
    assert source == "register tiles"
    assert is_legal(model, mp)
    roles = find_roles(model, 0, loop_extents(kernel, 0, _defaults(kernel)))
    assert roles.reductions == ("c", "r", "s") and roles.k == "c"
    # I is read at stride 2 along q: the vectors run along the output channels k, the rows along q
    assert (roles.i, roles.j, roles.lanewise) == ("q", "k", True)
    l1 = dict(zip(mp.loops, mp.levels[-2].tile))
    assert l1["r"] is None and l1["s"] is None  # whole above the registers
    # the registers walk the reductions in their original order, then the box
    rf_order = mp.levels[-1].order
    assert rf_order[-5:] == ("c", "r", "s", "q", "k")
    src = emit_c(kernel, model, (mp,))
    assert _loops_around_the_updates(src) == 3  # the accumulators stay across c, r and s
    # W[k, c, r, s] is read from its [c][r][s][k] panel, in vectors along k
    assert "polymap_pk_W_k_c_r_s" in src and "polymap_fma_f32x16" in src


def test_the_single_loop_reductions_keep_their_roles():
    """gemm's ``k`` and doitgen's ``s`` (``r, q`` sit outside the target's ``p``): no tuple of reductions."""
    for path, k in (("examples/gemm.loop", "k"), ("examples/polybench/doitgen.loop", "s")):
        kernel = load_program(ROOT / path).kernels[0]
        model_ = build_model(kernel)
        nest = next(n for n in range(len(kernel.nests())) if find_roles(model_, n, loop_extents(kernel, n, _defaults(kernel))))
        roles = find_roles(model_, nest, loop_extents(kernel, nest, _defaults(kernel)))
        assert roles.k == k and roles.reductions == () and roles.reduction_loops == (k,)


@pytest.mark.parametrize("stride,dtype,k,p,q", VARIANTS)
def test_the_pick_matches_the_reference_and_numpy(stride, dtype, k, p, q):
    kernel, model, mp, source = _pick(_kernel(stride, dtype, k, p, q))
    assert source == "register tiles"
    src = emit_c(kernel, model, (mp,))
    assert _loops_around_the_updates(src) == 3
    # stride 1 reads I unit stride along q: vectors along q; stride 2 does not: vectors along k
    assert f"polymap_fma_{dtype}x" in src
    assert ("polymap_pk_W" in src) == (stride == 2)
    fn = load_kernel(src, kernel)
    for n, params in enumerate([_defaults(kernel)] + RUN_SIZES):
        assert verify(kernel, params, targets=("c",), mapping=mp, model=model).passed, params
        i, w, o = _inputs(stride, dtype, params, n)
        want = _numpy_conv(i, w, o, stride, params)
        fn({"I": i, "W": w, "O": o}, params)
        tol = 1e-4 if dtype == "f32" else 1e-12
        np.testing.assert_allclose(o, want, rtol=tol, atol=tol * 10, err_msg=str(params))


#: (stride, dtype, K, P, Q) of the output-channel tile (weights ``[c, r, s, k]``): K 16 one vector of f32
#: on AVX-512, 19 a vector and 3 lanes of a masked one
CHANNEL_VARIANTS = [(2, "f32", 16, 14, 14), (2, "f64", 19, 13, 11), (2, "f32", 19, 13, 11)]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("stride,dtype,k,p,q", CHANNEL_VARIANTS)
def test_the_output_channel_pick_matches_the_reference_and_numpy(stride, dtype, k, p, q, layout):
    """Step 3: the vector loop is the output channels, the rows the columns ``q`` of ``O`` (``I``
    broadcast, one value per row), the target loaded lane by lane; ``W[k, c, r, s]`` packed
    ``[k / NR][c][r][s][k % NR]`` (whole ``c, r, s``: run-time extents), ``W[c, r, s, k]`` read in place."""
    kernel, model, mp, source = _pick(_kernel(stride, dtype, k, p, q, layout))
    assert source == "register tiles"
    roles = find_roles(model, 0, loop_extents(kernel, 0, _defaults(kernel)))
    assert (roles.i, roles.j, roles.reductions, roles.vector, roles.lanewise) == ("q", "k", ("c", "r", "s"), True, True)
    rf = dict(zip(mp.loops, mp.levels[-1].tile))
    # the row: the vectors that cover K (AVX-512: one of 16 f32 for K 16, not a GEMM row's 4), then as
    # many rows as the registers hold beside the row's vectors of W and a broadcast of I, at most 14
    width = -(-k // HOST.vector.lanes(dtype))
    assert rf["k"] == width * HOST.vector.lanes(dtype)
    assert rf["q"] == min(14, (HOST.vector.registers - width - 1) // width)
    assert mp.levels[-1].order[-2:] == ("q", "k")
    src = emit_c(kernel, model, (mp,))
    assert _loops_around_the_updates(src) == 3
    assert f"polymap_fma_{dtype}x" in src  # vectors along k
    assert ("polymap_pk_W" in src) == (layout == "kcrs")
    fn = load_kernel(src, kernel)
    for n, params in enumerate([_defaults(kernel)] + RUN_SIZES):
        assert verify(kernel, params, targets=("c",), mapping=mp, model=model).passed, params
        i, w, o = _inputs(stride, dtype, params, n)
        want = _numpy_conv(i, w, o, stride, params)
        fn({"I": i, "W": _laid_out(w, layout), "O": o}, params)
        tol = 1e-4 if dtype == "f32" else 1e-12
        np.testing.assert_allclose(o, want, rtol=tol, atol=tol * 10, err_msg=str(params))


@pytest.mark.parametrize("stride,dtype,layout", [(2, "f64", "kcrs"), (1, "f32", "kcrs"), (2, "f32", "crsk"),
                                                 (2, "f32", "kcrs")])
def test_the_picks_counts_equal_the_simulator(stride, dtype, layout):
    kernel, model, mp, _ = _pick(_kernel(stride, dtype, 19, 13, 11, layout))
    params = {"N": 1, "C": 2, "K": 3, "P": 5, "Q": 6, "R": 2, "S": 3}  # every box of p and q cut
    counts = isl_count_mapping(model, mp, HOST, params=params)
    assert count_mapping(model, mp, HOST, params=params) == counts
    got = counts_as_dict(counts)
    assert got == simulate(kernel, mp, params)
    # every element of O enters the registers once: c, r, s all inside its residency
    assert got["levels"][-1]["tensors"]["O"]["fills"] == 3 * 5 * 6


DRIVER = """
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  long N = atol(argv[3]), C = atol(argv[4]), K = atol(argv[5]), P = atol(argv[6]), Q = atol(argv[7]),
       R = atol(argv[8]), S = atol(argv[9]);
  long ni = N * C * (%(d)d * P + R - 1) * (%(d)d * Q + S - 1), nw = K * C * R * S, no = N * K * P * Q;
  T *I = malloc(sizeof(T) * ni), *W = malloc(sizeof(T) * nw), *O = malloc(sizeof(T) * no);
  FILE *in = fopen(argv[1], "rb");
  if (fread(I, sizeof(T), ni, in) != (size_t)ni || fread(W, sizeof(T), nw, in) != (size_t)nw
      || fread(O, sizeof(T), no, in) != (size_t)no) return 2;
  fclose(in);
  conv(I, W, O, N, C, K, P, Q, R, S);
  FILE *out = fopen(argv[2], "wb");
  fwrite(O, sizeof(T), no, out);
  fclose(out);
  free(I); free(W); free(O);
  return 0;
}
"""

SANITIZED = [(shape, build, stride, dtype, layout) for shape in SHAPES for build in BUILDS
             for stride, dtype, layout in ((2, "f32", "kcrs"), (1, "f64", "kcrs"), (2, "f32", "crsk"), (2, "f64", "crsk"))]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("shape,build,stride,dtype,layout", SANITIZED,
                         ids=[f"{s}-shape-{b}-build-stride{d}-{t}-{w}" for s, b, d, t, w in SANITIZED])
def test_the_pick_under_sanitizers(tmp_path, shape, build, stride, dtype, layout):
    """The pick for each vector unit, built for AVX-512 and for AVX2 (every shape in every variant),
    under ASan and UBSan, at the pick's sizes and at sizes that cut every box; against NumPy."""
    from test_sanitizers import sanitized_build

    flags, needs = BUILDS[build]
    kernel, model, mp, source = _pick(_kernel(stride, dtype, 19, 13, 11, layout), shape)
    assert source == "register tiles"
    src = emit_c(kernel, model, (mp,))
    assert f"polymap_fma_{dtype}x" in src
    (tmp_path / "t.c").write_text(src + f"#define T {C_TYPES[dtype]}\n" + DRIVER % {"d": stride})
    exe = tmp_path / "t"
    cc = sanitized_build(tmp_path / "t.c", exe, *flags)
    assert cc.returncode == 0, cc.stderr[-3000:]
    if needs not in FLAGS:
        pytest.skip(f"this processor has no {needs}: the {build} build was compiled but cannot run here")
    for n, params in enumerate([_defaults(kernel)] + RUN_SIZES):
        i, w, o = _inputs(stride, dtype, params, n)
        (tmp_path / "in.bin").write_bytes(i.tobytes() + _laid_out(w, layout).tobytes() + o.tobytes())
        run = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")]
                             + [str(params[x]) for x in "NCKPQRS"], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "OMP_NUM_THREADS": "2"})
        assert run.returncode == 0, (params, run.stderr[-3000:])
        got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=o.dtype).reshape(o.shape)
        tol = 1e-4 if dtype == "f32" else 1e-12
        np.testing.assert_allclose(got, _numpy_conv(i, w, o, stride, params), rtol=tol, atol=tol * 10,
                                   err_msg=str(params))


def test_the_tile_rule_of_vectorises():
    """``vectorises(tile=True)``: a register tile's explicit vectors load unit stride or a panel only;
    its target may move along the vector loop anywhere (loaded lane by lane). The plain rule (GCC's
    loops) takes a constant read stride and no strided target."""
    stmt = _kernel(2, "f32", 16, 14, 14).nests()[0]
    while not isinstance(stmt, ir.Assign):
        stmt = stmt.body[0]
    # along q: I[.., 2q + s] is stride 2: GCC's loop vectorises it, the tile does not
    assert vectorises(stmt, "q") and not vectorises(stmt, "q", tile=True)
    # along k: W[k, c, r, s] moves in its leading subscript: a panel makes it unit stride
    assert not vectorises(stmt, "k") and not vectorises(stmt, "k", tile=True)
    assert vectorises(stmt, "k", tile=True, packed=lambda r: packable(r, {"O"}))
    assert not packable(stmt.value.lhs, {"O"})  # I[n, c, 2p + r, 2q + s]: not bare subscripts
    crsk = _kernel(2, "f32", 16, 14, 14, "crsk").nests()[0]
    while not isinstance(crsk, ir.Assign):
        crsk = crsk.body[0]
    assert vectorises(crsk, "k", tile=True) and not vectorises(crsk, "k")  # O[n, k, p, q]: lane by lane


def test_the_weights_panel_has_run_time_extents():
    """W[k, c, r, s] under the output-channel tile: ``[k / 16][c][r][s][k % 16]``, ``c, r, s`` whole
    (their extents as C text), ``k`` last and unit stride."""
    kernel = load_program(ROOT / "examples" / "conv2d.loop").kernels[0]
    kernel, model, mp, _ = _pick(kernel)
    packs = plan_packs(model, mp)
    pack = packs[("W", ("k", "c", "r", "s"))]
    nr = dict(zip(mp.loops, mp.levels[-1].tile))["k"]
    assert [(d.loop, d.divisor) for d in pack.dims] == [("k", nr), ("c", 1), ("r", 1), ("s", 1), ("k", 1)]
    assert pack.unit_last("k") and pack.dims[-1].count == nr
    assert [d.count for d in pack.dims[1:4]] == ["(C - (0))", "(R - (0))", "(S - (0))"]
    assert isinstance(pack.size, str)  # the buffer on the heap, sized at run time


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_model_counts_the_packed_rows_lanes(dtype):
    """Issue 10: the pick reads ``W[k, c, r, s]`` from its panel in vectors along ``k`` (the code's
    ``polymap_fma_f32x16``), so the model counts the registers' lanes for it, as for ``W[c, r, s, k]``
    read in place: the same threads, lanes, waste and chains for the same tile in either layout."""
    got = {}
    for layout in sorted(LAYOUTS):
        kernel, model, mp, source = _pick(_kernel(2, dtype, 16, 14, 14, layout))
        assert source == "register tiles"
        ex = execution(model, mp, HOST, loop_extents(kernel, 0, _defaults(kernel)))
        assert ex.vector_loop == "k" and ex.lanes == HOST.vector.lanes(dtype), (layout, ex)
        got[layout] = (dict(zip(mp.loops, mp.levels[-1].tile)), ex.threads, ex.lanes, ex.waste, ex.chains)
    assert got["kcrs"] == got["crsk"]
