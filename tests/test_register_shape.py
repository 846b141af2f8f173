"""Register tile shapes and cache blocking from the vector unit and the capacities (hand-derived values)."""
from __future__ import annotations

import pytest

from polymap.machine.arch import Architecture, Compute, Level, VectorUnit
from polymap.passes.search.register_mapping import cache_blocking, register_shape

AVX512 = VectorUnit("avx512", 64, 32, True)
AVX2 = VectorUnit("avx2", 32, 16, True)
SSE = VectorUnit("sse", 16, 16, False)


@pytest.mark.parametrize("unit,dtype,mr,nr,vectors", [
    # 32 zmm: 4 vectors per row leave (32 - 4 - 1) / 4 = 6 rows; 5 would leave 5
    (AVX512, "f32", 6, 64, 4), (AVX512, "f64", 6, 32, 4),   # 24 accumulators + 4 B vectors + 1 broadcast
    # 16 registers: 3 vectors would leave (16 - 4) / 3 = 4 rows, so 2 vectors and 6 rows
    (AVX2, "f32", 6, 16, 2), (AVX2, "f64", 6, 8, 2),        # 12 ymm accumulators
    (SSE, "f32", 6, 8, 2), (SSE, "f64", 6, 4, 2),
])
def test_register_shape(unit, dtype, mr, nr, vectors):
    shape = register_shape(unit, dtype)
    assert (shape.mr, shape.nr) == (mr, nr)
    assert shape.nr == vectors * shape.lanes
    assert shape.mr * vectors + vectors + 1 <= unit.registers  # accumulators, B's vectors, A's broadcast
    assert unit.isa in shape.why


def _arch(l1: int, l2: int, llc: int, vector: VectorUnit) -> Architecture:
    levels = (Level("DRAM"), Level("LLC", None, llc, 1), Level("L2", None, l2, 2), Level("L1", None, l1, 2),
              Level("RF", None, 2048, 2))
    return Architecture("t", levels, Compute(32), vector)


def test_cache_blocking_avx2_f32():
    arch = _arch(32 * 1024, 512 * 1024, 32 * 2 ** 20, AVX2)
    b = cache_blocking(arch, "f32", register_shape(AVX2, "f32"))
    # KC: 16 KiB / (16 columns x 4 bytes) = 256; MC: 256 KiB / (256 x 4) = 256 -> 252 (multiple of 6);
    # NC: 8 MiB / (256 x 4) = 8192 -> capped at 4096
    assert (b.mr, b.nr, b.kc, b.mc, b.nc) == (6, 16, 256, 252, 4096)


def test_cache_blocking_avx512_f64_square_block_of_a():
    arch = _arch(48 * 1024, 2 ** 20, 32 * 2 ** 20, AVX512)
    b = cache_blocking(arch, "f64", register_shape(AVX512, "f64"))
    # KC: B's panel in half of L1 gives 24 KiB / (32 x 8) = 96; A's block square in half of L2 gives
    # sqrt(512 KiB / 8) = 256; the larger wins. MC: 512 KiB / (256 x 8) = 256 -> 252 (multiple of 6)
    assert (b.mr, b.nr, b.kc, b.mc) == (6, 32, 256, 252)
    f32 = cache_blocking(arch, "f32", register_shape(AVX512, "f32"))
    # f32: 24 KiB / (64 x 4) = 96; sqrt(512 KiB / 4) = 362 -> 352 (multiple of 16); MC 524288 / 1408 = 372
    assert (f32.kc, f32.mc) == (352, 372)


def test_a_mapping_without_a_register_box_is_not_documented_as_a_register_tile():
    """compile's JSON listed symm's interchange (no tile at the innermost level) as "register tile 1xNone"."""
    from pathlib import Path
    from polymap.driver import parse
    from polymap.machine.presets import load_architecture
    from polymap.passes.search.choice import original_mapping
    from polymap.passes.search.register_mapping import register_mappings, register_tile_doc
    from polymap.poly import build_model
    kernel = parse((Path(__file__).resolve().parent.parent / "examples/gemm.loop").read_text(), "gemm.loop").kernels[0]
    host = load_architecture("host")
    model = build_model(kernel)
    sizes = {p: 64 for p in kernel.param_names}
    assert register_tile_doc(model, [original_mapping(kernel, 0, host)], host) == []
    tiled = [m for _, m in register_mappings(model, 0, host, sizes)][:1]
    doc = register_tile_doc(model, tiled, host)
    assert len(doc) == 1 and "None" not in doc[0]["tile"]
