"""Time the reference execution (``polymap.reference.execute``) on example kernels.

    python benchmarks/bench_reference.py [--scalar] [NAME...]

``--scalar`` forces the statement-by-statement path (``vectorize=False``)
when the installed reference has it. Sizes are the kernels' defaults except
for the GEMM sweep (64, 128, 256).
"""
from __future__ import annotations

import inspect
import sys
import time
from pathlib import Path

from polymap.driver import load_program
from polymap.reference import execute
from polymap.tensors import random_inputs

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("gemm64", "examples/gemm.loop", {"M": 64, "N": 64, "K": 64}),
    ("gemm128", "examples/gemm.loop", {"M": 128, "N": 128, "K": 128}),
    ("gemm256", "examples/gemm.loop", {"M": 256, "N": 256, "K": 256}),
    ("conv2d", "examples/conv2d.loop", {}),
    ("jacobi2d", "examples/jacobi2d.loop", {}),
    ("seidel2d", "examples/seidel2d.loop", {}),
    ("softmax", "examples/softmax.loop", {}),
    ("pb-2mm", "examples/polybench/2mm.loop", {}),
    ("pb-atax", "examples/polybench/atax.loop", {}),
    ("pb-covariance", "examples/polybench/covariance.loop", {}),
    ("pb-lu", "examples/polybench/lu.loop", {}),
    ("pb-floyd-warshall", "examples/polybench/floyd-warshall.loop", {}),
    ("pb-heat-3d", "examples/polybench/heat-3d.loop", {}),
    ("pb-seidel-2d", "examples/polybench/seidel-2d.loop", {}),
]


def main(argv: list[str]) -> None:
    scalar = "--scalar" in argv
    names = [a for a in argv if not a.startswith("--")]
    kwargs = {"vectorize": False} if scalar and "vectorize" in inspect.signature(execute).parameters else {}
    for name, path, sizes in CASES:
        if names and name not in names:
            continue
        (kernel,) = load_program(ROOT / path, check=False).kernels
        params = {p.name: p.default for p in kernel.params} | sizes
        arrays = random_inputs(kernel, params, seed=0, well_conditioned=True)
        t = time.perf_counter()
        execute(kernel, arrays, params, **kwargs)
        print(f"{name:20s} {time.perf_counter() - t:8.3f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
