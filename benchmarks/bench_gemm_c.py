"""GEMM f32: polymap's tiled C (default mapping) vs NumPy matmul and a naive -O3 triple loop.

    python benchmarks/bench_gemm_c.py [SIZE ...]      (default 1024 2048)

Prints GFLOP/s (2*N^3 / time, best of a few runs) and ratios. A benchmark,
not a test: numbers depend on the machine and on who else is using it.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from polymap.arch import load_architecture
from polymap.codegen.build import CFunction, build_c, load_kernel
from polymap.codegen.c_emitter import emit_c
from polymap.default_mapping import choose_mappings
from polymap.driver import parse
from polymap.poly import build_model

GEMM = """
kernel gemm(M, N, K) {
  in A[M, K] : f32
  in B[K, N] : f32
  out C[M, N] : f32
  for i in 0..M, j in 0..N {
    init: C[i, j] = 0
    for k in 0..K {
      acc: C[i, j] += A[i, k] * B[k, j]
    }
  }
}
"""

NAIVE = """
void gemm(float *restrict A, float *restrict B, float *restrict C, long M, long N, long K) {
  for (long i = 0; i < M; i++)
    for (long j = 0; j < N; j++) {
      float s = 0;
      for (long k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
      C[i * N + j] = s;
    }
}
"""


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(sizes: list[int]) -> None:
    kernel = parse(GEMM, "gemm.loop").kernels[0]
    model = build_model(kernel)
    arch = load_architecture("host")
    naive = CFunction(build_c(NAIVE, name="gemm_naive"), kernel)
    print(f"{'N':>6} {'numpy':>10} {'naive':>10} {'polymap':>10}  polymap/numpy  polymap/naive   (GFLOP/s)")
    for n in sizes:
        params = {"M": n, "N": n, "K": n}
        mappings = choose_mappings(model, arch, params)
        tiled = load_kernel(emit_c(kernel, model, mappings), kernel)
        rng = np.random.default_rng(0)
        a = rng.random((n, n), dtype=np.float32)
        b = rng.random((n, n), dtype=np.float32)
        c = np.zeros((n, n), dtype=np.float32)
        arrays = {"A": a, "B": b, "C": c}
        flops = 2.0 * n ** 3
        t_np = best(lambda: np.matmul(a, b))
        t_tiled = best(lambda: tiled(arrays, params))
        np.testing.assert_allclose(c, a @ b, rtol=1e-3)
        t_naive = best(lambda: naive(arrays, params), repeat=1)
        g = [flops / t / 1e9 for t in (t_np, t_naive, t_tiled)]
        print(f"{n:>6} {g[0]:>10.1f} {g[1]:>10.1f} {g[2]:>10.1f}  {g[2] / g[0]:>13.2f}  {g[2] / g[1]:>13.2f}")


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [1024, 2048])
