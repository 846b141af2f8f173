"""Milliseconds per mapping for the exact ISL counts (``count_mapping``).

GEMM (M = N = K = 64, 128, 256) and the 7-loop strided conv2d on the ``toy``
architecture (DRAM / GLB / RF, 16-way spatial j or k). Goal: under 50 ms a
mapping for GEMM. Run: ``/tmp/venv/bin/python benchmarks/bench_cost_isl.py``.
"""
from __future__ import annotations

import time
from pathlib import Path

from polymap.arch import load_architecture
from polymap.driver import load_program
from polymap.mapping import Mapping
from polymap.passes.counting import count_mapping
from polymap.poly import build_model

ROOT = Path(__file__).parent.parent

GEMM_MAPPING = {"levels": [
    {"level": "DRAM", "order": ["i", "j", "k"]},
    {"level": "GLB", "tile": {"i": 32, "j": 16, "k": 16}, "order": ["k", "i", "j"], "spatial": ["j"]},
    {"level": "RF", "tile": {"i": 1, "j": 1, "k": 16}, "order": ["k"]}]}

CONV_MAPPING = {"levels": [
    {"level": "DRAM", "order": ["n", "k", "p", "q", "c", "r", "s"]},
    {"level": "GLB", "tile": {"k": 16, "p": 7, "q": 7, "c": 8}, "order": ["c", "p", "q", "k"], "spatial": ["k"]},
    {"level": "RF", "tile": {"k": 1, "p": 1, "q": 7, "c": 1}, "order": ["q", "r", "s"]}]}


def bench(path: str, mapping: dict, params: dict, repeat: int = 5) -> float:
    kernel = load_program(ROOT / path).kernels[0]
    arch = load_architecture("toy")
    model = build_model(kernel)
    m = Mapping.from_dict(mapping, kernel=kernel, arch=arch)
    count_mapping(model, m, arch, params=params)  # warm up ISL's context
    start = time.perf_counter()
    for _ in range(repeat):
        count_mapping(model, m, arch, params=params)
    return 1000 * (time.perf_counter() - start) / repeat


def main() -> None:
    for n in (64, 128, 256):
        ms = bench("examples/gemm.loop", GEMM_MAPPING, {"M": n, "N": n, "K": n})
        print(f"gemm M=N=K={n:<4} {ms:8.1f} ms/mapping")
    ms = bench("examples/conv2d.loop", CONV_MAPPING, {"N": 1, "C": 16, "K": 16, "P": 14, "Q": 14, "R": 3, "S": 3},
               repeat=2)
    print(f"conv2d (7 loops)   {ms:8.1f} ms/mapping")


if __name__ == "__main__":
    main()
