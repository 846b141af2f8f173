"""The vector lanes of the innermost loop: the rule the C backend and the model share, checked against
the C compiler's own report, and the partial vectors and chains the model counts against hand counts
(conv2d's ``q``, issue 11: stride 2 in ``I``, vectorised by GCC, one lane in the model before)."""
from __future__ import annotations

import platform
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from c_run import run_c

from polymap import ir
from polymap.codegen.c.emitter import emit_c
from polymap.driver import load_program, param_values, parse
from polymap.machine.arch import VectorUnit
from polymap.machine.presets import load_architecture
from polymap.mapping.files import mapping_from_dict
from polymap.mapping.model import loop_extents
from polymap.passes.counting.execution import (
    LATENCY,
    LOOP_VECTOR_BYTES,
    STORE_FORWARD,
    batch_execution,
    effective_tiles,
    execution,
    vectorises,
)
from polymap.poly import build_model

CONV = load_program(Path(__file__).resolve().parent.parent / "examples" / "conv2d.loop").kernels[0]
CONV_MODEL = build_model(CONV)
SIZES = {"C": 32, "K": 32, "P": 28, "Q": 28}


def avx512_host():
    """``host``'s levels with 2 cores and a fixed AVX-512 unit (16 f32 lanes a register, 8 in a loop's
    vectors), so that the numbers below do not depend on where the suite runs."""
    h = load_architecture("host")
    levels = tuple(replace(lv, instances=2) if k >= 2 else lv for k, lv in enumerate(h.levels))
    return replace(h, levels=levels, compute=replace(h.compute, instances=32),
                   vector=VectorUnit("avx512", 64, 32, True))


HOST = avx512_host()


def conv_mapping(q_tile: int, inner: str = "q", arch=HOST):
    """conv2d with L1 tiles k 8, c 8 and ``q_tile``, the L1 tile's loops in the order n k p c r s q
    (``inner`` last)."""
    names = [lv.name for lv in arch.levels]
    order = [x for x in "nkpcrsq" if x != inner] + [inner]
    return mapping_from_dict({"kernel": "conv2d", "levels": [
        {"level": names[0], "order": list("nkpqcrs")}, {"level": names[1], "order": list("nkpqcrs")},
        {"level": names[2], "order": list("nkpqcrs")},
        {"level": names[3], "tile": {"k": 8, "c": 8, "q": q_tile}, "order": order},
        {"level": names[4], "order": order}]}, kernel=CONV, arch=arch)


def _stmt(text: str) -> ir.Assign:
    k = parse(f"""
kernel t(N = 8) {{
  in A[N, 2*N + 2]
  in W[N]
  inout O[N, 2*N + 2]
  for i in 0..N, j in 0..N {{
    {text}
  }}
}}""").kernels[0]
    return next(iter(k.statements())).stmt


@pytest.mark.parametrize("text, loop, expected", [
    ("O[i, j] += A[i, 2*j + 1] * W[i]", "j", True),   # a constant stride read: GCC permutes
    ("O[i, j] += A[i, j] * W[j]", "j", True),          # unit stride
    ("O[i, 2*j] += A[i, j] * W[i]", "j", False),       # a strided store
    ("O[i, j] += A[j, i] * W[i]", "j", False),         # a column walk: a stride of a row
    ("O[i, j] += A[i, N - j] * W[i]", "j", False),     # a negative stride
    ("O[i, 0] += A[i, j] * W[i]", "j", True),          # the target invariant (a reduction: parallel decides)
])
def test_vectorises_rule(text, loop, expected):
    assert vectorises(_stmt(text), loop) == expected


def test_conv2d_q_is_the_vector_loop_in_model_and_c():
    """The model's vector loop is the one the C marks ``omp simd``: q (stride 2 in I) innermost; with
    s innermost (a reduction of one element) neither."""
    values = param_values(CONV, SIZES)
    ext = loop_extents(CONV, 0, values)
    for q_tile, inner, loop in ((28, "q", "q"), (16, "q", "q"), (16, "s", None)):
        mp = conv_mapping(q_tile, inner)
        ex = execution(CONV_MODEL, mp, HOST, ext)
        assert ex.vector_loop == loop and (ex.lanes > 1) == (loop is not None), ex
        code = emit_c(CONV, CONV_MODEL, (mp,), params=values, threads=2)
        lines = code.splitlines()
        simd = [lines[n + 1] for n, text in enumerate(lines) if text.strip() == "#pragma omp simd"]
        assert [re.search(r"for \(long (\w+) ", s).group(1) for s in simd] == ([loop] if loop else [])


def _gcc_reports(code: str, tmp_path: Path) -> list[tuple[int, int]]:
    src = tmp_path / "k.c"
    src.write_text(code)
    out = subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", "-c", str(src), "-o", str(tmp_path / "k.o"),
                          "-fopt-info-vec-optimized"], capture_output=True, text=True, check=True).stderr
    return [(int(m.group(1)), int(m.group(2)))
            for m in re.finditer(r"k\.c:(\d+):\d+: optimized: loop vectorized using (\d+) byte vectors", out)]


