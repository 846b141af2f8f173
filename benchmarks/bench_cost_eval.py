"""Evaluations per second of the exact counts: ISL path vs fast path, GEMM and a 7-loop conv2d on `toy`.

Run on one core: ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_cost_eval.py``.
The GEMM is the single-statement ``C += A @ B`` (the fast path's class; the
``init``/``acc`` gemm of examples/ is counted by the ISL path only).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from polymap.machine.presets import load_architecture
from polymap.driver import load_program, parse
from polymap.mapping.model import LevelMapping, Mapping, nest_loops, nest_tensors
from polymap.passes.counting.counting import count_mapping
from polymap.passes.counting.fastcount import evaluator_for, tiles_of
from polymap.poly import build_model

GEMM = """
kernel gemm(M = 256, N = 256, K = 256) {
  in A[M, K]
  in B[K, N]
  inout C[M, N]
  for i in 0..M, j in 0..N, k in 0..K { C[i, j] += A[i, k] * B[k, j] }
}"""


def random_mappings(kernel, arch, count: int, seed: int = 0) -> list[Mapping]:
    """Mappings sharing one structure (order, keep) with random, often non-dividing tiles."""
    rng = np.random.default_rng(seed)
    loops = nest_loops(kernel, 0)
    keep = nest_tensors(kernel, 0)
    out = []
    for _ in range(count):
        glb = [int(rng.integers(1, 33)) for _ in loops]
        rf = [int(rng.integers(1, g + 1)) if rng.random() < 0.5 else 1 for g in glb]
        tiles = [(None,) * len(loops), tuple(glb), tuple(rf)]
        out.append(Mapping(kernel.name, 0, loops, tuple(LevelMapping(lv.name, t, loops, (), keep)
                                                        for lv, t in zip(arch.levels, tiles))))
    return out


def bench(name: str, kernel, arch, n_isl: int, n_fast: int) -> None:
    model = build_model(kernel)
    params = {p.name: p.default for p in kernel.params}
    fast_maps = random_mappings(kernel, arch, n_fast)
    ev = evaluator_for(model, fast_maps[0], params)
    tiles = tiles_of(fast_maps, ev.nest)
    ev.evaluate(tiles[:8])  # warm-up
    t = time.perf_counter()
    batch = ev.evaluate(tiles)
    fast_s = time.perf_counter() - t
    t = time.perf_counter()
    for m in fast_maps[:n_isl]:
        count_mapping(model, m, arch, params=params)
    isl_s = (time.perf_counter() - t) / n_isl
    fast_rate = n_fast / fast_s
    print(f"{name:7s} ISL path {1 / isl_s:9.1f} mappings/s ({isl_s * 1e3:7.1f} ms each)   "
          f"fast path {fast_rate:11.0f} mappings/s ({batch.exact.mean():.0%} exact)   "
          f"ratio {fast_rate * isl_s:9.0f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--isl", type=int, default=5, help="mappings counted with the ISL path")
    ap.add_argument("--fast", type=int, default=20000, help="mappings in the fast path's batch")
    args = ap.parse_args()
    arch = load_architecture("toy")
    bench("gemm", parse(GEMM, "<gemm>").kernels[0], arch, args.isl, args.fast)
    here = os.path.dirname(os.path.abspath(__file__))
    conv = load_program(os.path.join(here, "..", "examples", "conv2d.loop")).kernels[0]
    bench("conv2d", conv, arch, args.isl, args.fast)


if __name__ == "__main__":
    main()
