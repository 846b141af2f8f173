"""Register tiles over triangles (covariance, correlation): the vector unit's box, panels dealt round-robin,
diagonal boxes masked.

Each rule against something independent: the register box against the exact (ISL) footprint of the
register level, the triangle test against the work per iteration counted point by point, the
round-robin code against the reference execution.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from polymap.codegen.c.emitter import emit_c
from polymap.codegen.c.expr import C_TYPES
from polymap.codegen.verify import verify
from polymap.driver import load_program, parse
from polymap.machine.hostinfo import CPUINFO, cpu_flags
from polymap.machine.presets import load_architecture
from polymap.mapping.model import loop_extents, nest_loops
from polymap.passes.counting.fit import capacity_problems
from polymap.passes.search.choice import fit_keeps, kernel_to_map
from polymap.passes.search.register_mapping import (
    bounds_coupled,
    cache_blocking,
    find_roles,
    register_mapping,
    register_shape,
)
from polymap.poly import build_model, fix_params, points
from test_sanitizers import sanitized_build

ROOT = Path(__file__).parent.parent
os.environ.setdefault("OMP_NUM_THREADS", "2")
HOST = load_architecture("host")


def polybench(name: str):
    kernel, _ = kernel_to_map(load_program(ROOT / "examples" / "polybench" / f"{name}.loop").kernels[0])
    return kernel, build_model(kernel)


def main_nest(name: str) -> int:
    return {"covariance": 2, "correlation": 3}.get(name, 0)


def without_mirror(name: str):
    """The kernel with its mirror copy (``cov[j, i] = cov[i, j]``) left out, and its model."""
    text = (ROOT / "examples" / "polybench" / f"{name}.loop").read_text()
    kept = "\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("mirror:"))
    assert kept != text
    kernel, _ = kernel_to_map(parse(kept, f"{name}.loop").kernels[0])
    return kernel, build_model(kernel)


@pytest.mark.parametrize("name", ["covariance", "correlation", "gemm", "trmm", "syrk"])
def test_the_register_box_is_the_vector_units_and_the_reduction_fits_it_exactly(name):
    # the box is the one the vector unit gives, mirror or not (cov6 halved covariance's to 6 x 16 so
    # that the counts held the mirror's box too; it ran 1.3x slower). Against the exact (ISL)
    # footprint of the register level: the box fits with every statement the registers hold, and
    # where the counts say it overflows, the mirror copy (run by the code in a loop of its own) is
    # the only cause: without it the same box fits and its accumulators' tensor stays there
    kernel, model = polybench(name)
    nest = main_nest(name)
    params = {p.name: 45 if i % 2 == 0 else 29 for i, p in enumerate(kernel.params)}
    made = register_mapping(model, nest, HOST, params)
    assert made is not None
    last = len(HOST.levels) - 1
    if HOST.vector is not None:
        roles = find_roles(model, nest, loop_extents(kernel, nest, params))
        full = register_mapping(model, nest, HOST, params,
                                blocking=cache_blocking(HOST, roles.dtype, register_shape(HOST.vector, roles.dtype)))
        assert made.levels[last].tile == full.levels[last].tile
    if name in ("covariance", "correlation"):
        kernel, model = without_mirror(name)
        alone = register_mapping(model, nest, HOST, params)
        assert alone is not None and alone.levels[last].tile == made.levels[last].tile
        made = alone
    assert all(p.level_index != last for p in capacity_problems(model, made, HOST, params))
    target = {s.stmt.target.tensor for s in (st.context for st in model.nest_statements(nest))
              if s.stmt.is_reduction}
    assert target <= set(fit_keeps(model, made, HOST, params).levels[last].keep)


def brute_force_varies(kernel, model, nest: int, loop: str, params) -> bool:
    """Does the number of statement instances differ between two values of ``loop`` (enumerated)?"""
    per: Counter = Counter()
    values = set()
    for st in model.nest_statements(nest):
        if loop not in st.loops:
            continue
        at = st.loops.index(loop)
        for p in points(fix_params(st.domain, model, params)):
            per[p[at]] += 1
            values.add(p[at])
    return len({per[v] for v in values}) > 1


@pytest.mark.parametrize("name", ["covariance", "correlation", "gemm", "trmm", "syrk", "syr2k", "symm", "2mm"])
def test_bounds_coupled_is_work_that_varies_per_iteration(name):
    kernel, model = polybench(name)
    params = {p.name: 7 + 2 * i for i, p in enumerate(kernel.params)}
    for nest in range(len(kernel.nests())):
        for loop in nest_loops(kernel, nest):
            assert bounds_coupled(kernel, nest, loop) == brute_force_varies(kernel, model, nest, loop, params), \
                (name, nest, loop)


def shared_loops(src: str) -> list[tuple[str, str]]:
    """(schedule clause, the loop header after it) of every ``omp parallel for``."""
    lines = src.splitlines()
    return [(re.search(r"schedule\([^)]*\)", ln).group(0), lines[k + 1].strip())
            for k, ln in enumerate(lines) if "omp parallel for" in ln]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("name", ["covariance", "correlation"])
def test_a_triangles_row_blocks_are_dealt_on_demand(name):
    # covariance's columns j >= i under a block of rows: the rows are the nest's parallel loop (its
    # own loops classed, not the kernel's: the first nest's i is a reduction), in blocks of gemm's
    # MC rows with A's block packed, and the blocks are the shared-out loop, dealt one at a time
    # (schedule(dynamic, 1)); sizes that no tile divides, so full boxes, diagonal boxes and edge boxes
    # all run, on 2 threads, against the reference; more blocks than cores
    kernel, model = polybench(name)
    nest = main_nest(name)
    params = {"M": 77, "N": 29}
    made = register_mapping(model, nest, HOST, params)
    assert made is not None and not made.levels[1].spatial
    src = emit_c(kernel, model, (made,))  # without sizes nothing is kept on one thread for being small
    deals = shared_loops(src)
    assert ("schedule(dynamic, 1)", deals[-1][1]) in deals and "polymap_acc_" in src
    assert verify(kernel, params, targets=("c",), mapping=made, model=model).passed


def _dealt(work: list[float], threads: int, dynamic: bool) -> list[float]:
    """Each thread's work when the blocks are dealt round-robin, or on demand in their order."""
    busy = [0.0] * threads
    for b, w in enumerate(work):
        busy[busy.index(min(busy)) if dynamic else b % threads] += w
    return busy


