"""GEMM f32 at 1024: the generated NumPy module against NumPy's own ``@``.

Goal: within 2x. The mapping tiles j and k by 512 (i whole) so that each
innermost tile is one ``@`` on whole blocks (the emitter turns the point
loops of ``acc`` into a matrix product). Run::

    /tmp/venv/bin/python benchmarks/bench_numpy_target.py [SIZE]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from polymap.codegen.numpy.emitter import load_numpy
from polymap.driver import load_program
from polymap.mapping.model import LevelMapping, Mapping, nest_loops, nest_tensors
from polymap.poly import build_model

ROOT = Path(__file__).resolve().parent.parent


def best_of(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(n: int = 1024) -> float:
    kernel = load_program(ROOT / "examples" / "gemm.loop").kernels[0]
    loops, keep = nest_loops(kernel, 0), nest_tensors(kernel, 0)
    mapping = Mapping(kernel.name, 0, loops, (
        LevelMapping("DRAM", (None, None, None), ("i", "j", "k"), (), keep),
        LevelMapping("GLB", (1024, 512, 512), ("k", "i", "j"), (), keep)))
    fn = load_numpy(kernel, build_model(kernel), mapping)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.empty((n, n), dtype=np.float32)
    generated = best_of(lambda: fn(A=a, B=b, C=c, M=n, N=n, K=n))
    reference = best_of(lambda: a @ b)
    err = float(np.max(np.abs(c - a @ b)))
    ratio = generated / reference
    print(f"gemm f32 {n}: generated {generated * 1e3:.1f} ms, numpy @ {reference * 1e3:.1f} ms, "
          f"ratio {ratio:.2f} (goal <= 2), max |diff| {err:.2e}")
    return ratio


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)