@pytest.mark.skipif(shutil.which("gcc") is None or platform.machine() not in ("x86_64", "AMD64"),
                    reason="needs GCC on x86")
def test_gcc_vectorises_conv2d_q_as_the_model_counts(tmp_path):
    """GCC's own report: conv2d's q loop (and no other) in LOOP_VECTOR_BYTES vectors, then one epilogue
    of half of them: what vector_issues counts (a run of 28 f32: 3 x 8 + 4)."""
    values = param_values(CONV, SIZES)
    host = load_architecture("host")
    if host.vector is None or host.vector.vector_bytes < LOOP_VECTOR_BYTES:
        pytest.skip("the build machine's vectors are narrower than LOOP_VECTOR_BYTES")
    code = emit_c(CONV, CONV_MODEL, (conv_mapping(28, arch=host),), params=values, threads=2)
    lines = code.splitlines()
    start = next(n for n, text in enumerate(lines, 1) if text.strip().startswith("for (long q = "))
    reports = _gcc_reports(code, tmp_path)
    assert {line for line, _ in reports} <= {start, start + 1}, reports  # the q loop, its for or its body
    assert sorted({nbytes for _, nbytes in reports}) == [LOOP_VECTOR_BYTES // 2, LOOP_VECTOR_BYTES]


def test_partial_vectors_and_chains_by_hand():
    """conv2d 28 x 28 on 2 cores x 16 lanes. Slots (issue_slots, a plain loop's): whole vectors of 16,
    then one issue per iteration left. Chains: O's elements are loaded and stored every (c, r, s)
    step (in memory), one chain per vector of q's loop as GCC builds it (8 lanes, LOOP_VECTOR_BYTES,
    then one vector of 4, then scalars), LATENCY + STORE_FORWARD cycles a link, 2 ops a cycle.

    q whole (28): 1 vector + 12 issues = 208 slots per row; chains 3 + 1 = 4.
    q in 16s: 16 (1 vector) and 12 (12 issues): 208 slots; chains in a run of 16: 2.
    q in 8s: 8, 8, 8, 4: 28 issues, 448 slots; 1 chain. q in 4s: 7 runs of 4: 448 slots, 1 chain.
    q in 14s (two runs of 14 per row): 28 issues, 448 slots; chains 1 + 1 + 2 = 4."""
    values = param_values(CONV, SIZES)
    ext = loop_extents(CONV, 0, values)
    ops = HOST.compute.ops_per_cycle
    wait = LATENCY + STORE_FORWARD
    for q_tile, slots, chains in ((28, 208, 4), (16, 208, 2), (8, 448, 1), (4, 448, 1), (14, 448, 4)):
        ex = execution(CONV_MODEL, conv_mapping(q_tile), HOST, ext)
        assert ex.lanes == 16 and ex.vector_loop == "q"
        assert ex.chains == min(q_tile, 28)
        assert f"({slots} slots for 28)" in ex.why, ex.why
        assert ex.latency == pytest.approx(max(1.0, ops * wait / chains)), (q_tile, ex)


def test_batch_equals_one_by_one_on_conv2d():
    """The search's batch form gives conv2d's tiles the same lanes, partial vectors and chains."""
    values = param_values(CONV, SIZES)
    ext = loop_extents(CONV, 0, values)
    for q_tile in (28, 16, 14, 8, 7, 4, 3):
        for inner in ("q", "s"):
            mp = conv_mapping(q_tile, inner)
            one = execution(CONV_MODEL, mp, HOST, ext)
            eff = np.array([[[e[x] for x in mp.loops] for e in effective_tiles(mp, ext)]], dtype=np.int64)
            units, slowdown = batch_execution(CONV_MODEL, mp, HOST, ext, eff)
            assert int(units[0]) == one.units, (q_tile, inner)
            assert float(slowdown[0]) == pytest.approx(one.slowdown, rel=1e-12), (q_tile, inner, one)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_conv2d_with_q_in_omp_simd_matches_the_reference():
    """The C with the newly marked ``omp simd`` q loop (stride 2 in I) computes what the reference does,
    bit for bit (no update is reordered), with q tiles that do not divide Q (13 in 5s) and whole."""
    sizes = {"N": 1, "C": 3, "K": 5, "P": 6, "Q": 13, "R": 3, "S": 3}
    values = param_values(CONV, sizes)
    for q_tile in (5, 13):
        mp = conv_mapping(q_tile)
        code = emit_c(CONV, CONV_MODEL, (mp,), params=values, threads=2)
        assert "#pragma omp simd" in code
        for name, (got, want) in run_c(CONV, code, values, threads=2).items():
            np.testing.assert_array_equal(got, want, err_msg=f"{name}, q tile {q_tile}")
