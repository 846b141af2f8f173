"""Milliseconds per mapping for the exact ISL counts (``count_mapping``).

GEMM (M = N = K = 64, 128, 256) and the 7-loop strided conv2d on the ``toy``
architecture (DRAM / GLB / RF, 16-way spatial j or k), and examples/gemm.loop
(with its init statement) on ``host`` with the default mapping. Goal: under
50 ms a mapping for GEMM. Prints wall-clock and CPU milliseconds (the CPU
figure is the one to compare when the machine is shared).
Run: ``/tmp/venv/bin/python benchmarks/bench_cost_isl.py``.
"""
from __future__ import annotations

import time
from pathlib import Path

from polymap.machine.presets import load_architecture
from polymap.driver import load_program
from polymap.mapping.model import Mapping
from polymap.passes.counting.counting import count_mapping
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


def _time(model, m, arch, params, repeat: int) -> tuple[float, float]:
    count_mapping(model, m, arch, params=params)  # warm up ISL's context
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeat):
        count_mapping(model, m, arch, params=params)
    return 1000 * (time.perf_counter() - wall) / repeat, 1000 * (time.process_time() - cpu) / repeat


def bench(path: str, mapping: dict, params: dict, repeat: int = 5) -> tuple[float, float]:
    """``(wall ms, CPU ms)`` per ``count_mapping`` call on ``toy``."""
    kernel = load_program(ROOT / path).kernels[0]
    arch = load_architecture("toy")
    model = build_model(kernel)
    m = Mapping.from_dict(mapping, kernel=kernel, arch=arch)
    return _time(model, m, arch, params, repeat)


def bench_host_default(repeat: int = 3) -> tuple[float, float]:
    """examples/gemm.loop (init + acc) at its default sizes on ``host``, default mapping."""
    from polymap.passes.search.default_mapping import choose_mappings
    from polymap.driver import param_values

    kernel = load_program(ROOT / "examples/gemm.loop").kernels[0]
    arch = load_architecture("host")
    model = build_model(kernel)
    params = param_values(kernel)
    m = choose_mappings(model, arch, params)[0]
    return _time(model, m, arch, params, repeat)


def main() -> None:
    for n in (64, 128, 256):
        wall, cpu = bench("examples/gemm.loop", GEMM_MAPPING, {"M": n, "N": n, "K": n})
        print(f"gemm M=N=K={n:<4}        {wall:8.1f} ms/mapping  ({cpu:6.1f} ms CPU)")
    wall, cpu = bench("examples/conv2d.loop", CONV_MAPPING,
                      {"N": 1, "C": 16, "K": 16, "P": 14, "Q": 14, "R": 3, "S": 3}, repeat=2)
    print(f"conv2d (7 loops)          {wall:8.1f} ms/mapping  ({cpu:6.1f} ms CPU)")
    wall, cpu = bench_host_default()
    print(f"gemm.loop host, default   {wall:8.1f} ms/mapping  ({cpu:6.1f} ms CPU)")


if __name__ == "__main__":
    main()