@pytest.mark.parametrize("name", ["covariance", "correlation"])
def test_row_blocks_on_demand_balance_the_triangle(name):
    # the share of the busiest of 2 threads at LARGE (M = 1200): the work of each row block counted
    # from the triangle's points by NumPy (row i has M - i columns j >= i), independent of the code;
    # on demand (the loop's order: longest rows first) the busiest thread has at most 52%, round-robin
    # over the same five blocks gave it 60%, one contiguous chunk per core 75%
    kernel, model = polybench(name)
    nest = main_nest(name)
    m_ = 1200
    made = register_mapping(model, nest, HOST, {"M": m_, "N": 1400})
    rows = dict(zip(made.loops, made.levels[1].tile))["i"]
    assert isinstance(rows, int) and 4 <= -(-m_ // rows)  # at least two blocks per thread
    upper = np.triu(np.ones((m_, m_), dtype=bool))
    per_row = upper.sum(axis=1).astype(float)
    work = [per_row[b:b + rows].sum() for b in range(0, m_, rows)]
    share = max(_dealt(work, 2, dynamic=True)) / sum(work)
    assert share <= 0.52, share
    assert max(_dealt(work, 2, dynamic=False)) / sum(work) > share


def test_a_rectangles_loops_keep_contiguous_chunks():
    kernel, model = polybench("gemm")
    params = {"NI": 45, "NJ": 53, "NK": 29}
    made = register_mapping(model, 0, HOST, params)
    src = emit_c(kernel, model, (made,))
    assert shared_loops(src) and all(clause == "schedule(static)" for clause, _ in shared_loops(src))
    assert not any(bounds_coupled(kernel, 0, x) for x in nest_loops(kernel, 0))


TRIANGLE = """
kernel t(M, N) {
  in D[N, M] : %(t)s
  out C[M, M] : %(t)s
  for i in 0..M, j in i..M {
    init: C[i, j] = 0
    for k in 0..N {
      acc: C[i, j] += D[k, i] * D[k, j]
    }
  }
}
"""

TRIANGLE_DRIVER = """
#include <stdio.h>
int main(int argc, char **argv) {
  long M = atol(argv[3]), N = atol(argv[4]);
  T *D = malloc(sizeof(T) * N * M), *C = malloc(sizeof(T) * M * M);
  FILE *in = fopen(argv[1], "rb");
  if (fread(D, sizeof(T), N * M, in) != (size_t)(N * M)) return 2;
  fclose(in);
  for (long q = 0; q < M * M; q++) C[q] = (T)12345;  /* below the diagonal: never written */
  t(D, C, M, N);
  FILE *out = fopen(argv[2], "wb");
  fwrite(C, sizeof(T), M * M, out);
  fclose(out);
  free(D); free(C);
  return 0;
}
"""

TRIANGLE_BUILDS = {"avx512": (("-mavx512f", "-mfma"), "avx512f"), "avx2": (("-mavx2", "-mfma", "-mno-avx512f"), "avx2")}


def _mapped_source(text: str, dtype: str, big: dict | None = None) -> tuple:
    """The kernel of ``text`` at ``dtype`` and its C for compile's register tiles at ``big`` (M, N = 300, 200)."""
    kernel, _ = kernel_to_map(parse(text % {"t": dtype}, "t.loop").kernels[0])
    model = build_model(kernel)
    big = big or {"M": 300, "N": 200}
    made = fit_keeps(model, register_mapping(model, 0, HOST, big), HOST, big)
    return kernel, emit_c(kernel, model, (made,), params=big)


def _sanitized(tmp_path: Path, src: str, dtype: str, driver: str, build: str) -> Path:
    """``src`` with ``driver`` built under AddressSanitizer and UBSan for ``build``; skips (after building)
    where this processor cannot run that build."""
    flags, needs = TRIANGLE_BUILDS[build]
    (tmp_path / "t.c").write_text(src + f"#define T {C_TYPES[dtype]}\n" + driver)
    exe = tmp_path / "t"
    cc = sanitized_build(tmp_path / "t.c", exe, *flags)
    assert cc.returncode == 0, cc.stderr[-3000:]
    if needs not in (cpu_flags(CPUINFO.read_text()) if CPUINFO.exists() else frozenset()):
        pytest.skip(f"this processor has no {needs}: the {build} build was compiled but cannot run here")
    return exe


def _run(exe: Path, tmp_path: Path, inputs: bytes, m_: int, n_: int) -> bytes:
    """The driver's output for ``inputs`` at M, N = ``m_``, ``n_`` on 2 threads."""
    (tmp_path / "in.bin").write_bytes(inputs)
    run = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin"), str(m_), str(n_)],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert run.returncode == 0, (m_, n_, run.stderr[-3000:])
    return (tmp_path / "out.bin").read_bytes()


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("build", sorted(TRIANGLE_BUILDS))
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_a_triangles_diagonal_boxes_run_masked(tmp_path, build, dtype):
    # covariance's upper triangle (rows i <= j): the boxes the diagonal cuts (rows starting at
    # different columns) run in the vector accumulators with per-row masks (polymap_maskr_), not the
    # generic loops; under AddressSanitizer and UBSan, against NumPy's D^T D, with every element
    # below the diagonal still the driver's sentinel (the masks never store there); sizes that cut
    # the diagonal at every offset of the box, and edge boxes, in both vector builds
    # made for N = 600, so that k is blocked (KC 256 f64, 352 f32) and both views of D are packed in the
    # row block's loops (A's block D[k, i] as rows of MR, B's panels D[k, j]): the boxes read the
    # panels, edge panels zero-filled past the array; run at sizes below, at and past one k block
    _, src = _mapped_source(TRIANGLE, dtype, {"M": 300, "N": 600})
    assert "= polymap_maskr_" in src and "(polymap_s_j_" in src and "polymap_acc_" in src
    assert "polymap_pk_D_k_i[" in src and "polymap_pk_D_k_j[" in src and "schedule(dynamic, 1)" in src
    exe = _sanitized(tmp_path, src, dtype, TRIANGLE_DRIVER, build)
    nt = np.float32 if dtype == "f32" else np.float64
    for m_, n_ in ((1, 3), (7, 5), (17, 9), (45, 29), (77, 31), (300, 200), (131, 600), (259, 401)):
        d = np.random.default_rng(m_).standard_normal((n_, m_)).astype(nt)
        out = _run(exe, tmp_path, d.tobytes(), m_, n_)
        c = np.frombuffer(out, dtype=nt).reshape(m_, m_).astype(np.float64)
        want = d.astype(np.float64).T @ d.astype(np.float64)
        upper = np.triu(np.ones((m_, m_), dtype=bool))
        tol = (1e-4 if dtype == "f32" else 1e-12) * max(1.0, np.sqrt(n_))
        np.testing.assert_allclose(c[upper], want[upper], rtol=tol, atol=tol, err_msg=f"M, N = {m_}, {n_}")
        assert (c[~upper] == 12345).all(), f"M, N = {m_}, {n_}: a store below the diagonal"


MOVING = """
kernel t(M, N) {
  in    A[M, M] : %(t)s
  inout B[M, N] : %(t)s
  for i in 0..M, j in 0..N {
    for k in i+1..M {
      acc: B[i, j] += A[k, i] * B[k, j]
    }
  }
}
"""

MOVING_DRIVER = """
#include <stdio.h>
int main(int argc, char **argv) {
  long M = atol(argv[3]), N = atol(argv[4]);
  T *A = malloc(sizeof(T) * M * M), *B = malloc(sizeof(T) * M * N);
  FILE *in = fopen(argv[1], "rb");
  if (fread(A, sizeof(T), M * M, in) != (size_t)(M * M) || fread(B, sizeof(T), M * N, in) != (size_t)(M * N)) return 2;
  fclose(in);
  t(A, B, M, N);
  FILE *out = fopen(argv[2], "wb");
  fwrite(B, sizeof(T), M * N, out);
  fclose(out);
  free(A); free(B);
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("build", sorted(TRIANGLE_BUILDS))
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_rows_ending_with_the_reduction_loop_mask_the_column_edge(tmp_path, build, dtype):
    # trmm's boxes (rows i < k: full only at the steps of k past the box) cut by the array's last
    # column run their full steps in the vector accumulators with masked loads and stores (the
    # generic loops at every step made the thread with that panel the last to finish); under
    # AddressSanitizer and UBSan, against NumPy's B + strictly-lower(A)^T B, at sizes that leave
    # every width of edge panel and rows in every position of the box, in both vector builds
    _, src = _mapped_source(MOVING, dtype)
    # the moving box's edge: a column count, and the accumulators loaded under its masks
    assert "polymap_acc_" in src and re.search(r"const long polymap_n_j = .*\n(.*\n)*.*polymap_mload_", src)
    exe = _sanitized(tmp_path, src, dtype, MOVING_DRIVER, build)
    nt = np.float32 if dtype == "f32" else np.float64
    for m_, n_ in ((1, 3), (7, 5), (17, 9), (45, 37), (77, 31), (300, 200)):
        rng = np.random.default_rng(m_ * 1000 + n_)
        a = rng.standard_normal((m_, m_)).astype(nt)
        b = rng.standard_normal((m_, n_)).astype(nt)
        got = np.frombuffer(_run(exe, tmp_path, a.tobytes() + b.tobytes(), m_, n_), dtype=nt
                            ).reshape(m_, n_).astype(np.float64)
        want = b.astype(np.float64) + np.tril(a.astype(np.float64), -1).T @ b.astype(np.float64)
        tol = (1e-4 if dtype == "f32" else 1e-12) * max(1.0, np.sqrt(m_))
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"M, N = {m_}, {n_}")
