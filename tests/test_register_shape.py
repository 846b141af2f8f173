"""Register tile shapes and cache blocking from the vector unit and the capacities (hand-derived values)."""
from __future__ import annotations

import pytest

from polymap.machine.arch import Architecture, Compute, Level, VectorUnit
from polymap.passes.search.register_mapping import cache_blocking, host_blockings, register_shape

AVX512 = VectorUnit("avx512", 64, 32, True)
AVX2 = VectorUnit("avx2", 32, 16, True)
SSE = VectorUnit("sse", 16, 16, False)


@pytest.mark.parametrize("unit,dtype,mr,nr", [
    (AVX512, "f32", 14, 32), (AVX512, "f64", 14, 16),   # 28 zmm accumulators + 2 B vectors + 1 broadcast
    (AVX2, "f32", 6, 16), (AVX2, "f64", 6, 8),          # 12 ymm accumulators
    (SSE, "f32", 6, 8), (SSE, "f64", 6, 4),
])
def test_register_shape(unit, dtype, mr, nr):
    shape = register_shape(unit, dtype)
    assert (shape.mr, shape.nr) == (mr, nr)
    assert 2 * shape.mr + 3 <= unit.registers
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


def test_cache_blocking_avx512_f64_and_neighbours():
    arch = _arch(48 * 1024, 2 ** 20, 32 * 2 ** 20, AVX512)
    b = cache_blocking(arch, "f64", register_shape(AVX512, "f64"))
    # KC: 24 KiB / (16 x 8) = 192; MC: 512 KiB / (192 x 8) = 341 -> 336 (multiple of 14)
    assert (b.kc, b.mc) == (192, 336)
    kcs = [x.kc for _, x in host_blockings(arch, "f64")]
    assert kcs == [192, 96, 384]
