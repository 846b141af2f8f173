"""Packed buffers on the heap start on a cache line (``codegen/c/packing.py``, ``BUFFER_ALIGN``).

A register tile reads a packed KC x NR panel of B one 64-byte vector per load; with malloc's 16-byte
alignment every such load straddled two cache lines (gemm f32 2048, one thread: 14% slower than with
the panel on a line, RESULTS.md session 25). Checked at run time, not in the text: the generated C is
built with its allocation calls renamed to a recorder (a separate file, built without the renaming,
that calls the C library and notes every address it returns), run at a size where A's and B's packs
exceed the stack limit and the tiles do not divide it, and the result compared with NumPy. A return to
``malloc`` fails here: glibc's large blocks are 16 bytes past a page boundary.
"""
from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from polymap.codegen.c.emitter import emit_c
from polymap.codegen.c.packing import BUFFER_ALIGN, STACK_BYTES, plan_packs
from polymap.driver import parse
from polymap.machine.presets import load_architecture
from polymap.passes.search.choice import fit_keeps
from polymap.passes.search.register_mapping import cache_blocking, register_mapping, register_shape
from polymap.poly import build_model

from gemm_text import DRIVER_INPUTS, GEMM

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

HOST = load_architecture("host")

#: built without the renaming: the real allocators, and a record of every heap block the kernel took
RECORDER = r"""
#include <stdint.h>
#include <stdlib.h>
long polymap_test_blocks = 0, polymap_test_misaligned = 0;
static void *note(void *p) { polymap_test_blocks++; if ((uintptr_t)p % ALIGN) polymap_test_misaligned++; return p; }
void *polymap_test_malloc(size_t n) { return note(malloc(n)); }
void *polymap_test_aligned_alloc(size_t a, size_t n) { return note(aligned_alloc(a, n)); }
"""

DRIVER = r"""
extern long polymap_test_blocks, polymap_test_misaligned;
void g(T *restrict A, T *restrict B, T *restrict C, long M, long N, long K);
""" + DRIVER_INPUTS + r"""
  long before = polymap_test_blocks;  /* the driver's own blocks were not recorded: only the kernel's */
  g(A, B, C, M, N, K);
  FILE *out = fopen(argv[2], "wb");
  fwrite(C, sizeof(T), M * N, out);
  fclose(out);
  printf("%ld %ld\n", polymap_test_blocks - before, polymap_test_misaligned);
  return 0;
}
"""


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_heap_packs_start_on_a_cache_line(tmp_path: Path, dtype: str, stream: bool):
    """Compile's streamed form packs B's block on the heap (A is read in place); the grouped form
    (``stream=False``) packs A's block there too."""
    kernel = parse(GEMM % {"t": dtype}, "g.loop").kernels[0]
    model = build_model(kernel)
    sizes = {"M": 301, "N": 275, "K": 700}  # no tile divides them; K over both KCs (a whole K is not packed)
    blocking = dataclasses.replace(cache_blocking(HOST, dtype, register_shape(HOST.vector, dtype)), stream=stream)
    mp = fit_keeps(model, register_mapping(model, 0, HOST, sizes, blocking=blocking), HOST, sizes)
    item = {"f32": 4, "f64": 8}[dtype]
    packs = plan_packs(model, mp)
    assert {p.tensor for p in packs.values() if p.size * item > STACK_BYTES} == ({"B"} if stream else {"A", "B"})
    ctype = {"f32": "float", "f64": "double"}[dtype]
    (tmp_path / "k.c").write_text(emit_c(kernel, model, (mp,), params=sizes))
    (tmp_path / "rec.c").write_text(RECORDER)
    (tmp_path / "main.c").write_text(DRIVER)
    exe = tmp_path / "run"
    rename = ("-Dmalloc=polymap_test_malloc", "-Daligned_alloc=polymap_test_aligned_alloc")
    steps = [["cc", "-O2", "-fopenmp", "-c", *rename, str(tmp_path / "k.c"), "-o", str(tmp_path / "k.o")],
             ["cc", "-O2", f"-DALIGN={BUFFER_ALIGN}", "-c", str(tmp_path / "rec.c"), "-o", str(tmp_path / "rec.o")],
             ["cc", "-O2", f"-DT={ctype}", "-c", str(tmp_path / "main.c"), "-o", str(tmp_path / "main.o")],
             ["cc", "-fopenmp", *(str(tmp_path / f) for f in ("k.o", "rec.o", "main.o")), "-o", str(exe), "-lm"]]
    for cmd in steps:
        built = subprocess.run(cmd, capture_output=True, text=True)
        assert built.returncode == 0, built.stderr[-3000:]
    rng = np.random.default_rng(1)
    nt = np.float32 if dtype == "f32" else np.float64
    a = rng.standard_normal((sizes["M"], sizes["K"])).astype(nt)
    b = rng.standard_normal((sizes["K"], sizes["N"])).astype(nt)
    (tmp_path / "in.bin").write_bytes(a.tobytes() + b.tobytes())
    ran = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin"),
                          *(str(sizes[x]) for x in "MNK")], capture_output=True, text=True, env={"OMP_NUM_THREADS": "2"})
    assert ran.returncode == 0, ran.stderr[-3000:]
    blocks, misaligned = map(int, ran.stdout.split())
    assert blocks >= 2 and misaligned == 0, ran.stdout
    c = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=nt).reshape(sizes["M"], sizes["N"])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-4 if dtype == "f32" else 1e-10, atol=1e-3 if dtype == "f32" else 1e-10)
