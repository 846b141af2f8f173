"""GEMM f32: polymap's C (default mapping, register tiles) vs NumPy matmul, a naive -O3 loop and the NumPy target.

    /tmp/venv/bin/python benchmarks/bench_gemm_c.py [--sizes 1024 2048] [--blocking MR,NR,KC,MC,NC]
                                                    [--threads 2]

For a current NumPy (not the environment's pinned OpenBLAS core type) run it as::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /tmp/venv/bin/python benchmarks/bench_gemm_c.py

It prints which BLAS kernel NumPy runs (threadpoolctl, when installed),
then GFLOP/s (2 N^3 / best time) and ratios. All C is built with
``cc -O3 -march=native -fopenmp -shared -fPIC`` and run on OMP_NUM_THREADS
threads. A benchmark, not a test: numbers depend on the machine and on who
else is using it. Runtime at 1024 and 2048 is about a minute.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from polymap.machine.arch import load_architecture
from polymap.codegen.build import CFunction, build_c, load_kernel
from polymap.codegen.c.emitter import emit_c
from polymap.passes.search.choice import ChoiceOptions, choose
from polymap.driver import parse
from polymap.poly import build_model
from polymap.passes.search.register_mapping import Blocking, register_mapping

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

# the naive triple loop, same signature (a dot product per element: what -O3 makes of the textbook loop)
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
    fn()  # warm-up: page faults, thread pool start
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed: BLAS kernel unknown"
    infos = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    return "; ".join(f"{i.get('internal_api')} {i.get('version')} kernel {i.get('architecture')} "
                     f"threads {i.get('num_threads')}" for i in infos) or "no BLAS found"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024, 2048])
    ap.add_argument("--blocking", help="MR,NR,KC,MC,NC instead of the default register blocking")
    ap.add_argument("--threads", default=os.environ.get("OMP_NUM_THREADS", "2"))
    ap.add_argument("--no-naive", action="store_true", help="skip the (slow) naive loop")
    ap.add_argument("--search-evaluations", type=int, default=ChoiceOptions().search_evaluations,
                    help="tile vectors the search evaluates per loop order (compile's default)")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    kernel = parse(GEMM, "gemm.loop").kernels[0]
    model = build_model(kernel)
    arch = load_architecture("host")
    naive = CFunction(build_c(NAIVE, name="gemm_naive"), kernel)
    print(f"numpy {np.__version__}: {blas_info()}")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, OMP_NUM_THREADS={args.threads}")
    from polymap.codegen.numpy.emitter import load_numpy

    head = f"{'N':>6} {'numpy':>8} {'naive':>8} {'polymap':>8} {'np-tgt':>8}   poly/numpy  poly/naive  (GFLOP/s)"
    print(head)
    for n in args.sizes:
        params = {"M": n, "N": n, "K": n}
        if args.blocking:
            b = Blocking(*(int(x) for x in args.blocking.split(",")))
            mappings = (register_mapping(model, 0, arch, params, blocking=b),)
        else:
            # what `polymap compile` chooses (gemm has no shared loop names: the kernel is unchanged)
            choice = choose(kernel, arch, params, options=ChoiceOptions(search_evaluations=args.search_evaluations))
            mappings = choice.mappings
            print(f"  N={n}: compile chose " + ", ".join(nc.chosen.source for nc in choice.nests), flush=True)
        tiled = load_kernel(emit_c(kernel, model, mappings, params=params), kernel)
        np_target = load_numpy(kernel, model, mappings[0] if mappings else None)
        rng = np.random.default_rng(0)
        a = rng.random((n, n), dtype=np.float32)
        b = rng.random((n, n), dtype=np.float32)
        c = np.zeros((n, n), dtype=np.float32)
        arrays = {"A": a, "B": b, "C": c}
        flops = 2.0 * n ** 3
        t_np = best(lambda: np.matmul(a, b), repeat=5)
        t_tiled = best(lambda: tiled(arrays, params), repeat=5)
        np.testing.assert_allclose(c, a @ b, rtol=1e-3)
        t_tgt = best(lambda: np_target(A=a, B=b, C=c, M=n, N=n, K=n), repeat=1)
        t_naive = float("nan") if args.no_naive else best(lambda: naive(arrays, params), repeat=1)
        g = [flops / t / 1e9 for t in (t_np, t_naive, t_tiled, t_tgt)]  # nan for a skipped run
        print(f"{n:>6} {g[0]:>8.1f} {g[1]:>8.1f} {g[2]:>8.1f} {g[3]:>8.1f}   {g[2] / g[0]:>10.2f}  {g[2] / g[1]:>10.1f}",
              flush=True)


if __name__ == "__main__":
    main()
