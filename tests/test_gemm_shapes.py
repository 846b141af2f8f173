"""The register-blocked GEMM kernel in both vector shapes, under AddressSanitizer and UBSan, against NumPy.

The AVX-512 shape (6 x 64 f32, 6 x 32 f64) and the AVX2 shape (6 x 16,
6 x 8) are each built twice: with ``-mavx512f`` (the 64-byte variant and
its masked edges) and with ``-mavx2 -mfma`` (the 32-byte variant and
maskload/maskstore), so that every shape runs in every variant; one more
build with plain ``-march=x86-64`` runs the 16-byte variant. Every build is
compiled on any x86 machine; only the runs of a build whose instructions
this processor lacks are skipped (and say so). The sizes are 1, 7, 17, 257
(every tile cut) for every case, and 1000 x 1100 x 1200 for each shape and
dtype in its own build. The 64- and 32-byte builds fuse the tile's
multiply-adds (``-mfma``), the x86-64 build does not: both roundings run. The
mapping is compile's: capacity blocking, keeps fitted to the host, A and B
packed. Each run is an executable that reads its inputs from a file and
writes C back; the result is compared with float64 NumPy.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from polymap.codegen.c.emitter import emit_c
from polymap.codegen.c.expr import C_TYPES
from polymap.driver import parse
from polymap.machine.arch import VectorUnit
from polymap.machine.presets import load_architecture
from polymap.machine.hostinfo import CPUINFO, cpu_flags
from polymap.passes.search.choice import fit_keeps
from polymap.passes.search.register_mapping import cache_blocking, register_mapping, register_shape
from polymap.poly import build_model

from gemm_text import DRIVER_INPUTS, GEMM
from test_sanitizers import sanitized_build

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

HOST = load_architecture("host")
FLAGS = cpu_flags(CPUINFO.read_text()) if CPUINFO.exists() else frozenset()
SHAPES = {"avx512": VectorUnit("avx512", 64, 32, True), "avx2": VectorUnit("avx2", 32, 16, True)}
BUILDS = {"avx512": (("-mavx512f", "-mfma"), "avx512f"), "avx2": (("-mavx2", "-mfma", "-mno-avx512f"), "avx2"),
          "sse2": (("-march=x86-64",), "sse2")}


DRIVER = DRIVER_INPUTS + """
  for (long q = 0; q < M * N; q++) C[q] = (T)12345;  /* the kernel must overwrite every element */
  g(A, B, C, M, N, K);
  FILE *out = fopen(argv[2], "wb");
  fwrite(C, sizeof(T), M * N, out);
  fclose(out);
  free(A); free(B); free(C);
  return 0;
}
"""
BIG = (1000, 1100, 1200)


def _mapping(model, shape: str, dtype: str, params: dict):
    """compile's register blocking for ``shape``'s tile: capacity blocking, keeps fitted to the host."""
    blocking = cache_blocking(HOST, dtype, register_shape(SHAPES[shape], dtype))
    mp = register_mapping(model, 0, HOST, params, blocking=blocking)
    return fit_keeps(model, mp, HOST, params)


# every shape in every build at the small sizes; the large size once per shape, in its own build
CASES = [(shape, build, dtype) for shape in SHAPES for build in ("avx512", "avx2") for dtype in ("f32", "f64")]
CASES.append(("avx512", "sse2", "f32"))  # the plain x86-64 build: 16-byte vectors, generic edges


@pytest.mark.slow
@pytest.mark.parametrize("shape,build,dtype", CASES, ids=[f"{s}-shape-{b}-build-{d}" for s, b, d in CASES])
def test_gemm_shape_sanitized(tmp_path: Path, shape: str, build: str, dtype: str):
    flags, needs = BUILDS[build]
    kernel = parse(GEMM % {"t": dtype}, "g.loop").kernels[0]
    model = build_model(kernel)
    # the mapping is chosen for the large size (constant blocks, packed panels); the code runs at any size
    mp = _mapping(model, shape, dtype, dict(zip("MNK", BIG)))
    src = emit_c(kernel, model, (mp,), params=dict(zip("MNK", BIG)))
    assert "polymap_acc_" in src and "polymap_mload_" in src and "polymap_pk_" in src
    assert f"polymap_fma_{dtype}x" in src
    (tmp_path / "g.c").write_text(src + f"#define T {C_TYPES[dtype]}\n" + DRIVER)
    exe = tmp_path / "g"
    cc = sanitized_build(tmp_path / "g.c", exe, *flags)
    assert cc.returncode == 0, cc.stderr[-3000:]
    if needs not in FLAGS:
        pytest.skip(f"this processor has no {needs}: the {build} build was compiled but cannot run here")
    nt = np.float32 if dtype == "f32" else np.float64
    sizes = [(n, n, n) for n in (1, 7, 17, 257)]
    if shape == build:
        sizes.append(BIG)
    for m_, n_, k_ in sizes:
        rng = np.random.default_rng(m_ * 7 + n_)
        a = rng.standard_normal((m_, k_)).astype(nt)
        b = rng.standard_normal((k_, n_)).astype(nt)
        (tmp_path / "in.bin").write_bytes(a.tobytes() + b.tobytes())
        run = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin"), str(m_), str(n_),
                              str(k_)], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "OMP_NUM_THREADS": "2"})
        assert run.returncode == 0, (m_, n_, k_, run.stderr[-3000:])
        c = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=nt).reshape(m_, n_)
        want = a.astype(np.float64) @ b.astype(np.float64)
        tol = (1e-4 if dtype == "f32" else 1e-12) * max(1.0, np.sqrt(k_))
        np.testing.assert_allclose(c, want, rtol=tol, atol=tol, err_msg=f"M, N, K = {m_}, {n_}, {k_}")
